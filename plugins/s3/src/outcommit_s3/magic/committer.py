"""S3A's magic committer: stream to pending multipart uploads, complete at job commit.

Tasks write through :class:`~outcommit.committers.delayed.filesystem.MagicFileSystem`
under the job's magic paths (``<dest>/__magic_job-<jobId>/<attempt>/tasks/<attemptId>/__base/``).
An attempt set up in this process keeps its uploads in memory: a file smaller than a
part costs its two requests (start, part), and task commit three (publish the pendingset
exclusively, claim the task, check the job is still live). With
``outcommit.magic.track-commits-in-memory=false`` (Hadoop:
``fs.s3a.committer.magic.track.commits.in.memory.enabled``), or for a filesystem sent to
another process, writers save ``.pending`` files that task commit lists and reads. The
machinery is core's (:mod:`outcommit.committers.delayed.magic`), shared with Azure's
``blocklist``; this is its S3 binding.
"""

from __future__ import annotations

from outcommit import capabilities as caps
from outcommit.committers.delayed.magic import MagicCommitterBase

from ..commit.committer import MultipartCommitter
from ..settings import MAGIC_IN_MEMORY, MAGIC_UPLOAD_THREADS


class MagicCommitter(MultipartCommitter, MagicCommitterBase):
    """S3A's magic committer: stream to pending multipart uploads, complete at job commit."""

    name = "magic"
    requires = (caps.MULTIPART_DELAYED_COMPLETION, caps.CREATE_EXCLUSIVE, caps.LISTING_CONSISTENT)
    in_memory_key = MAGIC_IN_MEMORY
    upload_threads_key = MAGIC_UPLOAD_THREADS
    # Hadoop's readers of a magic path's marker object take the file's length from it.
    marker_length_header = "x-hadoop-s3a-magic-data-length"
