"""Optional store operations: the one way a store offers them and callers reach them.

Each group of optional operations is an interface named by one capability
(:data:`OPTIONAL_OPERATIONS`). A store offers it by *declaring* the capability; callers
reach it only through the Store's typed accessor (``store.multipart()``...), which answers
from the declared capability alone: the implementing object when declared, else None.
Never by probing attributes: a wrapper store declares what its inner store declares, and a
store that implements a method but does not declare it (GCS without upload preconditions)
offers nothing. A store whose implementation is a separate object (S3's multipart uploads)
returns it from :meth:`OptionalOperations.implementation`; stores never override the
accessors (``Store.__init_subclass__`` refuses it, see :func:`refuse_overrides`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, cast

from . import capabilities as caps
from .errors import CommitError
from .multipart import BlockLists, MultipartUploads
from .storetypes import BatchDelete, ExclusiveCreate, ObjectMetadata


@dataclass(frozen=True)
class OptionalOperation:
    """One optional interface: the capability declaring it, and the Store accessor reaching it."""

    capability: str
    interface: type
    accessor: str


#: Every optional operation group (docs/plugins.md, "Optional operations").
OPTIONAL_OPERATIONS: tuple[OptionalOperation, ...] = (
    OptionalOperation(caps.DELETE_BATCH, BatchDelete, "batch_delete"),
    OptionalOperation(caps.OBJECT_METADATA, ObjectMetadata, "object_metadata"),
    OptionalOperation(caps.CREATE_EXCLUSIVE, ExclusiveCreate, "exclusive_create"),
    OptionalOperation(caps.MULTIPART_DELAYED_COMPLETION, MultipartUploads, "multipart"),
    OptionalOperation(caps.BLOCKLIST_DELAYED_COMPLETION, BlockLists, "block_lists"),
)
_BY_CAPABILITY = {op.capability: op for op in OPTIONAL_OPERATIONS}

T = TypeVar("T")


def required(found: T | None, store: object, capability: str, needed_by: str) -> T:
    """``found`` (what an accessor of ``store`` answered), where ``needed_by`` requires
    ``capability`` (a committer whose factory checked it, a wrapper asked for its inner
    store's): a CommitError naming both if it is None (a store, such as a staging
    committer's shared one, the factory did not check), never an AttributeError later."""
    if found is None:
        raise CommitError(f"{needed_by} needs {capability}, which {store!r} does not declare; "
                          "use a store that declares it")
    return found


#: Extension points a store plugin overrode under private names until issue 28: old -> new.
RENAMED_EXTENSION_POINTS = {"_make_filesystem": "make_filesystem", "_to_info": "to_info",
                            "_tree": "tree", "_delete_directory": "delete_directory",
                            "_delete_file": "delete_file"}


def refuse_overrides(cls: type) -> None:
    """TypeError for a Store subclass overriding what it must not (``Store.__init_subclass__``):
    an extension point under its old private name (the override would never be called), or
    an accessor (it could answer other than the declared capabilities: an object while the
    capability is absent, None while it is declared)."""
    for old, new in RENAMED_EXTENSION_POINTS.items():
        if old in vars(cls):
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}.{old}: the extension point "
                            f"is the public Store.{new} now; rename the override")
    for op in OPTIONAL_OPERATIONS:
        if op.accessor in vars(cls):
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}.{op.accessor}: Store answers it from "
                            f"the declared capability {op.capability}; override Store.implementation "
                            f"to return the {op.interface.__name__} instead")


class OptionalOperations:
    """The Store's accessors of its optional operations (a base of :class:`~outcommit.store.Store`)."""

    def has_capability(self, name: str) -> bool:
        raise NotImplementedError  # the Store's: its declared capabilities

    def implementation(self, capability: str) -> object:
        """Extension point: the object implementing the optional interface named by
        ``capability``, asked only when the store declares it. Default: the store itself (a
        store implementing the interface's methods needs nothing more)."""
        return self

    def batch_delete(self) -> BatchDelete | None:
        """The ``BatchDelete`` when the store declares ``fs.delete.batch``, else None."""
        return cast("BatchDelete | None", self._optional(caps.DELETE_BATCH))

    def object_metadata(self) -> ObjectMetadata | None:
        """The ``ObjectMetadata`` when the store declares ``fs.object.metadata``, else None."""
        return cast("ObjectMetadata | None", self._optional(caps.OBJECT_METADATA))

    def exclusive_create(self) -> ExclusiveCreate | None:
        """The ``ExclusiveCreate`` when the store declares ``fs.create.exclusive``, else None."""
        return cast("ExclusiveCreate | None", self._optional(caps.CREATE_EXCLUSIVE))

    def multipart(self) -> MultipartUploads | None:
        """The ``MultipartUploads`` when the store declares ``fs.multipart.delayed-completion``."""
        return cast("MultipartUploads | None", self._optional(caps.MULTIPART_DELAYED_COMPLETION))

    def block_lists(self) -> BlockLists | None:
        """The ``BlockLists`` when the store declares ``fs.blocklist.delayed-completion``."""
        return cast("BlockLists | None", self._optional(caps.BLOCKLIST_DELAYED_COMPLETION))

    def _optional(self, capability: str) -> object | None:
        """The implementation of ``capability``'s interface if declared, else None: the one
        place every accessor decides."""
        if not self.has_capability(capability):
            return None
        found = self.implementation(capability)
        interface = _BY_CAPABILITY[capability].interface
        # A store declaring what it does not implement: say so here, not as an
        # AttributeError in the middle of a job commit.
        if not isinstance(found, interface):
            raise TypeError(f"{self!r} declares {capability} but offers {type(found).__name__}, not a "
                            f"{interface.__name__}: implement its methods, or return the object "
                            "implementing them from Store.implementation")
        return found
