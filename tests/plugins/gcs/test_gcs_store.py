"""The GCS store against the emulator: capabilities, copy-based rename and its recovery."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outcommit import (
    CorruptFileError,
    JobCommitError,
    JobContext,
    UnsafeCommitterError,
    create_committer,
    describe_capabilities,
    open_store,
)
from outcommit.store import FileInfo
from outcommit.testing.conformance import leftovers, run_tasks, visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore
from outcommit_gcs import GcsStore

pytestmark = pytest.mark.gcs


def http_503(message: str) -> BaseException:
    from gcsfs.retry import HttpError

    return HttpError({"code": 503, "message": message})


def test_manifest_is_the_default_and_v1_is_refused(gcs_root: str, gcs_config: dict) -> None:
    for scheme in ("gs", "gcs"):
        url = gcs_root.replace("gs://", f"{scheme}://", 1)
        assert create_committer(url, gcs_config).name == "manifest"
        with pytest.raises(UnsafeCommitterError, match=r"fs\.rename\.directory\.atomic") as refused:
            create_committer(url, gcs_config, "v1")
        assert "manifest" in refused.value.safe
    info = describe_capabilities(gcs_root, gcs_config)
    assert info["default_committer"] == "manifest"
    assert info["capabilities"]["fs.rename.file.atomic"] is True
    assert info["capabilities"]["fs.rename.directory.atomic"] is False


def test_rename_is_copy_then_delete_and_keeps_the_content_hash(gcs_root: str, gcs_config: dict) -> None:
    store = open_store(gcs_root, gcs_config)
    assert isinstance(store, GcsStore)
    root = store.strip(gcs_root)
    store.write_bytes(f"{root}/a.txt", b"payload")
    before = store.info(f"{root}/a.txt")
    store.rename_file(f"{root}/a.txt", f"{root}/sub/b.txt")
    after = store.info(f"{root}/sub/b.txt")
    assert store.info(f"{root}/a.txt") is None
    assert before is not None and after is not None and before.etag == after.etag
    assert store.read_bytes(f"{root}/sub/b.txt") == b"payload"
    store.write_bytes(f"{root}/c.txt", b"other")
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/c.txt", f"{root}/sub/b.txt")
    assert store.read_bytes(f"{root}/sub/b.txt") == b"payload"


def test_rename_outcome_from_content_hash(gcs_root: str, gcs_config: dict) -> None:
    store = open_store(gcs_root, gcs_config)
    root = store.strip(gcs_root)
    store.write_bytes(f"{root}/src", b"abc")
    known = store.info(f"{root}/src")
    assert known is not None and known.etag
    assert store.rename_outcome(f"{root}/src", f"{root}/dst", known) == "not-done"
    store.fs.cp_file(f"{root}/src", f"{root}/dst")  # the copy happened, the delete did not
    assert store.rename_outcome(f"{root}/src", f"{root}/dst", known) == "done"
    store.delete(f"{root}/src")
    assert store.rename_outcome(f"{root}/src", f"{root}/dst", known) == "done"
    store.write_bytes(f"{root}/dst", b"xyz")  # same size, other content: not this rename's copy
    assert store.rename_outcome(f"{root}/src", f"{root}/dst", known) == "unknown"
    store.delete(f"{root}/dst")
    assert store.rename_outcome(f"{root}/src", f"{root}/dst", known) == "unknown"  # both gone


def test_delete_failing_after_the_copy_is_recovered(gcs_root: str, gcs_config: dict,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(gcs_root, gcs_config)
    real_rm = store.fs.rm_file
    failed: list[str] = []

    def flaky_rm(path: str, **kwargs: Any) -> None:
        if "/tasks/" in path and len(failed) < 2:
            failed.append(path)
            raise ConnectionError(f"connection reset deleting {path}")
        real_rm(path, **kwargs)

    monkeypatch.setattr(store.fs, "rm_file", flaky_rm)
    committer = create_committer(gcs_root, gcs_config, "manifest", store=store)
    job = JobContext(gcs_root, config=committer.config)
    committer.setup_job(job)
    messages, expected = run_tasks(committer, job)
    summary = committer.commit_job(job, messages)
    monkeypatch.undo()
    assert len(failed) == 2 and summary.metrics["rename.recovered"] == 2
    view = open_store(gcs_root, gcs_config)
    assert visible_files(view, view.strip(gcs_root)) == expected
    assert leftovers(view, view.strip(gcs_root)) == []


def test_throttled_rewrite_is_retried_and_counted(gcs_root: str, gcs_config: dict) -> None:
    faulty = FaultInjectingStore(open_store(gcs_root, gcs_config),
                                 [Fault("rename_file", path_contains="/tasks/", times=2, error=http_503)])
    committer = create_committer(gcs_root, gcs_config, "manifest", store=faulty)
    job = JobContext(gcs_root, config=committer.config)
    committer.setup_job(job)
    messages, expected = run_tasks(committer, job)
    summary = committer.commit_job(job, messages)
    assert summary.metrics["store.throttled"] == 2
    view = open_store(gcs_root, gcs_config)
    assert visible_files(view, view.strip(gcs_root)) == expected


class SameSizeCorruption(FaultInjectingStore):
    """Renames, then overwrites one destination with other bytes of the same length."""

    def rename_file(self, src: str, dst: str, overwrite: bool = False) -> None:
        self.inner.rename_file(src, dst, overwrite)
        if dst.endswith("part-1-1.bin"):
            self.inner.write_bytes(dst, b"TASK 1 FILE 1")


def test_validation_catches_same_size_corruption_by_content_hash(gcs_root: str, gcs_config: dict) -> None:
    store = SameSizeCorruption(open_store(gcs_root, gcs_config))
    config = {**gcs_config, "outcommit.manifest.validate-output": "true"}
    committer = create_committer(gcs_root, config, "manifest", store=store)
    job = JobContext(gcs_root, config=committer.config)
    committer.setup_job(job)
    messages, _ = run_tasks(committer, job)
    with pytest.raises(JobCommitError, match="etag"):
        committer.commit_job(job, messages)


def test_manifest_pointing_into_another_bucket_is_refused(gcs_root: str, gcs_config: dict,
                                                          gcs_emulator: Any) -> None:
    gcs_emulator.create_bucket("outcommit-other")
    committer = create_committer(gcs_root, gcs_config, "manifest")
    job = JobContext(gcs_root, config=committer.config)
    committer.setup_job(job)
    messages, _ = run_tasks(committer, job, tasks=1, n=1)
    tampered = json.loads(json.dumps(messages[0]))
    tampered["files"][0]["d"] = "gs://outcommit-other/stolen.bin"
    with pytest.raises(JobCommitError, match="not inside the job's destination"):
        committer.commit_job(job, [tampered])
    store = open_store(gcs_root, gcs_config)
    assert store.info("outcommit-other/stolen.bin") is None
    assert visible_files(store, store.strip(gcs_root)) == {}
    committer.abort_job(job)
    assert leftovers(store, store.strip(gcs_root)) == []


def test_content_hash_is_the_reported_etag(gcs_root: str, gcs_config: dict) -> None:
    store = open_store(gcs_root, gcs_config)
    path = store.strip(gcs_root) + "/x"
    store.write_bytes(path, b"hello")
    info = store.info(path)
    assert isinstance(info, FileInfo) and info.etag == info.extra["md5Hash"]


class _Killed(BaseException):
    """The driver dies here: none of the committer's failure paths catches it."""


def _gcs_job(gcs_root: str, gcs_config: dict, faults: list[Fault] | None = None,
             **options: str) -> tuple[Any, JobContext, list[dict[str, Any]], dict[str, bytes]]:
    store = FaultInjectingStore(open_store(gcs_root, gcs_config), faults or [])
    committer = create_committer(gcs_root, {**gcs_config, **options}, "manifest", store=store)
    job = JobContext(gcs_root, config=committer.config)
    committer.setup_job(job)
    messages, expected = run_tasks(committer, job)
    return committer, job, messages, expected


@pytest.mark.parametrize(("field", "claim"), [("z", 999), ("e", "bm90IHRoaXMgZmlsZQ==")])
def test_a_manifest_the_listing_disagrees_with_fails_and_the_abort_leaves_nothing(
        gcs_root: str, gcs_config: dict, field: str, claim: Any) -> None:
    """Altered between task and job commit (default options: no validation): a size, or a
    content hash of another file of the same size. The listing job commit takes of the
    task attempts' files disagrees: nothing moves, and abort + cleanup leave nothing."""
    committer, job, messages, _ = _gcs_job(gcs_root, gcs_config)
    view = open_store(gcs_root, gcs_config)
    tampered = json.loads(json.dumps(messages[0]))
    tampered["files"][0][field] = claim
    view.save_json(committer.manifest_path(job, job.task_attempt(0).task_id), tampered)
    with pytest.raises(JobCommitError) as failure:
        committer.commit_job(job)
    cause = failure.value.__cause__
    assert isinstance(cause, CorruptFileError) and cause.field == f"files[0].{field}"
    root = view.strip(gcs_root)
    assert visible_files(view, root) == {}
    committer.abort_job(job)
    committer.cleanup_job(job)
    assert visible_files(view, root) == {}
    assert leftovers(view, root) == []


def test_abort_after_a_killed_commit_removes_its_files_and_keeps_a_same_size_rewrite(
        gcs_root: str, gcs_config: dict) -> None:
    """The driver dies right after its third rename took effect (a result it never saw).
    Another writer then rewrote the first renamed file with other bytes of the same
    length: the journal's content hash, listed by the store, tells it from the job's."""
    kill = Fault("rename_file", path_contains="/tasks/", when="after", skip=2, error=_Killed)
    committer, job, messages, expected = _gcs_job(gcs_root, gcs_config, [kill],
                                                  **{"outcommit.committer.threads": "1"})
    with pytest.raises(_Killed):
        committer.commit_job(job, messages)
    view = open_store(gcs_root, gcs_config)
    root = view.strip(gcs_root)
    renamed = sorted(visible_files(view, root))
    assert len(renamed) == 3
    first = renamed[0]
    rewrite = expected[first].upper()
    assert len(rewrite) == len(expected[first]) and rewrite != expected[first]
    view.write_bytes(f"{root}/{first}", rewrite)
    operator = create_committer(gcs_root, gcs_config, "manifest")
    operator.abort_job(job)
    operator.cleanup_job(job)
    assert visible_files(view, root) == {first: rewrite}
    assert leftovers(view, root) == []


def test_a_batch_of_deletes_is_counted_as_one_bulk_delete() -> None:
    """GcsStore.delete_many's batch request (gcsfs on GCS itself: the emulators have no
    batch endpoint) is counted as Hadoop's bulk delete, not as an unnamed POST; an object
    whose name begins 'batch/storage' is not (its '/' is percent-encoded in the path)."""
    from outcommit_gcs.tracing import statistic

    assert statistic("POST", "/batch/storage/v1", {}) == "object_bulk_delete_request"
    assert statistic("DELETE", "/storage/v1/b/bucket/o/batch%2Fstorage%2Fv1", {}) == \
        "object_delete_request"


def test_exclusive_creates_go_to_the_upload_url_of_gcsfs_public_base() -> None:
    """GcsStore.create_exclusive's URL from gcsfs's public ``base``, not its private
    ``_location``: the configured endpoint's upload API."""
    from gcsfs import GCSFileSystem

    from outcommit_gcs.store import upload_base

    fs = GCSFileSystem(endpoint_url="http://127.0.0.1:9", token="anon", skip_instance_cache=True)
    assert upload_base(fs) == "http://127.0.0.1:9/upload/storage/v1/"
