"""Reads configuration from its hook, that is while the plugins load, and keeps what it read."""

from outcommit import Config, hookimpl

#: "during": ``outcommit.committer.threads`` as read inside the hook; "config": that Config.
READ = {}


@hookimpl
def register_config_keys(register):
    config = Config({"mapreduce.manifest.committer.io.threads": "7"})  # core's Hadoop name
    READ.setdefault("during", config.get_str("outcommit.committer.threads"))
    READ.setdefault("config", config)
