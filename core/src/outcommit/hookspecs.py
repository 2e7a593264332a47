"""The hooks a plugin implements, and the typed ``register`` object each one receives.

A plugin is a module (or object) with functions decorated by ``outcommit.hookimpl``,
published through the entry-point group ``outcommit``::

    [project.entry-points.outcommit]
    mystore = "outcommit_mystore.plugin"

Each hook gets one registrar, as tox's hooks do: ``register.add(...)`` with typed
arguments, checked when called (a wrong type is a :class:`~outcommit.errors.PluginError`
naming the plugin, the hook and what it passed). Calling the registrar itself, as
``register(...)``, is the earlier form: it still works, with a ``DeprecationWarning``, until
the next release. The registry (``outcommit.plugins``) makes the registrars and decides
what the registrations of all plugins add up to (``outcommit.contributions``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pluggy

from .commands import Command
from .committer import CommitterSpec
from .config import KeyFamily
from .errors import PluginError
from .selection import CommitterSelector
from .store import StoreSpec

PROJECT = "outcommit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class Registrar:
    """What one hook of one plugin registers through: ``add`` is typed per hook."""

    hook: str = ""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin

    def _check(self, value: object, expected: type | tuple[type, ...], what: str) -> None:
        """Refuse a wrong type here, naming who passed it: it would fail much later, far
        from the plugin (a lookup, a job)."""
        if not isinstance(value, expected):
            raise PluginError(f'plugin "{self.plugin}", hook {self.hook}: {what} must be '
                              f"{_names(expected)}, not {type(value).__name__} ({value!r})")

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """The earlier form, ``register(...)``: ``register.add(...)`` with a DeprecationWarning."""
        warnings.warn(f'plugin "{self.plugin}" calls the {self.hook} registrar as register(...): '
                      "call register.add(...) instead (register(...) goes in the next release)",
                      DeprecationWarning, stacklevel=2)
        getattr(self, "add")(*args, **kwargs)  # noqa: B009  (each subclass types its own add)


class StoreRegistrar(Registrar):
    """``register_stores``: ``register.add(StoreSpec(...), replace=False)``."""

    hook = "register_stores"

    def __init__(self, plugin: str, take: Callable[[StoreSpec, bool], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, spec: StoreSpec, *, replace: bool = False) -> None:
        self._check(spec, StoreSpec, "a store")
        self._take(spec, bool(replace))


class CommitterRegistrar(Registrar):
    """``register_committers``: ``register.add(CommitterSpec.for_class(...), replace=False)``."""

    hook = "register_committers"

    def __init__(self, plugin: str, take: Callable[[CommitterSpec, bool], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, spec: CommitterSpec, *, replace: bool = False) -> None:
        self._check(spec, CommitterSpec, "a committer")
        self._take(spec, bool(replace))


class ConfigKeyRegistrar(Registrar):
    """``register_config_keys``: ``register.add(key, description, secret=False)``."""

    hook = "register_config_keys"

    def __init__(self, plugin: str, take: Callable[[str, str, bool], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, key: str, description: str = "", *, secret: bool = False) -> None:
        self._check(key, str, "a key")
        self._check(description, str, "a description")
        self._take(key, description, bool(secret))


class ConfigAliasRegistrar(Registrar):
    """``register_config_aliases``: ``register.add(alias, key)``."""

    hook = "register_config_aliases"

    def __init__(self, plugin: str, take: Callable[[str, str], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, alias: str, key: str) -> None:
        self._check(alias, str, "an alias")
        self._check(key, str, "a key")
        self._take(alias, key)


class ConfigFamilyRegistrar(Registrar):
    """``register_config_families``: ``register.add(KeyFamily(...))``."""

    hook = "register_config_families"

    def __init__(self, plugin: str, take: Callable[[KeyFamily], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, family: KeyFamily) -> None:
        self._check(family, KeyFamily, "a key family")
        if not family.prefix.endswith("."):
            raise PluginError(f'plugin "{self.plugin}", hook {self.hook}: the prefix of a key family '
                              f"ends with '.' ({family.prefix!r})")
        self._take(family)


class SelectorRegistrar(Registrar):
    """``register_committer_selectors``: ``register.add(CommitterSelector(...))``."""

    hook = "register_committer_selectors"

    def __init__(self, plugin: str, take: Callable[[CommitterSelector], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, selector: CommitterSelector) -> None:
        self._check(selector, CommitterSelector, "a selector")
        self._take(selector)


class CommandRegistrar(Registrar):
    """``register_commands``: ``register.add(Command(...))``."""

    hook = "register_commands"

    def __init__(self, plugin: str, take: Callable[[Command], None]) -> None:
        super().__init__(plugin)
        self._take = take

    def add(self, command: Command) -> None:
        self._check(command, Command, "a command")
        self._take(command)


def _names(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins"
                       else t.__qualname__ for t in types)


@hookspec
def register_stores(register: StoreRegistrar) -> None:
    """Register stores: ``register.add(StoreSpec(...), replace=False)`` once per store.

    A scheme an earlier plugin registered is a conflict (this plugin is skipped, with an
    error naming both) unless ``replace=True``, which wins over plain registrations
    (``outcommit.contributions``). Import cloud SDKs inside the spec's factory, not at
    module import.
    """


@hookspec
def register_committers(register: CommitterRegistrar) -> None:
    """Register committers: ``register.add(CommitterSpec(...), replace=False)`` once each.

    A committer name an earlier plugin registered is a conflict unless ``replace=True``,
    as for stores.
    """


@hookspec
def register_config_keys(register: ConfigKeyRegistrar) -> None:
    """Register configuration keys a plugin reads: ``register.add(key, description)``.

    A key ending in ``.`` registers a prefix (every key below it is known). A key that
    holds a credential: ``register.add(key, description, secret=True)``; its value (under
    the key or any alias of it) is never logged, shown or written, whatever its name.
    Names that say so (secret, password, token, private key, account key, SAS,
    connection string...) are hidden anyway (``outcommit.redaction``).
    """


@hookspec
def register_commands(register: CommandRegistrar) -> None:
    """Add subcommands to the ``outcommit`` CLI: ``register.add(Command(...))``
    (``outcommit.commands.Command``).

    A command's module is imported when it runs, not when the CLI starts.
    """


@hookspec
def register_config_aliases(register: ConfigAliasRegistrar) -> None:
    """Register other names of a plugin's keys: ``register.add(alias, key)``.

    Hadoop's names are the usual aliases (``fs.s3a.committer.threads`` for
    ``outcommit.committer.threads``); an ``outcommit.`` key given explicitly wins over
    any alias of it. An alias an earlier plugin made an alias of another key is a
    conflict: this plugin is skipped, with an error naming both.
    """


@hookspec
def register_config_families(register: ConfigFamilyRegistrar) -> None:
    """Declare the families of Hadoop's keys a plugin reads some of:
    ``register.add(KeyFamily(prefix, hadoop_keys, closed=...))``
    (``outcommit.config.KeyFamily``; the S3 plugin: ``fs.s3a.committer.`` and ``fs.s3a.``).

    Core then checks every key of the family for typos, without naming the plugin: a key
    that is neither an alias the plugins registered nor one of Hadoop's own keys of the
    family is reported with a "did you mean" (every such key in a closed family, a near
    miss only in an open one). A prefix an earlier plugin declared is a conflict.
    """


@hookspec
def register_committer_selectors(register: SelectorRegistrar) -> None:
    """Register configuration keys that choose the committer for some schemes:
    ``register.add(CommitterSelector(...))`` (Hadoop's ``fs.s3a.committer.name`` for s3/s3a).

    The factory consults them after ``outcommit.committer.<scheme>`` and before the
    FileOutputCommitter algorithm and the store's default.
    """
