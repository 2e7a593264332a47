"""The s3 store and its multipart operations against the moto server."""

from __future__ import annotations

import logging

import pytest
from s3_helpers import HttpFaults, outcome, run_task, start

import outcommit
from outcommit import capabilities as caps
from outcommit.errors import UnsafeCommitterError, UploadGoneError, UploadPendingError
from outcommit_s3.multipart import multipart_etag

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


def test_capabilities_and_default_committer(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    for name in (caps.LISTING_CONSISTENT, caps.MULTIPART_DELAYED_COMPLETION, caps.ETAGS_AVAILABLE,
                 caps.CREATE_EXCLUSIVE, caps.DELETE_BATCH, caps.OBJECT_METADATA):
        assert store.has_capability(name)
    assert store.batch_delete() is store and store.object_metadata() is store
    assert not store.has_capability(caps.RENAME_FILE_ATOMIC)
    assert not store.has_capability(caps.RENAME_DIRECTORY_ATOMIC)
    assert outcommit.create_committer(s3_root, s3_config).name == "magic"
    assert outcommit.create_committer(s3_root.replace("s3://", "s3a://"), s3_config).name == "magic"
    with pytest.raises(UnsafeCommitterError, match=r"fs\.rename\.directory\.atomic"):
        outcommit.create_committer(s3_root, s3_config, "v1")


def test_hadoop_keys_reach_the_server_and_secrets_stay_out_of_logs(s3_server, s3_root, caplog):
    secret = "super-secret-value-123"
    config = {**{k: v for k, v in s3_server.hadoop_config.items()},
              "spark.hadoop.fs.s3a.secret.key": secret, "outcommit.s3.retry.max-attempts": "1"}
    with caplog.at_level(logging.DEBUG, logger="outcommit"):
        committer = outcommit.create_committer(s3_root, config, "magic")
        store = committer.store
        store.write_bytes(store.strip(s3_root) + "/x", b"1")  # moto accepts any secret
        assert store.read_bytes(store.strip(s3_root) + "/x") == b"1"
        logging.getLogger("outcommit").info("%r %r", store, committer.config)
    assert store.settings.endpoint_url == s3_server.endpoint_url and store.settings.path_style
    assert secret not in caplog.text and secret not in repr(store) and secret not in repr(store.settings)


def test_exclusive_create(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    path = store.strip(s3_root) + "/claim.json"
    store.create_exclusive(path, b"first")
    with pytest.raises(FileExistsError):
        store.create_exclusive(path, b"second")
    assert store.read_bytes(path) == b"first"


def test_list_pending_is_exact_for_a_directory(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    mp = store.multipart()
    root = store.strip(s3_root)
    one = mp.initiate(f"{root}/dataset1/a.txt")
    ten = mp.initiate(f"{root}/dataset10/a.txt")
    assert [u.upload_id for u in mp.list_pending(f"{root}/dataset1")] == [one]
    assert [u.upload_id for u in mp.list_pending(f"{root}/dataset1/")] == [one]
    assert {u.upload_id for u in mp.list_pending(root)} == {one, ten}
    assert mp.abort(f"{root}/dataset1/a.txt", one) and mp.abort(f"{root}/dataset10/a.txt", ten)
    assert not mp.abort(f"{root}/dataset1/a.txt", one)  # no longer pending: False, no error
    assert mp.list_pending(root) == []


def test_completion_is_idempotent_and_checked(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    mp = store.multipart()
    path = store.strip(s3_root) + "/big.bin"
    upload = mp.initiate(path)
    etags = [mp.upload_part(path, upload, 1, b"a" * (5 * MiB)), mp.upload_part(path, upload, 2, b"b")]
    etag = mp.complete(path, upload, etags)
    assert etag == multipart_etag(etags) == store.info(path).etag
    assert mp.complete(path, upload, etags) == etag  # again: success
    assert store.read_bytes(path) == b"a" * (5 * MiB) + b"b"

    gone = mp.initiate(store.strip(s3_root) + "/gone.bin")
    part = mp.upload_part(store.strip(s3_root) + "/gone.bin", gone, 1, b"x")
    mp.abort(store.strip(s3_root) + "/gone.bin", gone)
    with pytest.raises(UploadGoneError, match="aborted"):
        mp.complete(store.strip(s3_root) + "/gone.bin", gone, [part])


def test_complete_if_none_match_keeps_the_existing_object(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    mp = store.multipart()
    path = store.strip(s3_root) + "/exists.txt"
    store.write_bytes(path, b"old")
    upload = mp.initiate(path)
    part = mp.upload_part(path, upload, 1, b"new")
    with pytest.raises(FileExistsError):
        mp.complete(path, upload, [part], if_none_match=True)
    assert store.read_bytes(path) == b"old"
    assert mp.abort(path, upload)


def test_rename_is_copy_and_delete(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    root = store.strip(s3_root)
    for i in range(3):
        store.write_bytes(f"{root}/src/d/{i}.txt", str(i).encode())
    store.rename_dir(f"{root}/src", f"{root}/dst")
    assert [f.path for f in store.list_files(f"{root}/dst")] == [f"{root}/dst/d/{i}.txt" for i in range(3)]
    assert not store.exists(f"{root}/src")
    store.write_bytes(f"{root}/srcdir10/keep.txt", b"k")
    store.delete(f"{root}/dst", recursive=True)
    store.write_bytes(f"{root}/dst0/keep.txt", b"k")
    store.delete(f"{root}/dst", recursive=True)
    assert store.exists(f"{root}/dst0/keep.txt")  # a delete never reaches an adjacent prefix


def test_an_object_beyond_copy_objects_limit_is_copied_in_parts(s3_config, s3_root, monkeypatch):
    """Beyond CopyObject's 5 GiB a rename copies ranges of one multipart upload (botocore's
    UploadPartCopy: the store does not use boto3's managed transfer). Limits lowered here."""
    import outcommit_s3.store as s3store

    monkeypatch.setattr(s3store, "_MAX_COPY", 1)
    monkeypatch.setattr(s3store, "_COPY_PART", 5 * MiB)
    store = outcommit.open_store(s3_root, s3_config)
    root = store.strip(s3_root)
    data = bytes(range(256)) * (11 * MiB // 256) + b"tail"
    store.write_bytes(f"{root}/big.bin", data)
    faults = HttpFaults(store.client)
    faults.answer("UploadPartCopy", 0, "none", times=0)       # counts the parts, changes nothing
    store.rename_file(f"{root}/big.bin", f"{root}/moved/big.bin")
    assert store.read_bytes(f"{root}/moved/big.bin") == data and not store.exists(f"{root}/big.bin")
    assert faults.sent["UploadPartCopy"] == 3
    assert store.multipart().list_pending(f"{root}/") == []


def test_a_failed_part_copy_aborts_its_upload(s3_config, s3_root, monkeypatch):
    import outcommit_s3.store as s3store

    monkeypatch.setattr(s3store, "_MAX_COPY", 1)
    monkeypatch.setattr(s3store, "_COPY_PART", 5 * MiB)
    store = outcommit.open_store(s3_root, {**s3_config, "outcommit.committer.threads": "1"})
    root = store.strip(s3_root)
    store.write_bytes(f"{root}/big.bin", b"x" * (6 * MiB))
    HttpFaults(store.client).answer("UploadPartCopy", 403, "AccessDenied", times=1)
    with pytest.raises(outcommit.StorePermissionError):
        store.rename_file(f"{root}/big.bin", f"{root}/moved/big.bin")
    assert store.multipart().list_pending(f"{root}/") == []     # no upload left behind
    assert store.exists(f"{root}/big.bin") and not store.exists(f"{root}/moved/big.bin")


def _pending_upload(store, name: str) -> tuple[str, str, list[str]]:
    mp = store.multipart()
    path = f"{store.strip(store._url)}/{name}"
    upload = mp.initiate(path)
    return path, upload, [mp.upload_part(path, upload, 1, b"data of " + name.encode())]


def test_throttled_completion_is_retried_with_backoff(s3_config, s3_root):
    store = outcommit.open_store(s3_root, {**s3_config, "outcommit.retry.attempts": "4"})
    path, upload, etags = _pending_upload(store, "slow.bin")
    faults = HttpFaults(store.client)
    faults.answer("CompleteMultipartUpload", 503, "SlowDown", times=3)
    assert store.multipart().complete(path, upload, etags) == multipart_etag(etags)
    assert faults.sent["CompleteMultipartUpload"] == 4
    assert store.read_bytes(path) == b"data of slow.bin"


def test_sustained_throttling_says_so_and_keeps_the_upload_pending(s3_config, s3_root):
    store = outcommit.open_store(s3_root, {**s3_config, "outcommit.retry.attempts": "3"})
    mp = store.multipart()
    path, upload, etags = _pending_upload(store, "throttled.bin")
    faults = HttpFaults(store.client)
    faults.answer("CompleteMultipartUpload", 503, "SlowDown")
    with pytest.raises(UploadPendingError, match="503 SlowDown") as failure:
        mp.complete(path, upload, etags)
    assert "still pending" in str(failure.value) and "was aborted" not in str(failure.value)
    assert faults.sent["CompleteMultipartUpload"] == 3
    assert upload in {u.upload_id for u in mp.list_pending(store.strip(s3_root))}
    faults.clear("CompleteMultipartUpload")  # the throttling ends: a retried commit finishes
    assert mp.complete(path, upload, etags) == multipart_etag(etags)


def test_completion_whose_answer_was_lost_is_recognised(s3_config, s3_root):
    store = outcommit.open_store(s3_root, s3_config)
    path, upload, etags = _pending_upload(store, "dropped.bin")
    faults = HttpFaults(store.client)
    faults.act_then_drop("CompleteMultipartUpload")
    assert store.multipart().complete(path, upload, etags) == multipart_etag(etags)
    assert store.read_bytes(path) == b"data of dropped.bin"


def test_refused_completion_is_not_retried(s3_config, s3_root):
    store = outcommit.open_store(s3_root, {**s3_config, "outcommit.retry.attempts": "5"})
    path, upload, etags = _pending_upload(store, "denied.bin")
    faults = HttpFaults(store.client)
    faults.answer("CompleteMultipartUpload", 403, "AccessDenied")
    with pytest.raises(Exception, match="AccessDenied"):
        store.multipart().complete(path, upload, etags)
    assert faults.sent["CompleteMultipartUpload"] == 1


def test_job_commit_under_sustained_throttling_fails_loudly_then_succeeds(s3_config, s3_root):
    store = outcommit.open_store(s3_root, {**s3_config, "outcommit.retry.attempts": "2"})
    committer, job = start(s3_root, s3_config, store=store)
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    faults = HttpFaults(store.client)
    faults.answer("CompleteMultipartUpload", 503, "SlowDown")
    with pytest.raises(outcommit.JobCommitError, match=r"SlowDown.*still pending"):
        committer.commit_job(job, [message])
    faults.clear("CompleteMultipartUpload")
    committer.commit_job(job, [message])
    assert outcome(s3_root, s3_config) == ({"a.txt": b"a"}, [])


def test_delete_files_uses_the_declared_batch_interface(s3_config, s3_root):
    from outcommit.testing.faults import FaultInjectingStore

    store = FaultInjectingStore(outcommit.open_store(s3_root, s3_config))
    root = store.strip(s3_root)
    for i in range(3):
        store.write_bytes(f"{root}/d/{i}", b"x")
    store.delete_files([f"{root}/d/{i}" for i in range(3)])
    assert store.calls["delete_many"] == 1 and store.calls["delete"] == 0
    assert store.list_files(root) == []
    # A store without the capability (memory) deletes file by file through the same call.
    memory = FaultInjectingStore(outcommit.open_store("memory://batch/x"))
    assert memory.batch_delete() is None
    memory.write_bytes("/batch/x/a", b"a")
    memory.delete_files(["/batch/x/a"])
    assert memory.calls["delete"] == 1 and not memory.exists("/batch/x/a")
