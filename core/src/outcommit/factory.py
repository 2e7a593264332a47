"""Choosing a committer for a destination, and refusing unsafe pairings."""

from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from . import keys
from .capabilities import STORE_CAPABILITIES
from .committer import Committer
from .config import Config, redact
from .errors import ConfigError, UnknownCommitterError, UnsafeCommitterError
from .plugins import KNOWN_DISTRIBUTIONS, Registry, get_registry
from .selection import ALGORITHM_KEY, algorithm
from .selection import CommitterSelector as CommitterSelector  # its home before selection.py
from .store import Store
from .stores.local import canonical_file_url

log = logging.getLogger(__name__)

ALLOW_UNSAFE_KEY = "outcommit.committer.allow-unsafe"

_CAPABILITY_MEANING = {
    "fs.rename.file.atomic": "atomic file rename",
    "fs.rename.directory.atomic": "atomic O(1) directory rename",
    "fs.listing.consistent": "consistent listing",
    "fs.multipart.delayed-completion": "delayed multipart completion",
    "fs.blocklist.delayed-completion": "delayed block-list completion",
    "fs.etags.available": "etags",
    "fs.etags.preserved-in-rename": "etags preserved in rename",
    "fs.create.exclusive": "exclusive create",
}

#: ``scheme:`` at the start of a destination: two characters at least (``C:`` is a drive).
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+):")


def normalise_url(destination: str, schemes: Iterable[str] = ()) -> str:
    """A URL with a scheme: plain paths become absolute ``file://`` URLs (``~/out`` is the
    home directory's ``out``, as in a shell).

    Refused (:class:`ConfigError`), because each would quietly name another place than
    the one meant: an empty destination (an unset variable: the current directory), a
    ``file`` URL naming a host (``file://tmp/x`` is host ``tmp``) or a relative path
    (``file:tmp``), and a store's scheme without ``//`` (``s3:/bucket``, ``hdfs:/path``):
    a ``name:`` prefix followed by ``/``, or naming a scheme of ``schemes`` or of a plugin
    known by name (``s3:bucket``). Hadoop's ``file:/path`` is ``file:///path``,
    ``file://localhost/path`` too; any other ``name:`` prefix is part of a relative path
    (``run-2026-01-01T10:00``). Pure: no plugin is loaded (the factory's entry points pass
    the registered schemes, having loaded them anyway).
    """
    if not destination.strip():
        raise ConfigError("the destination is empty: give a URL (s3://bucket/table, "
                          "file:///abs/path) or a path")
    if "://" in destination:
        return canonical_file_url(destination)
    named = _SCHEME_PREFIX.match(destination)
    if named:
        scheme, rest = named.group(1), destination[named.end():]
        if scheme.lower() == "file":
            if rest.startswith("/"):
                return "file://" + rest  # Hadoop's Path.toString() form
            raise ConfigError(f"destination {destination!r} is a relative file URL: write "
                              "file:///abs/path, or the path itself")
        known = {s.lower() for s in (*schemes, *KNOWN_DISTRIBUTIONS)}
        if rest.startswith("/") or scheme.lower() in known:
            raise ConfigError(f"destination {destination!r} names the scheme {scheme!r} without "
                              f"'//': write {scheme}://authority/path (s3://bucket/table, "
                              f"hdfs://namenode:8020/path, hdfs:///path)")
        # Any other 'name:...' is a relative path whose first name has a colon (a timestamp).
    return "file://" + os.path.abspath(_home_expanded(destination))


def _home_expanded(path: str) -> str:
    """``~/out`` as a shell, fsspec, pyarrow and pandas read it: the home directory's ``out``
    (left as it was, Spark's Hadoop Path made a directory named ``~`` in the current one).
    ``~user`` that names no user is refused rather than taken as a directory name."""
    if not path.startswith("~"):
        return path
    expanded = os.path.expanduser(path)
    if expanded.startswith("~"):
        first = path.split("/", 1)[0]
        raise ConfigError(f"destination {path!r}: no home directory for {first!r} here: write the "
                          "full path (a directory named '~...' needs ./ before it)")
    return expanded


def scheme_of(url: str) -> str:
    return normalise_url(url).split("://", 1)[0].lower()


def _registered_url(destination: str, registry: Registry) -> str:
    """``normalise_url`` with every registered scheme known (the registry is loaded)."""
    return normalise_url(destination, registry.stores())


def resolve_config(config: Mapping[str, Any] | Config | None = None) -> Config:
    """``config`` resolved with every installed plugin's aliases (``fs.s3a.*``...) as well as
    core's: what stores and committers are given. A :class:`Config` stays a plain value;
    the registry's alias table is applied here, in the composition layer."""
    aliases = get_registry().config_aliases()
    if isinstance(config, Config):
        return config.with_aliases(aliases)
    return Config(config or {}, aliases)


def open_store(destination: str, config: Mapping[str, Any] | Config | None = None) -> Store:
    """The store for a destination URL, from whichever plugin registered its scheme."""
    registry = get_registry()
    url = _registered_url(destination, registry)
    cfg = resolve_config(config)
    spec = registry.store_spec(scheme_of(url))
    check_config(cfg)
    return spec.factory(url, cfg)


# Stores shared by the task attempts of a process: see shared_store.
_SHARED: dict[tuple[Any, ...], Store] = {}
_SHARED_LOCK = threading.Lock()
_MAX_SHARED_STORES = 16


def _forget_shared_stores() -> None:
    """In a forked child: its parent's clients and connections are not its own."""
    global _SHARED_LOCK
    _SHARED.clear()
    _SHARED_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere a child process starts afresh
    os.register_at_fork(after_in_child=_forget_shared_stores)


def shared_store(destination: str, config: Mapping[str, Any] | None = None) -> Store:
    """The store for ``destination`` and ``config`` that this process's task attempts share.

    Opening a store is not free: an S3 store's client costs ~40 ms of CPU to make and
    opens its own connections (TLS handshakes on a real endpoint). Executors run one task
    after another, or several at once: like Hadoop's ``FileSystem.get`` cache and fsspec's
    instance cache, they share one store (its client and connection pool) per destination,
    configuration, environment (stores read credentials, regions and endpoints from it)
    and store plugin. Stores are thread-safe; the few most recently used are kept. Never
    ``close()`` a shared store. A job's ``_SUCCESS`` counts the requests made during its
    job commit, so a committer on a shared store reports another user's requests only if
    they hit the same store at that moment; the local engine's driver opens its own.
    """
    registry = get_registry()
    url = _registered_url(destination, registry)
    items = tuple(sorted((str(k), str(v)) for k, v in (config or {}).items()))
    environment = frozenset(os.environ.items())
    key = (registry.store_spec(scheme_of(url)).factory, url, items, environment)
    with _SHARED_LOCK:
        store = _SHARED.pop(key, None)  # re-inserted last: the least recently used goes first
        if store is not None:
            _SHARED[key] = store
            return store
    # Opened unlocked: a slow plugin factory must not hold up other destinations' stores.
    store = open_store(url, dict(items))
    with _SHARED_LOCK:
        kept = _SHARED.pop(key, None)
        if kept is None:
            while len(_SHARED) >= _MAX_SHARED_STORES:
                _SHARED.pop(next(iter(_SHARED)))
            _SHARED[key] = store
            return store
        _SHARED[key] = kept  # another thread opened it meanwhile: one store per key
    store.close()  # never used
    return kept


def select_committer(scheme: str, config: Config, explicit: str | None,
                     default: str, aliases: tuple[str, ...] = ()) -> tuple[str, str]:
    """(committer name, why it was chosen), in the documented order.

    ``aliases``: the other schemes of the same store (``s3a`` for ``s3``...): their
    per-scheme key applies too, after the scheme's own.
    """
    if explicit:
        return explicit, f"committer={explicit!r} given by the caller"
    for name in (scheme, *(a for a in aliases if a != scheme)):
        key = f"outcommit.committer.{name}"
        per_scheme = config.get_str(key)
        if per_scheme:
            alias = "" if name == scheme else f" ({scheme}:// is an alias of {name}://)"
            return per_scheme, f"{config.spelled(key)}={per_scheme}{alias}"
    for selector in get_registry().committer_selectors():
        chosen = selector.choose(config) if scheme in selector.schemes else None
        if chosen is not None:
            return chosen
    version = config.get_str(ALGORITHM_KEY)
    if version and default in ("v1", "v2"):
        name = algorithm(version)
        return name, f"{config.spelled(ALGORITHM_KEY)}={version}"
    general = config.get_str("outcommit.committer")
    if general:
        return general, f"{config.spelled('outcommit.committer')}={general}"
    return default, f"default committer for {scheme}://"


def check_config(config: Config) -> list[str]:
    """Refuse ``outcommit.`` keys no installed component reads (see :mod:`outcommit.keys`)."""
    return keys.check(config)


def create_committer(destination: str, config: Mapping[str, Any] | Config | None = None,
                     committer: str | None = None, *, allow_unsafe: bool | None = None,
                     store: Store | None = None) -> Committer:
    """The committer for ``destination``.

    Chosen by: the ``committer`` argument; ``outcommit.committer.<scheme>``; Hadoop's
    names (plugins' selectors such as ``fs.s3a.committer.name``;
    ``mapreduce.fileoutputcommitter.algorithm.version``);
    ``outcommit.committer``; the store's default. A committer that needs a capability
    the store lacks is refused (UnsafeCommitterError) unless ``allow_unsafe`` or
    ``outcommit.committer.allow-unsafe=true``.
    """
    registry = get_registry()
    url = _registered_url(destination, registry)
    cfg = resolve_config(config)
    scheme = scheme_of(url)
    store_spec = registry.store_spec(scheme)
    check_config(cfg)
    the_store = store or store_spec.factory(url, cfg)
    # The store's own default: it may depend on what the store measured (Azure: Blob or HNS).
    name, why = select_committer(scheme, cfg, committer, the_store.default_committer,
                                 store_spec.schemes)
    try:
        spec = registry.committer_spec(name)
    except UnknownCommitterError as exc:  # say where the name came from: a key, an option
        raise UnknownCommitterError(f"{why}: {exc}") from None
    if spec.made_for and scheme not in spec.made_for:
        raise UnsafeCommitterError(
            f"committer '{name}' is made for {', '.join(f'{s}://' for s in spec.made_for)} only, "
            f"not {scheme}:// ({why})", committer=name, scheme=scheme, missing=[],
            safe=sorted(n for n, s in registry.committers().items() if s.safe_on(the_store, scheme)))
    missing = the_store.capabilities.missing(spec.requires)
    if missing:
        unsafe_ok = allow_unsafe if allow_unsafe is not None else cfg.get_bool(ALLOW_UNSAFE_KEY, False)
        safe = sorted(n for n, s in registry.committers().items() if s.safe_on(the_store, scheme))
        needs = ", ".join(f"{m} ({_CAPABILITY_MEANING.get(m, m)})" for m in missing)
        if not unsafe_ok:
            raise UnsafeCommitterError(
                f"committer '{name}' is not safe on {scheme}:// ({why}): the store lacks {needs}. "
                f"Safe committers for {scheme}://: {', '.join(safe) or 'none installed'}. "
                f"To use it anyway, set {ALLOW_UNSAFE_KEY}=true (or allow_unsafe=True)",
                committer=name, scheme=scheme, missing=missing, safe=safe)
        warnings.warn(f"using unsafe committer '{name}' on {scheme}://: the store lacks {needs}",
                      stacklevel=2)
        why += f"; UNSAFE: store lacks {', '.join(missing)} (allowed by override)"
    instance = spec.factory(url, the_store, cfg)
    instance.selection = why
    instance.components = INSTALLED
    # Made for every step and task attempt: details, not a step (job setup says it at INFO).
    log.debug("committer %s for %s (%s); config %s", name, url, why, redact(dict(cfg)))
    return instance


def describe_capabilities(destination: str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Store capabilities, default committer and safe committers for a URL (the CLI's view)."""
    registry = get_registry()
    url = _registered_url(destination, registry)
    cfg = resolve_config(config)
    spec = registry.store_spec(scheme_of(url))
    check_config(cfg)
    store = spec.factory(url, cfg)
    safe = sorted(n for n, s in registry.committers().items()
                  if s.safe_on(store, scheme_of(url)))
    return {
        "url": url,
        "store": type(store).__name__,
        "plugin": spec.plugin,
        "capabilities": store.capabilities.as_dict(
            sorted(set(STORE_CAPABILITIES) | set(store.capabilities.names))),
        "default_committer": store.default_committer,
        "safe_committers": safe,
        "committers": {n: {"requires": list(s.requires),
                           "missing": store.capabilities.missing(s.requires),
                           "capabilities": sorted(s.capabilities.names)}
                       for n, s in sorted(registry.committers().items())},
    }


class _Installed:
    """The registry's stores and committers as a committer reaches them
    (``Committer.components``): the factory injects them into every committer it makes, so
    the protocol layer never imports the registry. Stateless, so it pickles by reference."""

    def check_store(self, url: str) -> None:
        registry = get_registry()
        registry.store_spec(scheme_of(_registered_url(url, registry)))

    def open_store(self, url: str, config: Config) -> Store:
        return open_store(url, config)

    def create_committer(self, destination: str, config: Mapping[str, str], name: str) -> Committer:
        return create_committer(destination, config, name)


INSTALLED = _Installed()
