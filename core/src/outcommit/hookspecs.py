"""The hooks a plugin implements. Each receives a ``register`` callable.

A plugin is a module (or object) with functions decorated by ``outcommit.hookimpl``,
published through the entry-point group ``outcommit``::

    [project.entry-points.outcommit]
    mystore = "outcommit_mystore.plugin"
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "outcommit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

RegisterStore = Callable[..., None]
RegisterCommitter = Callable[..., None]


@hookspec
def register_stores(register: RegisterStore) -> None:
    """Register stores: call ``register(StoreSpec(...), replace=False)`` once per store.

    A scheme an earlier plugin registered is a conflict (this plugin is skipped, with an
    error naming both) unless ``replace=True``, which wins over plain registrations
    (``outcommit.contributions``). Import cloud SDKs inside the spec's factory, not at
    module import.
    """


@hookspec
def register_committers(register: RegisterCommitter) -> None:
    """Register committers: call ``register(CommitterSpec(...), replace=False)`` once each.

    A committer name an earlier plugin registered is a conflict unless ``replace=True``,
    as for stores.
    """


@hookspec
def register_config_keys(register: Callable[..., None]) -> None:
    """Register configuration keys a plugin reads: ``register(key, description)``.

    A key ending in ``.`` registers a prefix (every key below it is known). A key that
    holds a credential: ``register(key, description, secret=True)``; its value (under
    the key or any alias of it) is never logged, shown or written, whatever its name.
    Names that say so (secret, password, token, private key, account key, SAS,
    connection string...) are hidden anyway (``outcommit.redaction``).
    """


@hookspec
def register_commands(register: Callable[..., None]) -> None:
    """Add subcommands to the ``outcommit`` CLI: ``register(Command(...))``.

    A command's module is imported when it runs, not when the CLI starts.
    """


@hookspec
def register_config_aliases(register: Callable[[str, str], None]) -> None:
    """Register other names of a plugin's keys: ``register(alias, key)``.

    Hadoop's names are the usual aliases (``fs.s3a.committer.threads`` for
    ``outcommit.committer.threads``); an ``outcommit.`` key given explicitly wins over
    any alias of it. An alias an earlier plugin made an alias of another key is a
    conflict: this plugin is skipped, with an error naming both.
    """


@hookspec
def register_committer_selectors(register: Callable[..., None]) -> None:
    """Register configuration keys that choose the committer for some schemes:
    ``register(CommitterSelector(...))`` (Hadoop's ``fs.s3a.committer.name`` for s3/s3a).

    The factory consults them after ``outcommit.committer.<scheme>`` and before the
    FileOutputCommitter algorithm and the store's default.
    """
