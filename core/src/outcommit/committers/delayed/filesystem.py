"""The magic filesystem: tasks stream straight into pending uploads (S3 multipart, Azure blocks).

A task writes under ``<dest>/__magic_job-<jobId>/<jobAttempt>/tasks/<attemptId>/__base/``
through the committer's filesystem. A file opened there becomes a multipart upload to
the mapped final path (``<dest>/<path after __base>``), whose parts are uploaded as the
writer fills them and which is never completed by the writer. The upload goes to the
task commit in this process's memory (:mod:`.tracker`: two requests for a file smaller
than a part, the first sent in the background when the file is opened), or, for a
writer in another process, as a ``.pending`` file (upload id, ordered etags) and a
zero-byte marker at the path it was opened with. Nothing is visible in the destination
until job commit completes the upload; nothing is copied or renamed.
"""

from __future__ import annotations

import io
import json
import posixpath
import threading
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any

import fsspec
from fsspec.spec import AbstractBufferedFile

from outcommit.context import TaskAttemptContext
from outcommit.errors import TaskCommitError, UnsupportedWriteError
from outcommit.paths import is_inside, relative_to

from .files import PENDING_SUFFIX, PendingCommit
from .operations import abortable_commits
from .tracker import AttemptUploads, abort_started

if TYPE_CHECKING:
    from outcommit.committer import Components

    from .committer import DelayedCompletionCommitter

MAGIC = "__magic"
BASE = "__base"


def magic_destination(dest: str, path: str) -> str | None:
    """Final path of a file written at ``path``, or None when ``path`` is not a magic path.

    Everything from the ``__magic…`` component to ``__base`` inclusive is dropped.
    """
    if not is_inside(path, dest):
        return None
    parts = relative_to(path, dest).split("/")
    for index, part in enumerate(parts):
        if part.startswith(MAGIC):
            if BASE not in parts[index:]:
                return None
            rest = parts[parts.index(BASE, index) + 1:]
            if not rest:
                return None
            return posixpath.join(dest, *parts[:index], *rest)
    return None


class MagicUploadFile(AbstractBufferedFile):  # type: ignore[misc]
    """A write stream whose data goes into one multipart upload that it never completes.

    Two ways to hand the upload to the task commit: recorded in this process's memory
    (``tracker`` given: the attempt was set up here), or saved on the store as a
    ``.pending`` file with a zero-byte marker and a liveness check (a writer in another
    process than the attempt's task commit).
    """

    buffer: io.BytesIO  # fsspec's write buffer

    def __init__(self, fs: MagicFileSystem, path: str, final_path: str, part_size: int,
                 tracker: AttemptUploads | None) -> None:
        super().__init__(fs, path, mode="wb", block_size=part_size, cache_type="none")
        self.committer = fs.committer
        self.task = fs.task
        self.final_path = final_path
        self.part_size = part_size
        self.tracker = tracker
        self.upload_id: str | None = None
        self.parts: list[Future[str]] = []  # in order: part i + 1
        self.length = 0
        # In memory, the upload starts now, in the attempt's pool, while the writer encodes:
        # at close a small file then waits for one round trip (its part), as a plain PUT
        # does. (The work holds no reference to the file, so an abandoned file is collected.)
        self._starting: Future[str] | None = None
        if tracker is not None:
            initiate, final = self.committer.mp.initiate, final_path
            self._starting = tracker.start(final, lambda: initiate(final))

    def _initiate_upload(self) -> None:
        """Nothing more: the upload started when the file was opened (or starts when needed)."""

    def _start(self) -> str:
        if self.upload_id is None:
            self.upload_id = (self._starting.result() if self._starting is not None
                              else self.committer.mp.initiate(self.final_path))
        return self.upload_id

    def _part(self, data: bytes) -> Future[str]:
        """Upload the next part: in the attempt's pool, or right here."""
        upload_id, number, mp = self._start(), len(self.parts) + 1, self.committer.mp
        # The part holds no reference to the file: an abandoned file is collected (and its
        # upload discarded) while a part is in flight, not only after it lands.
        final_path = self.final_path

        def upload() -> str:
            return mp.upload_part(final_path, upload_id, number, data)

        if self.tracker is not None:
            return self.tracker.submit(upload, len(data))
        done: Future[str] = Future()
        done.set_result(upload())
        return done

    def _upload_chunk(self, final: bool = False) -> bool:
        self.buffer.seek(0)
        data = self.buffer.read()
        # Every part but the last must be >= 5 MiB: upload whole parts, keep the rest.
        while len(data) >= self.part_size and (len(data) > self.part_size or not final):
            chunk, data = data[:self.part_size], data[self.part_size:]
            self.parts.append(self._part(chunk))
            self.length += len(chunk)
        if final:
            self._finish(data)
            data = b""
        self.buffer = io.BytesIO()
        self.buffer.write(data)
        return False  # we manage the buffer ourselves

    def _finish(self, last: bytes) -> None:
        """The file is closed: its last part, then the record the task commit will use."""
        etags = [part.result() for part in self.parts]  # a failed part fails close()
        length = self.length + len(last)
        mp = self.committer.mp

        def complete_record() -> PendingCommit:
            upload_id = self._start()
            if last or not etags:  # an empty file is one empty part
                etags.append(mp.upload_part(self.final_path, upload_id, len(etags) + 1, last))
            bucket, _, key = self.final_path.partition("/")
            return PendingCommit(bucket=bucket, key=key, upload_id=upload_id, etags=tuple(etags),
                                 length=length, job_id=self.task.job_id, task_id=self.task.task_id,
                                 filename=posixpath.basename(self.path),
                                 scheme=next(iter(self.committer.uri_schemes), ""))

        if self.tracker is not None:
            # The last part in the background (the upload started at open): close() returns.
            if self._starting is not None:
                self.tracker.settle(self._starting)
            self.tracker.finish(self.path, complete_record, len(last), after=self._starting)
        else:
            self._save_pending(complete_record())

    def _save_pending(self, commit: PendingCommit) -> None:
        store = self.committer.store
        pending = self.path + PENDING_SUFFIX
        body = json.dumps(commit.to_dict()).encode()
        try:
            store.write_bytes(pending, body)
            with_metadata = store.object_metadata()
            header = self.committer.marker_length_header
            if with_metadata is not None and header:
                with_metadata.write_with_metadata(self.path, b"", {header: str(commit.length)})
            else:
                store.write_bytes(self.path, b"")
            # A writer that outlived its job (a straggler closing after job commit or abort)
            # must not leave a pending upload, nor recreate the finished job's directory.
            # This is the file's only liveness check, and it must come after its last
            # write: a check before the upload cannot see a job that ends meanwhile, and
            # an attempt that never commits has no later point where it could be undone.
            self.committer.require_job(self.task.job, TaskCommitError)
        except BaseException:
            self.committer.mp.abort(self.final_path, commit.upload_id)
            for leftover in (pending, self.path):
                try:
                    store.delete(leftover)
                except Exception:
                    self.committer.logger(self.task).warning("could not delete %s", leftover,
                                                             exc_info=True)
            raise
        self.fs.saved_upload(self.path, commit)

    def discard(self) -> None:
        """Throw the data away: abort the upload, save nothing."""
        self.closed = True
        if self._starting is not None and self.tracker is not None:
            self.tracker.settle(self._starting)  # aborted here, not again at the attempt's end
        try:
            if self.upload_id is None:
                if self._starting is None:
                    return
                if not self._starting.done():
                    # Started at open and still queued (this may run in the pool itself,
                    # from the garbage collector): abort it when it has started.
                    mp, final, log = self.committer.mp, self.final_path, self.committer.logger(self.task)
                    self._starting.add_done_callback(lambda f: abort_started(mp, final, f, log))
                    return
                self.upload_id = self._starting.result()  # started at open: abort it too
            wait(self.parts)  # no part may land after the abort
            self.committer.mp.abort(self.final_path, self.upload_id)
        except Exception:
            self.committer.logger(self.task).warning("could not abort upload %s", self.upload_id,
                                                     exc_info=True)

    def __del__(self) -> None:
        # Garbage-collected without close(): the writer never finished this file, so it is
        # thrown away rather than saved (a partial file must never become committable).
        if not self.closed:
            self.discard()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        # A writer that failed must not leave an upload that a task commit would publish.
        if exc_type is not None and not self.closed:
            self.discard()
        else:
            self.close()


class MagicFileSystem(fsspec.AbstractFileSystem):  # type: ignore[misc]
    """The task's view of the store: magic paths become pending uploads, the rest is the
    store's own filesystem (s3fs, adlfs)."""

    # fsspec's registry needs one; each instance names its binding's (``uri_schemes``):
    # paths are stripped by the store.
    protocol: str | tuple[str, ...] = "magic"
    cachable = False  # one per committer and task, never shared through fsspec's cache

    def __init__(self, committer: DelayedCompletionCommitter, task: TaskAttemptContext,
                 inner: fsspec.AbstractFileSystem, part_size: int,
                 tracker: AttemptUploads | None = None) -> None:
        super().__init__()
        self.protocol = tuple(committer.uri_schemes) or type(self).protocol
        self.committer = committer
        self.task = task
        self.inner = inner
        self.part_size = part_size
        #: The attempt's in-memory record, when its task commit runs in this process.
        self.tracker = tracker
        self._saved: dict[str, PendingCommit] = {}  # .pending mode: the last upload per path

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """``s3://b/k``, ``s3a://b/k``, ``abfs://c/k``, ``abfss://c@account.host/k`` -> store path.

        One class serves every store's schemes, so any scheme is stripped (the committer
        checks every path it acts on against its destination). fsspec's hook for the
        filesystems implementing it: overridden here, as fsspec's implementers do.
        """
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        text = str(path)
        if "://" in text:
            text = text.split("://", 1)[1]
            first, sep, rest = text.partition("/")
            text = first.split("@", 1)[0] + sep + rest  # abfss://container@account/...
        return text.rstrip("/")

    def saved_upload(self, path: str, commit: PendingCommit) -> None:
        """A .pending saved at ``path``: the upload an earlier write of the path saved is
        replaced, and must not leak."""
        replaced = self._saved.get(path)
        self._saved[path] = commit
        if replaced is not None and replaced.upload_id != commit.upload_id:
            self.committer.mp.abort(replaced.path, replaced.upload_id)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process (a pool, Dask, Ray): writers there cannot reach this
        # process's memory, so they save .pending files, and this attempt's task commit
        # will list them.
        components = self.committer.installed(f"sending {self.committer.name}'s filesystem to "
                                              "another process")
        if self.tracker is not None:
            self.tracker.shared = True
        return (_rebuild, (components, self.committer.destination,
                           dict(self.committer.config.to_dict()), self.task.to_dict(),
                           self.committer.name))

    def _final(self, path: str) -> str | None:
        return magic_destination(self.committer.dest, self._strip_protocol(path))

    def _check_write(self, path: str) -> str | None:
        """Final path of a write to ``path``; refuses writes that would bypass the commit.

        Inside the destination a task may write only under its own ``__base``: a write to
        the destination itself would be visible at once, one under another attempt's
        ``__base`` would be committed as that attempt's, and a ``..`` path is ambiguous.
        """
        stripped = self._strip_protocol(path)
        if any(part in ("", ".", "..") for part in stripped.removeprefix("/").split("/")):
            raise UnsupportedWriteError(f"{path}: empty, '.' and '..' path components are not allowed")
        base = self.committer.work_path(self.task)
        if not is_inside(stripped, self.committer.dest):
            return None  # not the committer's business: the plain filesystem
        if not is_inside(stripped, base):
            raise UnsupportedWriteError(f"{path} is inside the destination but not under the task's work "
                             f"path {base}: write there, or the commit protocol is bypassed")
        final = self._final(stripped)
        assert final is not None
        relative = relative_to(final, self.committer.dest)
        if relative == "_SUCCESS" or any(p.startswith(MAGIC) for p in relative.split("/")) \
                or stripped.endswith(PENDING_SUFFIX):
            raise UnsupportedWriteError(f"{path} maps to {final}, which the committer reserves")
        return final

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True,
              cache_options: Any = None, **kwargs: Any) -> Any:
        if "r" in mode:
            return self.inner.open(path, mode, block_size=block_size, **kwargs)
        final = self._check_write(path)
        if final is None:
            return self.inner.open(path, mode, block_size=block_size, **kwargs)
        if "a" in mode:
            raise UnsupportedWriteError(f"cannot append to {path}: files under __magic are write-once")
        # No liveness check per file: in memory, the task commit checks after publishing
        # (a straggler's uploads are aborted there, or found by the job's sweep); with a
        # .pending file, close() checks after the file's last write.
        return MagicUploadFile(self, self._strip_protocol(path), final, self.part_size, self.tracker)

    def _forget(self, path: str, recursive: bool) -> None:
        """Abort the pending uploads of magic files about to be deleted (else job commit
        would complete them: a deleted file would reappear in the output)."""
        stripped = self._strip_protocol(path)
        if self._final(stripped + "/x") is None and self._final(stripped) is None:
            return
        if self.tracker is not None:
            self.committer.ops.abort(self.tracker.take(stripped, recursive), self.committer.logger(self.task))
        store = self.committer.store
        pending = [stripped + PENDING_SUFFIX]
        if recursive:
            pending += [f.path for f in store.list_files(stripped) if f.path.endswith(PENDING_SUFFIX)]
        expect = self.committer.expectations(self.task.job)
        for name in pending:
            try:
                commits = abortable_commits(store, name, expect)
            except FileNotFoundError:
                continue
            self.committer.ops.abort(commits, self.committer.logger(self.task))
            store.delete(name)

    # Directories do not exist on S3; creating one under __magic is a no-op.
    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        if self._final(path + "/x") is None:
            self.inner.mkdir(path, create_parents=create_parents, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        if self._final(path + "/x") is None:
            self.inner.makedirs(path, exist_ok=exist_ok)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        return self.inner.ls(path, detail=detail, **kwargs)

    def info(self, path: str, **kwargs: Any) -> Any:
        return self.inner.info(path, **kwargs)

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self.inner.find(path, *args, **kwargs)

    def cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> Any:
        return self.inner.cat_file(path, start=start, end=end, **kwargs)

    def rm_file(self, path: str) -> None:
        self.rm(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Any = None) -> None:
        for one in path if isinstance(path, list) else [path]:
            self._forget(one, recursive)
            try:
                self.inner.rm(one, recursive=recursive, maxdepth=maxdepth)
            except FileNotFoundError:
                # A magic file tracked in memory has nothing on the store to delete.
                if self._final(self._strip_protocol(one)) is None and \
                        self._final(self._strip_protocol(one) + "/x") is None:
                    raise

    def rmdir(self, path: str) -> None:
        """Nothing to remove on S3."""

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        if self._check_write(path2) is not None:
            raise UnsupportedWriteError("copy into a magic path is not supported: write the file instead")
        self.inner.cp_file(path1, path2, **kwargs)

    def modified(self, path: str) -> Any:
        return self.inner.modified(path)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.inner.invalidate_cache(path)


class _Rebuilding(threading.local):
    """Set while a pickled filesystem is rebuilt in another process (it saves .pending files)."""

    active = False


_rebuilding = _Rebuilding()


def _rebuild(components: Components, destination: str, config: dict[str, str],
             task: dict[str, Any], name: str) -> MagicFileSystem:
    """A task's magic filesystem in another process: its writers save .pending files. The
    committer is made again by the installed components it was made with (the factory's)."""
    committer = components.create_committer(destination, config, name)
    _rebuilding.active = True
    try:
        return committer.filesystem(TaskAttemptContext.from_dict(task))  # type: ignore[no-any-return]
    finally:
        _rebuilding.active = False
