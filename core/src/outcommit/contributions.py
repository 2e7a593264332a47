"""What each plugin registered, and how the registrations of all plugins combine.

The rules (docs/plugins.md), which make the outcome the same in every process:

* plugins are taken in a fixed order: the built-ins, then installed plugins by
  distribution name and entry point name, then plugins added by hand;
* a plugin whose registration conflicts with an earlier plugin's -- a scheme, committer,
  command or key family registered already, an alias made an alias of another key, a scheme or
  committer that an earlier plugin replaces already -- is skipped as a whole, with an
  error naming both plugins, as a plugin that fails to import is: the others all load;
* ``replace=True`` wins over every plain registration of the name, whichever plugin
  comes first (replacements are applied after all plain registrations).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .commands import Command
    from .committer import CommitterSpec
    from .config import KeyFamily
    from .selection import CommitterSelector
    from .store import StoreSpec


@dataclass
class Contribution:
    """Everything one plugin's hooks registered, before it meets the other plugins'."""

    name: str
    #: How messages name it: ``"s3" (outcommit-s3 0.1.0)``.
    label: str = ""
    stores: list[tuple[StoreSpec, bool]] = field(default_factory=list)
    committers: list[tuple[CommitterSpec, bool]] = field(default_factory=list)
    keys: list[tuple[str, str, bool]] = field(default_factory=list)  # key, description, secret
    aliases: list[tuple[str, str]] = field(default_factory=list)
    selectors: list[CommitterSelector] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    families: list[KeyFamily] = field(default_factory=list)
    #: A hook of the plugin raised: it is skipped with this error.
    error: str | None = None

    def __post_init__(self) -> None:
        self.label = self.label or f'"{self.name}"'

    def names(self) -> Iterator[tuple[str, str, bool]]:
        """(kind, name, replace) of each name it claims: schemes, committers, commands, key
        families."""
        for store, replace in self.stores:
            for scheme in store.schemes:
                yield "scheme", scheme, replace
        for committer, replace in self.committers:
            yield "committer", committer.name, replace
        for command in self.commands:
            yield "command", command.name, False
        for family in self.families:
            yield "key family", family.prefix, False


@dataclass
class Merged:
    """The registries all accepted plugins make together; ``skipped``: plugin -> why."""

    stores: dict[str, StoreSpec] = field(default_factory=dict)
    committers: dict[str, CommitterSpec] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    key_owners: dict[str, str] = field(default_factory=dict)
    secret_keys: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    selectors: list[CommitterSelector] = field(default_factory=list)
    commands: dict[str, Command] = field(default_factory=dict)
    families: dict[str, KeyFamily] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


class _Claims:
    """Who claimed which name so far (plain and replacing registrations apart)."""

    def __init__(self) -> None:
        self.plain: dict[tuple[str, str], Contribution] = {}
        self.replacing: dict[tuple[str, str], Contribution] = {}
        self.aliases: dict[str, tuple[str, Contribution]] = {}

    def conflict(self, plugin: Contribution) -> str | None:
        """Why ``plugin`` cannot be added to what the earlier plugins claimed (None: it can)."""
        own: set[tuple[str, str, bool]] = set()
        for kind, name, replace in plugin.names():
            if (kind, name, replace) in own:
                return f"plugin {plugin.label} registers {kind} \"{name}\" twice"
            own.add((kind, name, replace))
            other = (self.replacing if replace else self.plain).get((kind, name))
            if other is not None and replace:
                return (f"plugin {plugin.label} replaces {kind} \"{name}\", which plugin "
                        f"{other.label} replaces already: only one plugin may replace it")
            if other is not None:
                fix = "; pass replace=True to replace it" if kind in ("scheme", "committer") else ""
                return (f"plugin {plugin.label} registers {kind} \"{name}\", already "
                        f"registered by plugin {other.label}{fix}")
        for alias, key in plugin.aliases:
            target = self.aliases.get(alias)
            if target is not None and target[0] != key:
                return (f"plugin {plugin.label} registers {alias!r} as an alias of {key!r}; "
                        f"plugin {target[1].label} made it an alias of {target[0]!r}")
        return None

    def add(self, plugin: Contribution) -> None:
        for kind, name, replace in plugin.names():
            (self.replacing if replace else self.plain)[(kind, name)] = plugin
        for alias, key in plugin.aliases:
            self.aliases.setdefault(alias, (key, plugin))


def merge(plugins: Sequence[Contribution]) -> Merged:
    """The registries of ``plugins`` (in their order), each conflicting plugin skipped."""
    merged = Merged()
    claims = _Claims()
    accepted: list[Contribution] = []
    for plugin in plugins:
        why = plugin.error or claims.conflict(plugin)
        if why is not None:
            merged.skipped[plugin.name] = why
            continue
        claims.add(plugin)
        accepted.append(plugin)
    for replacing in (False, True):  # every plain registration first: a replacement wins
        for plugin in accepted:
            _add_specs(merged, plugin, replacing)
    for plugin in accepted:
        _add_the_rest(merged, plugin)
    return merged


def _add_specs(merged: Merged, plugin: Contribution, replacing: bool) -> None:
    for store, replace in plugin.stores:
        if replace == replacing:
            merged.stores.update(dict.fromkeys(store.schemes, store))
    for committer, replace in plugin.committers:
        if replace == replacing:
            merged.committers[committer.name] = committer


def _add_the_rest(merged: Merged, plugin: Contribution) -> None:
    for key, description, secret in plugin.keys:
        merged.keys[key] = description
        merged.key_owners[key] = plugin.name
        if secret:
            merged.secret_keys.add(key)
    merged.aliases.update(plugin.aliases)
    merged.selectors.extend(plugin.selectors)
    merged.commands.update((command.name, command) for command in plugin.commands)
    merged.families.update((family.prefix, family) for family in plugin.families)


def by_distribution(entries: Iterable[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """(distribution, entry point name) pairs in loading order: by distribution name
    (normalised as pip does: ``Outcommit_S3`` is ``outcommit-s3``), then entry point name;
    entry points of no distribution last. Never the order the environment lists them in."""
    def key(entry: tuple[str | None, str]) -> tuple[bool, str, str]:
        dist, name = entry
        return dist is None, normalise_distribution(dist or ""), name

    return sorted(entries, key=key)


def normalise_distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
