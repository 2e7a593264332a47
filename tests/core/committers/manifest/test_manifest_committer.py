"""Manifest committer behaviour beyond the shared suite: recovery, throttling, validation, tampering."""

from __future__ import annotations

import json
import posixpath
import threading
from typing import Any

import pytest

from outcommit import (
    CommitError,
    CorruptFileError,
    JobCommitError,
    JobContext,
    create_committer,
    load_success,
    open_store,
)
from outcommit.committers.manifest import ManifestCommitter
from outcommit.committers.manifest.format import MANIFEST_TYPE, TaskManifest
from outcommit.store import FileInfo, Store
from outcommit.testing.conformance import leftovers, visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore

FAST = {"outcommit.manifest.retry-backoff-ms": "0"}


class Throttled(OSError):
    """What an HTTP client raises for a 503 answer."""

    status = 503


def throttled(message: str) -> BaseException:
    return Throttled(message)


def dropped(message: str) -> BaseException:
    return ConnectionError(message)


def refused(message: str) -> BaseException:
    return PermissionError(message)


@pytest.fixture(params=["file", "memory"])
def dest(request, file_root: str, memory_root: str) -> str:
    root = file_root if request.param == "file" else memory_root
    return f"{root}/table"


def files_of(index: int, n: int = 3) -> dict[str, bytes]:
    return {f"year=2024/part-{index:05d}-{i}.txt": f"task {index} file {i}".encode() for i in range(n)}


def run_job_tasks(committer: ManifestCommitter, job: JobContext, tasks: int = 3,
                  n: int = 3) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    messages, expected = [], {}
    for index in range(tasks):
        task = job.task_attempt(index)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for rel, data in files_of(index, n).items():
            with fs.open(posixpath.join(base, rel), "wb") as f:
                f.write(data)
        expected.update(files_of(index, n))
        messages.append(committer.commit_task(task))
    return messages, expected


def setup(dest: str, faults: list[Fault] | None = None, store: Store | None = None,
          **config: str) -> tuple[ManifestCommitter, JobContext, Store]:
    wrapped = store or FaultInjectingStore(open_store(dest, {**FAST, **config}), faults or [])
    committer = create_committer(dest, {**FAST, **config}, "manifest", store=wrapped)
    assert isinstance(committer, ManifestCommitter)
    job = JobContext(dest, config=committer.config)
    committer.setup_job(job)
    return committer, job, wrapped


def view(dest: str) -> tuple[Store, str]:
    store = open_store(dest)
    return store, store.strip(dest)


# -- rename recovery and throttling ------------------------------------------------------

@pytest.mark.parametrize(("when", "error", "metric"), [
    ("before", dropped, "rename.retried"),     # never happened: retried
    ("after", refused, "rename.recovered"),    # happened, then raised: recognised as done
    ("after", dropped, "rename.recovered"),
])
def test_rename_that_raises_reaches_the_right_outcome(dest: str, when: str, error, metric: str) -> None:
    fault = Fault("rename_file", path_contains="/tasks/", when=when, skip=1, times=2, error=error)
    committer, job, _ = setup(dest, [fault])
    messages, expected = run_job_tasks(committer, job)
    summary = committer.commit_job(job, messages)
    assert fault.fired == 2
    store, path = view(dest)
    assert visible_files(store, path) == expected
    assert summary.metrics[metric] == 2
    assert load_success(store, store.join(path, "_SUCCESS")).metrics[metric] == 2
    assert leftovers(store, path) == []


def test_refused_rename_fails_the_job_and_a_rerun_finishes_it(dest: str) -> None:
    fault = Fault("rename_file", path_contains="/tasks/", skip=4, error=refused)
    committer, job, _ = setup(dest, [fault])
    messages, expected = run_job_tasks(committer, job)
    with pytest.raises(JobCommitError, match="PermissionError") as failure:
        committer.commit_job(job, messages)
    assert failure.value.summary.success is False
    store, path = view(dest)
    assert not store.exists(store.join(path, "_SUCCESS"))
    summary = committer.commit_job(job, messages)  # job commit is repeatable
    assert summary.metrics["commit.resumed"] == 1
    assert visible_files(store, path) == expected
    assert leftovers(store, path) == []


def test_throttling_is_retried_with_backoff_and_counted(dest: str) -> None:
    faults = [Fault("rename_file", path_contains="/tasks/", times=3, error=throttled),
              Fault("info", path_contains="year=2024", times=1, error=throttled)]
    committer, job, _ = setup(dest, faults)
    messages, expected = run_job_tasks(committer, job)
    summary = committer.commit_job(job, messages)
    store, path = view(dest)
    assert visible_files(store, path) == expected
    assert summary.metrics["store.throttled"] == 4
    assert load_success(store, store.join(path, "_SUCCESS")).metrics["store.throttled"] == 4


def test_throttling_that_never_ends_fails_after_the_configured_attempts(dest: str) -> None:
    fault = Fault("rename_file", path_contains="/tasks/", times=-1, error=throttled)
    committer, job, _ = setup(dest, [fault], **{"outcommit.manifest.io-attempts": "3"})
    messages, _ = run_job_tasks(committer, job, tasks=1, n=1)
    with pytest.raises(JobCommitError, match="after 3 attempt"):
        committer.commit_job(job, messages)
    assert fault.fired == 3


class NoEvidenceStore(FaultInjectingStore):
    """A store that cannot tell whether an interrupted rename happened."""

    def rename_outcome(self, src: str, dst: str, src_info: FileInfo) -> Any:
        return "unknown"


def test_store_without_evidence_fails_the_job_rather_than_guess(dest: str) -> None:
    fault = Fault("rename_file", path_contains="/tasks/", when="after", error=dropped)
    store = NoEvidenceStore(open_store(dest, FAST), [fault])
    committer, job, _ = setup(dest, store=store)
    messages, _ = run_job_tasks(committer, job, tasks=1, n=2)
    with pytest.raises(JobCommitError, match="cannot tell whether it happened"):
        committer.commit_job(job, messages)


def test_task_commit_retries_a_throttled_manifest_save(dest: str) -> None:
    fault = Fault("save_json", path_contains="-manifest.json", times=2, error=throttled)
    committer, job, _ = setup(dest, [fault])
    messages, expected = run_job_tasks(committer, job, tasks=1)
    assert fault.fired == 2
    committer.commit_job(job)  # discovered from the store: the manifest is there
    store, path = view(dest)
    assert visible_files(store, path) == expected
    assert messages[0]["type"] == MANIFEST_TYPE


# -- validation -------------------------------------------------------------------------

class LossyStore(FaultInjectingStore):
    """Renames, then loses or alters chosen destinations (what validation exists to catch)."""

    def __init__(self, inner: Store, damage: str, victim: str) -> None:
        super().__init__(inner)
        self.damage, self.victim = damage, victim

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        self.inner.rename_file(src, dst, overwrite)
        if dst.endswith(self.victim):
            if self.damage == "missing":
                self.inner.delete(dst)
            else:
                self.inner.write_bytes(dst, b"altered: a different length")


@pytest.mark.parametrize("damage", ["missing", "altered"])
def test_validation_catches_a_missing_or_altered_file(dest: str, damage: str) -> None:
    store = LossyStore(open_store(dest, FAST), damage, "part-00001-1.txt")
    committer, job, _ = setup(dest, store=store, **{"outcommit.manifest.validate-output": "true"})
    messages, _ = run_job_tasks(committer, job)
    with pytest.raises(JobCommitError, match=r"validation: .*part-00001-1\.txt"):
        committer.commit_job(job, messages)
    plain, path = view(dest)
    assert not plain.exists(plain.join(path, "_SUCCESS"))


def test_without_validation_the_damage_goes_unnoticed(dest: str) -> None:
    store = LossyStore(open_store(dest, FAST), "missing", "part-00001-1.txt")
    committer, job, _ = setup(dest, store=store)
    messages, expected = run_job_tasks(committer, job)
    committer.commit_job(job, messages)
    plain, path = view(dest)
    assert set(visible_files(plain, path)) == set(expected) - {"year=2024/part-00001-1.txt"}


# -- corrupt and tampered manifests ---------------------------------------------------------

def _tamper(message: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(message))
    for index, entry in changes.pop("files", {}).items():
        data["files"][index].update(entry)
    data.update(changes)
    return data


def _state(dest: str) -> dict[str, bytes]:
    """Everything below the destination's parent: tampering must change none of it."""
    store, path = view(dest)
    parent = posixpath.dirname(path)
    return {f.path: store.read_bytes(f.path) for f in store.list_files(parent)}


@pytest.mark.parametrize("case", ["outside", "dotdot", "temporary", "other-job", "duplicate",
                                  "not-json-object", "missing-field", "wrong-type"])
def test_tampered_manifest_fails_clearly_and_changes_nothing(dest: str, case: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=2, n=2)
    store, path = view(dest)
    parent = posixpath.dirname(path)
    # Another job writing next door, whose files a tampered manifest tries to steal.
    other, other_job, _ = setup(dest + "-other")
    other_messages, _ = run_job_tasks(other, other_job, tasks=1, n=1)
    store.write_bytes(store.join(parent, "victim.txt"), b"precious")
    before = _state(dest)
    victim_url = store.url(store.join(parent, "victim.txt"))
    first = messages[0]
    tampered: Any
    if case == "outside":
        tampered = _tamper(first, files={0: {"d": victim_url}})
    elif case == "dotdot":
        tampered = _tamper(first, files={0: {"d": first["files"][0]["d"].rsplit("/", 2)[0]
                                             + "/../../victim.txt"}})
    elif case == "temporary":
        tampered = _tamper(first, files={0: {"d": store.url(store.join(path, "_temporary", "x"))}})
    elif case == "other-job":
        tampered = _tamper(first, files={0: {"s": other_messages[0]["files"][0]["s"]}})
    elif case == "duplicate":
        tampered = _tamper(first, files={1: {"d": first["files"][0]["d"]}})
    elif case == "not-json-object":
        tampered = ["not", "a", "manifest"]
    elif case == "missing-field":
        tampered = {k: v for k, v in first.items() if k != "taskAttemptID"}
    else:
        tampered = _tamper(first, files={0: {"z": "12"}})
    with pytest.raises(JobCommitError) as failure:
        committer.commit_job(job, [tampered, *messages[1:]])
    assert isinstance(failure.value.__cause__, CorruptFileError)
    assert failure.value.__cause__.field or case == "not-json-object"  # names the field
    assert _state(dest) == before
    committer.abort_job(job)
    other.abort_job(other_job)


def test_duplicate_destination_across_tasks_is_refused(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=2, n=1)
    second = _tamper(messages[1], files={0: {"d": messages[0]["files"][0]["d"]}})
    before = _state(dest)
    with pytest.raises(JobCommitError, match="also written by"):
        committer.commit_job(job, [messages[0], second])
    assert _state(dest) == before


def test_corrupt_manifest_file_on_the_store_is_named(dest: str) -> None:
    committer, job, _ = setup(dest)
    run_job_tasks(committer, job, tasks=2, n=1)
    store, _ = view(dest)
    manifest = committer.manifest_path(job, job.task_attempt(1).task_id)
    store.write_bytes(manifest, b'{"type": "truncat')
    before = _state(dest)
    with pytest.raises(JobCommitError, match="not valid JSON") as failure:
        committer.commit_job(job)
    assert isinstance(failure.value.__cause__, CorruptFileError)
    assert failure.value.__cause__.path.endswith("-manifest.json")
    assert _state(dest) == before


# -- attempts, discovery, cleanup, options ---------------------------------------------------

def test_two_committed_attempts_of_one_task_only_the_last_counts(dest: str) -> None:
    committer, job, _ = setup(dest)
    for attempt, files in ((0, {"a.txt": b"first", "first-only.txt": b"1"}), (1, {"a.txt": b"second"})):
        task = job.task_attempt(0, attempt)
        committer.setup_task(task)
        for rel, data in files.items():
            with committer.filesystem(task).open(f"{committer.work_path(task)}/{rel}", "wb") as f:
                f.write(data)
        committer.commit_task(task)
    committer.commit_job(job)  # discovery: one manifest per task id
    store, path = view(dest)
    assert visible_files(store, path) == {"a.txt": b"second"}
    assert leftovers(store, path) == []


def test_two_messages_of_one_task_are_refused(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=1, n=1)
    with pytest.raises(JobCommitError, match="committed twice"):
        committer.commit_job(job, [messages[0], messages[0]])


def test_manifest_is_hadoop_shaped_and_nothing_moves_at_task_commit(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=1, n=2)
    store, path = view(dest)
    assert visible_files(store, path) == {}
    saved = store.load_json(committer.manifest_path(job, job.task_attempt(0).task_id))
    assert saved == messages[0]
    assert set(saved) >= {"type", "version", "jobId", "jobAttemptNumber", "taskID", "taskAttemptID",
                          "taskAttemptDir", "files", "directories", "iostatistics", "extraData"}
    entry = saved["files"][0]
    assert set(entry) >= {"s", "d", "z"} and entry["d"].endswith("year=2024/part-00000-0.txt")
    assert TaskManifest.from_dict(saved, "m").total_bytes == sum(len(v) for v in files_of(0, 2).values())
    assert [d["d"].rsplit("/", 1)[-1] for d in saved["directories"]] == ["year=2024"]


def test_existing_target_file_fails_unless_delete_target_files(dest: str) -> None:
    store, path = view(dest)
    store.write_bytes(store.join(path, "year=2024", "part-00000-0.txt"), b"old")
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=1)
    with pytest.raises(JobCommitError, match="delete-target-files"):
        committer.commit_job(job, messages)
    committer.abort_job(job)
    committer, job, _ = setup(dest, **{"outcommit.manifest.delete-target-files": "true"})
    messages, expected = run_job_tasks(committer, job, tasks=1)
    committer.commit_job(job, messages)
    assert visible_files(store, path) == expected


def test_file_where_a_directory_must_go_is_replaced(dest: str) -> None:
    store, path = view(dest)
    store.write_bytes(store.join(path, "year=2024"), b"a file in the way")
    committer, job, _ = setup(dest)
    messages, expected = run_job_tasks(committer, job, tasks=2)
    summary = committer.commit_job(job, messages)
    assert visible_files(store, path) == expected
    assert summary.metrics["directories.file-deleted"] == 1


def test_summary_report_saved_on_success_and_failure(dest: str, tmp_path) -> None:
    reports = f"file://{tmp_path}/reports"
    options = {"outcommit.manifest.summary-report-dir": reports}
    committer, job, _ = setup(dest, **options)
    messages, _ = run_job_tasks(committer, job, tasks=2)
    summary = committer.commit_job(job, messages)
    assert {"stage.load-manifests.duration.ms", "stage.rename-files.duration.ms",
            "stage.create-directories.duration.ms", "files.renamed"} <= set(summary.metrics)
    fault = Fault("rename_file", path_contains="/tasks/", error=refused)
    failing, job2, _ = setup(dest + "2", [fault], **options)
    messages2, _ = run_job_tasks(failing, job2, tasks=1)
    with pytest.raises(JobCommitError):
        failing.commit_job(job2, messages2)
    saved = {p.name: json.loads(p.read_text()) for p in (tmp_path / "reports").iterdir()}
    assert saved[f"summary-{job.job_id}-0.json"]["success"] is True
    assert saved[f"summary-{job2.job_id}-0.json"]["success"] is False
    assert "PermissionError" in saved[f"summary-{job2.job_id}-0.json"]["diagnostics"]["exception"]


def test_cleanup_twice_and_abort_after_commit_are_safe(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, expected = run_job_tasks(committer, job)
    committer.commit_job(job, messages)
    committer.cleanup_job(job)
    committer.cleanup_job(job)
    committer.abort_job(job)
    store, path = view(dest)
    assert visible_files(store, path) == expected
    assert leftovers(store, path) == []


def test_recovery_refuses_a_tampered_previous_manifest(dest: str) -> None:
    committer, job0, _ = setup(dest)
    run_job_tasks(committer, job0, tasks=1, n=1)
    store, path = view(dest)
    previous = committer.manifest_path(job0, job0.task_attempt(0).task_id)
    data = store.load_json(previous)
    data["files"][0]["d"] = store.url(posixpath.dirname(path) + "/elsewhere.txt")
    store.write_bytes(previous, json.dumps(data).encode())
    job1 = job0.next_attempt()
    committer.setup_job(job1)
    with pytest.raises(CorruptFileError, match="not inside the job's destination"):
        committer.recover_task(job1.task_attempt(0))


def test_task_commit_after_job_commit_is_refused(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=1, n=1)
    committer.commit_job(job, messages)
    with pytest.raises(CommitError, match="not active"):
        committer.commit_task(job.task_attempt(5))


# -- resumed and recovered commits, reserved names, hostile JSON -------------------------

DELETE_TARGETS = {"outcommit.manifest.delete-target-files": "true"}


def test_resumed_commit_with_delete_target_files_keeps_already_renamed_files(dest: str) -> None:
    # The first commit renames some files, then fails; the rerun must not delete them
    # as "existing target files" (their sources are gone: that would lose them).
    fault = Fault("rename_file", path_contains="/tasks/", skip=3, error=refused)
    committer, job, _ = setup(dest, [fault], **DELETE_TARGETS, **{"outcommit.committer.threads": "1"})
    messages, expected = run_job_tasks(committer, job)
    with pytest.raises(JobCommitError, match="PermissionError"):
        committer.commit_job(job, messages)
    store, path = view(dest)
    assert len(visible_files(store, path)) == 3  # part-way
    summary = committer.commit_job(job, messages)
    assert summary.metrics["commit.resumed"] == 1
    assert visible_files(store, path) == expected
    assert leftovers(store, path) == []


@pytest.mark.parametrize("mode", ["replace", "fail", "append"])
def test_next_job_attempt_finishes_a_commit_the_previous_attempt_left_part_way(
        dest: str, mode: str) -> None:
    # Job attempt 0 renames some files and dies; the restarted driver (attempt 1) recovers
    # the committed tasks and commits again. Its conflict handling must not treat the
    # job's own renamed files as someone else's data (replace would delete them for good).
    options = {"outcommit.committer.conflict-mode": mode, "outcommit.committer.threads": "1"}
    fault = Fault("rename_file", path_contains="/tasks/", skip=4, error=refused)
    committer, job0, _ = setup(dest, [fault], **options)
    _, expected = run_job_tasks(committer, job0)
    with pytest.raises(JobCommitError):
        committer.commit_job(job0)
    store, path = view(dest)
    assert len(visible_files(store, path)) == 4
    job1 = job0.next_attempt()
    committer.setup_job(job1)
    for index in range(3):
        assert committer.recover_task(job1.task_attempt(index))
    summary = committer.commit_job(job1)
    assert summary.metrics["commit.resumed"] == 1
    assert visible_files(store, path) == expected
    assert leftovers(store, path) == []


def test_replace_deletes_the_old_partitions_and_files_threads_at_once(dest: str) -> None:
    """'replace' deletes every old entry, and not one after another: a table of 10,000
    partitions would be 10,000 round trips of job commit."""
    store, path = view(dest)
    old = {f"date=2026-01-{day:02d}/part-0.parquet" for day in range(1, 9)} | {"loose-0", "loose-1"}
    for rel in old:
        store.write_bytes(store.join(path, rel), b"old")
    threads = 4
    options = {"outcommit.committer.conflict-mode": "replace", "outcommit.committer.threads": str(threads)}
    # Each recursive delete of a partition waits until `threads` of them are in flight.
    together = threading.Barrier(threads, timeout=60)
    partitions = Fault("delete", times=0, predicate=lambda _op, args: posixpath.basename(args[0])
                       .startswith("date=") and together.wait() < 0)
    committer, job, _ = setup(dest, [partitions], **options)
    messages, expected = run_job_tasks(committer, job)
    committer.commit_job(job, messages)
    assert visible_files(store, path) == expected
    assert leftovers(store, path) == []


def test_replace_deletes_the_earlier_success_marker_before_the_data(dest: str) -> None:
    """No reader may take a half-deleted table for the earlier job's output."""
    store, path = view(dest)
    for rel in ("_SUCCESS", "a.parquet", "b.parquet", "date=1/c.parquet"):
        store.write_bytes(store.join(path, rel), b"old")
    deleted: list[str] = []
    order = Fault("delete", times=0, predicate=lambda _op, args: deleted.append(args[0]) is not None)
    committer, job, _ = setup(dest, [order], **{"outcommit.committer.conflict-mode": "replace"})
    messages, expected = run_job_tasks(committer, job)
    committer.commit_job(job, messages)
    assert posixpath.basename(deleted[0]) == "_SUCCESS"
    assert {posixpath.basename(p) for p in deleted[1:4]} == {"a.parquet", "b.parquet", "date=1"}
    assert visible_files(store, path) == expected


def test_manifest_naming_the_success_marker_is_refused(dest: str) -> None:
    # _SUCCESS belongs to the committer: a file renamed there would be overwritten (lost)
    # by the job's own summary, or would pass for another job's summary.
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=2, n=2)
    store, path = view(dest)
    tampered = json.loads(json.dumps(messages[0]))
    tampered["files"][0]["d"] = store.url(store.join(path, "_SUCCESS"))
    before = _state(dest)
    with pytest.raises(JobCommitError, match="_SUCCESS") as failure:
        committer.commit_job(job, [tampered, messages[1]])
    assert isinstance(failure.value.__cause__, CorruptFileError)
    assert failure.value.__cause__.field == "files[0].d"
    assert _state(dest) == before
    committer.abort_job(job)
    assert leftovers(store, path) == []


def test_task_writing_a_success_file_fails_the_job_clearly_and_loses_nothing(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=1, n=1)
    task = job.task_attempt(1)
    committer.setup_task(task)
    with committer.filesystem(task).open(posixpath.join(committer.work_path(task), "_SUCCESS"),
                                         "wb") as f:
        f.write(b"not the committer's")
    messages.append(committer.commit_task(task))
    with pytest.raises(JobCommitError, match="reserved"):
        committer.commit_job(job, messages)
    store, path = view(dest)
    assert visible_files(store, path) == {}
    assert not store.exists(store.join(path, "_SUCCESS"))


def test_deeply_nested_manifest_file_is_a_clear_corruption_error(dest: str) -> None:
    committer, job, _ = setup(dest)
    run_job_tasks(committer, job, tasks=2, n=1)
    store, _ = view(dest)
    manifest = committer.manifest_path(job, job.task_attempt(1).task_id)
    store.write_bytes(manifest, b"[" * 200_000)
    before = _state(dest)
    with pytest.raises(JobCommitError) as failure:
        committer.commit_job(job)
    assert isinstance(failure.value.__cause__, CorruptFileError)
    assert failure.value.__cause__.path.endswith("-manifest.json")
    assert _state(dest) == before
    committer.abort_job(job)


def test_success_metrics_survive_a_resumed_commit(dest: str) -> None:
    fault = Fault("rename_file", path_contains="/tasks/", skip=1, error=refused)
    committer, job, _ = setup(dest, [fault], **{"outcommit.committer.threads": "1"})
    messages, expected = run_job_tasks(committer, job, tasks=1)
    with pytest.raises(JobCommitError):
        committer.commit_job(job, messages)
    committer.commit_job(job, messages)
    store, path = view(dest)
    success = load_success(store, store.join(path, "_SUCCESS"))
    assert success.metrics["commit.resumed"] == 1
    assert sorted(f.rsplit("/", 1)[-1] for f in success.filenames) == sorted(
        p.rsplit("/", 1)[-1] for p in expected)


def test_manifest_naming_another_tasks_uncommitted_attempt_is_refused(dest: str) -> None:
    # Continuity of correctness: task 1's attempt 0 never committed; a manifest of task 0
    # that names that attempt must not make its files visible.
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=2, n=1)
    zombie = job.task_attempt(1, attempt=1)
    committer.setup_task(zombie)
    zombie_dir = committer.work_path(zombie)
    with committer.filesystem(zombie).open(posixpath.join(zombie_dir, "zombie.txt"), "wb") as f:
        f.write(b"never committed")
    store, path = view(dest)
    tampered = json.loads(json.dumps(messages[0]))
    tampered["taskAttemptID"] = zombie.attempt_id
    tampered["taskAttemptDir"] = store.url(zombie_dir)
    tampered["files"] = [{"s": store.url(posixpath.join(zombie_dir, "zombie.txt")),
                          "d": store.url(store.join(path, "zombie.txt")), "z": 15}]
    before = _state(dest)
    with pytest.raises(JobCommitError, match="is not an attempt of task") as failure:
        committer.commit_job(job, [tampered, messages[1]])
    assert isinstance(failure.value.__cause__, CorruptFileError)
    assert failure.value.__cause__.field == "taskAttemptID"
    assert _state(dest) == before


class ProbedThroughFaults(FaultInjectingStore):
    """Answers rename_outcome with the default evidence, read through the faulty requests."""

    def rename_outcome(self, src: str, dst: str, src_info: FileInfo) -> Any:
        return Store.rename_outcome(self, src, dst, src_info)


def test_throttled_evidence_requests_are_retried_not_fatal(dest: str) -> None:
    victim = "part-00000-0.txt"
    rename = Fault("rename_file", path_contains=victim, when="after", error=dropped)
    probe = Fault("info", path_contains=victim, times=2, error=throttled)
    store = ProbedThroughFaults(open_store(dest, FAST), [rename, probe])
    committer, job, _ = setup(dest, store=store)
    messages, expected = run_job_tasks(committer, job, tasks=2)
    summary = committer.commit_job(job, messages)
    assert rename.fired == 1 and probe.fired == 2
    assert summary.metrics["rename.recovered"] == 1
    assert summary.metrics["store.throttled"] == 2
    plain, path = view(dest)
    assert visible_files(plain, path) == expected


# -- sizes are the store's, not the manifest's -------------------------------------------------

class _Killed(BaseException):
    """The driver dies here: none of the committer's failure paths catches it."""


def _save_manifest(committer: ManifestCommitter, job: JobContext, index: int,
                   data: dict[str, Any]) -> None:
    """Replace task ``index``'s committed manifest on the store (tampering after task commit)."""
    store, _ = view(committer.destination)
    store.save_json(committer.manifest_path(job, job.task_attempt(index).task_id), data)


@pytest.mark.parametrize("validate", ["false", "true"])
@pytest.mark.parametrize("read_from", ["store", "messages"])
def test_a_manifest_size_the_file_disagrees_with_fails_before_anything_moves(
        dest: str, validate: str, read_from: str) -> None:
    """A manifest saying 999 bytes for a 13-byte file: job commit lists the sources and
    fails naming the field, whatever validate-output says; the abort then leaves nothing."""
    committer, job, _ = setup(dest, **{"outcommit.manifest.validate-output": validate})
    messages, _ = run_job_tasks(committer, job, tasks=2, n=2)
    tampered = _tamper(messages[1], files={1: {"z": 999}})
    if read_from == "store":
        _save_manifest(committer, job, 1, tampered)
    before = _state(dest)
    with pytest.raises(JobCommitError) as failure:
        committer.commit_job(job, None if read_from == "store" else [messages[0], tampered])
    cause = failure.value.__cause__
    assert isinstance(cause, CorruptFileError) and cause.field == "files[1].z"
    assert "999 bytes" in cause.problem and "the store has 13" in cause.problem
    assert _state(dest) == before  # nothing renamed, nothing journaled
    committer.abort_job(job)
    committer.cleanup_job(job)
    store, path = view(dest)
    assert visible_files(store, path) == {}
    assert leftovers(store, path) == []


def test_a_killed_commit_of_a_tampered_manifest_leaves_nothing_after_abort(dest: str) -> None:
    """The driver dies right after its first rename took effect (it never saw the result).
    Whatever the manifest claimed, the abort that follows removes what the job renamed."""
    kill = Fault("rename_file", path_contains="/tasks/", when="after", error=_Killed)
    committer, job, _ = setup(dest, [kill], **{"outcommit.committer.threads": "1"})
    messages, _ = run_job_tasks(committer, job, tasks=2, n=2)
    _save_manifest(committer, job, 0, _tamper(messages[0], files={0: {"z": 999}}))
    with pytest.raises((_Killed, JobCommitError)):
        committer.commit_job(job)
    operator = create_committer(dest, FAST, "manifest")  # a new process aborts the job
    operator.abort_job(job)
    operator.cleanup_job(job)
    store, path = view(dest)
    assert visible_files(store, path) == {}
    assert leftovers(store, path) == []


def test_a_resumed_commit_checks_sizes_against_what_the_first_commit_listed(dest: str) -> None:
    """The first commit renamed two files and failed; the manifest is then altered for a file
    whose source is gone. The resumed commit compares it with the journal (the store's
    sizes when the first commit listed them) and fails; the abort removes both files."""
    fault = Fault("rename_file", path_contains="/tasks/", skip=2, error=refused)
    committer, job, _ = setup(dest, [fault], **{"outcommit.committer.threads": "1"})
    messages, _ = run_job_tasks(committer, job, tasks=2, n=2)
    with pytest.raises(JobCommitError, match="PermissionError"):
        committer.commit_job(job)
    store, path = view(dest)
    assert len(visible_files(store, path)) == 2
    _save_manifest(committer, job, 0, _tamper(messages[0], files={0: {"z": 999}}))
    with pytest.raises(JobCommitError) as failure:
        committer.commit_job(job)
    cause = failure.value.__cause__
    assert isinstance(cause, CorruptFileError) and cause.field == "files[0].z"
    committer.abort_job(job)
    committer.cleanup_job(job)
    assert visible_files(store, path) == {}
    assert leftovers(store, path) == []


def test_a_resumed_commit_reports_the_bytes_the_store_listed(dest: str) -> None:
    fault = Fault("rename_file", path_contains="/tasks/", skip=2, error=refused)
    committer, job, _ = setup(dest, [fault], **{"outcommit.committer.threads": "1"})
    _, expected = run_job_tasks(committer, job, tasks=2, n=2)
    with pytest.raises(JobCommitError):
        committer.commit_job(job)
    summary = committer.commit_job(job)
    assert summary.metrics["commit.resumed"] == 1
    assert summary.metrics["bytes.committed"] == sum(len(data) for data in expected.values())
    store, path = view(dest)
    assert visible_files(store, path) == expected


def test_a_manifest_naming_a_file_that_is_not_there_fails_before_anything_moves(dest: str) -> None:
    committer, job, _ = setup(dest)
    messages, _ = run_job_tasks(committer, job, tasks=2, n=2)
    store, _ = view(dest)
    store.delete(store.strip(messages[1]["files"][0]["s"]))
    before = _state(dest)
    with pytest.raises(JobCommitError) as failure:
        committer.commit_job(job, messages)
    cause = failure.value.__cause__
    assert isinstance(cause, CorruptFileError) and cause.field == "files[0].s"
    assert _state(dest) == before


def test_abort_after_a_killed_commit_removes_its_files_and_keeps_anothers(dest: str) -> None:
    """Crash windows of the journal, saved before the first rename: the driver dies right
    after its third rename took effect (a result it never saw); the fourth never happened.
    Meanwhile another writer replaced the first renamed file and wrote where the fourth
    would go. The abort removes the job's own files and neither of the other writer's."""
    kill = Fault("rename_file", path_contains="/tasks/", when="after", skip=2, error=_Killed)
    committer, job, _ = setup(dest, [kill], **{"outcommit.committer.threads": "1"})
    messages, expected = run_job_tasks(committer, job, tasks=2, n=2)
    with pytest.raises(_Killed):
        committer.commit_job(job, messages)
    store, path = view(dest)
    renamed = sorted(visible_files(store, path))
    assert len(renamed) == 3
    (unmoved,) = set(expected) - set(renamed)
    others = {renamed[0]: b"another writer's file", unmoved: b"another writer's too"}
    for rel, data in others.items():
        store.write_bytes(store.join(path, rel), data)
    operator = create_committer(dest, FAST, "manifest")
    operator.abort_job(job)
    operator.cleanup_job(job)
    assert visible_files(store, path) == others
    assert leftovers(store, path) == []
