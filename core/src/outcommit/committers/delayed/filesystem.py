"""The magic filesystem: tasks stream straight into pending uploads (S3 multipart, Azure blocks).

A task writes under ``<dest>/__magic_job-<jobId>/<jobAttempt>/tasks/<attemptId>/__base/``
through the committer's filesystem. A file opened there becomes a multipart upload to
the mapped final path (``<dest>/<path after __base>``), whose parts are uploaded as the
writer fills them and which is never completed by the writer (:mod:`.uploadfile`). The upload goes to the
task commit in this process's memory (:mod:`.tracker`: two requests for a file smaller
than a part, the first sent in the background when the file is opened), or, for a
writer in another process, as a ``.pending`` file (upload id, ordered etags) and a
zero-byte marker at the path it was opened with. Nothing is visible in the destination
until job commit completes the upload; nothing is copied or renamed.
"""

from __future__ import annotations

import posixpath
import threading
from typing import TYPE_CHECKING, Any

import fsspec

from outcommit.context import TaskAttemptContext
from outcommit.errors import UnsupportedWriteError
from outcommit.livewrites import PassThroughFileSystem
from outcommit.paths import is_inside, relative_to

from .files import PENDING_SUFFIX, PendingCommit
from .operations import abortable_commits
from .tracker import AttemptUploads
from .uploadfile import MagicUploadFile

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


class MagicFileSystem(PassThroughFileSystem):
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
