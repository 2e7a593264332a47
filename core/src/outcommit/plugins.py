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
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from .errors import PluginError, UnknownCommitterError, UnknownSchemeError
from .redaction import declare_secret_keys

if TYPE_CHECKING:
    from .committer import CommitterSpec
    from .factory import CommitterSelector
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
        self._stores: dict[str, StoreSpec] = {}
        self._committers: dict[str, CommitterSpec] = {}
        self._config_keys: dict[str, str] = {}
        self._key_owners: dict[str, str] = {}
        self._secret_keys: frozenset[str] = frozenset()
        self._aliases: dict[str, str] = {}
        self._selectors: list[CommitterSelector] = []
        self._commands: dict[str, Any] = {}
        self._loading = False
        self._info: dict[str, PluginInfo] = {}
        #: Entry point name -> why it did not load (``Type: message``): named by lookups
        #: that find nothing, which the plugin may have registered.
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
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            dist_name = dist.name if dist is not None else None
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must not break every other store
                cause = f"{type(exc).__name__}: {exc}"
                message = f'Error importing plugin "{ep.name}": {cause}'
                log.warning("%s (skipped)", message)
                self._info[ep.name] = PluginInfo(ep.name, dist_name, _version(dist_name),
                                                 error=message)
                self._load_failures[ep.name] = cause
                continue
            self._register_module(plugin, ep.name, dist_name)

    def _register_module(self, plugin: object, name: str, dist_name: str | None) -> None:
        if self._pm.is_registered(plugin) or self._pm.has_plugin(name):
            return
        try:
            self._pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f'Error registering plugin "{name}": {exc}') from exc
        self._info[name] = PluginInfo(name, dist_name, _version(dist_name))

    def add_plugin(self, plugin: object, name: str) -> None:
        """Register a plugin object by hand (tests, applications); reloads the registries."""
        with self._lock:
            self._extra.append((plugin, name))
            if self._loaded:
                self._register_module(plugin, name, None)
                self._collect()

    def _collect(self) -> None:
        stores: dict[str, StoreSpec] = {}
        committers: dict[str, CommitterSpec] = {}
        keys: dict[str, str] = {}
        key_owners: dict[str, str] = {}
        aliases: dict[str, str] = {}
        alias_owner: dict[str, str] = {}
        selectors: list[CommitterSelector] = []
        commands: dict[str, Any] = {}
        secret_keys: set[str] = set()
        for info in self._info.values():
            info.schemes.clear()
            info.committers.clear()
        # Built-ins first so that plugins can replace them explicitly.
        order = sorted(self._pm.get_plugins(), key=lambda p: self._pm.get_name(p) != "outcommit")
        for plugin in order:
            name = self._pm.get_name(plugin) or repr(plugin)
            info = self._info.setdefault(name, PluginInfo(name))

            def add_store(spec: StoreSpec, replace: bool = False, *, _n: str = name,
                          _i: PluginInfo = info) -> None:
                object.__setattr__(spec, "plugin", _n)
                for scheme in spec.schemes:
                    if scheme in stores and not replace:
                        raise PluginError(
                            f'plugin "{_n}" registers scheme "{scheme}", already registered by '
                            f'"{stores[scheme].plugin}"; pass replace=True to replace it')
                    stores[scheme] = spec
                    _i.schemes.append(scheme)

            def add_committer(spec: CommitterSpec, replace: bool = False, *, _n: str = name,
                              _i: PluginInfo = info) -> None:
                object.__setattr__(spec, "plugin", _n)
                if spec.name in committers and not replace:
                    raise PluginError(
                        f'plugin "{_n}" registers committer "{spec.name}", already registered by '
                        f'"{committers[spec.name].plugin}"; pass replace=True to replace it')
                committers[spec.name] = spec
                _i.committers.append(spec.name)

            def add_key(key: str, description: str = "", secret: bool = False, *,
                        _n: str = name) -> None:
                keys[key] = description
                key_owners[key] = _n
                if secret:
                    secret_keys.add(key)

            def add_alias(alias: str, key: str, *, _n: str = name) -> None:
                if alias in aliases and aliases[alias] != key:
                    raise PluginError(
                        f'plugin "{_n}" registers {alias!r} as an alias of {key!r}; plugin '
                        f'"{alias_owner[alias]}" made it an alias of {aliases[alias]!r}')
                aliases[alias] = key
                alias_owner[alias] = _n

            def add_selector(selector: CommitterSelector, *, _n: str = name) -> None:
                object.__setattr__(selector, "plugin", _n)
                selectors.append(selector)

            def add_command(command: Any, *, _n: str = name) -> None:
                if command.name in commands:
                    raise PluginError(f'plugin "{_n}" registers the command "{command.name}" '
                                      f'that plugin "{commands[command.name].plugin}" registered')
                object.__setattr__(command, "plugin", _n)
                commands[command.name] = command

            hooks = self._pm.subset_hook_caller  # call one plugin's hooks at a time, in order
            others = [p for p in self._pm.get_plugins() if p is not plugin]
            hooks("register_stores", others)(register=add_store)
            hooks("register_committers", others)(register=add_committer)
            hooks("register_config_keys", others)(register=add_key)
            hooks("register_config_aliases", others)(register=add_alias)
            hooks("register_committer_selectors", others)(register=add_selector)
            hooks("register_commands", others)(register=add_command)
        for spec in committers.values():  # keys a committer declares are its plugin's
            for key, description in spec.config_keys.items():
                keys.setdefault(key, description)
                key_owners.setdefault(key, spec.plugin)
        # Declared secrets, by any of their names, are hidden wherever text is scrubbed.
        secret_keys |= {alias for alias, key in aliases.items() if key in secret_keys}
        declare_secret_keys(secret_keys)
        self._secret_keys = frozenset(secret_keys)
        self._stores, self._committers, self._config_keys = stores, committers, keys
        self._key_owners = key_owners
        self._aliases, self._selectors, self._commands = aliases, selectors, commands

    # -- lookups -----------------------------------------------------------------
    def store_spec(self, scheme: str) -> StoreSpec:
        self.load()
        try:
            return self._stores[scheme]
        except KeyError:
            dist = KNOWN_DISTRIBUTIONS.get(scheme)
            broken = {self._info[name].distribution for name in self._load_failures}
            if dist and dist in broken:
                hint = (f"its plugin, {dist}, is installed but failed to load (below): fix its "
                        "installation (a missing or incompatible requirement)")
            elif dist:
                hint = f"install the plugin for it: pip install {dist}"
            else:
                hint = "install a plugin that registers it (entry-point group 'outcommit')"
                if self._load_failures:
                    hint += ", or fix an installed one that failed to load (below)"
            raise UnknownSchemeError(
                f"no store registered for scheme '{scheme}': {hint}. "
                f"Registered schemes: {', '.join(sorted(self._stores)) or 'none'}"
                f"{self._failures_text()}") from None

    def committer_spec(self, name: str) -> CommitterSpec:
        self.load()
        try:
            return self._committers[name]
        except KeyError:
            raise UnknownCommitterError(
                f"no committer named '{name}'. Registered committers: "
                f"{', '.join(sorted(self._committers)) or 'none'}{self._failures_text()}") from None

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
            lines.append(f"\n  plugin '{name}'{dist} is installed but failed to load: {first}")
        return ". Installed plugins that failed to load (one may register it):" + "".join(lines)

    def stores(self) -> dict[str, StoreSpec]:
        self.load()
        return dict(self._stores)

    def committers(self) -> dict[str, CommitterSpec]:
        self.load()
        return dict(self._committers)

    def config_keys(self) -> dict[str, str]:
        self.load()
        return dict(self._config_keys)

    def key_owners(self) -> dict[str, str]:
        """Configuration key -> the plugin that registered it."""
        self.load()
        return dict(self._key_owners)

    def secret_keys(self) -> frozenset[str]:
        """Keys (and their aliases) that plugins declared secret (``secret=True``)."""
        self.load()
        return self._secret_keys

    def config_aliases(self) -> dict[str, str]:
        """Alias -> key, core's and every plugin's (during loading: those collected so far)."""
        self.load()
        return dict(self._aliases)

    def committer_selectors(self) -> list[CommitterSelector]:
        self.load()
        return list(self._selectors)

    def commands(self) -> dict[str, Any]:
        """CLI subcommands plugins contributed (``outcommit.cli.Command``), by name."""
        self.load()
        return dict(self._commands)

    def plugins(self) -> list[PluginInfo]:
        self.load()
        return sorted(self._info.values(), key=lambda i: (i.name != "outcommit", i.name))


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
