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
        _assert_retried_then_left_pending(store, mp, path, upload, etags, rule)


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


GATEWAY_PAGE = b"<html><body><p>Request accepted</p></body></html>"  # well-formed XML, not S3's


@pytest.mark.parametrize("body", [
    GATEWAY_PAGE,
    b'<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ETag></ETag>'
    b"</CompleteMultipartUploadResult>",
    b'<?xml version="1.0"?><CompleteMultipartUploadResult><Location>http://s',  # cut short
], ids=["gateway-page", "no-etag", "truncated"])
def test_a_200_that_is_not_a_completion_is_retried(body, s3_server, s3_config, s3_root):
    """A 2xx counts only as a CompleteMultipartUploadResult with an ETag: anything else is
    a 500 InternalError, retried (the retry then completes, with the real ETag)."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = {**s3_config, LIGHT: "true", "outcommit.s3.endpoint": proxy.url}
        store = outcommit.open_store(s3_root, config)
        path = store.strip(s3_root) + "/not-a-completion.bin"
        mp, upload, etags = _upload(store, path)
        rule = proxy.add(Rule("not-s3", respond(200, body), **COMPLETE, times=1))
        etag = mp.complete(path, upload, etags)
    assert rule.fired == 1 and rule.matched == 2
    assert etag and store.info(path).etag == etag
    assert store.read_bytes(path) == b"content"


def test_a_gateway_page_every_time_leaves_the_upload_pending(s3_server, s3_config, s3_root):
    """A 200 gateway page never completes the upload: it must not be counted as completed."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = {**s3_config, LIGHT: "true", "outcommit.s3.endpoint": proxy.url,
                  "outcommit.s3.retry.max-attempts": "2", "outcommit.retry.attempts": "2"}
        store = outcommit.open_store(s3_root, config)
        path = store.strip(s3_root) + "/gateway.bin"
        mp, upload, etags = _upload(store, path)
        rule = proxy.add(Rule("gateway", respond(200, GATEWAY_PAGE, "text/html"), **COMPLETE, times=-1))
        _assert_retried_then_left_pending(store, mp, path, upload, etags, rule)


def test_a_wrong_region_answer_hands_the_bucket_to_botocore(s3_server, s3_config, s3_root):
    """400 AuthorizationHeaderMalformed (signed for the wrong region): botocore's region
    redirector resends such calls, the light path cannot, so it hands this call and the
    bucket's later ones to botocore."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = {**s3_config, LIGHT: "true", "outcommit.s3.endpoint": proxy.url}
        store = outcommit.open_store(s3_root, config)
        through_botocore = _botocore_completions(store.client)
        bucket = s3_root.split("/")[2]
        paths = [store.strip(s3_root) + f"/moved-{i}.bin" for i in range(2)]
        uploads = [_upload(store, p) for p in paths]
        rule = proxy.add(Rule("region", respond(400, s3_error("AuthorizationHeaderMalformed")), **COMPLETE))
        for path, (mp, upload, etags) in zip(paths, uploads, strict=True):
            assert mp.complete(path, upload, etags) == store.info(path).etag
    assert rule.fired == 1
    assert len(through_botocore) == 2  # the handed-back call, then the bucket's next one
    assert store.client.light.redirected == {bucket}


def test_the_light_path_goes_through_the_environments_proxy(monkeypatch, s3_server, s3_config, s3_root):
    """HTTP_PROXY as botocore's endpoint honours it: the completion reaches S3 through it."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        store = outcommit.open_store(s3_root, {**s3_config, LIGHT: "true"})
        path = store.strip(s3_root) + "/proxied.bin"
        mp, upload, etags = _upload(store, path)
        seen = proxy.add(Rule("seen", respond(200, b""), **COMPLETE, skip=1 << 30))  # counts, never fires
        etag = mp.complete(path, upload, etags)
    assert seen.matched == 1
    assert store.info(path).etag == etag


@pytest.mark.parametrize("endpoint, path_style, bucket", [
    ("http://10.0.0.1:9000", False, "bucket"),  # no virtual host in front of an address
    ("http://[::1]:9000", False, "bucket"),
    ("https://s3.example.com/prefix", True, "bucket"),  # botocore keeps the path's prefix
    ("https://s3.example.com/prefix", False, "bucket"),
    ("https://s3.us-west-2.amazonaws.com", False, "data--usw2-az1--x-s3"),  # S3 Express
    ("https://s3.us-west-2.amazonaws.com", True, "data--usw2-az1--x-s3"),
])
def test_addresses_the_light_path_does_not_make_go_to_botocore(endpoint, path_style, bucket):
    assert _completer(endpoint, path_style).url(bucket, "k") is None


@pytest.mark.parametrize("endpoint, path_style, expected", [
    ("http://10.0.0.1:9000", True, "http://10.0.0.1:9000/bucket/k"),
    ("https://s3.example.com", False, "https://bucket.s3.example.com/k"),
    ("https://s3.example.com/", True, "https://s3.example.com/bucket/k"),
])
def test_plain_addresses_take_the_light_path(endpoint, path_style, expected):
    assert _completer(endpoint, path_style).url("bucket", "k") == expected


def _completer(endpoint: str, path_style: bool) -> Any:
    import botocore.session

    from outcommit_s3.light import LightCompleter

    client = botocore.session.Session().create_client(
        "s3", endpoint_url=endpoint, region_name="us-west-2", aws_access_key_id="k",
        aws_secret_access_key="s")
    return LightCompleter(client, None, path_style, True, 3, 4, (1.0, 1.0))


@pytest.mark.parametrize("body", [b'<?xml version="1.0"?><CompleteMultipartUploadResult><ETag>"ab',
                                  b"<html><body>ok</body></html>"], ids=["truncated", "gateway-page"])
def test_a_200_that_is_not_a_completion_reads_as_a_500_internal_error(body):
    """What botocore's retry checks then see: a retryable 500 InternalError (not a 200 with
    an error code of "200", which no retry condition takes)."""
    from outcommit_s3.light import parse_answer

    parsed = parse_answer(200, {}, body)
    assert parsed["Error"]["Code"] == "InternalError"
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == 500


def _assert_retried_then_left_pending(store, mp, path, upload, etags, rule):
    """A 200 that is no completion, every time: retried (2 store attempts x 2 botocore
    attempts), then UploadPendingError with nothing visible and the upload still pending."""
    # botocore names the error inside a 200 InternalError; its floor (1.35) by the status.
    with pytest.raises(UploadPendingError, match=r"InternalError|answered 200"):
        mp.complete(path, upload, etags)
    assert rule.fired == 4
    assert store.info(path) is None
    assert mp.is_pending(path, upload)
    assert mp.abort(path, upload)
