"""The committer and store config a plan carries, and the check that the session still agrees.

Its own module because the driver-side steps and the tasks meet here: ``register(spark)``
reads the session once (:func:`session_config`, the SQL settings), configuration keys
given as options of a write or read are merged over it (:func:`option_config`), and each
task compares the session it runs in with what was read (:class:`SessionSnapshot`) before
it writes or reads anything. The data source's own options are in ``options.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..config import CORE_ALIASES, CORE_KEYS, Config
from ..context import SPARK_JOB_UUID_KEY
from ..errors import OptionError

# Spark session keys handed to the committer as its config (Config strips spark./spark.hadoop.).
SPARK_CONF_PREFIXES = ("spark.outcommit.", "spark.hadoop.fs.", "spark.hadoop.mapreduce.")
SPARK_CONF_KEYS = (SPARK_JOB_UUID_KEY,)

# Write options that are committer config when given on the write itself.
OPTION_CONFIG_PREFIXES = ("outcommit.", "spark.outcommit.", "spark.hadoop.", "fs.", "mapreduce.")


def session_config(conf: Mapping[str, str] | list[tuple[str, str]]) -> dict[str, str]:
    """The part of a Spark session's config that concerns committers and stores."""
    items = conf.items() if isinstance(conf, Mapping) else conf
    return {str(k): str(v) for k, v in items
            if str(k).startswith(SPARK_CONF_PREFIXES) or str(k) in SPARK_CONF_KEYS}


#: Spark SQL settings the data source follows; ``register(spark)`` reads them too.
TIME_ZONE_KEY = "spark.sql.session.timeZone"
PARTITION_INFERENCE_KEY = "spark.sql.sources.partitionColumnTypeInference.enabled"
FILTER_PUSHDOWN_KEY = "spark.sql.python.filterPushdown.enabled"
SQL_SETTINGS = (TIME_ZONE_KEY, PARTITION_INFERENCE_KEY, FILTER_PUSHDOWN_KEY)
REGISTER_HINT = "outcommit.spark.register(spark)"


def watched_session_keys(captured: Mapping[str, str]) -> list[str]:
    """The session keys a task compares with what ``register(spark)`` read: those it read,
    and every key an installed plugin declares (committer names per scheme included),
    spelt as a Spark user sets them (``spark.outcommit.*``, ``spark.hadoop.fs.*``, ...)."""
    keys = set(captured) | set(SPARK_CONF_KEYS)
    try:
        from ..plugins import get_registry

        registry = get_registry()
        names = [*registry.config_keys(), *registry.config_aliases(),
                 *(f"outcommit.committer.{scheme}" for scheme in registry.stores())]
        for spec in registry.committers().values():
            names.extend(spec.config_keys)
    except Exception:  # a broken plugin must not hide the task's own errors
        names = [*CORE_KEYS, *CORE_ALIASES]
    for name in names:
        if name.endswith("."):
            continue  # a family of keys (outcommit.x.*): nothing to ask for by name
        keys.add(f"spark.{name}" if name.startswith("outcommit.") else f"spark.hadoop.{name}")
    return sorted(k for k in keys if k.startswith(SPARK_CONF_PREFIXES) or k in SPARK_CONF_KEYS)


@dataclass(frozen=True)
class SessionSnapshot:
    """The session config the driver-side steps used: what ``register(spark)`` read, or
    nothing when Spark found the data source by itself (``pyspark_outcommit``).

    The driver-side steps of a Python data source run in processes that cannot ask the
    session, but its tasks can: Spark hands every task the session's settings as local
    properties. A task that finds them different from the snapshot stops before it
    writes or reads anything, with the fix, rather than working with another committer,
    conflict mode or endpoint than the session names.
    """

    config: dict[str, str] = field(default_factory=dict)
    registered: bool = False
    #: Registered through Spark Connect, which hides from clients the keys that match
    #: ``spark.redaction.regex`` (secret and access keys, tokens, passwords): ``getAll``
    #: leaves them out.
    connect: bool = False

    def differences(self, lookup: Callable[[str], str | None], overridden: Iterable[str] = ()) -> list[str]:
        """The watched keys whose value in the running session (``lookup``) differs, less
        those the write's or read's own options set (``overridden``: normalised names)."""
        from ..config import CORE_ALIASES, normalise_key
        from ..plugins import get_registry

        table = {**get_registry().config_aliases(), **CORE_ALIASES}
        given = set(overridden)
        changed = []
        for key in watched_session_keys(self.config):
            if lookup(key) == self.config.get(key):
                continue
            name = normalise_key(key)
            if table.get(name, name) not in given:
                changed.append(key)
        return changed

    def check(self, lookup: Callable[[str], str | None], overridden: Iterable[str] = ()) -> None:
        """Raise OptionError naming the keys (never their values) and the fix."""
        changed = self.differences(lookup, overridden)
        if not changed:
            return
        hidden = [k for k in changed if self.connect and k not in self.config and SPARK_REDACTED.search(k)]
        if hidden:
            raise OptionError(
                f"Spark Connect does not show {_names(hidden)} to its clients (spark.redaction.regex), "
                f"so {REGISTER_HINT} could not pass it on to the driver's steps: give it as an option "
                "of the write or read instead (.option(name, value), any spelling the session uses)")
        if self.registered:
            raise OptionError(
                f"the session's {_names(changed)} changed after {REGISTER_HINT} read the session config "
                f"(the driver used the old values): call {REGISTER_HINT} again after "
                "spark.conf.set/unset")
        raise OptionError(
            f"the session sets {_names(changed)}, which the outcommit data source reads only through "
            f"{REGISTER_HINT} (Spark found it by itself, without the session config): call "
            f"{REGISTER_HINT} once per session, after setting them, or give them as options")


#: Spark's default ``spark.redaction.regex``: the session keys Spark Connect hides.
SPARK_REDACTED = re.compile(r"(?i)secret|password|token|access[.]?key")


def _names(keys: list[str]) -> str:
    return ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")


def _known_key_case() -> dict[str, str]:
    """Lower-cased -> real spelling of every key something registered (options lose case)."""
    known: dict[str, str] = {}
    try:
        from ..plugins import get_registry

        registry = get_registry()
        names = list(registry.config_keys())
        for spec in registry.committers().values():
            names.extend(spec.config_keys)
        aliases = registry.config_aliases()
    except Exception:  # a broken plugin must not hide the write's own errors
        names, aliases = list(CORE_KEYS), CORE_ALIASES
    for name in [*names, *aliases, *aliases.values()]:
        known[name.lower()] = name
    return known



def option_config(lowered: Mapping[str, str],
                  spark_conf: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(the configuration keys given as options, that merged over the session's config).

    Spark lower-cases option names: each key gets back the spelling a plugin registered.
    """
    known = _known_key_case()
    given: dict[str, str] = {}
    for key, value in lowered.items():
        if key.startswith(OPTION_CONFIG_PREFIXES):
            given[known.get(key, known.get(key.removeprefix("spark.hadoop."), key))] = value
    session = session_config(spark_conf or {})
    return given, Config(session).merged(given).to_dict()

