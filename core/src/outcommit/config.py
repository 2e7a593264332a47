"""Flat string configuration under ``outcommit.``, with Hadoop's names where they fit.

Keys arrive from Python callers, Spark (``spark.`` / ``spark.hadoop.`` prefixes) and
Hadoop-style settings. They are normalised when the Config is made: prefixes stripped,
aliases mapped to their ``outcommit.`` name (an explicit ``outcommit.`` key wins over its
alias). A Config is a plain value of the bottom layer: it knows the aliases of core's own
committers (Hadoop's ``mapreduce.*`` names) and those it is given; the plugins' aliases
(``fs.s3a.*``..., hook ``register_config_aliases``) are given by the composition layer
(``outcommit.factory.resolve_config``, which every factory entry point applies). It never
asks the plugin registry, so a Config made while plugins load reads as one made after.
Unknown ``outcommit.`` keys are reported, never silently ignored.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .redaction import redact as redact  # re-exported: its home before redaction.py
from .redaction import remember_config

log = logging.getLogger(__name__)

PREFIX = "outcommit."

# Hadoop's names for the settings of core's own committers (FileOutputCommitter, manifest).
CORE_ALIASES: dict[str, str] = {
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "outcommit.success.enabled",
    "mapreduce.fileoutputcommitter.algorithm.version": "outcommit.fileoutputcommitter.algorithm.version",
    "mapreduce.manifest.committer.summary.report.directory": "outcommit.manifest.summary-report-dir",
    "mapreduce.manifest.committer.validate.output": "outcommit.manifest.validate-output",
    "mapreduce.manifest.committer.delete.target.files": "outcommit.manifest.delete-target-files",
    "mapreduce.manifest.committer.io.threads": "outcommit.committer.threads",
}

# Hadoop's own keys of those families that outcommit does not read (Hadoop 3.5's
# FileOutputCommitter and ManifestCommitterConstants): they pass unreported, for Hadoop's
# committers in the same session; any other key of the family is a typo (KeyFamily).
HADOOP_FILEOUTPUTCOMMITTER_KEYS = frozenset({
    "mapreduce.fileoutputcommitter.cleanup-failures.ignored",
    "mapreduce.fileoutputcommitter.cleanup.skipped",
    "mapreduce.fileoutputcommitter.failures.attempts",
    "mapreduce.fileoutputcommitter.task.cleanup.enabled",
})
HADOOP_MANIFEST_KEYS = frozenset({
    "mapreduce.manifest.committer.cleanup.parallel.delete",
    "mapreduce.manifest.committer.cleanup.parallel.delete.base.first",
    "mapreduce.manifest.committer.diagnostics.manifest.directory",
    "mapreduce.manifest.committer.manifest.save.attempts",
    "mapreduce.manifest.committer.store.operations.classname",
    "mapreduce.manifest.committer.writer.queue.capacity",
})

# Keys core itself reads. Plugins add theirs through ``register_config_keys``.
CORE_KEYS: dict[str, str] = {
    "outcommit.committer": "committer name used for every scheme without its own key",
    "outcommit.committer.allow-unsafe": "allow a committer the store cannot make safe (default false)",
    "outcommit.committer.threads": "threads for parallel job commit work (default: the store's "
                                   "connection pool, 64 on S3; 8 elsewhere)",
    "outcommit.committer.conflict-mode": "fail | append | replace for committers that support it",
    "outcommit.committer.unique-filenames": "staging committers (directory, partitioned): add the "
                                            "job id to each uploaded file's name (default true; "
                                            "the engines' file names always carry it)",
    "outcommit.job-commit.processes": "delayed committers (magic, directory, partitioned, blocklist): "
                                      "complete the uploads at job commit in this many processes "
                                      "(default 1: in the driver's; each prefix whole in one of them). "
                                      "The processes are spawned and import the driver's script "
                                      "again: keep its work under `if __name__ == \"__main__\":` "
                                      "(a script without it is refused)",
    "outcommit.job-commit.prefix-rate": "with outcommit.job-commit.processes above 1: completions per "
                                        "second per prefix at most (default 3500: S3's PUT rate)",
    "outcommit.success.enabled": "write the _SUCCESS report at job commit (default true)",
    "outcommit.summary-report-dir": "directory to save every job's summary report, also on failure",
    "outcommit.fileoutputcommitter.algorithm.version": "1 or 2: which rename committer 'file' means",
    "outcommit.config.strict": "unknown outcommit. keys are errors (default true); false: a warning",
}
# ``outcommit.committer.<scheme>`` is known for every registered scheme.
SCHEME_KEY = re.compile(r"^outcommit\.committer\.(?P<scheme>[a-z][a-z0-9+.-]*)$")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def normalise_key(key: str) -> str:
    for prefix in ("spark.hadoop.", "spark."):
        if key.startswith(prefix) and not key.startswith("spark.sql."):
            key = key[len(prefix):]
            break
    return key


def resolve(raw: Mapping[str, str], aliases: Mapping[str, str]) -> dict[str, str]:
    """``raw`` under normalised names: prefixes stripped, ``aliases`` (alias -> key) mapped;
    an explicit key wins over any alias of it."""
    return {key: raw[given] for key, given in spellings(raw, aliases).items()}


def spellings(raw: Iterable[str], aliases: Mapping[str, str]) -> dict[str, str]:
    """Normalised key -> the key as given that sets it (``spark.hadoop.fs.s3a.committer.name``
    for ``outcommit.s3a.committer.name``): an explicit key wins over any alias of it."""
    explicit: dict[str, str] = {}
    aliased: dict[str, str] = {}
    for key in raw:
        norm = normalise_key(key)
        if norm in aliases:
            aliased[aliases[norm]] = key
        else:
            explicit[norm] = key
    return {**aliased, **explicit}


@dataclass(frozen=True)
class KeyFamily:
    """A family of Hadoop's configuration keys that outcommit reads some of (hook
    ``register_config_families``): ``fs.s3a.committer.``, ``mapreduce.manifest.committer.``.

    Hadoop reads its keys from one shared configuration and ignores any other, so a
    misspelled ``fs.s3a.committer.nmae`` silently chose the default committer. A key of a
    family that is neither an alias of an ``outcommit.`` key nor one of ``hadoop_keys``
    (Hadoop's own keys of the family that outcommit does not read: they are for Hadoop's
    committers and connectors in the same session, and pass) is reported
    (``outcommit.keys.check``): in a ``closed`` family, every such key; in an open one
    (Hadoop's connectors read keys that no list here holds, such as ``fs.s3a.*``), only a
    near miss of a listed key, which is a typo rather than a setting of a newer Hadoop.
    """

    prefix: str                      # ends with '.': 'fs.s3a.committer.'
    hadoop_keys: frozenset[str] = frozenset()
    closed: bool = True
    #: Subtrees of Hadoop's whose keys all pass (``fs.s3a.bucket.``: per-bucket settings).
    hadoop_prefixes: tuple[str, ...] = ()
    label: str = ""                  # who reads the family: "Hadoop's S3A committers"
    plugin: str = ""

    def holds(self, key: str) -> bool:
        return key.startswith(self.prefix)


class Config(Mapping[str, str]):
    """An immutable mapping of normalised keys to string values.

    ``aliases`` (alias -> key) adds to core's own (:data:`CORE_ALIASES`, always applied):
    the composition layer passes the plugins' (``outcommit.factory.resolve_config``).
    """

    def __init__(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
                 aliases: Mapping[str, str] | None = None) -> None:
        items = values.items() if isinstance(values, Mapping) else values
        raw: dict[str, str] = {}
        for key, value in items:
            if value is None:
                continue
            raw[str(key)] = _to_str(value)
        # Remembered at once: a secret must be hidden in whatever text it reaches later
        # (an SDK's DEBUG record, an exception), not only where outcommit shows the config.
        remember_config(raw.items())
        self._raw = raw
        self._aliases = {**(aliases or {}), **CORE_ALIASES}
        self._values = resolve(raw, self._aliases)

    @property
    def aliases(self) -> dict[str, str]:
        """The alias table this Config was resolved with (alias -> key)."""
        return dict(self._aliases)

    def with_aliases(self, aliases: Mapping[str, str]) -> Config:
        """The same values resolved with ``aliases`` too (the plugins', from the registry)."""
        if all(self._aliases.get(alias) == key for alias, key in aliases.items()):
            return self
        return Config(self._raw, {**self._aliases, **aliases})

    # Mapping protocol
    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Config({redact(self._values)!r})"

    def spelled(self, key: str) -> str:
        """How the user spelled normalised ``key``: the key as given that set it, with its
        ``spark.``/``spark.hadoop.`` prefix or as the Hadoop alias it was (``key`` itself
        when nothing set it). Errors and reports name keys as their users wrote them."""
        return spellings(self._raw, self._aliases).get(key, key)

    def raw(self, key: str) -> str | None:
        """A key exactly as given (e.g. ``spark.sql.sources.writeJobUUID``)."""
        return self._raw.get(key, self._values.get(key))

    def to_dict(self) -> dict[str, str]:
        return dict(self._raw)

    def merged(self, other: Mapping[str, Any] | None) -> Config:
        """A new config where ``other`` wins."""
        if not other:
            return self
        other_raw = other._raw if isinstance(other, Config) else other
        table = {**self._aliases, **other._aliases} if isinstance(other, Config) else self._aliases
        return Config({**self._raw, **{k: v for k, v in other_raw.items() if v is not None}}, table)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        return self._values.get(key, default)

    def get_bool(self, key: str, default: bool) -> bool:
        value = self._values.get(key)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{key}={value!r} is not a boolean: use true or false")

    def get_int(self, key: str, default: int, minimum: int | None = None) -> int:
        value = self._values.get(key)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(f"{key}={value!r} is not an integer") from None
        if minimum is not None and number < minimum:
            raise ConfigError(f"{key}={number} must be >= {minimum}")
        return number

    def get_choice(self, key: str, choices: Iterable[str], default: str) -> str:
        value = self._values.get(key)
        if value is None:
            return default
        options = list(choices)
        lowered = value.strip().lower()
        if lowered not in options:
            raise ConfigError(f"{key}={value!r} is not one of {', '.join(options)}")
        return lowered

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """Values whose key starts with ``prefix``, with the prefix removed."""
        return {k[len(prefix):]: v for k, v in self._values.items() if k.startswith(prefix)}

    def unknown_keys(self, known: Iterable[str], known_prefixes: Iterable[str] = (),
                     schemes: Iterable[str] = ()) -> list[str]:
        """``outcommit.`` keys that nothing registered."""
        known_set = set(known)
        prefixes = tuple(known_prefixes)
        scheme_set = set(schemes)
        unknown = []
        for key in self._values:
            if not key.startswith(PREFIX) or key in known_set or key.startswith(prefixes):
                continue
            match = SCHEME_KEY.match(key)
            if match and match.group("scheme") in scheme_set:
                continue
            unknown.append(key)
        return sorted(unknown)


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: The Hadoop families core reads some keys of (registered by the built-in plugin).
CORE_FAMILIES = (
    KeyFamily("mapreduce.fileoutputcommitter.", HADOOP_FILEOUTPUTCOMMITTER_KEYS,
              label="Hadoop's FileOutputCommitter"),
    KeyFamily("mapreduce.manifest.committer.", HADOOP_MANIFEST_KEYS,
              label="Hadoop's manifest committer"),
)
