"""What stores answer and offer, as values and interfaces: a listing's :class:`FileInfo`,
a rename's outcome, and the optional interfaces a store implements (each declared by the
capability naming it). Re-exported by ``outcommit.store``, where plugins import them."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class FileInfo:
    """What a listing or ``info`` says about one path."""

    path: str
    size: int = 0
    is_dir: bool = False
    etag: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))


RenameOutcome = Literal["done", "not-done", "unknown"]


# -- optional interfaces: a store implements one and declares the capability naming it ----------
# Reached only through the Store's accessors (outcommit.storeoptional), which check the object
# a store offers against these at run time: a declared capability with no implementation
# fails there, naming the interface, not later as an AttributeError deep in a commit.
@runtime_checkable
class BatchDelete(Protocol):
    """``fs.delete.batch``: delete many files in few requests (S3: 1,000 per DeleteObjects).

    Deleting nothing is success; a file that could not be deleted raises (a store that
    answers "done" with per-file errors must turn them into an exception).
    """

    def delete_many(self, paths: Sequence[str]) -> None: ...


@runtime_checkable
class ObjectMetadata(Protocol):
    """``fs.object.metadata``: write a file that carries user metadata (S3: ``x-amz-meta-*``)."""

    def write_with_metadata(self, path: str, data: bytes, metadata: Mapping[str, str]) -> None: ...


@runtime_checkable
class ExclusiveCreate(Protocol):
    """``fs.create.exclusive``: create a file only if nothing is at its path, in one step.

    ``create_exclusive(path, data)`` raises FileExistsError when something is there (and
    leaves it as it was): two writers racing for a name, exactly one wins.
    """

    def create_exclusive(self, path: str, data: bytes) -> None: ...
