"""The magic filesystem as writers use it, and attempts that outlive their job."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from s3_helpers import outcome, start

import outcommit
from outcommit.errors import TaskCommitError
from outcommit.testing.conformance import leftovers, visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore

pytestmark = pytest.mark.s3

MiB = 1024 * 1024
NO_SWEEP = {"outcommit.s3.abort-pending-uploads": "false"}
# Every writer saves .pending files (writers in several processes): liveness checked per file.
PENDING_FILES = {"outcommit.magic.track-commits-in-memory": "false"}


@pytest.fixture
def config(s3_config):
    return {**s3_config, "outcommit.committer.unique-filenames": "false", **NO_SWEEP}


def task_fs(committer, job, index=0, attempt=0):
    task = job.task_attempt(index, attempt)
    committer.setup_task(task)
    return task, committer.filesystem(task), committer.work_path(task)


def test_rm_of_magic_files_aborts_their_uploads(config, s3_root):
    url = f"{s3_root}/rm"
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job)
    for rel in ("a.txt", "b.txt", "d/x.txt", "d/y.txt"):
        fs.pipe_file(f"{base}/{rel}", rel.encode())
    fs.rm(f"{base}/a.txt")
    fs.rm(f"{base}/d", recursive=True)
    committer.commit_job(job, [committer.commit_task(task)])
    assert outcome(url, config) == ({"b.txt": b"b.txt"}, [])


def test_writing_one_path_twice_keeps_the_last_and_leaks_nothing(config, s3_root):
    url = f"{s3_root}/twice"
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job)
    with fs.open(f"{base}/a.txt", "wb") as f:
        f.write(b"first")
    with fs.open(f"{base}/a.txt", "wb") as f:
        f.write(b"second")
    committer.commit_job(job, [committer.commit_task(task)])
    assert outcome(url, config) == ({"a.txt": b"second"}, [])


@pytest.mark.parametrize("target", [
    "{dest}/direct.txt",                  # straight into the destination: visible at once
    "{base}/../x.txt",                    # '..' in the relative path
    "{base}//x.txt",
    "{other}/x.txt",                      # another attempt's work path
    "{base}/sub/__magic/y/__base/z.txt",  # maps into a magic area
    "{base}/x.pending",                   # collides with the committer's own files
    "{base}/_SUCCESS",
])
def test_writes_that_bypass_the_protocol_are_refused(target, config, s3_root):
    url = f"{s3_root}/refuse"
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job)
    other = committer.work_path(job.task_attempt(0, 1))
    path = target.format(dest=committer.dest, base=base, other=other)
    with pytest.raises(ValueError), fs.open(path, "wb") as f:
        f.write(b"x")
    with pytest.raises(ValueError):
        fs.pipe_file(path, b"x")
    assert not committer.needs_task_commit(task)
    committer.abort_job(job)
    assert outcome(url, config) == ({}, [])


def test_an_unclosed_file_is_discarded_not_saved(config, s3_root):
    url = f"{s3_root}/unclosed"
    committer, job = start(url, config, **{"outcommit.s3.multipart.part-size": str(5 * MiB)})
    task, fs, base = task_fs(committer, job)
    f = fs.open(f"{base}/partial.bin", "wb")
    f.write(b"p" * (5 * MiB + 1))  # one part uploaded: the upload exists
    store = outcommit.open_store(url, config)
    assert len(store.multipart().list_pending(store.strip(url))) == 1
    del f
    gc.collect()
    assert not committer.needs_task_commit(task)
    assert store.multipart().list_pending(store.strip(url)) == []
    committer.cleanup_job(job)


def test_files_at_and_around_the_part_size(config, s3_root):
    url = f"{s3_root}/parts"
    committer, job = start(url, config, **{"outcommit.s3.multipart.part-size": str(5 * MiB)})
    task, fs, base = task_fs(committer, job)
    sizes = {"one.bin": 5 * MiB, "two.bin": 10 * MiB, "three.bin": 10 * MiB + 1}
    data = {name: bytes([i + 1]) * size for i, (name, size) in enumerate(sizes.items())}
    for name, payload in data.items():
        with fs.open(f"{base}/{name}", "wb") as f:
            for start_at in range(0, len(payload), 3 * MiB):  # writes that straddle parts
                f.write(payload[start_at:start_at + 3 * MiB])
    message = committer.commit_task(task)
    parts = {c["destinationKey"].rsplit("/", 1)[1]: len(c["etags"]) for c in message["commits"]}
    assert parts == {"one.bin": 1, "two.bin": 2, "three.bin": 3}
    committer.commit_job(job, [message])
    assert outcome(url, config) == (data, [])


class InFlight:
    """The most requests of one S3 operation in flight at once, from botocore's hooks of a
    real client; ``meet`` makes that many of them wait for each other first (the test fails,
    rather than hangs, when fewer can be in flight together)."""

    def __init__(self, client: Any, operation: str, meet: int = 0) -> None:
        self.client, self.operation, self.now, self.most = client, operation, 0, 0
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(meet, timeout=60) if meet else None

    def before(self, model: Any, **_: Any) -> None:
        if model.name == self.operation:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            if self.barrier is not None:
                self.barrier.wait()

    def after(self, model: Any, **_: Any) -> None:
        if model.name == self.operation:
            with self.lock:
                self.now -= 1

    def __enter__(self) -> InFlight:
        self.client.meta.events.register("before-call.s3", self.before)
        self.client.meta.events.register("after-call.s3", self.after)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.meta.events.unregister("before-call.s3", self.before)
        self.client.meta.events.unregister("after-call.s3", self.after)


@pytest.mark.parametrize("operation", ["CreateMultipartUpload", "UploadPart"])
def test_a_tasks_small_files_start_and_finish_all_at_once(operation, config, s3_root):
    # Eight small files, twice the attempt's 4 parts' worth of memory: their uploads start
    # (at open) and their only parts go (at close) together, as write_dataset's would, not
    # four at a time. Each request waits here until all eight are in flight.
    url = f"{s3_root}/at-once-{operation}"
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job)
    data = {f"d={i}/part.bin": bytes([65 + i]) * 1000 for i in range(8)}
    with InFlight(committer.store.client, operation, meet=len(data)) as seen:
        files = [fs.open(f"{base}/{name}", "wb") for name in data]
        for f, payload in zip(files, data.values(), strict=True):
            f.write(payload)
        for f in files:
            f.close()
        message = committer.commit_task(task)
    assert seen.most == len(data)
    committer.commit_job(job, [message])
    assert outcome(url, config) == (data, [])


@pytest.mark.parametrize("threads", [1, 2])
def test_parts_in_flight_never_hold_more_than_the_upload_threads_parts(threads, config, s3_root):
    url = f"{s3_root}/bounded-{threads}"
    committer, job = start(url, config, **{"outcommit.s3.multipart.part-size": str(5 * MiB),
                                           "outcommit.magic.upload-threads": str(threads)})
    task, fs, base = task_fs(committer, job)
    data = {f"{name}.bin": bytes([i + 1]) * (15 * MiB) for i, name in enumerate("ab")}
    with InFlight(committer.store.client, "UploadPart") as seen:
        files = [fs.open(f"{base}/{name}", "wb") for name in data]
        for at in range(0, 15 * MiB, 5 * MiB):  # both writers go on while parts are in flight
            for f, payload in zip(files, data.values(), strict=True):
                f.write(payload[at:at + 5 * MiB])
        for f in files:
            f.close()
        message = committer.commit_task(task)
    assert 1 <= seen.most <= threads
    committer.commit_job(job, [message])
    assert outcome(url, config) == (data, [])


def test_a_straggler_closing_after_job_commit_leaves_nothing(config, s3_root):
    url = f"{s3_root}/straggler"
    config = {**config, **PENDING_FILES}
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job, 0)
    fs.pipe_file(f"{base}/a.txt", b"a")
    message = committer.commit_task(task)
    _, late_fs, late_base = task_fs(committer, job, 0, attempt=1)  # speculative copy
    late = late_fs.open(f"{late_base}/a.txt", "wb")
    late.write(b"late")
    committer.commit_job(job, [message])
    with pytest.raises(TaskCommitError):
        late.close()
    assert outcome(url, config) == ({"a.txt": b"a"}, [])
    assert [c.name for c in committer.store.list_dir(committer.dest) if c.is_dir] == []


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_a_task_commit_racing_job_commit_leaves_no_job_directory(name, config, s3_root):
    url = f"{s3_root}/race"
    driver, job = start(url, config, name)
    task, fs, base = task_fs(driver, job, 0)
    fs.pipe_file(f"{base}/a.txt", b"a")
    message = driver.commit_task(task)

    late = job.task_attempt(1)

    def commit_the_job_first(operation, args):  # the driver wins the race, then publishing goes on
        driver.commit_job(job, [message])
        return False

    store = FaultInjectingStore(outcommit.open_store(url, config), [
        Fault("create_exclusive", path_contains=f"{late.attempt_id}.pendingset",
              predicate=commit_the_job_first)])
    worker = outcommit.create_committer(url, config, name, store=store)
    worker.setup_task(late)
    worker_fs, worker_base = worker.filesystem(late), worker.work_path(late)
    worker_fs.pipe_file(f"{worker_base}/b.txt", b"b")
    with pytest.raises(TaskCommitError):
        worker.commit_task(late)
    assert outcome(url, config) == ({"a.txt": b"a"}, [])
    # No stray job directory: it would switch the next jobs' pending-upload sweep off.
    assert [c.name for c in driver.store.list_dir(driver.dest) if c.is_dir] == []


def test_pyarrow_write_dataset_with_partitions_through_the_magic_filesystem(config, s3_root):
    pa = pytest.importorskip("pyarrow")
    ds = pytest.importorskip("pyarrow.dataset")
    url = f"{s3_root}/dataset"
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job)
    table = pa.table({"p": [1, 1, 2], "v": ["a", "b", "c"]})
    ds.write_dataset(table, base, filesystem=fs, format="parquet", partitioning=["p"],
                     existing_data_behavior="delete_matching", basename_template="part-{i}.parquet")
    committer.commit_job(job, [committer.commit_task(task)])
    store = outcommit.open_store(url, config)
    assert set(visible_files(store, store.strip(url))) == {"1/part-0.parquet", "2/part-0.parquet"}
    back = ds.dataset(store.strip(url), filesystem=store.fs, format="parquet", partitioning=["p"])
    assert sorted(back.to_table().column("v").to_pylist()) == ["a", "b", "c"]
    assert leftovers(store, store.strip(url)) == []


def test_a_straggler_closing_while_the_job_is_torn_down_leaves_nothing(config, s3_root):
    """The job ends (its marker goes) before teardown lists and deletes its files.

    The straggler closes its file after the teardown listed the job's .pending files and
    before it deletes the job directory: it must see the job gone and abort its own upload.
    (Sweeping is off in this module, so the sweep cannot hide a leak.)
    """
    url = f"{s3_root}/teardown-race"
    config = {**config, **PENDING_FILES}
    store = FaultInjectingStore(outcommit.open_store(url, config))
    driver, job = start(url, config, store=store)
    _, late_fs, late_base = task_fs(driver, job, 0, attempt=1)
    late = late_fs.open(f"{late_base}/a.txt", "wb")
    late.write(b"late")
    closed: list[BaseException | None] = []

    def close_the_straggler_now(operation, args):
        if args and args[0] == driver.layout(job).root and not closed:
            try:
                late.close()
                closed.append(None)
            except BaseException as exc:  # what the straggler saw
                closed.append(exc)
        return False

    store.add(Fault("delete", predicate=close_the_straggler_now))
    driver.abort_job(job)
    assert len(closed) == 1 and isinstance(closed[0], TaskCommitError)
    assert outcome(url, config) == ({}, [])


def test_a_straggler_in_memory_fails_its_task_commit_and_leaves_nothing(config, s3_root):
    """In memory, a late attempt's file closes without a check; its task commit checks the
    job after publishing, fails, and aborts the attempt's uploads."""
    url = f"{s3_root}/straggler-memory"
    committer, job = start(url, config)
    task, fs, base = task_fs(committer, job, 0)
    fs.pipe_file(f"{base}/a.txt", b"a")
    message = committer.commit_task(task)
    late_task, late_fs, late_base = task_fs(committer, job, 0, attempt=1)  # speculative copy
    with late_fs.open(f"{late_base}/a.txt", "wb") as late:
        late.write(b"late")
    committer.commit_job(job, [message])
    with pytest.raises(TaskCommitError, match="not active"):
        committer.commit_task(late_task)
    assert outcome(url, config) == ({"a.txt": b"a"}, [])
    assert [c.name for c in committer.store.list_dir(committer.dest) if c.is_dir] == []


def test_a_process_that_did_not_set_the_attempt_up_cannot_write_it_in_memory(config, s3_root):
    url = f"{s3_root}/not-mine"
    committer, job = start(url, config)
    task = job.task_attempt(0)
    other = outcommit.create_committer(url, config, "magic")  # e.g. another process
    with pytest.raises(outcommit.errors.UnsupportedWriteError, match="setup_task"):
        other.filesystem(task)
    committer.abort_job(job)
