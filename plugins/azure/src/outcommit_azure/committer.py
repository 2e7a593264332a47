"""The ``blocklist`` committer: Azure Blob without rename.

A task writes through the committer's filesystem under the job's magic paths
(``<dest>/__magic_job-<jobId>/<attempt>/tasks/<attemptId>/__base/...``), as with S3's
``magic``: every file's bytes go straight to blocks staged under its *final* name (Put
Block, uncommitted: invisible), uploaded as the writer fills them, and the attempt keeps
its block ids in the memory of the process that set it up. Task commit publishes the
attempt's pendingset (each file's container, name, upload id and ordered block ids) with
an exclusive create and claims the task; job commit makes each file visible with one Put
Block List (``If-None-Match: *`` with conflict mode ``fail``). Abort commits nothing.
Zero bytes are copied and no file is renamed.

Everything but the uploads' interface is core's delayed-completion machinery
(:mod:`outcommit.committers.delayed`), shared with S3's committers: pendingsets, claims,
conflict modes, repeatable job commit, recovery, cleanup. What differs on Azure:

* nothing can be aborted alone: a losing attempt's blocks are discarded by the service
  when the winning attempt's list is committed for the same name, else after a week
  (:mod:`.blocklist`); no pending-upload sweep is needed or possible;
* a completed file is proven by its committed block list (Get Block List), which is how
  a repeated job commit, or an abort after a commit began, recognises the job's own files.
"""

from __future__ import annotations

from typing import ClassVar

from outcommit import capabilities as caps
from outcommit.committers.delayed.magic import MagicCommitterBase
from outcommit.multipart import MultipartUploads
from outcommit.store import Store

from .schemes import SCHEMES

IN_MEMORY_KEY = "outcommit.blocklist.track-commits-in-memory"
UPLOAD_THREADS_KEY = "outcommit.blocklist.upload-threads"
INLINE_LIMIT_KEY = "outcommit.blocklist.message.inline-commits"

CONFIG_KEYS: dict[str, str] = {
    IN_MEMORY_KEY: "blocklist: keep a task's block ids in the memory of the process that set the "
                   "task up (default true); false: every writer saves .pending files (writers in "
                   "several processes)",
    UPLOAD_THREADS_KEY: "blocklist: per task attempt, blocks' worth of bytes staged in the "
                        "background at once (default 4: the memory bound); small files run as "
                        "many requests at once as outcommit.committer.threads, at least 4x it",
    INLINE_LIMIT_KEY: "blocklist: task commit messages carry their files inline up to this many, "
                      "else a digest-checked reference to the pendingset (default 200)",
}


class BlockListCommitter(MagicCommitterBase):
    """Stage blocks under the final names at task time; one Put Block List per file at job commit."""

    name = "blocklist"
    requires: ClassVar[tuple[str, ...]] = (caps.BLOCKLIST_DELAYED_COMPLETION, caps.CREATE_EXCLUSIVE,
                                           caps.LISTING_CONSISTENT)
    in_memory_key = IN_MEMORY_KEY
    upload_threads_key = UPLOAD_THREADS_KEY
    inline_limit_key = INLINE_LIMIT_KEY
    exclusive_completion = True
    uri_schemes = ("abfs", "abfss", "az", "wasb", "wasbs")
    made_for: ClassVar[tuple[str, ...]] = SCHEMES  # its block lists are Azure's

    def open_uploads(self, store: Store) -> MultipartUploads | None:
        return store.block_lists()
