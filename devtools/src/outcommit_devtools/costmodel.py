"""A store cost model: exact request counts, priced in *virtual* time.

Wall time on an emulator says little about a real store (moto spends ~11 ms of CPU per
completion on one GIL-bound server, so parallelism barely shows and a copy looks as cheap
as a completion). Here every operation really runs against the emulator or memory, and is
also *charged* a modelled cost on a virtual clock:

    cost = request_latency + client_cpu_per_request + upload/upload_bandwidth
           + download/download_bandwidth + copied/copy_bandwidth

Each thread has its own virtual clock. While a :meth:`Meter.measure` block runs, work
submitted to a ``concurrent.futures.ThreadPoolExecutor`` is list-scheduled onto that
executor's ``max_workers`` virtual workers (at most ``connections`` of them: a request
needs a pooled connection), in submit order, and the caller's clock advances to a task's
virtual end when it takes the result (``result()``, ``map``, ``shutdown(wait=True)``).
Scheduling is incremental: each task is placed once, with a heap of worker end times,
so a phase of N tasks costs O(N log workers) to model (100,000 completions in seconds).

Three resources bound a phase, and the model takes the binding one:

* latency and parallelism: the virtual clocks above;
* the client's CPU: a request costs ``client_cpu_per_request`` of CPU (botocore builds,
  signs and parses it), and one Python process runs one thread at a time (the GIL), so
  the requests of an executor also queue on ``client_cores`` CPU lanes. A task ends no
  earlier than its CPU could be done; the phase no earlier than all its requests' CPU
  divided by ``client_cores``;
* the store's request-rate limit per prefix (S3: 3,500 writes and 5,500 reads per second
  per prefix); the prefix is the bucket plus the first key component, an approximation of
  S3's partitioning.

Two ways to meter:

* :func:`attach_botocore` registers event hooks on a boto3/botocore client: one charge per
  HTTP request *attempt* (a retried request is charged again), named by S3 operation, with
  bytes from the request/response (CopyObject's source size through ``size_of``).
* :class:`MeteredStore` wraps any :class:`~outcommit.store.Store`: one charge per request
  the store call makes where that is known (a recursive delete: its listing and one
  request per batch), priced with the same model; for stores whose SDK has no hooks
  (``rename_copies`` prices a rename as a server-side copy of the file's bytes).

Parameters are explicit; :meth:`CostModel.describe` prints them with the results, and
:func:`measure_client_cpu` measures the client CPU per request against a server running in
another process (its CPU is not the client's).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from outcommit import capabilities as caps
from outcommit.capabilities import Capabilities
from outcommit.multipart import MultipartUploads, PendingUpload
from outcommit.store import FileInfo, Store
from outcommit.storeoptional import required

MB = 1_000_000


@dataclass(frozen=True)
class CostModel:
    """Prices of store operations. Defaults: S3 as measured in the zero-rename paper."""

    name: str = "s3"
    #: Fixed cost of every request (round trip + service time), seconds.
    request_latency: float = 0.030
    #: Client CPU of one request (serialise, sign, send, parse), seconds. 0 leaves it out;
    #: benchmarks measure it (:func:`measure_client_cpu`) and print it.
    client_cpu_per_request: float = 0.0
    #: CPU lanes for that work: one Python process runs one thread at a time (the GIL).
    client_cores: int = 1
    #: Requests in flight at most (the HTTP connection pool); 0: as many as threads.
    connections: int = 0
    #: Client -> store bytes per second, per connection (PUT, UploadPart).
    upload_bandwidth: float = 100 * MB
    #: Store -> client bytes per second, per connection (GET).
    download_bandwidth: float = 100 * MB
    #: Server-side copy bytes per second (CopyObject, UploadPartCopy; the paper: 6-10 MB/s).
    copy_bandwidth: float = 8 * MB
    #: Request-rate limits per prefix (S3 documents 3,500 PUT/COPY/POST/DELETE, 5,500 GET/HEAD).
    write_requests_per_prefix: float = 3500.0
    read_requests_per_prefix: float = 5500.0
    #: MeteredStore only: a rename copies the data server-side (S3, GCS) rather than O(1) (ABFS).
    rename_copies: bool = True

    def price(self, upload: int = 0, download: int = 0, copied: int = 0) -> float:
        return (self.request_latency + self.client_cpu_per_request + upload / self.upload_bandwidth
                + download / self.download_bandwidth + copied / self.copy_bandwidth)

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    def connection_bound(self, requests: int, serial: int = 0) -> float:
        """The least time ``requests`` independent requests need on ``connections``
        connections (latency only), plus ``serial`` requests that must follow them."""
        if self.connections <= 0:
            raise ValueError("connection_bound needs a model with connections > 0")
        return requests * self.request_latency / self.connections + serial * self.request_latency

    def cpu_bound(self, requests: int) -> float:
        """The least time the client's CPU needs for ``requests`` requests."""
        return requests * self.client_cpu_per_request / max(1, self.client_cores)


# S3 operations that write (rate-limited at 3,500/s per prefix); everything else reads.
_WRITES = {"PutObject", "CopyObject", "UploadPart", "UploadPartCopy", "CreateMultipartUpload",
           "CompleteMultipartUpload", "AbortMultipartUpload", "DeleteObject", "DeleteObjects",
           "write_bytes", "write_atomic", "create_exclusive", "save_json", "rename_file",
           "rename_dir", "delete", "delete_many", "write_with_metadata", "multipart.initiate",
           "multipart.upload_part",
           "multipart.complete", "multipart.abort"}
_LISTINGS = {"ListObjectsV2", "ListObjects", "ListMultipartUploads", "ListParts", "list_dir",
             "list_files", "multipart.list_pending"}


@dataclass(eq=False)
class _Task:
    index: int
    submitted_at: float
    future: Future[Any] | None = None
    cost: float = 0.0
    cpu: float = 0.0
    end: float | None = None


class _Schedule:
    """List scheduling of one executor's tasks onto its virtual workers, in submit order.

    Incremental: tasks are placed once each, in submit order, as their results are taken;
    ``free`` holds the end times of the busy workers (a heap), ``cpu_free`` when the
    client's CPU lanes are next free. A placed task drops its future (memory stays
    proportional to the tasks not yet placed, not to all tasks ever submitted).
    """

    def __init__(self, workers: int, cores: int) -> None:
        self.workers = max(1, workers)
        self.cores = max(1, cores)
        self.tasks: list[_Task | None] = []
        self.free: list[float] = []
        self.cpu_free = 0.0
        self.computed = 0
        self.latest = 0.0
        self.lock = threading.Lock()

    def add(self, submitted_at: float) -> _Task:
        with self.lock:
            task = _Task(index=len(self.tasks), submitted_at=submitted_at)
            self.tasks.append(task)
            return task

    def _place(self, task: _Task) -> None:
        if len(self.free) < self.workers:
            start = task.submitted_at
        else:
            start = max(task.submitted_at, heapq.heappop(self.free))
        task.end = start + task.cost
        if task.cpu > 0:
            # The task's requests need the CPU too; one lane per core, shared by all workers.
            self.cpu_free = max(self.cpu_free, start) + task.cpu / self.cores
            task.end = max(task.end, self.cpu_free)
        heapq.heappush(self.free, task.end)
        self.latest = max(self.latest, task.end)

    def end_of(self, target: _Task | None) -> float:
        """Virtual end of ``target`` (None: of every task), waiting for earlier tasks to run."""
        with self.lock:
            upto = len(self.tasks) if target is None else target.index + 1
            earlier = [t.future for t in self.tasks[self.computed:upto]
                       if t is not None and t.future is not None]
        wait_futures(earlier)  # outside the lock: a running task may still submit more
        with self.lock:
            while self.computed < upto:
                task = self.tasks[self.computed]
                assert task is not None
                self._place(task)
                task.future = None
                self.tasks[self.computed] = None
                self.computed += 1
            if target is not None:
                return target.end or 0.0
            return self.latest


_ACTIVE: Meter | None = None
_PATCH_LOCK = threading.Lock()
_ORIGINAL_SUBMIT = ThreadPoolExecutor.submit
_ORIGINAL_SHUTDOWN = ThreadPoolExecutor.shutdown
_ORIGINAL_RESULT = Future.result


def _submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
    meter = _ACTIVE
    if meter is None:
        return _ORIGINAL_SUBMIT(self, fn, *args, **kwargs)
    schedule = self.__dict__.get("_outcommit_schedule")
    if schedule is None:
        workers = self._max_workers
        if meter.model.connections > 0:
            workers = min(workers, meter.model.connections)
        schedule = self.__dict__.setdefault("_outcommit_schedule",
                                            _Schedule(workers, meter.model.client_cores))
    task = schedule.add(meter.now())

    def run() -> Any:
        saved, saved_cpu = meter.now(), meter.cpu()
        meter._set(0.0, 0.0)
        try:
            return fn(*args, **kwargs)
        finally:
            task.cost, task.cpu = meter.now(), meter.cpu()
            meter._set(saved, saved_cpu)

    with schedule.lock:
        future = _ORIGINAL_SUBMIT(self, run)
        task.future = future
    future._outcommit = (schedule, task, meter)  # type: ignore[attr-defined]
    return future


def _result(self: Future[Any], timeout: float | None = None) -> Any:
    try:
        return _ORIGINAL_RESULT(self, timeout)
    finally:
        info = getattr(self, "_outcommit", None)
        if info is not None and self.done():
            schedule, task, meter = info
            meter._advance_to(schedule.end_of(task))


def _shutdown(self: ThreadPoolExecutor, wait: bool = True, **kwargs: Any) -> None:
    _ORIGINAL_SHUTDOWN(self, wait, **kwargs)
    schedule = self.__dict__.get("_outcommit_schedule")
    if wait and schedule is not None and _ACTIVE is not None and schedule.tasks:
        _ACTIVE._advance_to(schedule.end_of(None))


class Meter:
    """Counts and prices operations; keeps the virtual clocks of a measured phase."""

    def __init__(self, model: CostModel | None = None) -> None:
        self.model = model or CostModel()
        self._lock = threading.Lock()
        self._local = threading.local()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.requests: Counter[str] = Counter()
            self.bytes_uploaded = 0
            self.bytes_downloaded = 0
            self.bytes_copied = 0
            self.listings = 0
            self.prefix_writes: Counter[str] = Counter()
            self.prefix_reads: Counter[str] = Counter()
            self.modelled_seconds = 0.0
            self.wall_seconds = 0.0
        self._set(0.0, 0.0)

    # -- virtual clock ---------------------------------------------------------------------------
    def now(self) -> float:
        return float(getattr(self._local, "now", 0.0))

    def cpu(self) -> float:
        """Client CPU charged by this thread (since its task began)."""
        return float(getattr(self._local, "cpu", 0.0))

    def _set(self, value: float, cpu: float | None = None) -> None:
        self._local.now = value
        if cpu is not None:
            self._local.cpu = cpu

    def _advance_to(self, value: float) -> None:
        self._set(max(self.now(), value))

    # -- charging ----------------------------------------------------------------------------------
    def charge(self, operation: str, *, upload: int = 0, download: int = 0, copied: int = 0,
               prefix: str = "", objects: Mapping[str, int] | None = None) -> float:
        """Count one request of ``operation`` and advance this thread's clock by its price.

        ``objects``: the objects it acts on, by prefix, each counted against its prefix's
        request rate (S3 counts each key of a DeleteObjects as one write); by default one,
        under ``prefix``."""
        cost = self.model.price(upload, download, copied)
        with self._lock:
            self.requests[operation] += 1
            self.bytes_uploaded += upload
            self.bytes_downloaded += download
            self.bytes_copied += copied
            if operation in _LISTINGS:
                self.listings += 1
            (self.prefix_writes if operation in _WRITES else self.prefix_reads).update(
                objects if objects is not None else {prefix: 1})
        self._set(self.now() + cost, self.cpu() + self.model.client_cpu_per_request)
        return cost

    def charge_bytes(self, *, download: int = 0) -> None:
        """Bytes of a request already charged (a GET's body, known once it answered)."""
        with self._lock:
            self.bytes_downloaded += download
        self._set(self.now() + download / self.model.download_bandwidth)

    def rate_bound(self) -> float:
        """The least time the counted requests need under the per-prefix rate limits."""
        writes = max(self.prefix_writes.values(), default=0) / self.model.write_requests_per_prefix
        reads = max(self.prefix_reads.values(), default=0) / self.model.read_requests_per_prefix
        return max(writes, reads)

    def cpu_bound(self) -> float:
        """The least time the client's CPU needs for every counted request."""
        return self.model.cpu_bound(self.total_requests)

    @contextmanager
    def measure(self) -> Iterator[Meter]:
        """Meter a phase run by the calling thread; sets ``modelled_seconds``/``wall_seconds``."""
        global _ACTIVE
        with _PATCH_LOCK:
            if _ACTIVE is not None:
                raise RuntimeError("only one Meter can measure at a time")
            self.reset()
            _ACTIVE = self
            ThreadPoolExecutor.submit = _submit  # type: ignore[method-assign,assignment]
            ThreadPoolExecutor.shutdown = _shutdown  # type: ignore[method-assign,assignment]
            Future.result = _result  # type: ignore[method-assign]
        started = time.perf_counter()
        try:
            yield self
        finally:
            self.wall_seconds = time.perf_counter() - started
            with _PATCH_LOCK:
                ThreadPoolExecutor.submit = _ORIGINAL_SUBMIT  # type: ignore[method-assign]
                ThreadPoolExecutor.shutdown = _ORIGINAL_SHUTDOWN  # type: ignore[method-assign]
                Future.result = _ORIGINAL_RESULT  # type: ignore[method-assign]
                _ACTIVE = None
            self.modelled_seconds = max(self.now(), self.rate_bound(), self.cpu_bound())

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def summary(self) -> dict[str, Any]:
        return {"requests": dict(sorted(self.requests.items())), "total_requests": self.total_requests,
                "bytes_uploaded": self.bytes_uploaded, "bytes_downloaded": self.bytes_downloaded,
                "bytes_copied": self.bytes_copied, "listings": self.listings,
                "modelled_seconds": self.modelled_seconds, "wall_seconds": self.wall_seconds}


# -- botocore clients: one charge per HTTP request ------------------------------------------------------
def _body_size(body: Any) -> int:
    if body is None:
        return 0
    if isinstance(body, (bytes, bytearray, memoryview)):
        return len(body)
    if isinstance(body, str):
        return len(body.encode())
    try:
        here = int(body.tell())
        body.seek(0, 2)
        size = int(body.tell()) - here
        body.seek(here)
        return size
    except (AttributeError, OSError):
        return 0


def _path_prefix(path: str) -> str:
    return "/".join(path.strip("/").split("/")[:2])


def _prefix(bucket: str, key: str) -> str:
    return f"{bucket}/{key.split('/', 1)[0]}" if key else bucket


def attach_botocore(client: Any, meter: Meter,
                    size_of: Callable[[str, str], int] | None = None) -> Callable[[], None]:
    """Meter every HTTP request of a boto3/botocore S3 client; returns a function that detaches.

    Charged per attempt (botocore's ``needs-retry`` event follows every attempt, the last
    one included), so a retried request costs what it cost, and an error answer (404,
    412) costs a request too. ``size_of(bucket, key)`` gives a CopyObject source's size
    (e.g. a HEAD through another, unmetered client); without it copies are priced as zero
    bytes.
    """
    def before(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        operation = model.name
        bucket, key = str(params.get("Bucket", "")), str(params.get("Key", ""))
        copied = 0
        if operation in ("CopyObject", "UploadPartCopy") and size_of is not None:
            source: Any = params.get("CopySource")
            if isinstance(source, dict):
                copied = size_of(str(source["Bucket"]), str(source["Key"]))
            elif isinstance(source, str):
                sb, _sep, sk = source.lstrip("/").partition("/")
                copied = size_of(sb, sk.split("?", 1)[0])
        objects = None
        if operation == "DeleteObjects":
            keys = [str(o.get("Key", "")) for o in (params.get("Delete") or {}).get("Objects") or ()]
            objects = Counter(_prefix(bucket, k) for k in keys)
        context["outcommit.cost"] = {"operation": operation, "upload": _body_size(params.get("Body")),
                                     "copied": copied, "objects": objects,
                                     "prefix": _prefix(bucket, key or str(params.get("Prefix", "")))}

    def attempt(request_dict: dict[str, Any], response: Any = None, **_: Any) -> None:
        pending = (request_dict.get("context") or {}).get("outcommit.cost")
        if pending is None:
            return None
        download = 0
        if pending["operation"] == "GetObject" and isinstance(response, tuple):
            parsed = response[1]
            if isinstance(parsed, dict):
                download = int(parsed.get("ContentLength") or 0)
        meter.charge(pending["operation"], upload=pending["upload"], download=download,
                     copied=pending["copied"], prefix=pending["prefix"], objects=pending["objects"])
        return None  # never a retry decision: botocore's own handlers make that

    def light_attempt(operation: str, params: dict[str, Any], status: int) -> None:
        meter.charge(operation, prefix=_prefix(str(params.get("Bucket", "")), str(params.get("Key", ""))))

    events = client.meta.events
    events.register("before-parameter-build.s3", before, unique_id=f"outcommit-cost-b-{id(meter)}")
    events.register("needs-retry.s3", attempt, unique_id=f"outcommit-cost-a-{id(meter)}")
    # The store's light CompleteMultipartUpload path (outcommit.s3.light-requests) fires
    # neither event: without its own hook, every light completion went uncharged.
    light = getattr(client, "light", None)
    if light is not None:
        light.after_attempt.append(light_attempt)

    def detach() -> None:
        events.unregister("before-parameter-build.s3", unique_id=f"outcommit-cost-b-{id(meter)}")
        events.unregister("needs-retry.s3", unique_id=f"outcommit-cost-a-{id(meter)}")
        if light is not None:
            light.after_attempt.remove(light_attempt)

    return detach


def metered_job_commit(committer: Any, job: Any, messages: Sequence[Mapping[str, Any]] | None,
                       model: CostModel, size_of: Callable[[str, str], int] | None = None) -> Meter:
    """``committer.commit_job(job, messages)`` with every request of the committer's S3
    client metered and priced by ``model`` (:func:`attach_botocore`)."""
    meter = Meter(model)
    detach = attach_botocore(committer.store.client, meter, size_of)
    try:
        with meter.measure():
            committer.commit_job(job, messages)
    finally:
        detach()
    return meter


def measure_client_cpu(client: Any, bucket: str, requests: int = 200, threads: int = 1) -> float:
    """Client CPU seconds per S3 request of ``client`` on this machine (CompleteMultipartUpload).

    The server must run in *another process* (``time.process_time`` counts this process
    only, so its CPU is not counted). ``requests`` uploads of one small part are prepared
    untimed; then their completions are timed, ``threads`` at a time: process CPU time
    divided by requests. Completion is what a job commit sends most.
    """
    prepared = []
    for index in range(requests):
        key = f"__outcommit-cpu-probe/{index}"
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1,
                                  Body=b"x" * 64)["ETag"]
        prepared.append((key, upload, etag))

    def complete(item: tuple[str, str, str]) -> None:
        key, upload, etag = item
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})

    started = time.process_time()
    if threads <= 1:
        for item in prepared:
            complete(item)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(complete, prepared))
    cpu = time.process_time() - started
    for start in range(0, len(prepared), 1000):
        client.delete_objects(Bucket=bucket, Delete={
            "Objects": [{"Key": k} for k, _, _ in prepared[start:start + 1000]], "Quiet": True})
    return cpu / requests


# -- any store: one charge per store call ------------------------------------------------------------------
class MeteredStore(Store):
    """Delegates to ``inner`` and charges each store and multipart call to ``meter``.

    Counts are per *store call* where a call is one request, and per request where a call
    is known to make several: a recursive delete is its listing plus one request per
    1,000 files (batch delete) or per file; a copying ``rename_dir`` its listing plus one
    copy per file. A paged listing is one call; use :func:`attach_botocore` where the SDK
    has hooks and HTTP-level counts matter.
    """

    def __init__(self, inner: Store, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

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
    def default_committer(self) -> str:  # type: ignore[override]
        return self.inner.default_committer

    @property
    def iostatistics(self) -> Any:  # type: ignore[override]
        return self.inner.iostatistics

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def strip(self, url: str) -> str:
        return self.inner.strip(url)

    def url(self, path: str) -> str:
        return self.inner.url(path)

    def _charge(self, operation: str, path: str, upload: int = 0, download: int = 0,
                copied: int = 0) -> None:
        self.meter.charge(operation, prefix=_path_prefix(path), upload=upload, download=download,
                          copied=copied)

    def _charge_keys(self, operation: str, paths: Sequence[str]) -> None:
        """One request acting on ``paths``: each a write against its own prefix."""
        self.meter.charge(operation, prefix=_path_prefix(paths[0]),
                          objects=Counter(_path_prefix(p) for p in paths))

    def info(self, path: str) -> FileInfo | None:
        self._charge("info", path)
        return self.inner.info(path)

    def modified(self, path: str) -> datetime | None:
        self._charge("info", path)  # a HEAD, as info
        return self.inner.modified(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        self._charge("list_dir", path)
        return self.inner.list_dir(path)

    def list_files(self, path: str) -> list[FileInfo]:
        self._charge("list_files", path)
        return self.inner.list_files(path)

    def read_bytes(self, path: str) -> bytes:
        data = self.inner.read_bytes(path)
        self._charge("read_bytes", path, download=len(data))
        return data

    def write_bytes(self, path: str, data: bytes) -> None:
        self._charge("write_bytes", path, upload=len(data))
        self.inner.write_bytes(path, data)

    def write_atomic(self, path: str, data: bytes) -> None:
        self._charge("write_atomic", path, upload=len(data))
        self.inner.write_atomic(path, data)

    def create_exclusive(self, path: str, data: bytes) -> None:
        self._charge("create_exclusive", path, upload=len(data))
        required(self.inner.exclusive_create(), self.inner, caps.CREATE_EXCLUSIVE,
                 "MeteredStore").create_exclusive(path, data)

    def save_json(self, path: str, data: Any) -> None:
        import json

        self._charge("save_json", path, upload=len(json.dumps(data)))
        self.inner.save_json(path, data)

    def load_json(self, path: str, max_bytes: int = 256 * 1024 * 1024) -> Any:
        self._charge("load_json", path)
        return self.inner.load_json(path, max_bytes)

    def mkdirs(self, path: str) -> None:
        self.inner.mkdirs(path)  # free: no request on object stores; cheap elsewhere

    def delete(self, path: str, recursive: bool = False) -> None:
        if not recursive:
            self._charge("delete", path)
        else:
            files = self.inner.list_files(path)  # what the store's own listing will find
            self._charge("list_files", path)
            if self.inner.batch_delete() is not None:
                keys = [path, path + "/", *(f.path for f in files)]  # what S3Store.delete sends
                for start in range(0, len(keys), 1000):
                    self._charge_keys("delete_many", keys[start:start + 1000])
            else:
                for _ in range(max(len(files), 1)):
                    self._charge("delete", path)
        self.inner.delete(path, recursive)

    def delete_empty_dir(self, path: str) -> None:
        self._charge("delete", path)
        self.inner.delete_empty_dir(path)

    def delete_many(self, paths: Sequence[str]) -> None:
        """Charged per batch: one request deletes up to 1,000 files (S3 DeleteObjects)."""
        batch = required(self.inner.batch_delete(), self.inner, caps.DELETE_BATCH, "MeteredStore")
        for start in range(0, len(paths), 1000):
            self._charge_keys("delete_many", paths[start:start + 1000])
        batch.delete_many(paths)

    def write_with_metadata(self, path: str, data: bytes, metadata: Mapping[str, str]) -> None:
        with_metadata = required(self.inner.object_metadata(), self.inner, caps.OBJECT_METADATA,
                                 "MeteredStore")
        self._charge("write_with_metadata", path, upload=len(data))
        with_metadata.write_with_metadata(path, data, metadata)

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        status = self.inner.info(src) if self.meter.model.rename_copies else None
        self._charge("rename_file", src, copied=status.size if status else 0)
        self.inner.rename_file(src, dst, overwrite)

    def rename_dir(self, src: str, dst: str) -> None:
        if self.meter.model.rename_copies:
            self._charge("list_files", src)
            for f in self.inner.list_files(src):  # one copy request per file
                self._charge("rename_file", f.path, copied=f.size)
        else:
            self._charge("rename_dir", src)
        self.inner.rename_dir(src, dst)

    def implementation(self, capability: str) -> object:
        """The inner store's uploads, each call charged; every other interface is this
        store's own metered methods (asked only for what the inner store declares)."""
        if capability == caps.MULTIPART_DELAYED_COMPLETION:
            return _MeteredMultipart(self, required(self.inner.multipart(), self.inner, capability,
                                                    "MeteredStore"))
        return self


class _MeteredMultipart(MultipartUploads):
    def __init__(self, owner: MeteredStore, inner: MultipartUploads) -> None:
        self.owner = owner
        self.inner = inner
        self.part_size = inner.part_size

    def initiate(self, path: str) -> str:
        self.owner._charge("multipart.initiate", path)
        return self.inner.initiate(path)

    def upload_part(self, path: str, upload_id: str, part_number: int, data: bytes) -> str:
        self.owner._charge("multipart.upload_part", path, upload=len(data))
        return self.inner.upload_part(path, upload_id, part_number, data)

    def complete(self, path: str, upload_id: str, etags: Sequence[str],
                 if_none_match: bool = False) -> str:
        self.owner._charge("multipart.complete", path)
        return self.inner.complete(path, upload_id, etags, if_none_match)

    def abort(self, path: str, upload_id: str) -> bool:
        self.owner._charge("multipart.abort", path)
        return self.inner.abort(path, upload_id)

    def list_pending(self, directory: str) -> list[PendingUpload]:
        self.owner._charge("multipart.list_pending", directory)
        return self.inner.list_pending(directory)


__all__ = ["CostModel", "Meter", "MeteredStore", "attach_botocore", "measure_client_cpu"]
