"""Production S3 settings (encryption, ACL, storage class, requester pays, profiles, roles)
and the errors a user can act on, against the moto server (which has KMS and STS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit.errors import StoreCredentialsError, StoreNotFoundError, StoreUnreachableError

pytestmark = pytest.mark.s3


@pytest.fixture
def kms_key(s3_server: Any) -> str:
    import boto3

    kms = boto3.client("kms", endpoint_url=s3_server.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    return str(kms.create_key(Description="outcommit tests")["KeyMetadata"]["Arn"])


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_encryption_acl_and_storage_class_on_every_object_created(name, s3_config, s3_root, kms_key):
    url = f"{s3_root}/sse-{name}"
    config = {**s3_config, "spark.hadoop.fs.s3a.encryption.algorithm": "SSE-KMS",
              "spark.hadoop.fs.s3a.encryption.key": kms_key,
              "outcommit.s3.acl": "BucketOwnerFullControl", "outcommit.s3.storage-class": "standard_ia"}
    committer, job = start(url, config, name)
    message = run_task(committer, job, 0, {"d=1/a.parquet": b"a" * 1000, "b.parquet": b"b"})
    committer.commit_job(job, [message])
    # A repeated completion is recognised by the parts' etag, encrypted or not.
    mp = committer.store.multipart()
    commit = message["commits"][0]
    assert mp.complete(f"{commit['bucket']}/{commit['destinationKey']}", commit["uploadId"],
                       commit["etags"])
    files, left = outcome(url, config)
    assert sorted(files.values()) == [b"a" * 1000, b"b"] and left == []
    client = committer.store.client
    store = outcommit.open_store(url, config)
    for info in store.list_files(store.strip(url)):  # data files and _SUCCESS alike
        bucket, key = info.path.split("/", 1)
        head = client.head_object(Bucket=bucket, Key=key)
        assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == kms_key, key
        assert head.get("StorageClass") == "STANDARD_IA", key
        grants = client.get_object_acl(Bucket=bucket, Key=key)["Grants"]
        assert any(g["Permission"] == "FULL_CONTROL" for g in grants), key


def test_requester_pays_marks_every_request(s3_config, s3_root):
    committer, job = start(f"{s3_root}/pays", {**s3_config, "fs.s3a.requester.pays.enabled": "true"})
    seen: dict[str, Any] = {}

    def record(request: Any, event_name: str, **_: Any) -> None:  # the request as sent
        payer = request.headers.get("x-amz-request-payer")
        seen[event_name.rsplit(".", 1)[1]] = payer.decode() if isinstance(payer, bytes) else payer

    # before-send: botocore's requests and the light path's completions (no before-call) alike.
    committer.store.client.meta.events.register("before-send.s3", record)
    committer.commit_job(job, [run_task(committer, job, 0, {"a.txt": b"a"})])
    assert {"CreateMultipartUpload", "UploadPart", "PutObject", "CompleteMultipartUpload"} <= set(seen)
    assert set(seen.values()) == {"requester"}


def _aws_files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "credentials").write_text("[outcommit-test]\naws_access_key_id = testing\n"
                                          "aws_secret_access_key = testing\n")
    (tmp_path / "config").write_text("[profile outcommit-test]\nregion = us-east-1\n")
    return {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
            "AWS_CONFIG_FILE": str(tmp_path / "config")}


def _without_keys(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if "access-key" not in k and "secret-key" not in k}


def test_a_named_profile_supplies_the_credentials(s3_config, s3_root, tmp_path, monkeypatch):
    for name, value in _aws_files(tmp_path).items():
        monkeypatch.setenv(name, value)
    config = {**_without_keys(s3_config), "outcommit.s3.profile": "outcommit-test"}
    committer, job = start(f"{s3_root}/profile", config)
    committer.commit_job(job, [run_task(committer, job, 0, {"a.txt": b"a"})])
    assert outcome(f"{s3_root}/profile", config) == ({"a.txt": b"a"}, [])
    assert "profile 'outcommit-test'" in committer.store.client.credential_source


def test_an_assumed_role_signs_the_requests(s3_server, s3_config, s3_root):
    role = "arn:aws:iam::123456789012:role/outcommit-writer"
    config = {**s3_config, "fs.s3a.assumed.role.arn": role,
              "fs.s3a.assumed.role.sts.endpoint": s3_server.endpoint_url}
    committer, job = start(f"{s3_root}/role", config)
    committer.commit_job(job, [run_task(committer, job, 0, {"a.txt": b"a"})])
    assert outcome(f"{s3_root}/role", s3_config) == ({"a.txt": b"a"}, [])
    assert committer.store.client.credential_source.endswith(f"then the assumed role {role}")


def test_a_wrong_endpoint_fails_before_any_request_and_says_which(s3_config, s3_root):
    config = {**s3_config, "outcommit.s3.endpoint": "http://127.0.0.1:1"}
    with pytest.raises(StoreUnreachableError, match=r"http://127\.0\.0\.1:1.*outcommit\.s3\.endpoint"):
        start(f"{s3_root}/nowhere", config)


def test_a_missing_bucket_is_named(s3_config):
    with pytest.raises(StoreNotFoundError, match="the bucket 'no-such-bucket-here' does not exist"):
        start("s3://no-such-bucket-here/t", s3_config)


def test_missing_credentials_say_where_they_were_looked_for(s3_config, s3_root, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(StoreCredentialsError, match=r"no AWS credentials .*credentials: none found"):
        start(f"{s3_root}/anon", _without_keys(s3_config))


def test_the_cli_prints_one_line_for_a_store_error(s3_config, s3_root):
    conf = [arg for k, v in {**s3_config, "outcommit.s3.endpoint": "http://127.0.0.1:1"}.items()
            for arg in ("--conf", f"{k}={v}")]
    done = subprocess.run([sys.executable, "-m", "outcommit.cli", "uploads", "list", s3_root, *conf],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("outcommit uploads: cannot reach the S3 endpoint http://127.0.0.1:1")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "outcommit.cli", *argv], capture_output=True,
                          text=True, timeout=120)


def conf_args(config: dict[str, Any]) -> list[str]:
    return [arg for k, v in config.items() for arg in ("--conf", f"{k}={v}")]


def test_a_forbidden_head_is_one_line_not_a_traceback(s3_server, s3_config, s3_root):
    """A HEAD answer has no body: botocore's error code is the bare '403'. `outcommit
    success` printed a traceback and exited 1, which says 'not committed'."""
    from outcommit_devtools.faultproxy import FaultProxy, Rule, respond

    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxy.add(Rule("forbidden", respond(403, b""), method="HEAD", times=-1))
        done = cli("success", f"{s3_root}/t", "--json",
                   *conf_args({**s3_config, "outcommit.s3.endpoint": proxy.url}))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "403 Forbidden to head_object" in done.stderr and "IAM policy" in done.stderr
    assert '"error": "StorePermissionError"' in done.stdout


def test_https_to_a_plain_http_endpoint_says_to_write_http(s3_server, s3_config, s3_root):
    endpoint = s3_server.endpoint_url.replace("http://", "https://")
    done = cli("success", f"{s3_root}/t", *conf_args({**s3_config, "outcommit.s3.endpoint": endpoint}))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "no TLS connection" in done.stderr and "http:// in outcommit.s3.endpoint" in done.stderr


def test_the_session_token_is_not_in_botocores_debug_records(s3_config, s3_root, caplog):
    """botocore logs each request's headers and the canonical request it signs at DEBUG:
    X-Amz-Security-Token's value was in them (docs/configuration.md: never logged)."""
    import logging

    token, secret = "SessionTokenValue-4f2a9c", "SecretKeyValue-7d1e3b"
    config = {**s3_config, "outcommit.s3.session-token": token, "outcommit.s3.secret-key": secret}
    with caplog.at_level(logging.DEBUG):
        committer, job = start(f"{s3_root}/token", config)
        committer.commit_job(job, [run_task(committer, job, 0, {"a.txt": b"a"})])
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "x-amz-security-token:<redacted>" in logged.lower()  # botocore did log the headers
    assert token not in logged and secret not in logged


def test_an_assumed_roles_credentials_are_not_in_botocores_debug_records(s3_server, s3_config,
                                                                         s3_root, caplog):
    """botocore.parsers logs STS AssumeRole's answer at DEBUG: its SecretAccessKey and
    SessionToken were in it (found in review)."""
    import logging
    import re

    role = "arn:aws:iam::123456789012:role/outcommit-writer"
    config = {**s3_config, "fs.s3a.assumed.role.arn": role,
              "fs.s3a.assumed.role.sts.endpoint": s3_server.endpoint_url}
    with caplog.at_level(logging.DEBUG):
        committer, job = start(f"{s3_root}/role-debug", config)
        committer.commit_job(job, [run_task(committer, job, 0, {"a.txt": b"a"})])
    logged = "\n".join(record.getMessage() for record in caplog.records)
    values = re.findall(r"<(SessionToken|SecretAccessKey)>(.*?)</\1>", logged)
    assert {name for name, _ in values} == {"SessionToken", "SecretAccessKey"}  # it was logged
    assert {value for _, value in values} == {"<redacted>"}
    assert "x-amz-security-token:<redacted>" in logged.lower()  # the role's token, in requests


def test_an_untrusted_certificate_is_not_told_to_switch_to_plain_http(s3_config, s3_root):
    """Review: every TLS failure said to write http://, which for a self-signed MinIO or
    TLS interception would send the data and the session token unencrypted; and a TLS
    failure, a ConnectionError, was retried by the committers."""
    import ssl

    from botocore.exceptions import SSLError

    client = outcommit.open_store(s3_root, s3_config).client
    untrusted = SSLError(endpoint_url="https://minio.example:9000", error=ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"))
    error = client.translate(untrusted, "head_object", "b", "k")
    assert "CA bundle" in str(error) and "write it with http://" not in str(error)
    assert not isinstance(error, ConnectionError)
    plain = SSLError(endpoint_url="https://127.0.0.1:9000", error=ssl.SSLError(
        1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"))
    assert "write it with http://" in str(client.translate(plain, "head_object", "b", "k"))


def test_unsupported_or_misspelled_encryption_is_refused(s3_config, s3_root):
    with pytest.raises(outcommit.ConfigError, match=r"SSE-C .* is not supported"):
        start(f"{s3_root}/c", {**s3_config, "outcommit.s3.encryption.algorithm": "SSE-C"})
    with pytest.raises(outcommit.ConfigError, match="use SSE-S3, SSE-KMS or DSSE-KMS"):
        start(f"{s3_root}/c", {**s3_config, "outcommit.s3.encryption.algorithm": "SSE-XYZ"})


def test_a_storage_class_aws_does_not_know_is_refused_for_aws_and_named_by_others(
        s3_config, s3_root, caplog):
    """It failed at the first upload, with S3's raw InvalidStorageClass. For AWS (no
    endpoint) a class outside botocore's model is refused when the store is made; an
    S3-compatible store may have classes of its own (Ceph RGW): a warning, and if it
    refuses the class, a store error naming the key (review: refusing those broke them)."""
    import logging

    with pytest.raises(outcommit.ConfigError, match=r"storage-class='standard_infrequent'.*standard_ia"):
        outcommit.open_store("s3://some-bucket/t", {"outcommit.s3.storage-class": "standard_infrequent"})
    config = {**s3_config, "outcommit.s3.storage-class": "standard_infrequent"}
    with caplog.at_level(logging.WARNING, logger="outcommit_s3"):
        committer = outcommit.create_committer(f"{s3_root}/c", config)
    assert "is not one of AWS's storage classes" in caplog.text
    with pytest.raises(outcommit.errors.StoreError, match=r"refused the storage class 'STANDARD_INFREQUENT'"
                                                          r".*outcommit\.s3\.storage-class"):
        committer.setup_job(outcommit.JobContext(f"{s3_root}/c"))


def test_stores_share_one_botocore_model_loader(s3_config, s3_root):
    """A new store must not parse botocore's JSON models again (the fault matrix opens
    hundreds of stores: that parse was half of its CPU time)."""
    first, second = (outcommit.open_store(s3_root, s3_config) for _ in range(2))
    assert first.client._client is not second.client._client
    assert first.client._client._loader is second.client._client._loader
    first.client.list_objects_v2(Bucket=s3_root.split("/")[2], MaxKeys=1)  # both still work
    second.client.list_objects_v2(Bucket=s3_root.split("/")[2], MaxKeys=1)


@pytest.mark.parametrize("connections", [None, "8"])
def test_the_pool_holds_job_commits_requests_beside_its_completions(s3_config, s3_root, connections):
    """Job commit runs its committer's threads of completions (as many as the pool's
    connections by default) and ends the job and lists its state beside them: with no
    room for those, urllib3 discards connections ("Connection pool is full")."""
    from outcommit.multipart import JOB_COMMIT_SIDE_REQUESTS

    config = {k: v for k, v in s3_config.items() if k != "outcommit.committer.threads"}  # the default
    if connections:
        config["outcommit.s3.connection.maximum"] = connections
    committer = outcommit.create_committer(s3_root, config, "magic")
    pool = committer.store.client.meta.config.max_pool_connections
    assert committer.threads == committer.store.settings.max_connections == int(connections or 64)
    assert pool == committer.threads + JOB_COMMIT_SIDE_REQUESTS == int(connections or 64) + 2
