"""Delayed-completion multipart uploads as a store capability.

A store with ``fs.multipart.delayed-completion`` returns a :class:`MultipartUploads`
from ``Store.multipart()``: one process uploads parts, another completes or aborts the
upload later. The S3 plugin implements it over S3's multipart API; committers and the
``outcommit uploads`` CLI use only this interface.
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


class MultipartUploads(abc.ABC):
    """The operations of delayed-completion multipart uploads, on store paths."""

    #: Bytes per part a writer uploads (every part but the last has exactly this size).
    part_size: int = DEFAULT_PART_SIZE

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

    @abc.abstractmethod
    def abort(self, path: str, upload_id: str) -> bool:
        """Abort an upload; False when it was no longer pending. Never raises for that."""

    @abc.abstractmethod
    def list_pending(self, directory: str) -> list[PendingUpload]:
        """Pending uploads under a *directory* (``out/dataset1/`` never matches ``out/dataset10``)."""
