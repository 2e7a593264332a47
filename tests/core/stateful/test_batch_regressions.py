"""What the batch protocol's machine found (``test_batch_stateful.py``), shrunk, as plain tests.

Each test is the machine's minimal failing sequence, written out; each failed on the code
before its fix.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import outcommit
from outcommit import JobContext, read
from outcommit.committer import JOB_MARKER
from outcommit.testing.conformance import visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore

FAIL = {"outcommit.committer.conflict-mode": "fail"}


def start(url: str, name: str, **config: str) -> tuple[Any, JobContext]:
    committer = outcommit.create_committer(url, config, name)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    return committer, job


def write_and_commit(committer: Any, job: JobContext, files: dict[str, bytes]) -> dict[str, Any]:
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for name, data in files.items():
        fs.pipe_file(f"{base}/{name}", data)
    return committer.commit_task(task)


@pytest.fixture(params=["file", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"file://{tmp_path}" if request.param == "file" else f"memory:///{tmp_path.name}"


@pytest.mark.parametrize("name", ["v1", "v2", "manifest"])
def test_fail_is_not_refused_by_the_empty_directory_of_an_aborted_nested_job(root: str, name: str) -> None:
    """Machine: start a job on ``out/dataset1/nested`` and abort it; a job on ``out/dataset1``
    under ``fail`` was refused, "already has data (nested, ...)": the aborted job's (empty)
    destination directory was counted as data, which readers never see."""
    nested, job = start(f"{root}/out/dataset1/nested", name, **FAIL)
    nested.abort_job(job)
    nested.cleanup_job(job)
    parent, job = start(f"{root}/out/dataset1", name, **FAIL)  # refused before the fix
    parent.commit_job(job, [write_and_commit(parent, job, {"a.txt": b"a"})])
    store = outcommit.open_store(root)
    assert visible_files(store, store.strip(f"{root}/out/dataset1")) == {"a.txt": b"a"}


@pytest.mark.parametrize("name", ["v1", "v2", "manifest"])
def test_fail_still_refuses_data_below_a_partition_directory(root: str, name: str) -> None:
    store = outcommit.open_store(root)
    store.write_bytes(store.join(store.strip(root), "out", "p=1", "deeper", "old.txt"), b"old")
    with pytest.raises(outcommit.DestinationExistsError, match=r"p=1/deeper/old\.txt"):
        start(f"{root}/out", name, **FAIL)


@pytest.mark.parametrize("name", ["v1", "v2", "manifest"])
def test_a_store_error_in_the_job_check_fails_the_commit_with_its_report(root: str, name: str) -> None:
    """Machine: ``commit_job`` whose first request (the job's liveness check) fails. v1 and
    v2 raised the store's own error, without the ``success=false`` report that
    ``JobCommitError`` carries (docs/protocol.md); a retry then commits."""
    url = f"{root}/out"
    faulty = FaultInjectingStore(outcommit.open_store(url), [])
    committer = outcommit.create_committer(url, {}, name, store=faulty)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    message = write_and_commit(committer, job, {"a.txt": b"a"})
    faulty.add(Fault("info", path_contains=JOB_MARKER))
    with pytest.raises(outcommit.JobCommitError) as failure:
        committer.commit_job(job, [message])
    assert failure.value.summary is not None and failure.value.summary.success is False
    assert committer.commit_job(job, [message]).success


@pytest.mark.parametrize("name", ["v1", "v2", "manifest"])
def test_replace_of_a_parent_leaves_a_nested_jobs_state_alone(root: str, name: str) -> None:
    """Machine: a job starts on ``out/dataset1/nested``; a job on ``out/dataset1`` commits
    (``v2``: sets up) under ``replace``. The parent's replace deleted the nested directory
    whole, the running job's ``_temporary`` with it, and that job then failed ("not
    active"). Conflict modes act on what readers see; other jobs' state stays. The nested
    dataset's ``_SUCCESS`` goes with its data (it would name deleted files)."""
    store = outcommit.open_store(root)
    nested_url = f"{root}/out/dataset1/nested"
    append = {"outcommit.committer.conflict-mode": "append"}
    earlier, earlier_job = start(nested_url, name, **append)
    earlier.commit_job(earlier_job, [write_and_commit(earlier, earlier_job, {"old-n.txt": b"old"})])
    child, child_job = start(nested_url, name, **append)
    replace = {"outcommit.committer.conflict-mode": "replace"}
    parent, parent_job = start(f"{root}/out/dataset1", name, **replace)
    parent.commit_job(parent_job, [write_and_commit(parent, parent_job, {"p.txt": b"parent"})])
    assert not store.exists(store.join(store.strip(nested_url), "_SUCCESS"))
    child.commit_job(child_job, [write_and_commit(child, child_job, {"c.txt": b"child"})])  # failed before
    assert visible_files(store, store.strip(f"{root}/out/dataset1")) == {"p.txt": b"parent",
                                                                           "nested/c.txt": b"child"}
    assert outcommit.create_committer(nested_url, {}, name).recovery.state.leftover_jobs() == {}


def test_v2_never_reports_success_for_files_gone_before_its_job_commit(root: str) -> None:
    """Machine: a ``v2`` task publishes its file; another job sets up under ``replace`` and
    deletes it (v2 replaces at job setup); the first job's commit then wrote a
    ``success=true`` ``_SUCCESS`` naming the missing file (readers failed on it)."""
    url = f"{root}/out/dataset1"
    first, first_job = start(url, "v2")
    message = write_and_commit(first, first_job, {"part-0.txt": b"first job"})
    start(url, "v2", **{"outcommit.committer.conflict-mode": "replace"})
    with pytest.raises(outcommit.JobCommitError, match=r"part-0\.txt"):
        first.commit_job(first_job, [message])
    store = outcommit.open_store(url)
    assert not store.exists(store.join(store.strip(url), "_SUCCESS"))


DELAYED = ["magic", "directory", "partitioned"]


@pytest.mark.s3
@pytest.mark.parametrize("name", DELAYED)
def test_a_delayed_replace_takes_a_nested_datasets_success_with_its_data(
        name: str, s3_config: dict[str, Any], s3_root: str) -> None:
    """Machine: a job commits to ``out/dataset1/nested``, then a job on ``out/dataset1``
    commits under ``replace``: the nested files were deleted and the nested ``_SUCCESS``
    stayed, naming them (``committed_files`` of the nested dataset failed on it)."""
    nested_url, parent_url = f"{s3_root}/out/dataset1/nested", f"{s3_root}/out/dataset1"
    nested, job = start(nested_url, name, **s3_config)
    nested.commit_job(job, [write_and_commit(nested, job, {"p=0/n.txt": b"nested"})])
    parent, job = start(parent_url, name, **s3_config, **{"outcommit.committer.conflict-mode": "replace"})
    parent.commit_job(job, [write_and_commit(parent, job, {"p=0/a.txt": b"parent"})])
    store = outcommit.open_store(s3_root, s3_config)
    report = store.join(store.strip(nested_url), "_SUCCESS")
    if name == "partitioned":  # its replace is scoped to p=0: the nested dataset stays whole
        assert len(read.committed_files(nested_url, s3_config)) == 1
    else:
        assert not store.exists(report)  # it named n.txt, deleted


@pytest.mark.s3
@pytest.mark.parametrize("name", DELAYED)
def test_an_aborted_delayed_replace_leaves_no_report_naming_what_it_deleted(
        name: str, s3_config: dict[str, Any], s3_root: str) -> None:
    """Machine: a job commits; a ``replace`` job's commit deletes the old files and fails
    at its first completion, and is aborted. The earlier job's ``_SUCCESS`` stayed, naming
    the deleted files (the rename committers delete it first: no reader may take the
    half-deleted table for that job's output)."""
    url = f"{s3_root}/out/dataset1"
    first, job = start(url, name, **s3_config)
    first.commit_job(job, [write_and_commit(first, job, {"p=0/old.txt": b"old"})])
    faulty = FaultInjectingStore(outcommit.open_store(url, s3_config), [Fault("multipart.complete")])
    replace = {**s3_config, "outcommit.committer.conflict-mode": "replace"}
    second = outcommit.create_committer(url, replace, name, store=faulty)
    job = JobContext(url, config=second.config)
    second.setup_job(job)
    message = write_and_commit(second, job, {"p=0/new.txt": b"new"})
    with pytest.raises(outcommit.JobCommitError):
        second.commit_job(job, [message])
    second.abort_job(job)
    second.cleanup_job(job)
    store = outcommit.open_store(url, s3_config)
    assert visible_files(store, store.strip(url)) == {}  # replace-not-atomic: the old file went
    assert not store.exists(store.join(store.strip(url), "_SUCCESS"))  # and its report with it


@pytest.mark.s3
@pytest.mark.parametrize("name", DELAYED)
def test_a_store_error_in_a_delayed_job_check_fails_the_commit_with_its_report(
        name: str, s3_config: dict[str, Any], s3_root: str) -> None:
    """As for v1 and v2: the delayed committers raised the store's own error when the job
    check's request failed, without the ``success=false`` report."""
    url = f"{s3_root}/out"
    faulty = FaultInjectingStore(outcommit.open_store(url, s3_config), [])
    committer = outcommit.create_committer(url, s3_config, name, store=faulty)
    job = JobContext(url, config=committer.config, task_messages=True)
    committer.setup_job(job)
    message = write_and_commit(committer, job, {"a.txt": b"a"})
    faulty.add(Fault("info", path_contains="_job.json"))
    with pytest.raises(outcommit.JobCommitError) as failure:
        committer.commit_job(job, [message])
    assert failure.value.summary is not None and failure.value.summary.success is False
    assert committer.commit_job(job, [message]).success



@pytest.fixture
def azure_config(azurite_server: Any) -> dict[str, Any]:
    return {**azurite_server.config(), "outcommit.manifest.retry-backoff-ms": "0"}


@pytest.fixture
def azure_root(azurite_server: Any) -> str:
    container = f"regressions-{uuid.uuid4().hex[:12]}"
    azurite_server.create_container(container)
    return f"abfs://{container}"


@pytest.mark.azure
@pytest.mark.parametrize("name", ["v2", "manifest", "blocklist"])
def test_a_job_into_an_empty_destination_never_touches_an_adjacent_name_on_azure(
        name: str, azure_config: dict[str, Any], azure_root: str) -> None:
    """Machine (its canary ``out/dataset1.bak/keep.txt``): on Azure, listing the empty
    ``out/dataset1`` returned the sibling's file, so a job under ``fail`` was refused
    ("already has data (keep.txt, ...)"). A ``replace`` leaves the sibling alone."""
    store = outcommit.open_store(azure_root, azure_config)
    keep = store.join(store.strip(azure_root), "out", "dataset1.bak", "keep.txt")
    store.write_bytes(keep, b"backup")
    url = f"{azure_root}/out/dataset1"
    start(url, name, **azure_config, **FAIL)  # refused before the fix
    replacing, job = start(url, name, **azure_config, **{"outcommit.committer.conflict-mode": "replace"})
    replacing.commit_job(job, [write_and_commit(replacing, job, {"a.txt": b"a"})])
    assert store.read_bytes(keep) == b"backup"


def test_v2_a_repeated_commit_of_one_attempt_keeps_its_record(root: str) -> None:
    """Machine: a ``v2`` job commits by discovery, its cleanup fails (a store error: the
    job's markers stay), a zombie of the committed attempt commits it again, and the job's
    commit is repeated: the repeat found no files (already published) and replaced the
    task's record with an empty one, and ``_SUCCESS`` was rewritten without the file.
    Shrunk: the repeated task commit of one attempt must answer as the first did."""
    url = f"{root}/out"
    committer, job = start(url, "v2")
    task = job.task_attempt(0)
    first = write_and_commit(committer, job, {"part-0.txt": b"data"})
    assert committer.commit_task(task) == first
    report = committer.commit_job(job)
    assert [name.rsplit("/", 1)[1] for name in report.filenames] == ["part-0.txt"]


def test_a_replace_whose_report_delete_fails_deletes_none_of_the_files_it_names() -> None:
    """Machine (memmp-magic, long run): a job under ``replace`` on a dataset another job had
    committed failed deleting that job's ``_SUCCESS``; its other deletes, run beside it
    (a store without batch deletes: one request per file), had taken the files the report
    names: the report stayed, naming files that are not there (readers fail on it).
    The reports go first now, and the files they name only once they are gone."""
    url = f"memmp:///regress-{uuid.uuid4().hex[:8]}/out/dataset1"
    first, job = start(url, "memmp-magic")
    first.commit_job(job, [write_and_commit(first, job, {f"old-{n}.txt": b"old" for n in range(8)})])
    store = outcommit.open_store(url)
    faulty = FaultInjectingStore(store, [Fault("delete", path_contains="_SUCCESS")])
    second = outcommit.create_committer(url, {"outcommit.committer.conflict-mode": "replace"},
                                        "memmp-magic", store=faulty)
    job = JobContext(url, config=second.config)
    second.setup_job(job)
    message = write_and_commit(second, job, {"new.txt": b"new"})
    with pytest.raises(outcommit.JobCommitError):
        second.commit_job(job, [message])
    assert len(read.committed_files(url)) == 8  # the first job's report, and all it names
    second.abort_job(job)
    second.cleanup_job(job)


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_a_later_attempt_of_a_finished_job_whose_record_and_report_are_gone_commits_anew(
        root: str, name: str) -> None:
    """Machine (v1 on memory, seed 11): job j1 commits by discovery, only the removal of
    ``_temporary`` failing in its cleanup (its journal already gone); job j0 commits into
    the same destination, its ``_SUCCESS`` replacing j1's; j1's driver restarts (attempt 1)
    and commits. Nothing says j1 finished (docs/protocol.md, "Limits") nor what it
    published (its journal is gone): attempt 1 commits as a new job attempt, its report
    naming what it recovered and reran (nothing), and j1's first output stays as it was.
    The machine had expected that report to name j1's first file: the model was wrong."""
    url = f"{root}/out/dataset1"
    store = outcommit.open_store(url)
    faulty = FaultInjectingStore(store, [])
    other, other_job = start(url, name)  # j0: its directory keeps _temporary from being empty
    first = outcommit.create_committer(url, {}, name, store=faulty)
    job = JobContext(url, job_id="j1", config=first.config)
    first.setup_job(job)
    write_and_commit(first, job, {"part-j1-0-0.txt": b"j1 attempt 0"})
    removal = faulty.add(Fault("delete_empty_dir", path_contains="_temporary"))
    assert first.commit_job(job).filenames == [f"{url}/part-j1-0-0.txt"]
    assert removal.fired == 1
    other.commit_job(other_job, [])  # its _SUCCESS replaces j1's
    later = job.next_attempt()
    restarted = outcommit.create_committer(url, {}, name)
    restarted.setup_job(later)
    assert not restarted.recover_task(later.task_attempt(0))
    report = restarted.commit_job(later)
    assert (report.jobId, report.filenames) == ("j1", [])
    assert read.committed_files(url) == [f"{url}/part-j1-0-0.txt"]
    assert store.read_bytes(store.join(store.strip(url), "part-j1-0-0.txt")) == b"j1 attempt 0"


def test_the_machine_expects_a_new_commit_of_a_later_attempt_whose_record_is_gone() -> None:
    """The machine's own shrunk sequence (v1 on memory, seed 11), replayed on the machine:
    it failed with "_SUCCESS of j1 lists [], expected [part-j1-0-0.txt]" before the model
    learnt that a later attempt begun after the cleanup had deleted the finished commit's
    journal, its ``_SUCCESS`` hidden by another job's, commits as a new one."""
    from batch_machine import Binding, machine_for, remove_tree

    prefix = f"memory:///regress-{uuid.uuid4().hex[:8]}"
    binding = Binding("memory", lambda: f"{prefix}/example-{uuid.uuid4().hex[:10]}",
                      {"outcommit.retry.backoff-ms": "0"}, remove_tree)
    machine = machine_for("v1", binding)()
    machine.seed_and_start(seeds=set(), dest="out/dataset1", mode="append", flow="messages", sizes=[0])
    steps: list[tuple[str, dict[str, Any]]] = [
        ("start_job", {"dest": "out/dataset1", "flow": "discovery", "mode": "append", "sizes": [1]}),
        ("run_task", {"pick": 1}), ("start_attempt", {"pick": 0}),
        ("commit_job_fails", {"pick": 0, "requests": 11}), ("commit_task", {"pick": 0}),
        ("commit_job", {"pick": 0}), ("driver_dies", {"pick": 0}), ("restart_driver", {"pick": 0}),
        ("commit_job", {"pick": 0})]
    for rule, arguments in steps:
        getattr(machine, rule)(**arguments)
        machine.visible_output_is_the_models()
    assert machine.detail[-3:] == ["driver_dies j1", "restart_driver j1.1", "commit_job j1.1"]
    machine.teardown()


@pytest.mark.parametrize("name", ["v1", "manifest"])
def test_a_resumed_commit_whose_published_files_another_job_replaced_is_refused(
        root: str, name: str) -> None:
    """Machine (v1 on memory, the long profile, seed 11): job j0's commit is interrupted
    after publishing its file (``_SUCCESS`` not written, its journal kept); job j2, under
    ``replace``, commits into the same destination and deletes that file; j0's commit is
    then resumed. It reported success and a ``_SUCCESS`` naming a file that is not there
    (complete broken: readers of ``_SUCCESS`` fail). It must refuse, loudly, and say why."""
    url = f"{root}/out/dataset1"
    store = outcommit.open_store(url)
    faulty = FaultInjectingStore(store, [])
    first = outcommit.create_committer(url, {}, name, store=faulty)
    job = JobContext(url, job_id="j0", config=first.config)
    first.setup_job(job)
    message = write_and_commit(first, job, {"part-j0-0-0.txt": b"j0"})
    interrupted = faulty.add(Fault("write_bytes", path_contains="_SUCCESS"))
    interrupted_save = faulty.add(Fault("save_json", path_contains="_SUCCESS"))
    with pytest.raises(outcommit.CommitError):
        first.commit_job(job, [message])
    assert interrupted.fired + interrupted_save.fired == 1
    assert store.exists(store.join(store.strip(url), "part-j0-0-0.txt"))  # published, not reported
    replacing, other = start(url, name, **{"outcommit.committer.conflict-mode": "replace"})
    replacing.commit_job(other, [write_and_commit(replacing, other, {"part-j2-0-0.txt": b"j2"})])
    assert not store.exists(store.join(store.strip(url), "part-j0-0-0.txt"))
    resumed = outcommit.create_committer(url, {}, name)
    # manifest: its rename of the journaled file finds neither side, and says it cannot tell
    refusal = "gone or replaced" if name == "v1" else "cannot tell whether it happened"
    with pytest.raises(outcommit.CommitError, match=refusal):
        resumed.commit_job(job, [message])
    assert read.committed_files(url) == [f"{url}/part-j2-0-0.txt"]
    resumed.abort_job(job)
    resumed.cleanup_job(job)
