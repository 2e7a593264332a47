"""outcommit.s3.light-requests: CompleteMultipartUpload without botocore's client machinery
(``outcommit_s3.light``), against the moto server over HTTP and the fault proxy.

Each fault test runs on both paths (light on and off) and asserts the same outcome: the
light path must keep botocore's retry rules and the store's error translation.
"""

from __future__ import annotations

from typing import Any

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit.errors import StoreCredentialsError, UploadPendingError
from outcommit_devtools.faultproxy import FaultProxy, Rule, respond, s3_error

LIGHT = "outcommit.s3.light-requests"
COMPLETE = {"method": "POST", "query": r"uploadId="}


def _botocore_completions(client: Any) -> list[str]:
    """CompleteMultipartUpload requests botocore's client machinery sent."""
    seen: list[str] = []

    def record(model: Any, **_: Any) -> None:
        if model.name == "CompleteMultipartUpload":
            seen.append(model.name)

    client.meta.events.register("before-call.s3", record)
    return seen


@pytest.mark.parametrize("light", ["true", "false"])
def test_a_job_commits_with_the_light_path(light, s3_config, s3_root):
    url = f"{s3_root}/job"
    committer, job = start(url, {**s3_config, LIGHT: light})
    through_botocore = _botocore_completions(committer.store.client)
    files = {f"part-{i}.txt": f"data {i}".encode() for i in range(3)}
    summary = committer.commit_job(job, [run_task(committer, job, i, {k: v})
                                         for i, (k, v) in enumerate(files.items())])
    visible, leftovers = outcome(url, s3_config)
    assert {k.rsplit("/", 1)[-1]: v for k, v in visible.items() if "part-" in k} == files
    assert leftovers == []
    assert len(through_botocore) == (0 if light == "true" else 3)
    # The store's request statistics (_SUCCESS's iostatistics) count light completions too.
    assert summary.iostatistics["counters"]["multipart_upload_completed"] == 3


def _upload(store: Any, path: str) -> tuple[Any, str, list[str]]:
    mp = store.multipart()
    upload = mp.initiate(path)
    return mp, upload, [mp.upload_part(path, upload, 1, b"content")]


@pytest.mark.parametrize("light", ["true", "false"])
@pytest.mark.parametrize("status, code", [(200, "InternalError"), (503, "SlowDown"), (500, "InternalError")])
def test_an_error_answer_is_retried(light, status, code, s3_server, s3_config, s3_root):
    """A 200 whose body is an <Error> (S3 does this for CompleteMultipartUpload), a 503
    and a 500: botocore's standard mode retries them; the completion then succeeds."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": proxy.url}
        store = outcommit.open_store(s3_root, config)
        path = store.strip(s3_root) + "/retried.bin"
        mp, upload, etags = _upload(store, path)
        rule = proxy.add(Rule("error", respond(status, s3_error(code)), **COMPLETE, times=1))
        etag = mp.complete(path, upload, etags)
    assert rule.fired == 1 and rule.matched == 2  # the error, then the retry that completed
    assert store.info(path).etag == etag
    assert store.read_bytes(path) == b"content"


@pytest.mark.parametrize("light", ["true", "false"])
def test_an_error_inside_a_200_every_time_leaves_the_upload_pending(light, s3_server, s3_config, s3_root):
    """Never completed: botocore's attempts, then the store's own, then UploadPendingError
    (the upload still there): the 200 was not taken for a completion."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": proxy.url,
                  "outcommit.s3.retry.max-attempts": "2", "outcommit.retry.attempts": "2"}
        store = outcommit.open_store(s3_root, config)
        path = store.strip(s3_root) + "/pending.bin"
        mp, upload, etags = _upload(store, path)
        rule = proxy.add(Rule("error", respond(200, s3_error("InternalError")), **COMPLETE, times=-1))
        with pytest.raises(UploadPendingError, match="InternalError"):
            mp.complete(path, upload, etags)
        assert rule.fired == 4  # 2 store attempts x 2 botocore attempts
        assert store.info(path) is None
        assert mp.is_pending(path, upload)
        assert mp.abort(path, upload)


def test_rejected_credentials_raise_what_botocores_path_raises(s3_server, s3_config, s3_root):
    messages = []
    for light in ("true", "false"):
        with FaultProxy(s3_server.endpoint_url) as proxy:
            config = {**s3_config, LIGHT: light, "outcommit.s3.endpoint": proxy.url}
            store = outcommit.open_store(s3_root, config)
            path = store.strip(s3_root) + f"/rejected-{light}.bin"
            mp, upload, etags = _upload(store, path)
            proxy.add(Rule("rejected", respond(403, s3_error("InvalidAccessKeyId")), **COMPLETE, times=-1))
            with pytest.raises(StoreCredentialsError) as raised:
                mp.complete(path, upload, etags)
            messages.append(str(raised.value).replace(proxy.url, "PROXY").replace(light, "LIGHT"))
            assert raised.value.response["Error"]["Code"] == "InvalidAccessKeyId"  # type: ignore[attr-defined]
            assert mp.abort(path, upload)
    assert messages[0] == messages[1]
    assert "S3 rejected the credentials" in messages[0]


def test_if_none_match_keeps_the_existing_object_on_the_light_path(s3_config, s3_root):
    store = outcommit.open_store(s3_root, {**s3_config, LIGHT: "true"})
    path = store.strip(s3_root) + "/exists.txt"
    store.write_bytes(path, b"old")
    mp, upload, etags = _upload(store, path)
    with pytest.raises(FileExistsError):
        mp.complete(path, upload, etags, if_none_match=True)
    assert store.read_bytes(path) == b"old"
    assert mp.abort(path, upload)
