"""Kill a driver (or a task attempt) at a precise store operation: real SIGKILL, real process.

The process runs the committer call with its store wrapped in a ``FaultInjectingStore``
whose faults count matching operations and, at the k-th, call
``os.kill(os.getpid(), SIGKILL)`` — after the operation took effect (``when="after"``),
or before it for "before ``_SUCCESS``". No ``finally``, no ``except`` and no finaliser
runs after that: exactly what the store sees when a driver dies.

Processes come from a ``multiprocessing`` fork server whose preloaded modules
(``_preload``: boto3, s3fs, adlfs, gcsfs, outcommit and its plugins) make a new process
cost a fork, not a second of imports. The fork server is a clean interpreter with no
threads; the test process runs emulator threads, so it is never forked directly.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

from outcommit.context import JobContext, TaskAttemptContext
from outcommit.factory import create_committer, open_store
from outcommit.store import Store
from outcommit.testing.faults import (
    MULTIPART_OPERATIONS,
    STORE_OPERATIONS,
    Fault,
    FaultInjectingStore,
    kill_process,
)

from .oracles import error_text

# Delayed completions come as S3 multipart uploads or Azure block lists (``blocklist.*``).
UPLOAD_KINDS = ("multipart", "blocklist")
ALL_OPERATIONS = (*STORE_OPERATIONS,
                  *(f"{kind}.{op}" for kind in UPLOAD_KINDS for op in MULTIPART_OPERATIONS))
COMPLETIONS = tuple(f"{kind}.complete" for kind in UPLOAD_KINDS)
WRITE_OPERATIONS = ("write_bytes", "write_atomic", "save_json", "create_exclusive", "write_with_metadata")
DEADLINE_SECONDS = 180.0  # a child that neither finishes nor dies by then is a harness failure

KillKind = Literal["start", "publish", "before-success", "after-success", "any", "undo",
                   "unpublish"]


@dataclass(frozen=True)
class KillRule:
    """Where the process dies.

    ``start``: before the call. ``any``: after its k-th store operation. ``publish``:
    after the k-th operation that makes a data file visible in the destination (a rename
    or a write to a data path, a multipart completion). ``before-success``: before the
    ``_SUCCESS`` file is written; ``after-success``: right after it. For an abort:
    ``undo``, after its k-th operation that takes output away (an upload's abort, a delete
    of a data file in the destination: the delayed committers abort each upload first, so
    nothing is deleted yet); ``unpublish``, after its k-th delete of a data file in the
    destination (alone or in a batch: part of what a job commit published is gone, the
    rest still visible).
    """

    kind: KillKind
    k: int = 1

    def describe(self) -> str:
        return {"start": "before the call", "any": f"after store operation {self.k}",
                "publish": f"after publishing operation {self.k}",
                "before-success": "before _SUCCESS", "after-success": "after _SUCCESS",
                "undo": f"after undoing operation {self.k}",
                "unpublish": f"after deleting published file {self.k}"}[self.kind]


@dataclass(frozen=True)
class ChildResult:
    """How the child ended: killed at the point, finished, or failed with an error."""

    killed: bool
    exitcode: int | None
    matched: int = 0
    error: str | None = None
    message: dict[str, Any] | None = None


class _Trigger:
    """Counts operations that ``matches`` accepts; fires at the k-th (thread-safe)."""

    def __init__(self, k: int, matches: Callable[[str, tuple[Any, ...]], bool]) -> None:
        self.k = k
        self.matches = matches
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, operation: str, args: tuple[Any, ...]) -> bool:
        if not self.matches(operation, args):
            return False
        with self._lock:
            self.count += 1
            return self.count == self.k


def _data_path(path: Any, dest: str) -> bool:
    """Is ``path`` a data file of the destination (inside it, no '_'/'.' component)?"""
    if not isinstance(path, str) or not path.startswith(dest.rstrip("/") + "/"):
        return False
    return not any(part.startswith(("_", ".")) for part in path[len(dest.rstrip("/")) + 1:].split("/"))


def _publishes(dest: str) -> Callable[[str, tuple[Any, ...]], bool]:
    def matches(operation: str, args: tuple[Any, ...]) -> bool:
        if operation in ("rename_file", "rename_dir"):
            return len(args) > 1 and _data_path(args[1], dest)
        if operation in (*COMPLETIONS, *WRITE_OPERATIONS):
            return bool(args) and _data_path(args[0], dest)
        return False
    return matches


def _undoes(dest: str, uploads: bool) -> Callable[[str, tuple[Any, ...]], bool]:
    aborts = tuple(f"{kind}.abort" for kind in UPLOAD_KINDS) if uploads else ()

    def matches(operation: str, args: tuple[Any, ...]) -> bool:
        if operation in aborts:
            return True
        if operation == "delete":
            return bool(args) and _data_path(args[0], dest)
        if operation == "delete_many":
            return bool(args) and any(_data_path(p, dest) for p in args[0])
        return False
    return matches


def _writes_success(dest: str) -> Callable[[str, tuple[Any, ...]], bool]:
    target = dest.rstrip("/") + "/_SUCCESS"
    return lambda operation, args: operation in WRITE_OPERATIONS and bool(args) and args[0] == target


def arm(store: FaultInjectingStore, rule: KillRule, dest: str) -> _Trigger | None:
    """Install the kill ``rule`` on ``store``; returns the counter (None for ``start``)."""
    if rule.kind == "start":
        return None
    if rule.kind == "any":
        trigger = _Trigger(rule.k, lambda operation, args: True)
    elif rule.kind == "publish":
        trigger = _Trigger(rule.k, _publishes(dest))
    elif rule.kind in ("undo", "unpublish"):
        trigger = _Trigger(rule.k, _undoes(dest, uploads=rule.kind == "undo"))
    else:
        trigger = _Trigger(1, _writes_success(dest))
    when: Literal["before", "after"] = "before" if rule.kind == "before-success" else "after"
    for operation in ALL_OPERATIONS:
        store.add(Fault(operation, when=when, times=-1, error=_die, predicate=trigger))
    return trigger


class _BeforeFirst:
    """A predicate that never fails an operation: it runs ``action`` once, just before the
    first operation ``matches`` accepts (a deterministic interleaving of another actor)."""

    def __init__(self, matches: Callable[[str, tuple[Any, ...]], bool], action: Callable[[], None]) -> None:
        self.matches = matches
        self.action: Callable[[], None] | None = action
        self._lock = threading.Lock()

    def __call__(self, operation: str, args: tuple[Any, ...]) -> bool:
        action = None
        with self._lock:
            if self.action is not None and self.matches(operation, args):
                action, self.action = self.action, None
        if action is not None:
            action()
        return False


def before_first(store: FaultInjectingStore, matches: Callable[[str, tuple[Any, ...]], bool],
                 action: Callable[[], None]) -> None:
    """Run ``action`` just before the first store operation that ``matches`` accepts."""
    predicate = _BeforeFirst(matches, action)
    for operation in ALL_OPERATIONS:
        store.add(Fault(operation, times=-1, predicate=predicate))


def cleans_up(dest: str) -> Callable[[str, tuple[Any, ...]], bool]:
    """A deletion of the committer's temporary state under ``dest`` (hidden paths).

    The first one is usually a job's liveness marker: a writer closing its file just
    before it still finds the job live, so the cleanup after it must find its work.
    """
    root = dest.rstrip("/") + "/"

    def hidden(path: Any) -> bool:
        return isinstance(path, str) and path.startswith(root) and not _data_path(path, dest)

    def matches(operation: str, args: tuple[Any, ...]) -> bool:
        if operation not in ("delete", "delete_many", "delete_empty_dir") or not args:
            return False
        first = args[0]
        return any(hidden(p) for p in first) if isinstance(first, list) else hidden(first)
    return matches


# -- the children ---------------------------------------------------------------------------
@dataclass(frozen=True)
class JobCommitRequest:
    """A job call in a child: ``commit_job`` (with ``messages``) or ``abort_job``."""

    committer: str
    destination: str
    config: dict[str, str]
    job: dict[str, Any]
    messages: list[dict[str, Any]] | None
    rule: KillRule


@dataclass(frozen=True)
class TaskAttemptRequest:
    committer: str
    destination: str
    config: dict[str, str]
    task: dict[str, Any]
    files: dict[str, bytes]
    rule: KillRule


#: The child's end of its pipe to the parent (set in the child only).
_conn: Connection | None = None


def _die(message: str) -> BaseException:
    """SIGKILL this child, saying so first: the fork server can lose a dead child's status
    (it then reports exit code 255), and the parent must still tell a kill from a crash."""
    if _conn is not None:
        try:
            _conn.send(ChildResult(True, -signal.SIGKILL))
        except OSError:
            pass
    return kill_process(message)


def _quiet() -> None:
    # A dying process's log lines would land in whatever captured the fork server's stderr.
    logging.disable(logging.CRITICAL)


def _in_child(request: JobCommitRequest | TaskAttemptRequest, conn: Connection,
              act: Callable[[Any, Callable[[], None]], dict[str, Any] | None]) -> None:
    """Open the store and committer, run ``act`` with the kill rule armed as it says, and
    report how it ended (a kill reports itself first: :func:`_die`)."""
    _quiet()
    global _conn
    _conn = conn
    trigger: _Trigger | None = None

    def armed() -> None:
        nonlocal trigger
        trigger = arm(store, request.rule, store.strip(request.destination))

    try:
        store = FaultInjectingStore(open_store(request.destination, request.config))
        committer = create_committer(request.destination, request.config, request.committer,
                                     store=store)
        message = act(committer, armed)
    except Exception as exc:
        conn.send(ChildResult(False, 0, trigger.count if trigger else 0, error_text(exc)))
        return
    conn.send(ChildResult(False, 0, trigger.count if trigger else 0, message=message))


def _child_commit_job(request: JobCommitRequest, conn: Connection) -> None:
    def act(committer: Any, armed: Callable[[], None]) -> None:
        job = JobContext.from_dict(request.job)
        if request.rule.kind == "start":
            _die("driver killed before job commit")
        armed()
        committer.commit_job(job, request.messages)

    _in_child(request, conn, act)


def _child_abort_job(request: JobCommitRequest, conn: Connection) -> None:
    def act(committer: Any, armed: Callable[[], None]) -> None:
        armed()
        committer.abort_job(JobContext.from_dict(request.job))

    _in_child(request, conn, act)


def _child_task_attempt(request: TaskAttemptRequest, conn: Connection) -> None:
    def act(committer: Any, armed: Callable[[], None]) -> dict[str, Any]:
        task = TaskAttemptContext.from_dict(request.task)
        committer.setup_task(task)  # the attempt lives in this process (magic tracks uploads here)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for rel, data in request.files.items():
            with fs.open(f"{base}/{rel}", "wb") as handle:
                handle.write(data)
        # Uploads tracked in memory finish in the background: let them land before the
        # count starts, or "the k-th operation of commit_task" would depend on timing.
        tracker = getattr(committer, "_tracker", lambda _task: None)(task)
        if tracker is not None:
            tracker.wait()
        armed()
        return dict(committer.commit_task(task))

    _in_child(request, conn, act)


# -- the parent's side --------------------------------------------------------------------------
_context: Any = None
_context_lock = threading.Lock()


def context() -> Any:
    """The fork-server context, its server preloading the store libraries (started lazily)."""
    global _context
    with _context_lock:
        if _context is None:
            # Read by gcsfs at import, in the fork server too (see ENVIRONMENT.md).
            os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["outcommit_devtools.faultmatrix._preload"])
            _context = ctx
        return _context


def _run(target: Callable[..., None], request: Any) -> ChildResult:
    ctx = context()
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(request, send), daemon=True)
    process.start()
    send.close()
    process.join(DEADLINE_SECONDS)
    if process.is_alive():
        process.kill()
        process.join()
        raise RuntimeError(f"child {target.__name__} neither finished nor died within "
                           f"{DEADLINE_SECONDS:.0f} s")
    try:
        result: ChildResult | None = receive.recv() if receive.poll() else None
    except EOFError:  # killed before it could say anything
        result = None
    receive.close()
    if process.exitcode == -signal.SIGKILL or (result is not None and result.killed):
        return ChildResult(True, -signal.SIGKILL)
    if result is None:
        raise RuntimeError(f"child {target.__name__} exited with {process.exitcode} without a result")
    return result


def commit_job_and_die(committer: str, destination: str, config: dict[str, str], job: JobContext,
                       messages: list[dict[str, Any]] | None, rule: KillRule) -> ChildResult:
    """``commit_job`` in a driver process that SIGKILLs itself as ``rule`` says."""
    return _run(_child_commit_job, JobCommitRequest(committer, destination, dict(config), job.to_dict(),
                                                    messages, rule))


def abort_job_and_die(committer: str, destination: str, config: dict[str, str], job: JobContext,
                      rule: KillRule) -> ChildResult:
    """``abort_job`` in an operator's process that SIGKILLs itself as ``rule`` says."""
    return _run(_child_abort_job, JobCommitRequest(committer, destination, dict(config), job.to_dict(),
                                                   None, rule))


def attempt_and_die(committer: str, destination: str, config: dict[str, str], task: TaskAttemptContext,
                    files: dict[str, bytes], rule: KillRule) -> ChildResult:
    """Write ``files`` and ``commit_task`` in an executor process that dies as ``rule`` says."""
    return _run(_child_task_attempt, TaskAttemptRequest(committer, destination, dict(config),
                                                        task.to_dict(), dict(files), rule))


def wrap(store: Store) -> FaultInjectingStore:
    """``store`` behind a wrapper where kill rules and hooks can be installed."""
    return FaultInjectingStore(store)
