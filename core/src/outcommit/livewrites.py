"""A task attempt's view of the store for the committers that keep its output under the
job's directory (v1, v2, manifest): every file it writes there checks that the job is
still live after the file's write, and takes itself back if not.

Why: an engine may stop waiting for an attempt that still runs. Spark kills the losing
attempt of a speculated task once the other succeeded, but its Python worker goes on
writing until ``spark.python.task.killTimeout`` has passed, and is then destroyed: the
attempt's task commit (which checks the job) and its abort never run. Meanwhile the
driver commits the job and deletes ``_temporary/<jobId>``; a file the attempt writes after
that would stay there for good. So the file checks, as the magic committer's files do
(write, then check; :meth:`~outcommit.jobdir.JobDirectoryCommitter.end_job_and_delete_state`
says why that order is enough): a file finished while the job is live was there before the
job's cleanup listed its directory, and goes with it; one finished after deletes itself,
and the write fails.

When the check runs: after the close (a blob, a GCS object, a memory file: the file
appears at its close; a file never closed is closed and checked at its garbage collection,
where Azure's and GCS's clients would upload it; a transaction's file at its commit; a
copy or a move after it is made), and where a file appears at its open (``Store.file_at_open``: local
disks, HDFS) also right after the open, so that a worker killed while writing a file it
opened after the job ended leaves nothing. One request per file on the object stores (a
read of the job's marker, a few hundred bytes); a worker killed between its write and the check leaves that
one file, for the next job's setup (``JobDirectoryCommitter.sweep_ended_jobs``) or
``outcommit jobs abort`` to remove.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import fsspec

from .context import TaskAttemptContext
from .paths import is_inside

if TYPE_CHECKING:
    from .committer import Components
    from .config import Config
    from .store import Store


class JobLiveness(Protocol):
    """What the filesystem uses of its committer (``JobDirectoryCommitter``)."""

    store: Store
    name: ClassVar[str]
    destination: str
    config: Config

    def installed(self, needed_by: str) -> Components: ...

    def job_dir(self, job_id: str) -> str: ...

    def abandon_write_if_job_ended(self, task: TaskAttemptContext, path: str) -> None: ...


class CheckedFile:
    """A file being written; its close checks the job (``check``) after the file's last write."""

    def __init__(self, inner: Any, check: Any) -> None:
        self._inner = inner
        self._check = check
        self._checked = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write(self, data: Any) -> int:
        return int(self._inner.write(data))

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def close(self) -> None:
        self._inner.close()
        if not self._checked:
            self._checked = True
            self._check()

    def commit(self) -> None:
        """A transaction's file takes its name here, after its close: checked again."""
        self._inner.commit()
        self._check()

    def __del__(self) -> None:
        # Azure's and GCS's files upload at their garbage collection when never closed (a
        # writer failed without closing one; the engine's discard, a no-op on Azure's): the
        # check has to follow that upload too, or a file dropped after the job's cleanup stays.
        inner = self.__dict__.get("_inner")
        try:
            if inner is not None and not self._checked and not inner.closed:
                self.close()
        except Exception:  # a finalizer raises to no one (the check deleted the file already)
            pass

    def __enter__(self) -> CheckedFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PassThroughFileSystem(fsspec.AbstractFileSystem):  # type: ignore[misc]
    """A task's view of the store's filesystem (``inner``): its reads and listings go
    straight through; subclasses say what a write does (this module's, the magic one's)."""

    inner: fsspec.AbstractFileSystem

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        return self.inner.ls(path, detail=detail, **kwargs)

    def info(self, path: str, **kwargs: Any) -> Any:
        return self.inner.info(path, **kwargs)

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self.inner.find(path, *args, **kwargs)

    def cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> Any:
        return self.inner.cat_file(path, start=start, end=end, **kwargs)

    def modified(self, path: str) -> Any:
        return self.inner.modified(path)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.inner.invalidate_cache(path)


class LiveWritesFileSystem(PassThroughFileSystem):
    """The store's own filesystem, but a file written under the job's directory checks the
    job after its write (module docstring); everything else goes straight through."""

    protocol: str | tuple[str, ...] = "outcommit-live"
    cachable = False  # one per committer and task, never shared through fsspec's cache

    def __init__(self, committer: JobLiveness, task: TaskAttemptContext,
                 inner: fsspec.AbstractFileSystem, check_at_open: bool) -> None:
        super().__init__()
        self.committer = committer
        self.task = task
        self.inner = inner
        self.check_at_open = check_at_open
        self.protocol = inner.protocol

    def _strip_protocol(self, path: Any) -> Any:
        return self.inner._strip_protocol(path)

    def _parent(self, path: Any) -> Any:
        # fsspec's is a classmethod calling the class's _strip_protocol, unbound here: put_file
        # and open_files failed with a TypeError.
        return self.inner._parent(path)

    def _in_job(self, path: str) -> bool:
        return is_inside(self.committer.store.strip(path), self.committer.job_dir(self.task.job_id))

    def _check(self, path: str) -> None:
        self.committer.abandon_write_if_job_ended(self.task, self.committer.store.strip(path))

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True,
              cache_options: Any = None, **kwargs: Any) -> Any:
        # autocommit: within this filesystem's transaction, the file takes its name at the
        # transaction's end (``CheckedFile.commit``), not at its close.
        stream = self.inner.open(path, mode, block_size=block_size, autocommit=autocommit,
                                 cache_options=cache_options, **kwargs)
        if "r" in mode or not self._in_job(path):
            return stream
        if self.check_at_open:
            try:
                self._check(path)  # the file exists from now on: a kill must not leave it
            except BaseException:
                try:
                    stream.close()  # its name is gone already (closing an unlinked file keeps it so)
                except Exception:  # HDFS refuses to close a file deleted under it: the check's error stands
                    pass
                raise
        return CheckedFile(stream, lambda: self._check(path))

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process (a pool, Dask, Ray): made again there by the installed
        # components the committer was made with, so the files written there check too.
        components = self.committer.installed(f"sending {self.committer.name}'s filesystem to "
                                              "another process")
        return (_rebuild, (components, self.committer.destination,
                           dict(self.committer.config.to_dict()), self.task.to_dict(),
                           self.committer.name))

    # -- the rest is the store's filesystem --------------------------------------------
    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.inner.mkdir(path, create_parents=create_parents, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.inner.makedirs(path, exist_ok=exist_ok)

    def rm_file(self, path: str) -> None:
        self.inner.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Any = None) -> None:
        self.inner.rm(path, recursive=recursive, maxdepth=maxdepth)

    def rmdir(self, path: str) -> None:
        self.inner.rmdir(path)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        self.inner.cp_file(path1, path2, **kwargs)
        self._check_made(path2)

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: Any = None,
           **kwargs: Any) -> None:
        """The store's own move (a rename where it has one: fsspec's generic move copies
        the bytes), then the check of what it made under the job's directory."""
        if getattr(self.inner, "auto_mkdir", False) and isinstance(path2, str):
            # A local filesystem's auto_mkdir: newer fsspec makes the destination's
            # directory for a move, 2024.6.0 (the oldest supported) failed the move.
            self.inner.makedirs(self.inner._parent(path2), exist_ok=True)
        self.inner.mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        for path in [path2] if isinstance(path2, str) else path2:
            self._check_made(path)

    def _check_made(self, path: str) -> None:
        """A copy or a move made ``path`` (a file, or a tree): checked as a write's file is."""
        if self._in_job(path):
            self._check(path)


def _rebuild(components: Components, destination: str, config: dict[str, str],
             task: dict[str, Any], name: str) -> fsspec.AbstractFileSystem:
    committer = components.create_committer(destination, config, name)
    return committer.filesystem(TaskAttemptContext.from_dict(task))


__all__ = ["CheckedFile", "JobLiveness", "LiveWritesFileSystem", "PassThroughFileSystem"]
