"""The blocklist committer on Azurite: what it costs, what happens to losers' blocks, what it refuses."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from outcommit import (
    CommitError,
    CorruptFileError,
    DestinationExistsError,
    JobContext,
    create_committer,
    open_store,
)
from outcommit.testing.conformance import leftovers, visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore
from outcommit_azure.blocklist import EMPTY_BLOCK, block_id

pytestmark = pytest.mark.azure


def write(committer: Any, task: Any, files: dict[str, bytes]) -> None:
    fs, base = committer.filesystem(task), committer.work_path(task)
    for name, data in files.items():
        with fs.open(f"{base}/{name}", "wb") as f:
            f.write(data)


def run_task(committer: Any, job: JobContext, index: int, files: dict[str, bytes],
             attempt: int = 0) -> dict[str, Any]:
    task = job.task_attempt(index, attempt)
    committer.setup_task(task)
    write(committer, task, files)
    return dict(committer.commit_task(task))


def blob(store: Any, path: str) -> Any:
    return store.inner._blob(path) if isinstance(store, FaultInjectingStore) else store._blob(path)


def test_default_per_account_type(azure_root: str, azure_config: dict) -> None:
    assert create_committer(azure_root, azure_config).name == "blocklist"
    hns = {**azure_config, "outcommit.azure.hns": "true"}  # told, not asked: no DFS here
    assert create_committer(azure_root, hns).name == "manifest"
    assert create_committer(azure_root, hns, "blocklist").name == "blocklist"  # Blob API on HNS too


def test_job_commit_is_one_put_block_list_per_file_and_copies_nothing(azure_root: str,
                                                                       azure_config: dict) -> None:
    tasks, files = 3, 4
    store = FaultInjectingStore(open_store(azure_root, azure_config))
    committer = create_committer(azure_root, azure_config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    store.calls.clear()
    messages = [run_task(committer, job, i, {f"p={i}/part-{i}-{n}.bin": b"x" * (100 + n)
                                             for n in range(files)}) for i in range(tasks)]
    # Task side: one Put Block per small file, no request to start an upload; per task,
    # the pendingset (exclusive create) and the claim, then a check that the job lives.
    assert store.calls["blocklist.upload_part"] == tasks * files
    assert store.calls["blocklist.initiate"] == tasks * files  # client-side ids, no request
    assert store.calls["create_exclusive"] == 2 * tasks and store.calls["info"] == tasks
    store.calls.clear()
    summary = committer.commit_job(job, messages)
    calls = dict(store.calls)
    assert calls.pop("blocklist.complete") == tasks * files
    assert not any(op in calls for op in ("rename_file", "rename_dir", "read_bytes", "load_json"))
    # The rest is per job, not per file: the job check, commit-started marker, _SUCCESS,
    # the leftovers listing, markers and the job directory's deletion.
    assert sum(calls.values()) <= 12, calls
    assert summary.metrics["files.committed"] == tasks * files
    view = open_store(azure_root, azure_config)
    assert len(visible_files(view, view.strip(azure_root))) == tasks * files
    assert leftovers(view, view.strip(azure_root)) == []


def test_losing_attempts_blocks_are_discarded_by_the_winners_commit(azure_root: str,
                                                                    azure_config: dict) -> None:
    store = open_store(azure_root, azure_config)
    committer = create_committer(azure_root, azure_config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    loser = job.task_attempt(0, 0)
    committer.setup_task(loser)
    write(committer, loser, {"part-0.bin": b"loser", "only-in-loser.bin": b"never"})
    winner = run_task(committer, job, 0, {"part-0.bin": b"winner"}, attempt=1)
    root = store.strip(azure_root)
    pending = committer.mp.list_pending(root)
    # Both names hold uncommitted blocks and neither is visible before job commit.
    assert sorted(p.path for p in pending) == [f"{root}/only-in-loser.bin", f"{root}/part-0.bin"]
    assert visible_files(store, root) == {}
    committer.commit_job(job, [winner])
    committer.abort_task(loser)  # commits nothing, never raises
    assert visible_files(store, root) == {"part-0.bin": b"winner"}
    committed, uncommitted = blob(store, f"{root}/part-0.bin").get_block_list("all")
    (ours,) = winner["commits"]
    assert [b.id for b in committed] == ours["etags"]
    assert uncommitted == []  # the winner's Put Block List discarded the loser's blocks
    # A name only the loser wrote keeps its uncommitted blocks, invisible, until the
    # service discards them (a week after the last Put Block) or a list is committed there.
    assert [p.path for p in committer.mp.list_pending(root)] == [f"{root}/only-in-loser.bin"]
    assert store.info(f"{root}/only-in-loser.bin") is None


def test_empty_file_commits_an_empty_block_list(azure_root: str, azure_config: dict) -> None:
    committer = create_committer(azure_root, azure_config)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    message = run_task(committer, job, 0, {"empty.bin": b"", "full.bin": b"data"})
    assert [c["etags"] for c in message["commits"] if c["destinationKey"].endswith("empty.bin")] == \
        [[EMPTY_BLOCK]]
    committer.commit_job(job, [message])
    view = open_store(azure_root, azure_config)
    assert visible_files(view, view.strip(azure_root)) == {"empty.bin": b"", "full.bin": b"data"}


def test_large_file_is_staged_block_by_block(azure_root: str, azure_config: dict) -> None:
    config = {**azure_config, "outcommit.azure.block-size": "1000"}
    store = FaultInjectingStore(open_store(azure_root, config))
    committer = create_committer(azure_root, config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    data = bytes(range(256)) * 10  # 2,560 bytes: blocks of 1000, 1000, 560
    message = run_task(committer, job, 0, {"big.bin": data})
    assert store.calls["blocklist.upload_part"] == 3 and len(message["commits"][0]["etags"]) == 3
    committer.commit_job(job, [message])
    assert store.read_bytes(f"{store.strip(azure_root)}/big.bin") == data


@pytest.mark.parametrize("tamper", ["another upload's blocks", "blocks out of order", "container",
                                    "outside the destination"])
def test_tampered_pendingsets_are_refused_before_anything_is_committed(
        azure_root: str, azure_config: dict, tamper: str) -> None:
    store = FaultInjectingStore(open_store(azure_root, azure_config))
    committer = create_committer(azure_root, azure_config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    victim = run_task(committer, job, 0, {"a.bin": b"a" * 10, "b.bin": b"b" * 10})
    other = run_task(committer, job, 1, {"c.bin": b"1234567890"})
    bad = copy.deepcopy(victim)
    entry = bad["commits"][0]
    if tamper == "another upload's blocks":  # the other task's staged blocks, same length
        entry["etags"] = [block_id(other["commits"][0]["uploadId"], 1)]
    elif tamper == "blocks out of order":
        entry["etags"] = [block_id(entry["uploadId"], 2)]
    elif tamper == "container":
        entry["bucket"] = "elsewhere"
        entry.pop("uri")
    else:
        entry["destinationKey"] = "elsewhere/escaped.bin"
        entry.pop("uri")
    store.calls.clear()
    with pytest.raises((CorruptFileError, CommitError)) as failure:
        committer.commit_job(job, [bad, other])
    assert failure.value is not None
    assert store.calls["blocklist.complete"] == 0  # refused on load: nothing committed
    view = open_store(azure_root, azure_config)
    found = visible_files(view, view.strip(azure_root))
    assert "a.bin" not in found and "escaped.bin" not in found
    committer.abort_job(job)


@pytest.mark.parametrize("ours", [b"ours", b""], ids=["file", "empty-file"])
def test_conflict_mode_fail_never_replaces_a_file_that_appears_during_commit(
        azure_root: str, azure_config: dict, ours: bytes) -> None:
    """An empty file's block list is empty, like any blob put whole: its metadata, not its
    list, proves whose it is (without it, the refused commit passed for ours)."""
    config = {**azure_config, "outcommit.committer.conflict-mode": "fail"}
    store = FaultInjectingStore(open_store(azure_root, config))
    committer = create_committer(azure_root, config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    message = run_task(committer, job, 0, {"a.bin": b"ours", "b.bin": ours})
    root = store.strip(azure_root)
    appeared: list[str] = []

    def someone_writes_b(operation: str, args: tuple[Any, ...]) -> bool:
        # After the destination was found empty, another writer creates b.bin.
        if args[0].endswith("/b.bin") and not appeared:
            appeared.append(args[0])
            open_store(azure_root, azure_config).write_bytes(f"{root}/b.bin", b"theirs")
        return False

    store.add(Fault("blocklist.complete", predicate=someone_writes_b))
    with pytest.raises(CommitError) as failure:
        committer.commit_job(job, [message])
    assert isinstance(failure.value.__cause__, DestinationExistsError)
    assert store.read_bytes(f"{root}/b.bin") == b"theirs"  # If-None-Match: * kept it
    committer.abort_job(job)  # deletes what this job completed (proved by its block list)
    view = open_store(azure_root, azure_config)
    assert visible_files(view, view.strip(azure_root)) == {"b.bin": b"theirs"}


def test_abort_keeps_a_blob_put_whole_where_an_empty_file_was_never_committed(
        azure_root: str, azure_config: dict) -> None:
    """abort_job deletes only what this job completed: a blob put whole (empty committed
    list) where the job's empty file was to go is not the job's."""
    root_view = open_store(azure_root, azure_config)
    root = root_view.strip(azure_root)
    root_view.write_bytes(f"{root}/b.bin", b"pre-existing data")
    config = {**azure_config, "outcommit.committer.conflict-mode": "append"}
    store = FaultInjectingStore(open_store(azure_root, config), [Fault("blocklist.complete", times=-1)])
    committer = create_committer(azure_root, config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    message = run_task(committer, job, 0, {"a.bin": b"ours", "b.bin": b""})
    with pytest.raises(CommitError):
        committer.commit_job(job, [message])   # every completion fails
    committer.abort_job(job)
    assert visible_files(root_view, root) == {"b.bin": b"pre-existing data"}


def test_repeated_job_commit_recognises_its_own_files(azure_root: str, azure_config: dict) -> None:
    config = {**azure_config, "outcommit.committer.conflict-mode": "fail"}
    store = FaultInjectingStore(open_store(azure_root, config),
                                [Fault("blocklist.complete", when="after", skip=1)])
    committer = create_committer(azure_root, config, store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    files = {**{f"f{i}.bin": b"%d" % i for i in range(4)}, "empty.bin": b""}
    message = run_task(committer, job, 0, files)
    with pytest.raises(CommitError):
        committer.commit_job(job, [message])
    committer.commit_job(job, [message])  # If-None-Match refuses; block list/metadata prove ours
    view = open_store(azure_root, azure_config)
    assert visible_files(view, view.strip(azure_root)) == files


def test_uploads_cli_lists_uncommitted_names_and_says_why_it_cannot_abort(
        azure_root: str, azure_config: dict, capsys: pytest.CaptureFixture[str]) -> None:
    from outcommit.cli import main

    store = open_store(azure_root, azure_config)
    blocks = store.block_lists()
    assert blocks is not None
    path = f"{store.strip(azure_root)}/staged.bin"
    blocks.upload_part(path, blocks.initiate(path), 1, b"never committed")
    conf = [arg for key, value in azure_config.items() for arg in ("--conf", f"{key}={value}")]
    assert main(["uploads", "list", azure_root, *conf]) == 0
    assert f"{azure_root}/staged.bin" in capsys.readouterr().out
    assert main(["uploads", "abort", azure_root, "--force", *conf]) == 2
    assert "cannot abort uncommitted blocks" in capsys.readouterr().err


def test_conflict_mode_replace_replaces_the_old_data(azure_root: str, azure_config: dict) -> None:
    """Found by the fault matrix (driver/*/replace): the check that every upload is still
    pending before old data is deleted compared upload ids, which Azure's listing of
    uncommitted names does not have, and refused every replace."""
    config = {**azure_config, "outcommit.committer.conflict-mode": "replace"}
    view = open_store(azure_root, config)
    root = view.strip(azure_root)
    view.write_bytes(f"{root}/old.txt", b"before the job")
    committer = create_committer(azure_root, config, "blocklist")
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    files = [{f"part-{i}.txt": f"task {i}".encode()} for i in range(2)]
    summary = committer.commit_job(job, [run_task(committer, job, i, files[i]) for i in range(2)])
    assert summary.metrics["conflict.deleted"] == 1
    assert visible_files(view, root) == {**files[0], **files[1]}
    assert leftovers(view, root) == []


def test_conflict_mode_replace_deletes_the_old_files_threads_at_once(azure_root: str,
                                                                     azure_config: dict) -> None:
    """Azure has no batch delete here: 'replace' sends one delete per old file, `threads`
    at once (one after another, 10,000 old files are 10,000 round trips of job commit)."""
    threads = 4
    config = {**azure_config, "outcommit.committer.conflict-mode": "replace",
              "outcommit.committer.threads": str(threads)}
    view = open_store(azure_root, config)
    root = view.strip(azure_root)
    old = [f"{root}/old-{i}.txt" for i in range(threads)]
    for path in old:
        view.write_bytes(path, b"before the job")
    together = threading.Barrier(threads, timeout=60)  # breaks if a delete waits for another's
    store = FaultInjectingStore(open_store(azure_root, config), [Fault(
        "delete", path_contains="/old-", times=0, predicate=lambda _op, _args: together.wait() < 0)])
    committer = create_committer(azure_root, config, "blocklist", store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    files = {"part-0.txt": b"task 0"}
    summary = committer.commit_job(job, [run_task(committer, job, 0, files)])
    assert summary.metrics["conflict.deleted"] == threads
    assert visible_files(view, root) == files
    assert leftovers(view, root) == []


@pytest.mark.parametrize(("files", "there_before"), [
    ({"report.csv": b"new report"}, True),
    ({"empty.csv": b""}, True),
    ({"empty.csv": b""}, False),
], ids=["same-name", "same-name-empty", "new-name-empty"])
def test_replace_commits_a_file_whose_name_already_holds_a_blob(
        azure_root: str, azure_config: dict, files: dict[str, bytes], there_before: bool) -> None:
    """Issue 27, defect 5: a daily ``report.csv`` under ``replace``. The listing of pending
    uploads leaves out a name that holds a committed blob, so the check before old data is
    deleted read the job's own upload as gone (UploadGoneError, 'rerun the job'), and every
    rerun failed the same way. An empty file stages no block at all: it failed on any name."""
    config = {**azure_config, "outcommit.committer.conflict-mode": "replace"}
    view = open_store(azure_root, config)
    root = view.strip(azure_root)
    for run in range(2):  # every run, not only the first
        view.write_bytes(f"{root}/old-{run}.txt", b"old")
        for name in files if there_before else ():
            view.write_bytes(f"{root}/{name}", b"yesterday's")
        committer = create_committer(azure_root, config, "blocklist")
        job = JobContext(azure_root, config=committer.config)
        committer.setup_job(job)
        summary = committer.commit_job(job, [run_task(committer, job, 0, files)])
        assert summary.metrics["conflict.deleted"] == 1
        assert visible_files(view, root) == files
        assert leftovers(view, root) == []
