"""A losing attempt that outlives its job and is then killed as Spark kills it.

Spark kills the losing attempt of a speculated task once the other attempt succeeded; its
Python worker runs on (``spark.python.task.killTimeout``, 2 s) and is then destroyed, so
the attempt's own abort never runs. Meanwhile the driver may commit the job and delete
its temporary state. Here the zombie is a real process (``spawn``) that holds its file
open at a chosen point until the parent has committed the job, then writes (opens or
closes its file), tells the parent what happened, and is killed with SIGKILL: nothing of
it runs after that point. The parent is the engine: the other attempt of the task
commits, the job commits with its message, and the destination is judged.

The steps are lined up by a pipe (no sleeps): every message is an answer to the other side.
"""

from __future__ import annotations

import multiprocessing
import os
import posixpath
import signal
import threading
from dataclasses import dataclass
from typing import Any, Literal

from outcommit import JobContext, create_committer, open_store
from outcommit.jobstate import JOB_MARKER
from outcommit.testing.faults import Fault, FaultInjectingStore, kill_process
from outcommit.testing.suite import leftovers, visible_files

#: ``close``: the file was opened and written before the job ended, and is closed after it
#: (the zombie's last write comes after job cleanup). ``open``: the zombie opens its next
#: file only after the job ended, and is killed while writing it. ``check``: the zombie
#: is killed inside the check that follows the write creating its file after the job
#: ended (its open where files appear at their open, else its close): the one window the
#: check leaves. ``commit`` (manifest): the zombie's task commit has passed its job check
#: and is held at saving its manifest until the job committed, then saves it and is
#: killed inside the check after it.
When = Literal["close", "open", "check", "commit"]

FILE = "date=1/part-00000-000-zombie-a0.txt"


@dataclass
class Outcome:
    """What the zombie reported before it was killed, and what the destination holds."""

    zombie: str
    left: list[str]
    visible: dict[str, bytes]
    job_id: str


def _zombie(conn: Any, name: str, url: str, config: dict[str, str], job: dict[str, Any],
            when: When) -> None:
    """Attempt 0 of task 0, in its own process: stops where the pipe says, never aborts."""
    store = FaultInjectingStore(open_store(url, config))
    committer = create_committer(url, config, name, store=store)
    task = JobContext.from_dict(job).task_attempt(0, 0)
    committer.setup_task(task)
    if when == "check":  # the next look at the job's marker is the check after the write
        store.add(Fault("read_bytes", path_contains=JOB_MARKER, error=kill_process))
    fs, path = committer.filesystem(task), posixpath.join(committer.work_path(task), FILE)
    if when == "commit":
        _commits_late(conn, store, committer, task, fs, path)
        return
    stream = None
    # Where a file appears at its open, the write that creates it after the job ended is
    # its open; elsewhere its close.
    if when == "close" or (when == "check" and not store.file_at_open):
        stream = fs.open(path, "wb")
        stream.write(b"written by the losing attempt\n")
    conn.send("ready")
    conn.recv()  # the job has committed and cleaned up
    try:
        if stream is None:
            stream = fs.open(path, "wb")
            stream.write(b"still writing when killed\n")
            conn.send("writing")
        else:
            stream.close()
            conn.send("closed")
    except Exception as exc:
        conn.send(f"refused: {type(exc).__name__}: {exc}")
    try:
        conn.recv()  # never answered: SIGKILL comes first, as Spark's forced kill does
    except EOFError:  # in the parent's process (memory store): its end closed, nothing runs on
        return


def _commits_late(conn: Any, store: FaultInjectingStore, committer: Any, task: Any, fs: Any,
                  path: str) -> None:
    """``when="commit"``: held at the manifest's save inside the task commit (the job still
    live when it began), then killed in the check after the save."""
    with fs.open(path, "wb") as stream:
        stream.write(b"written by the losing attempt\n")

    def hold(_operation: str, args: tuple[Any, ...]) -> bool:
        conn.send("ready")
        conn.recv()  # the job has committed and cleaned up
        store.add(Fault("info", path_contains=JOB_MARKER, error=kill_process))
        return False

    store.add(Fault("save_json", path_contains="/manifests/", predicate=hold))
    try:
        committer.commit_task(task)
        conn.send("committed")
    except Exception as exc:
        conn.send(f"refused: {type(exc).__name__}: {exc}")
    conn.recv()


def zombie_outlives_its_job(name: str, url: str, config: dict[str, str], when: When,
                            then: Literal["commit", "abort"] = "commit") -> Outcome:
    """Run the scenario with committer ``name`` at ``url``; the zombie stops at ``when``;
    the job commits (or, ``then="abort"``, fails and is aborted) while it is stopped."""
    committer = create_committer(url, config, name)
    job = JobContext(url, config=config)
    committer.setup_job(job)
    parent, child = multiprocessing.get_context("spawn").Pipe()
    args = (child, name, url, config, job.to_dict(), when)
    # The memory store lives in this process: there the zombie is a thread, "killed" by
    # closing its pipe (it then returns without another step).
    if when in ("check", "commit") and url.startswith("memory:"):
        raise ValueError("a zombie killed in its check needs its own process: not on memory")
    process: Any = (threading.Thread(target=_zombie, args=args, daemon=True) if url.startswith("memory:")
                    else multiprocessing.get_context("spawn").Process(target=_zombie, args=args, daemon=True))
    process.start()
    if not isinstance(process, threading.Thread):
        child.close()  # the zombie's end is its own now: its death is an EOF here
    try:
        if not parent.poll(120):
            raise AssertionError("the zombie never got ready")
        assert parent.recv() == "ready"
        winner = job.task_attempt(0, 1)
        committer.setup_task(winner)
        with committer.filesystem(winner).open(
                posixpath.join(committer.work_path(winner), "date=1/part-00000-000-won-a1.txt"), "wb") as f:
            f.write(b"written by the winning attempt\n")
        if then == "commit":
            committer.commit_job(job, [committer.commit_task(winner)])
        else:
            committer.abort_job(job)
            committer.cleanup_job(job)
        parent.send("go")
        if not parent.poll(120):
            raise AssertionError("the zombie never answered")
        try:
            said = parent.recv()
        except EOFError:
            said = "killed"  # by its own store wrapper, in its check
    finally:
        if isinstance(process, threading.Thread):
            parent.close()
        elif process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
        process.join(30)
    store = open_store(url, config)
    dest = store.strip(url)
    return Outcome(said, leftovers(store, dest), visible_files(store, dest), job.job_id)
