"""Configuration keys that choose a committer: how a plugin declares one (a spec, as
``StoreSpec`` and ``CommitterSpec`` are), registered through ``register_committer_selectors``.

The factory consults them (``outcommit.factory.select_committer``); this module names no
registry, so the registry and the hooks can name a selector without importing the factory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import Config
from .errors import ConfigError
from .spelling import guess

ALGORITHM_KEY = "outcommit.fileoutputcommitter.algorithm.version"


@dataclass(frozen=True)
class CommitterSelector:
    """A configuration key that chooses the committer for some schemes.

    Hadoop's ``fs.s3a.committer.name`` is one: the S3 plugin registers it for s3/s3a
    (``register_committer_selectors``). ``choices`` maps each accepted value to a
    committer name, or to None for "the FileOutputCommitter that
    ``mapreduce.fileoutputcommitter.algorithm.version`` names" (Hadoop's ``file``).
    """

    key: str                            # the outcommit. key holding the value (aliases apply)
    schemes: tuple[str, ...]
    choices: Mapping[str, str | None]
    label: str = ""                     # how a reason names it (default: ``key``)
    plugin: str = ""

    def choose(self, config: Config) -> tuple[str, str] | None:
        """(committer, why) when ``config`` sets this key; a value outside choices is an error."""
        value = config.get_str(self.key)
        if not value:
            return None
        # As the user spelled it (spark.hadoop.fs.s3a.committer.name), else the label.
        spelled = config.spelled(self.key)
        label = spelled if spelled != self.key else self.label or self.key
        chosen = value.strip().lower()
        if chosen not in self.choices:
            hint = guess(chosen, self.choices)
            raise ConfigError(f"{label}={chosen!r}{hint + ' Use' if hint else ': use'} "
                              f"{', '.join(self.choices)}")
        name = self.choices[chosen]
        if name is None:
            name = algorithm(config.get_str(ALGORITHM_KEY))
            return name, f"{label}={chosen} (FileOutputCommitter algorithm {name[1]})"
        return name, f"{label}={chosen}"


def algorithm(value: str | None) -> str:
    """The FileOutputCommitter that ``mapreduce.fileoutputcommitter.algorithm.version`` names."""
    if value is None or value.strip() == "1":
        return "v1"
    if value.strip() == "2":
        return "v2"
    raise ConfigError(f"mapreduce.fileoutputcommitter.algorithm.version={value!r}: use 1 or 2")
