"""The manifest committer's job commit, stage by stage, as Hadoop splits it.

Each stage is a function of one :class:`StageConfig` (the store, the destination, the
job, its threads, its retry policy and the statistics every stage adds to) and of what
the stage before it produced:

1. :func:`load_manifests` — validated files of every committed task (the task messages,
   or the manifests in the job attempt's directory);
2. :func:`list_sources`, :func:`observe_sources` — one listing of the task attempts'
   files: every size and etag from the store, and a manifest that disagrees fails the commit;
3. :func:`create_directories` — the merged set of parent directories;
4. :func:`rename_files` — every file, in parallel; a rename that raised is judged by the
   store's evidence (``Store.rename_outcome``): done, retried, or failed;
5. :func:`validate_output` — optional: size (and etag) of every committed file.

The committer (:mod:`.committer`) runs them in order, times each (``stage.<name>.duration.ms``
in ``_SUCCESS``), handles conflicts and the publish journal between 2 and 3, then writes
``_SUCCESS`` and cleans up.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ... import capabilities as caps
from ...errors import CommitError, CorruptFileError, RenameError
from ...parallel import run_all
from ...progress import Progress
from ...retry import RetryLater, RetryPolicy
from ...store import FileInfo, Store
from .format import CheckedFile

log = logging.getLogger("outcommit.committer.manifest")

T = TypeVar("T")
R = TypeVar("R")


class Stats:
    """Thread-safe counters and stage timings for the ``_SUCCESS`` metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counts[name] += amount

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(f"stage.{name}.duration.ms", int((time.monotonic() - started) * 1000))


@dataclass(frozen=True)
class StageConfig:
    """What every stage of one job commit shares."""

    store: Store
    dest: str                   # the destination (store path)
    threads: int
    retry: RetryPolicy
    stats: Stats
    #: Validate one manifest of this job: its files, contained ('where' names it in errors).
    check: Callable[[Any, str], list[CheckedFile]]
    delete_target_files: bool = False
    #: The config key a user sets to let existing destination files be replaced.
    delete_target_key: str = ""

    def parallel(self, action: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``action`` over ``items`` with the job's threads; the first error is raised."""
        return run_all(action, items, self.threads, "outcommit-manifest")

    def with_retries(self, action: Callable[[], T], what: str) -> T:
        """An idempotent store request, retried on throttling or transient failures."""
        def retryable(exc: BaseException) -> bool:
            throttled = self.store.is_throttling(exc)
            if throttled:
                self.stats.add("store.throttled")
            return throttled or self.store.is_transient(exc)

        return self.retry.call(action, retry_if=retryable, what=what)

    def url(self, path: str) -> str:
        return self.store.url(path)


# -- 1. load manifests ----------------------------------------------------------------------
def load_manifests(cfg: StageConfig, messages: Sequence[Mapping[str, Any]] | None,
                   manifest_paths: Callable[[], list[str]]) -> tuple[list[CheckedFile], int]:
    """Validated files of every committed task, and how many tasks; refuses two files with
    one destination, and a file of one task where another needs a directory."""
    if messages is not None:
        sources: list[tuple[str, Any]] = [
            (f"task commit message {i} ({dict(m).get('taskAttemptID', '?')})"
             if isinstance(m, Mapping) else f"task commit message {i}", m)
            for i, m in enumerate(messages)]
    else:
        paths = manifest_paths()
        loaded = cfg.parallel(lambda p: cfg.store.load_json(p), paths)
        sources = [(cfg.url(p), data) for p, data in zip(paths, loaded, strict=True)]
    checked = [(where, cfg.check(data, where)) for where, data in sources]
    task_ids: dict[str, str] = {}
    for where, data in sources:
        task_id = data["taskID"]
        if task_id in task_ids:
            raise CorruptFileError(where, "taskID",
                                   f"task {task_id} is committed twice (also {task_ids[task_id]})")
        task_ids[task_id] = where
    files: list[CheckedFile] = []
    owners: dict[str, str] = {}
    for where, entries in checked:
        for entry in entries:
            if entry.dest in owners:
                raise CorruptFileError(where, "files", f"destination {cfg.url(entry.dest)} is also "
                                       f"written by {owners[entry.dest]}")
            owners[entry.dest] = where
            files.append(entry)
    for entry in files:
        parent = posixpath.dirname(entry.dest)
        while parent != cfg.dest and parent.startswith(cfg.dest):
            if parent in owners:
                raise CommitError(f"{cfg.url(parent)} is a file of one task and a directory of "
                                  "another: the tasks' outputs conflict")
            parent = posixpath.dirname(parent)
    cfg.stats.add("manifests.loaded", len(sources))
    return files, len(sources)


# -- 2. observe sources ---------------------------------------------------------------------
def list_sources(cfg: StageConfig, roots: Iterable[str]) -> dict[str, FileInfo]:
    """What the store lists under ``roots`` (the tasks directory of each job attempt the
    manifests name), recursively, once each: one request per page of a listing, not one
    per file. Read-only: it runs beside the job commit's check for a journal."""
    def listing(root: str) -> list[FileInfo]:
        return cfg.with_retries(lambda: cfg.store.list_files(root), f"list {root}")

    unique = sorted(set(roots))  # one, unless recover_task carried tasks from earlier attempts
    listed: dict[str, FileInfo] = {}
    for found in ([listing(unique[0])] if len(unique) == 1 else cfg.parallel(listing, unique)):
        listed.update((info.path, info) for info in found)
    return listed


def observe_sources(cfg: StageConfig, files: Sequence[CheckedFile], listed: Mapping[str, FileInfo],
                    journaled: Mapping[str, FileInfo] | None = None) -> list[CheckedFile]:
    """The files with the size and etag the store lists for their sources (``listed``,
    :func:`list_sources`).

    A manifest is data from the store: its sizes and etags are claims. What job commit
    reports (``bytes.committed``), journals (what an abort may delete) and compares in rename
    recovery must be what the store says. A file whose manifest disagrees with the store,
    or that is not there, fails the commit before anything is changed.

    ``journaled``: a resumed commit's journal by source (what the first commit observed),
    for the sources it has already renamed away.
    """
    observed: list[CheckedFile] = []
    for entry in files:
        fact = listed.get(entry.source) or (journaled or {}).get(entry.source)
        field = f"files[{entry.index}]"
        if fact is None:
            raise CorruptFileError(entry.where, field + ".s",
                                   f"source {cfg.url(entry.source)} is not there: the task "
                                   f"attempt's file is gone")
        if fact.size != entry.size:
            raise CorruptFileError(entry.where, field + ".z",
                                   f"says {entry.size} bytes for {cfg.url(entry.source)}, the "
                                   f"store has {fact.size}")
        if entry.etag and fact.etag and fact.etag != entry.etag:
            raise CorruptFileError(entry.where, field + ".e",
                                   f"says etag {entry.etag} for {cfg.url(entry.source)}, the "
                                   f"store has {fact.etag}")
        observed.append(replace(entry, size=fact.size, etag=fact.etag))
    cfg.stats.add("files.observed", len(observed))
    return observed


# -- 3. create directories ------------------------------------------------------------------
def create_directories(cfg: StageConfig, files: Sequence[CheckedFile]) -> None:
    """Create the merged set of parent directories; delete a file where a directory must go."""
    wanted: set[str] = set()
    for entry in files:
        parent = posixpath.dirname(entry.dest)
        while parent != cfg.dest and parent.startswith(cfg.dest + "/"):
            wanted.add(parent)
            parent = posixpath.dirname(parent)
    directories = sorted(wanted)
    found = dict(zip(directories, cfg.parallel(
        lambda path: cfg.with_retries(lambda: cfg.store.info(path), f"probe {path}"), directories),
        strict=True))
    for path, status in found.items():
        if status is not None and not status.is_dir:
            cfg.store.delete(path)
            cfg.stats.add("directories.file-deleted")
    leaves = [d for d, status in found.items() if status is None or not status.is_dir]
    leaves = [d for d in leaves if not any(o.startswith(d + "/") for o in leaves)]
    cfg.parallel(lambda d: cfg.with_retries(lambda: cfg.store.mkdirs(d), f"mkdirs {d}"), leaves)
    cfg.stats.add("directories.created", len(leaves))


# -- 4. rename files ------------------------------------------------------------------------
def rename_files(cfg: StageConfig, files: Sequence[CheckedFile], resumed: bool,
                 progress: Progress | None = None) -> None:
    def one(entry: CheckedFile) -> None:
        rename_file(cfg, entry, resumed)
        if progress is not None:
            progress.advance()

    cfg.parallel(one, files)


def rename_file(cfg: StageConfig, entry: CheckedFile, resumed: bool = False) -> None:
    """Rename one file; after a failure the store's evidence decides: done, retry or fail."""
    store, stats = cfg.store, cfg.stats
    known = FileInfo(entry.source, entry.size, False, entry.etag)
    # On a resumed commit the target may be this job's own renamed file, whose source is
    # gone: deleting it would lose it. Only a source still waiting makes the target
    # someone else's file.
    replace_target = cfg.delete_target_files and (not resumed or store.exists(entry.source))
    attempts: list[int] = []

    def attempt() -> None:
        if replace_target and not attempts:
            store.delete(entry.dest)
        attempts.append(1)
        try:
            store.rename_file(entry.source, entry.dest, overwrite=False)
            stats.add("files.renamed")
            stats.add("bytes.renamed", entry.size)
            return
        except Exception as exc:
            failure = exc
        # The evidence is store requests too: under throttling they are retried, not fatal.
        outcome = cfg.with_retries(lambda: store.rename_outcome(entry.source, entry.dest, known),
                                   f"check rename of {entry.source}")
        if isinstance(failure, FileExistsError) and outcome != "done":
            # Not our own earlier rename (a resumed commit): someone else's file is there.
            raise RenameError(
                f"cannot commit {cfg.url(entry.dest)}: a file already exists there. "
                f"Set {cfg.delete_target_key}=true to replace existing files, or use "
                "conflict mode 'replace'") from failure
        if outcome == "done":
            stats.add("files.renamed")
            stats.add("bytes.renamed", entry.size)
            stats.add("rename.recovered")
            log.info("rename %s -> %s raised (%s) but had happened", entry.source, entry.dest, failure)
            return
        if outcome == "unknown":
            raise RenameError(
                f"rename {cfg.url(entry.source)} -> {cfg.url(entry.dest)} failed "
                f"({type(failure).__name__}: {failure}) and the store cannot tell whether it "
                "happened: failing the job rather than guessing") from failure
        throttled = store.is_throttling(failure)
        if throttled:
            stats.add("store.throttled")
        if not (throttled or store.is_transient(failure)):
            raise RenameError(f"rename {cfg.url(entry.source)} -> {cfg.url(entry.dest)} failed: "
                              f"{type(failure).__name__}: {failure}") from failure
        raise RetryLater(failure)  # it did not happen: the same rename may succeed later

    try:
        cfg.retry.call(attempt, retry_if=lambda e: isinstance(e, RetryLater),
                       what=f"rename of {entry.source}", on_retry=lambda _e: stats.add("rename.retried"))
    except RetryLater as exc:
        raise RenameError(f"rename {cfg.url(entry.source)} -> {cfg.url(entry.dest)} failed after "
                          f"{len(attempts)} attempt(s): {type(exc.cause).__name__}: {exc.cause}") \
            from exc.cause


# -- 5. validate output ---------------------------------------------------------------------
def validate_output(cfg: StageConfig, files: Sequence[CheckedFile]) -> None:
    cfg.parallel(lambda entry: validate_file(cfg, entry), files)


def validate_file(cfg: StageConfig, entry: CheckedFile) -> None:
    status = cfg.store.info(entry.dest)
    if status is None or status.is_dir:
        raise CommitError(f"validation: {cfg.url(entry.dest)} is missing after job commit")
    if status.size != entry.size:
        raise CommitError(f"validation: {cfg.url(entry.dest)} has {status.size} bytes, "
                          f"its source (task {entry.task_id}) was listed with {entry.size}")
    if (entry.etag and status.etag and status.etag != entry.etag
            and cfg.store.has_capability(caps.ETAGS_PRESERVED_IN_RENAME)):
        raise CommitError(f"validation: {cfg.url(entry.dest)} has etag {status.etag}, "
                          f"its source (task {entry.task_id}) was listed with {entry.etag}")
    cfg.stats.add("files.validated")
