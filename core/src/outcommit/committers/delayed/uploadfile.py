"""One file written under a magic path: a write stream whose data goes into one pending
upload (S3 multipart, Azure blocks) that it never completes.

Its own module because it is the writer's half of the magic write path, apart from the
filesystem that decides which paths are magic (:mod:`.filesystem`): what a file does
with its parts, how it hands its upload to the task commit (in memory, or as a
``.pending`` file with its marker), and how a file abandoned or failed throws its upload
away so that no partial file is ever committed.
"""

from __future__ import annotations

import io
import json
import posixpath
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, Protocol

from fsspec.spec import AbstractBufferedFile

from outcommit.context import TaskAttemptContext
from outcommit.errors import TaskCommitError

from .files import PENDING_SUFFIX, PendingCommit
from .tracker import AttemptUploads, abort_started

if TYPE_CHECKING:
    from .committer import DelayedCompletionCommitter


class MagicWriting(Protocol):
    """What a file uses of the filesystem it is written through (``MagicFileSystem``):
    named here, so this module needs not import it."""

    committer: DelayedCompletionCommitter
    task: TaskAttemptContext

    def saved_upload(self, path: str, commit: PendingCommit) -> None: ...


class MagicUploadFile(AbstractBufferedFile):  # type: ignore[misc]
    """A write stream whose data goes into one multipart upload that it never completes.

    Two ways to hand the upload to the task commit: recorded in this process's memory
    (``tracker`` given: the attempt was set up here), or saved on the store as a
    ``.pending`` file with a zero-byte marker and a liveness check (a writer in another
    process than the attempt's task commit).
    """

    buffer: io.BytesIO  # fsspec's write buffer

    def __init__(self, fs: MagicWriting, path: str, final_path: str, part_size: int,
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
