"""Plugin discovery and the store / committer registries.

Plugins are loaded lazily, on the first lookup, from the entry-point group
``outcommit``; the built-in stores and committers register through the same hooks.
Set ``OUTCOMMIT_DISABLE_PLUGIN_AUTOLOAD=1`` to load only the built-ins (tests).
"""

from __future__ import annotations

import importlib.metadata as metadata
import logging
import os
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

import pluggy

from . import hookspecs
from .commands import Command
from .committer import CommitterSpec
from .config import KeyFamily
from .contributions import Contribution, Merged, by_distribution, merge
from .errors import PluginError, UnknownCommitterError, UnknownSchemeError
from .install import install_command
from .redaction import declare_secret_keys
from .selection import CommitterSelector
from .spelling import guess
from .store import StoreSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "outcommit"
DISABLE_AUTOLOAD_ENV = "OUTCOMMIT_DISABLE_PLUGIN_AUTOLOAD"

# fsspec's convention: a hint for a scheme nobody registered (which distribution to
# install), never an import: core adds no store itself but through the registry.
KNOWN_DISTRIBUTIONS: dict[str, str] = {
    "s3": "outcommit-s3", "s3a": "outcommit-s3",
    "gs": "outcommit-gcs", "gcs": "outcommit-gcs",
    "abfs": "outcommit-azure", "abfss": "outcommit-azure", "az": "outcommit-azure",
    "hdfs": "outcommit-hdfs", "viewfs": "outcommit-hdfs",
}
#: The same for CLI commands this project's distributions add (``outcommit demo``).
KNOWN_COMMANDS: dict[str, str] = {"demo": "outcommit-devtools"}


@dataclass
class PluginInfo:
    name: str
    distribution: str | None = None
    version: str | None = None
    schemes: list[str] = field(default_factory=list)
    committers: list[str] = field(default_factory=list)
    error: str | None = None


class Registry:
    """A typed wrapper around the plugin manager: the rest of the code never calls ``pm.hook``."""

    def __init__(self, autoload: bool | None = None) -> None:
        self._lock = threading.RLock()
        self._autoload = autoload
        self._loaded = False
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        #: The registered plugins in the order their registrations are taken: the
        #: built-ins, installed plugins by distribution, plugins added by hand. Never the
        #: plugin manager's set: its order changes from one process to the next.
        self._order: list[tuple[object, str]] = []
        self._merged = Merged()
        self._loading = False
        self._info: dict[str, PluginInfo] = {}
        #: Plugin name -> why it did not load (``Type: message``) or was skipped (its
        #: registration conflicts with another plugin's): named by lookups that find
        #: nothing, which the plugin may have registered.
        self._load_failures: dict[str, str] = {}
        self._extra: list[tuple[object, str]] = []

    # -- loading -----------------------------------------------------------------
    def _autoload_enabled(self) -> bool:
        if self._autoload is not None:
            return self._autoload
        return os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes")

    def load(self) -> None:
        """Load the built-ins and (unless disabled) every installed plugin. Idempotent."""
        with self._lock:
            if self._loaded or self._loading:
                return  # loading: a plugin's import reads configuration meanwhile
            self._loading = True
            try:
                from . import builtin

                self._register_module(builtin, "outcommit", "outcommit")
                if self._autoload_enabled():
                    self._load_entry_points()
                for plugin, name in self._extra:
                    self._register_module(plugin, name, None)
                self._collect()
                self._loaded = True
            finally:
                self._loading = False

    def _load_entry_points(self) -> None:
        found = {(_dist_name(ep), ep.name): ep
                 for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
        for dist_name, ep_name in by_distribution(found):
            ep = found[(dist_name, ep_name)]
            # Two distributions may use one entry point name: the later is named by both.
            name = f"{dist_name}:{ep_name}" if self._pm.has_plugin(ep_name) else ep_name
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must not break every other store
                cause = f"{type(exc).__name__}: {exc}"
                self._failed(name, dist_name, f'Error importing plugin "{name}": {cause}', cause)
                continue
            try:
                self._register_module(plugin, name, dist_name)
            except PluginError as exc:  # pluggy refused its hooks
                self._failed(name, dist_name, str(exc), str(exc.__cause__ or exc))

    def _failed(self, name: str, dist_name: str | None, message: str, cause: str) -> None:
        log.warning("%s (skipped)", message)
        self._info[name] = PluginInfo(name, dist_name, _version(dist_name), error=message)
        self._load_failures[name] = cause

    def _register_module(self, plugin: object, name: str, dist_name: str | None) -> None:
        if self._pm.is_registered(plugin) or self._pm.has_plugin(name):
            return
        try:
            self._pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f'Error registering plugin "{name}": {exc}') from exc
        self._order.append((plugin, name))
        self._info[name] = PluginInfo(name, dist_name, _version(dist_name))

    def add_plugin(self, plugin: object, name: str) -> None:
        """Register a plugin object by hand (tests, applications); reloads the registries.

        Raises :class:`PluginError` when its registrations conflict with another
        plugin's (it is not added), as when pluggy refuses its hooks."""
        with self._lock:
            if self._loading:  # a plugin's import adds one: taken after the installed ones
                self._extra.append((plugin, name))
                return
            self.load()
            self._register_module(plugin, name, None)
            self._collect()
            if name in self._merged.skipped:
                why = self._load_failures.pop(name)
                self._pm.unregister(plugin)
                self._order = [(p, n) for p, n in self._order if p is not plugin]
                del self._info[name]
                self._collect()
                raise PluginError(f'Error registering plugin "{name}": {why}')
            self._extra.append((plugin, name))

    def _contribution(self, plugin: object, name: str) -> Contribution:
        """What ``plugin``'s hooks register (its hooks alone are called)."""
        info = self._info.get(name)
        release = " ".join(filter(None, (info.distribution, info.version))) if info else ""
        found = Contribution(name, f'"{name}" ({release})' if release else f'"{name}"')

        others = [p for p, _ in self._order if p is not plugin]
        hooks = self._pm.subset_hook_caller  # call one plugin's hooks, not the others'
        try:
            for hook, register in registrars(found).items():
                hooks(hook, others)(register=register)
        except Exception as exc:  # a plugin's bug must not break every other plugin
            found.error = f"a hook of plugin {found.label} raised {type(exc).__name__}: {exc}"
        return found

    def _collect(self) -> None:
        merged = merge([self._contribution(plugin, name) for plugin, name in self._order])
        for _, name in self._order:
            info = self._info[name]
            why = merged.skipped.get(name)
            if why is not None and self._load_failures.get(name) != why:  # once, not per reload
                log.warning('Error registering plugin "%s": %s (skipped)', name, why)
            if why is not None:
                self._load_failures[name] = why
            else:
                self._load_failures.pop(name, None)
            info.error = f'Error registering plugin "{name}": {why}' if why else None
            info.schemes = [s for s, spec in merged.stores.items() if spec.plugin == name]
            info.committers = [c for c, spec in merged.committers.items() if spec.plugin == name]
        for spec in merged.committers.values():  # keys a committer declares are its plugin's
            for key, description in spec.config_keys.items():
                merged.keys.setdefault(key, description)
                merged.key_owners.setdefault(key, spec.plugin)
        # Declared secrets, by any of their names, are hidden wherever text is scrubbed.
        merged.secret_keys |= {a for a, key in merged.aliases.items() if key in merged.secret_keys}
        declare_secret_keys(merged.secret_keys)
        self._merged = merged

    # -- lookups -----------------------------------------------------------------
    def store_spec(self, scheme: str) -> StoreSpec:
        self.load()
        try:
            return self._merged.stores[scheme]
        except KeyError:
            dist = KNOWN_DISTRIBUTIONS.get(scheme)
            broken = {self._info[name].distribution for name in self._load_failures}
            if dist and dist in broken:
                hint = (f"its plugin, {dist}, is installed but failed to load (below): fix its "
                        "installation (a missing or incompatible requirement)")
            elif dist:
                hint = f"install the plugin for it: {install_command(dist)}"
            else:
                hint = "install a plugin that registers it (entry-point group 'outcommit')"
                if self._load_failures:
                    hint += ", or fix an installed one that failed to load (below)"
            raise UnknownSchemeError(
                f"no store registered for scheme '{scheme}': {hint}. "
                f"Registered schemes: {', '.join(sorted(self._merged.stores)) or 'none'}"
                f"{self._failures_text()}") from None

    def committer_spec(self, name: str) -> CommitterSpec:
        self.load()
        try:
            return self._merged.committers[name]
        except KeyError:
            meant = guess(name, self._merged.committers) or "."
            raise UnknownCommitterError(
                f"no committer named '{name}'{meant} Registered committers: "
                f"{', '.join(sorted(self._merged.committers)) or 'none'}{self._failures_text()}") from None

    def _failures_text(self) -> str:
        """The installed plugins that failed to load, one line each ('' when none did): a
        lookup that finds nothing may be looking for what one of them registers."""
        if not self._load_failures:
            return ""
        lines = []
        for name, cause in sorted(self._load_failures.items()):
            info = self._info[name]
            release = " ".join(filter(None, (info.distribution, info.version)))
            dist = f" ({release})" if release else ""
            first = (cause.splitlines() or [""])[0]
            what = "was skipped" if name in self._merged.skipped else "failed to load"
            lines.append(f"\n  plugin '{name}'{dist} is installed but {what}: {first}")
        return ". Installed plugins that failed to load (one may register it):" + "".join(lines)

    def stores(self) -> dict[str, StoreSpec]:
        self.load()
        return dict(self._merged.stores)

    def committers(self) -> dict[str, CommitterSpec]:
        self.load()
        return dict(self._merged.committers)

    def config_keys(self) -> dict[str, str]:
        self.load()
        return dict(self._merged.keys)

    def key_owners(self) -> dict[str, str]:
        """Configuration key -> the plugin that registered it."""
        self.load()
        return dict(self._merged.key_owners)

    def secret_keys(self) -> frozenset[str]:
        """Keys (and their aliases) that plugins declared secret (``secret=True``)."""
        self.load()
        return frozenset(self._merged.secret_keys)

    def config_aliases(self) -> dict[str, str]:
        """Alias -> key, core's and every plugin's (during loading: those collected so far)."""
        self.load()
        return dict(self._merged.aliases)

    def config_families(self) -> dict[str, KeyFamily]:
        """The families of Hadoop's keys plugins declared (``outcommit.config.KeyFamily``), by prefix."""
        self.load()
        return dict(self._merged.families)

    def committer_selectors(self) -> list[CommitterSelector]:
        self.load()
        return list(self._merged.selectors)

    def commands(self) -> dict[str, Command]:
        """CLI subcommands plugins contributed (``outcommit.commands.Command``), by name."""
        self.load()
        return dict(self._merged.commands)

    def missing_command(self, name: str) -> str | None:
        """Why command ``name`` of one of this project's distributions is not here (the
        distribution is not installed, or failed to load), with the fix; None otherwise."""
        self.load()
        dist = KNOWN_COMMANDS.get(name)
        if dist is None or name in self._merged.commands:
            return None
        broken = [self._info[p].error for p in self._load_failures if self._info[p].distribution == dist]
        if broken:
            return f"the {name} is in {dist}, which is installed but failed to load: {broken[0]}"
        return f"the {name} is in {dist}, which is not installed: {install_command(dist)}"

    def plugins(self) -> list[PluginInfo]:
        self.load()
        return sorted(self._info.values(), key=lambda i: (i.name != "outcommit", i.name))


_Spec = TypeVar("_Spec", StoreSpec, CommitterSpec, CommitterSelector, Command, KeyFamily)


def registrars(found: Contribution) -> dict[str, hookspecs.Registrar]:
    """The ``register`` object of each hook, filling ``found``; every spec registered is
    marked as the plugin's (``spec.plugin``)."""
    name = found.name

    def owned(spec: _Spec) -> _Spec:
        object.__setattr__(spec, "plugin", name)  # frozen specs: who registered them
        return spec

    def key(key: str, description: str, secret: bool) -> None:
        found.keys.append((key, description, secret))

    def alias(alias: str, key: str) -> None:
        found.aliases.append((alias, key))

    return {
        "register_stores": hookspecs.StoreRegistrar(
            name, lambda spec, replace: found.stores.append((owned(spec), replace))),
        "register_committers": hookspecs.CommitterRegistrar(
            name, lambda spec, replace: found.committers.append((owned(spec), replace))),
        "register_config_keys": hookspecs.ConfigKeyRegistrar(name, key),
        "register_config_aliases": hookspecs.ConfigAliasRegistrar(name, alias),
        "register_committer_selectors": hookspecs.SelectorRegistrar(
            name, lambda selector: found.selectors.append(owned(selector))),
        "register_commands": hookspecs.CommandRegistrar(
            name, lambda command: found.commands.append(owned(command))),
        "register_config_families": hookspecs.ConfigFamilyRegistrar(
            name, lambda family: found.families.append(owned(family))),
    }


def _dist_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else None


def _version(dist_name: str | None) -> str | None:
    if not dist_name:
        return None
    try:
        return metadata.version(dist_name)
    except metadata.PackageNotFoundError:
        return None


_registry: Registry | None = None
_registry_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry (created on first use)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = Registry()
        return _registry


def reset_registry(autoload: bool | None = None) -> Registry:
    """Forget loaded plugins (tests); the next lookup loads them again."""
    global _registry
    with _registry_lock:
        _registry = Registry(autoload=autoload)
        return _registry


def add_plugin(plugin: ModuleType | Any, name: str) -> None:
    get_registry().add_plugin(plugin, name)
