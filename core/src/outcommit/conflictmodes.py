"""What the conflict modes do to a destination that holds data: ``fail`` refuses it,
``replace`` deletes it, ``append`` leaves it. Data is what readers see
(``hidden_from_readers``): hidden entries, other jobs' temporary areas among them, are
never data and are never deleted, also inside a data directory (a nested job's).

Functions of the store and the destination (a store path; ``destination``: its URL, for
messages), used per partition by the delayed family; and, on a committer's whole
destination, the functions every committer calls with itself
(``conflictmodes.replace_destination(self, job)``: :func:`check_destination_free`,
:func:`check_destination_free_of_others`, :func:`replace_destination`).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from typing import Any, Protocol

from .context import JobContext
from .errors import DestinationExistsError
from .parallel import run_all
from .paths import hidden_from_readers, relative_to
from .reporting import JobReports
from .store import FileInfo, Store
from .success import SUCCESS_FILE

MODES = ("fail", "append", "replace")


def visible_children(store: Store, dest: str) -> list[FileInfo]:
    """Entries of the destination that are data, or the _SUCCESS of an earlier job."""
    return [c for c in store.list_dir(dest) if not hidden_from_readers(c.name) or c.name == SUCCESS_FILE]


def first_data_file(store: Store, dest: str) -> FileInfo | None:
    """The first file under the destination that readers see (None: it holds no data).

    Directory by directory, stopping at the first such file: a destination with data
    answers in a listing or two, and a directory that holds no data for readers (the
    empty directory of an aborted job's nested destination, or only another job's
    ``_temporary``) is not data, as conflict modes define it (``hidden_from_readers``).
    """
    directories = [dest]
    while directories:
        children = [c for c in store.list_dir(directories.pop(0)) if not hidden_from_readers(c.name)]
        for child in children:
            if not child.is_dir:
                return child
        directories.extend(c.path for c in children if c.is_dir)
    return None


def refuse_data(store: Store, dest: str, destination: str, paths: Iterable[str] | None = None) -> None:
    """Conflict mode ``fail``: refuse when the destination (or ``paths``) hold data."""
    if paths is None:
        found = first_data_file(store, dest)
        if found is not None:
            raise DestinationExistsError(
                f"destination {destination} already has data "
                f"({relative_to(found.path, dest)}, ...) and the conflict mode is 'fail': "
                "use conflict mode 'append' or 'replace', or another destination")
        return
    for path in paths:
        if store.exists(path):
            raise DestinationExistsError(f"{store.url(path)} exists and the conflict mode is 'fail'")


def replace(store: Store, dest: str, threads: int) -> int:
    """Conflict mode ``replace``: delete the destination's data; the entries deleted.

    An earlier job's ``_SUCCESS`` first, alone: no reader may take the half-deleted
    table for that job's output. Then its files in batches where the store has them,
    else ``threads`` at once, and its directories (partitions) ``threads`` at once: one
    after another, a destination of 10,000 entries is 10,000 round trips of job commit.
    A directory with something hidden inside loses only its data files.
    """
    children = visible_children(store, dest)
    for marker in (c for c in children if c.name == SUCCESS_FILE and not c.is_dir):
        store.delete(marker.path)
    files = [c.path for c in children if not c.is_dir and c.name != SUCCESS_FILE]
    directories = [child.path for child in children if child.is_dir]
    if directories:
        # Deleting a directory whole would take a running nested job's _temporary (the
        # job then failed "not active") or its _SUCCESS with it: one listing says which.
        data, holding = data_by_directory(store, dest)
        files += [path for name in holding for path in data.get(name, [])]
        directories = [d for d in directories if posixpath.basename(d) not in holding]
    store.delete_files(files, threads=threads)
    run_all(lambda path: store.delete(path, recursive=True), directories,
            min(threads, len(directories)), name="outcommit-replace")
    return len(children)


def data_by_directory(store: Store, dest: str) -> tuple[dict[str, list[str]], set[str]]:
    """The data files of each top-level directory of the destination, by its name, and
    the names of those holding something hidden from readers too. A nested dataset's
    ``_SUCCESS`` counts as its data: it would name the files deleted with it."""
    data: dict[str, list[str]] = {}
    holding: set[str] = set()
    for info in store.list_files(dest):
        relative = relative_to(info.path, dest)
        top, below, _ = relative.partition("/")
        if not below or hidden_from_readers(top):
            continue
        if hidden_from_readers(relative) and posixpath.basename(relative) != SUCCESS_FILE:
            holding.add(top)
        else:
            data.setdefault(top, []).append(info.path)
    return data, holding


class Destined(Protocol):
    """What the conflict modes read of the committer whose destination they apply to
    (``Committer``)."""

    @property
    def destination(self) -> str: ...
    @property
    def dest(self) -> str: ...
    @property
    def store(self) -> Store: ...
    @property
    def threads(self) -> int: ...
    @property
    def conflict_mode(self) -> str: ...
    @property
    def reports(self) -> JobReports: ...

    def logger(self, job: JobContext) -> logging.LoggerAdapter[Any]: ...


def check_destination_free(committer: Destined, paths: Iterable[str] | None = None) -> None:
    """Conflict mode ``fail``: refuse when the committer's destination (or ``paths``) hold data."""
    if committer.conflict_mode == "fail":
        refuse_data(committer.store, committer.dest, committer.destination, paths)


def check_destination_free_of_others(committer: Destined, job: JobContext) -> None:
    """:func:`check_destination_free`, except that the output of this job's finished
    commit (its ``_SUCCESS`` says so) is no conflict: a later attempt meets it."""
    try:
        check_destination_free(committer)
    except DestinationExistsError:
        if committer.reports.own_success(job) is None:
            raise


def replace_destination(committer: Destined, job: JobContext) -> int:
    """Conflict mode ``replace``: delete the committer's destination's data, what readers
    see (:func:`replace`); the entries deleted."""
    removed = replace(committer.store, committer.dest, committer.threads)
    if removed:
        committer.logger(job).info("replace: deleted %d entries of %s", removed, committer.destination)
    return removed
