"""A store wrapper that makes chosen operations fail, before or after they take effect.

It wraps a *real* store: every operation really runs against it, and the wrapper counts
calls by operation (useful for request counts in benchmarks) and raises where told.

    store = FaultInjectingStore(open_store(url), [Fault("rename_file", when="after")])
    committer = create_committer(url, committer="v1", store=store)
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import capabilities as caps
from ..capabilities import Capabilities
from ..errors import InjectedFault
from ..multipart import BlockLists, MultipartUploads, PendingUpload
from ..store import Store
from ..storeoptional import required

# Store operations that can fail; multipart ones are named "multipart.<method>", block-list
# ones (Azure) "blocklist.<method>".
STORE_OPERATIONS = (
    "info", "modified", "list_dir", "list_files", "open", "read_bytes", "mkdirs", "write_bytes",
    "write_atomic", "create_exclusive", "rename_file", "rename_dir", "delete", "delete_empty_dir",
    "save_json", "load_json",
    # optional interfaces (called only when the inner store declares their capability)
    "delete_many", "write_with_metadata",
)
MULTIPART_OPERATIONS = ("initiate", "upload_part", "complete", "abort", "list_pending")


def kill_process(message: str) -> BaseException:
    """A Fault ``error`` that never returns: SIGKILL of this very process, as a crash.

    ``Fault("rename_dir", when="after", error=kill_process)`` in a driver running in its
    own process kills it right after its first directory rename took effect: nothing
    below it runs, no ``finally`` and no cleanup, exactly as a killed driver.
    """
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError(f"unreachable after SIGKILL ({message})")


def stop_process(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Stop a server process this run started: SIGTERM, then SIGKILL if it outlives ``timeout``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Fault:
    """Fail the matching call(s) of one operation.

    ``when="before"``: raise instead of doing the operation. ``when="after"``: do it, then
    raise, as a network failure after the server acted would. ``skip`` lets that many
    matching calls through first; ``times`` is how many calls fail (-1: every one).
    """

    operation: str
    path_contains: str | None = None
    when: Literal["before", "after"] = "before"
    times: int = 1
    skip: int = 0
    error: Callable[[str], BaseException] | None = None
    predicate: Callable[[str, tuple[Any, ...]], bool] | None = None
    fired: int = field(default=0, init=False)
    seen: int = field(default=0, init=False)

    def matches(self, operation: str, args: tuple[Any, ...]) -> bool:
        if operation != self.operation:
            return False
        if self.path_contains is not None and not any(
                isinstance(a, str) and self.path_contains in a for a in args):
            return False
        return self.predicate is None or self.predicate(operation, args)

    def make_error(self, operation: str, args: tuple[Any, ...]) -> BaseException:
        message = f"injected fault {self.when} {operation}{args!r}"
        return self.error(message) if self.error else InjectedFault(message)


def failing_deletes_in(dest: str) -> list[Fault]:
    """Faults refusing every delete of a data file under ``dest`` (a store path), alone or
    in a batch; hidden and temporary names (``_temporary``, ``__magic_job-...``,
    ``_SUCCESS``) are deleted as usual: an abort that cannot undo a job commit."""
    base = dest.rstrip("/") + "/"

    def data_file(path: object) -> bool:
        return isinstance(path, str) and path.startswith(base) and \
            not path[len(base):].split("/")[0].startswith(("_", "."))

    return [Fault("delete", times=-1, predicate=lambda _op, args: data_file(args[0])),
            Fault("delete_many", times=-1,
                  predicate=lambda _op, args: any(data_file(p) for p in args[0]))]


class FaultInjectingStore(Store):
    """Delegates to ``inner``; raises for calls that a :class:`Fault` matches."""

    def __init__(self, inner: Store, faults: Sequence[Fault] = ()) -> None:
        # No Store.__init__: identity and configuration are the inner store's.
        self.inner = inner
        self.faults = list(faults)
        self.calls: Counter[str] = Counter()
        # Re-entrant: a predicate may act on the store it is installed in.
        self._lock = threading.RLock()

    # identity
    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return self.inner.capabilities

    @property
    def fs(self) -> Any:
        return self.inner.fs

    @property
    def parallelism(self) -> int:  # type: ignore[override]
        return self.inner.parallelism

    @property
    def file_at_open(self) -> bool:  # type: ignore[override]
        return self.inner.file_at_open

    @property
    def iostatistics(self) -> Any:  # type: ignore[override]
        return self.inner.iostatistics

    def __getattr__(self, name: str) -> Any:  # config, scheme, _url, plugin extras
        return getattr(self.inner, name)

    def strip(self, url: str) -> str:
        return self.inner.strip(url)

    def url(self, path: str) -> str:
        return self.inner.url(path)

    @property
    def default_committer(self) -> str:  # type: ignore[override]
        return self.inner.default_committer

    # Recovery questions go to the real store: its evidence, not the base class default.
    def rename_outcome(self, src: str, dst: str, src_info: Any) -> Any:
        return self.inner.rename_outcome(src, dst, src_info)

    def is_throttling(self, exc: BaseException) -> bool:
        return self.inner.is_throttling(exc)

    def is_transient(self, exc: BaseException) -> bool:
        return self.inner.is_transient(exc)

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def _pick(self, operation: str, args: tuple[Any, ...]) -> Fault | None:
        with self._lock:
            self.calls[operation] += 1
            faults = list(self.faults)
        # Predicates run unlocked: one may act on this very store, from several threads.
        matching = [f for f in faults if f.matches(operation, args)]
        with self._lock:
            for fault in matching:
                if fault.times != 0:
                    fault.seen += 1
                    if fault.seen <= fault.skip:
                        continue
                    if fault.times > 0 and fault.fired >= fault.times:
                        continue
                    fault.fired += 1
                    return fault
        return None

    def call(self, operation: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        fault = self._pick(operation, args)
        if fault is not None and fault.when == "before":
            raise fault.make_error(operation, args)
        result = target(*args, **kwargs)
        if fault is not None:
            raise fault.make_error(operation, args)
        return result

    def implementation(self, capability: str) -> object:
        """The inner store's uploads and block lists, their calls faulted as this store's;
        every other interface is this store's own delegating methods."""
        if capability == caps.MULTIPART_DELAYED_COMPLETION:
            uploads = required(self.inner.multipart(), self.inner, capability, "FaultInjectingStore")
            return _FaultInjectingMultipart(self, uploads)
        if capability == caps.BLOCKLIST_DELAYED_COMPLETION:
            blocks = required(self.inner.block_lists(), self.inner, capability, "FaultInjectingStore")
            return _FaultInjectingBlockLists(self, blocks, "blocklist")
        return self


#: The optional operations, each reached on the inner store through its accessor: a store
#: may implement an interface on another object (``Store.implementation``), and its own
#: class's method of the same name is then not the one it declared.
_OPTIONAL_ACCESSORS = {"create_exclusive": "exclusive_create", "delete_many": "batch_delete",
                       "write_with_metadata": "object_metadata"}


def _target(inner: Store, operation: str) -> Callable[..., Any]:
    accessor = _OPTIONAL_ACCESSORS.get(operation)
    offered = getattr(inner, accessor)() if accessor else inner
    if offered is None:  # not declared: this wrapper does not offer it either
        raise AttributeError(f"{inner!r} does not offer {operation}")
    return getattr(offered, operation)  # type: ignore[no-any-return]


def _delegate(operation: str) -> Callable[..., Any]:
    def method(self: FaultInjectingStore, *args: Any, **kwargs: Any) -> Any:
        return self.call(operation, _target(self.inner, operation), *args, **kwargs)

    method.__name__ = operation
    return method


for _op in STORE_OPERATIONS:
    setattr(FaultInjectingStore, _op, _delegate(_op))


class _FaultInjectingMultipart(MultipartUploads):
    """Operations named ``<prefix>.<method>``: ``multipart.complete``, ``blocklist.complete``."""

    def __init__(self, owner: FaultInjectingStore, inner: MultipartUploads,
                 prefix: str = "multipart") -> None:
        self.owner = owner
        self.inner = inner
        self.prefix = prefix
        self.part_size = inner.part_size
        self.max_parts, self.max_part_size = inner.max_parts, inner.max_part_size
        self.max_object_size = inner.max_object_size
        self.abortable = inner.abortable

    def holds(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        return self.inner.holds(path, upload_id, etags)

    def pending_unlisted(self, path: str, upload_id: str, etags: Sequence[str]) -> bool:
        return self.inner.pending_unlisted(path, upload_id, etags)

    def check_parts(self, upload_id: str, etags: Sequence[str]) -> None:
        self.inner.check_parts(upload_id, etags)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def initiate(self, path: str) -> str:
        return self.owner.call(f"{self.prefix}.initiate", self.inner.initiate, path)  # type: ignore[no-any-return]

    def upload_part(self, path: str, upload_id: str, part_number: int, data: bytes) -> str:
        return self.owner.call(f"{self.prefix}.upload_part", self.inner.upload_part,  # type: ignore[no-any-return]
                               path, upload_id, part_number, data)

    def complete(self, path: str, upload_id: str, etags: Sequence[str],
                 if_none_match: bool = False) -> str:
        return self.owner.call(f"{self.prefix}.complete", self.inner.complete,  # type: ignore[no-any-return]
                               path, upload_id, etags, if_none_match=if_none_match)

    def abort(self, path: str, upload_id: str) -> bool:
        return self.owner.call(f"{self.prefix}.abort", self.inner.abort, path, upload_id)  # type: ignore[no-any-return]

    def list_pending(self, directory: str) -> list[PendingUpload]:
        return self.owner.call(f"{self.prefix}.list_pending", self.inner.list_pending, directory)  # type: ignore[no-any-return]


class _FaultInjectingBlockLists(_FaultInjectingMultipart, BlockLists):
    """Block lists, faults named ``blocklist.<method>``."""
