"""Delayed completion as store capabilities: parts uploaded now, made visible later.

Two optional interfaces share these operations:

* ``fs.multipart.delayed-completion``: ``Store.multipart()`` returns a
  :class:`MultipartUploads` (S3: initiate, upload parts, complete or abort by upload id);
* ``fs.blocklist.delayed-completion``: ``Store.block_lists()`` returns a
  :class:`BlockLists` (Azure Blob: blocks staged under the object's final name, committed
  as one block list; see its docstring for how it differs).

One process uploads parts, another completes them later, knowing only the path, the
upload id and the ordered part ids. The delayed-completion committers
(:mod:`outcommit.committers.delayed`) and the ``outcommit uploads`` CLI use only this
interface.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class PendingUpload:
    """An upload that was initiated and neither completed nor aborted."""

    path: str           # store path of the object the upload will create
    upload_id: str
    initiated: datetime | None = None


DEFAULT_PART_SIZE = 16 * 1024 * 1024
#: Requests a job commit has in flight beside its ``threads`` completions (ending the job,
#: listing its state): a store's connection pool holds that many more connections than
#: its committers' threads, or the pool overflows (urllib3: "Connection pool is full").
JOB_COMMIT_SIDE_REQUESTS = 2


class MultipartUploads(abc.ABC):
    """The operations of delayed-completion multipart uploads, on store paths."""

    #: Bytes per part a writer uploads (every part but the last has exactly this size).
    part_size: int = DEFAULT_PART_SIZE
    #: The store's limits, checked when a pending file is loaded (S3's by default).
    max_parts: int = 10_000
    max_part_size: int = 5 * 1024**3
    max_object_size: int = 5 * 1024**4
    #: ``abort`` frees an upload's parts (S3). False where nothing can be aborted alone
    #: (Azure block lists): then nobody reads pending files only to abort them.
    abortable: bool = True

    @abc.abstractmethod
    def initiate(self, path: str) -> str:
        """Start an upload to ``path``; returns its upload id."""

    @abc.abstractmethod
    def upload_part(self, path: str, upload_id: str, part_number: int, data: bytes) -> str:
        """Upload part ``part_number`` (1-based); returns its etag."""

    @abc.abstractmethod
    def complete(self, path: str, upload_id: str, etags: Sequence[str],
                 if_none_match: bool = False) -> str:
        """Make the object visible; returns its etag.

        Completing an upload already completed with the same parts is success.
        With ``if_none_match`` an existing object is not replaced (FileExistsError).
        """

    def check_parts(self, upload_id: str, etags: Sequence[str]) -> None:
        """Refuse (ValueError) part ids this upload cannot have made: checked for every
        loaded pending file before anything is completed. The default checks nothing."""

    def holds(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        """Proof that the object at ``path`` is this upload completed with exactly these parts.

        Used to recognise a job's own output (a repeated job commit, an abort after a
        commit began). The default proves nothing (False).
        """
        return False

    @abc.abstractmethod
    def abort(self, path: str, upload_id: str) -> bool:
        """Abort an upload; False when it was no longer pending. Never raises for that."""

    @abc.abstractmethod
    def list_pending(self, directory: str) -> list[PendingUpload]:
        """Pending uploads under a *directory* (``out/dataset1/`` never matches ``out/dataset10``)."""

    def pending_unlisted(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        """Is this upload still pending, though :meth:`list_pending` did not show it? Asked
        (one request) only for an upload the listing left out and that is not completed,
        before old data is deleted. The default: no, the listing shows every pending upload."""
        return False


class BlockLists(MultipartUploads):
    """``fs.blocklist.delayed-completion``: blocks staged under the final name, committed later.

    The operations of :class:`MultipartUploads`, with these differences a committer must
    respect:

    * there is no upload object on the service: ``initiate`` makes a client-side id that
      names the blocks of one write (no request), and ``upload_part`` stages one block;
    * ``complete`` commits the block list, which also discards every other uncommitted
      block staged for that name (another attempt's, another job's);
    * ``abort`` cannot remove one upload's blocks alone (``abortable`` is False): the
      service discards a name's uncommitted blocks when a block list is next committed for
      the name, or after its retention period (Azure: seven days);
    * ``list_pending`` lists names that have uncommitted blocks and no committed object: the
      listing cannot show a name's uncommitted blocks once a blob is committed there (a
      daily ``report.csv`` replaced by its next run), nor an empty file's upload, which
      stages no block. ``pending_unlisted`` asks the name itself for those.
    """

    abortable = False
