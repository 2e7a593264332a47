"""The secrets property: no secret, nor a recognisable piece of one, leaves a real job in text.

A value is set for every secret-looking key an installed plugin declares (by its flag, its
name or its description, under each of its names) and every Hadoop credential key the
project knows, with drawn secrets (PEM blocks, service account key files, base64, hex,
SAS strings, connection strings, passwords). Then a real job runs at DEBUG on a store: one
that commits, one whose commit fails (a fault injected in a real store), a configuration
with a misspelt secret key; and the CLI's ``--json`` commands read the destination with
the same settings. None of the values may be found -- as a 16-character piece with at
least 8 distinct characters -- in the captured log records (every logger, tracebacks
included), the exception messages, ``_SUCCESS``, the summary reports
(``outcommit.summary-report-dir``) or the CLI's output.

Stores: file and memory always; the moto S3 server, Azurite and the GCS emulator in the
long run (``make generative``), each keeping the credentials its emulator needs (the drawn
secrets go under the keys it does not read: another store's, Hadoop's), and in CI once
each with fixed secrets (the regression tests below the property).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

import outcommit
from generative import budget, long_run
from outcommit import JobContext
from outcommit.cli import main
from outcommit.keys import catalogue
from outcommit.success import SUCCESS_FILE
from outcommit.testing.faults import Fault, FaultInjectingStore

#: Hadoop's credential keys (S3A, ABFS, the GCS connector) and generic ones. Per-bucket and
#: per-account variants name a bucket and an account no test uses.
HADOOP_CREDENTIAL_KEYS = (
    "fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token", "fs.s3a.encryption.key",
    "fs.s3a.server-side-encryption.key", "fs.s3a.bucket.logs.access.key",
    "fs.s3a.bucket.logs.secret.key", "fs.s3a.bucket.logs.session.token",
    "fs.azure.account.key.archive.dfs.core.windows.net",
    "fs.azure.account.key.archive.blob.core.windows.net",
    "fs.azure.sas.logs.archive.blob.core.windows.net", "fs.azure.sas.fixed.token",
    "fs.azure.account.oauth2.client.secret", "fs.azure.account.oauth2.client.secret.archive",
    "fs.gs.auth.service.account.private.key", "fs.gs.auth.service.account.private.key.id",
    "fs.gs.auth.service.account.json.keyfile", "fs.gs.auth.client.secret",
    "fs.gs.auth.refresh.token",
    "javax.jdo.option.ConnectionPassword", "db.password", "service.api.token",
    "warehouse.connection.string", "metrics.api.key",
)
#: How the test itself tells a plugin's key is secret-looking (not the code under test's rule).
_LOOKS_SECRET = re.compile(r"secret|password|token|credential|private|signature|sas|"
                           r"connection.string|account.key|access.key|encryption.key",
                           re.IGNORECASE)
_SAYS_SECRET = re.compile(r"\bsecret\b|never logged", re.IGNORECASE)
#: Keys a store of the run reads to reach its emulator: they keep the emulator's values.
STORE_KEYS = {
    "s3": ("outcommit.s3.endpoint", "outcommit.s3.region", "outcommit.s3.path-style-access"),
    "azure": ("outcommit.azure.",),
    "gcs": ("outcommit.gcs.",),
}


def plugin_secret_keys() -> list[str]:
    keys = []
    for info in catalogue():
        if info.key.endswith("."):
            continue
        if info.secret or _LOOKS_SECRET.search(info.key) or _SAYS_SECRET.search(info.description):
            keys.extend([info.key, *info.aliases])
    return keys


# -- drawn secrets --------------------------------------------------------------------------
# Secret bytes: whatever is drawn (and shrunk), hashed to as many random-looking bytes, so
# that a piece of a secret is never a run of one character that text may hold by chance.
_random_bytes = st.tuples(st.binary(max_size=16), st.integers(24, 64)).map(
    lambda t: hashlib.shake_256(t[0]).digest(t[1]))


def _pem(data: bytes) -> str:
    body = base64.b64encode(data * 3).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n"


PEM = _random_bytes.map(_pem)
BASE64 = _random_bytes.map(lambda b: base64.b64encode(b).decode())
HEX = _random_bytes.map(lambda b: b.hex())
ACCESS_KEY = _random_bytes.map(lambda b: "AKIA" + b.hex()[:16].upper())
PASSWORD = st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789-_.~!*",
                   min_size=16, max_size=40).filter(
    # A password of mixed case and digits: 'outcommit.azure.h' (drawn on hypothesis 6.170)
    # is text the program itself writes (key names), not a secret anyone could leak.
    lambda s: len(set(s)) >= 10 and any(c.isdigit() for c in s) and any(c.isupper() for c in s)
    and any(c.islower() for c in s))
SAS = st.tuples(BASE64, st.sampled_from(["rwdlac", "r", "racwdl"])).map(
    lambda t: f"sv=2022-11-02&ss=b&srt=sco&sp={t[1]}&se=2031-01-01T00:00:00Z&sig={quote(t[0], safe='')}")
CONNECTION_STRING = BASE64.map(lambda key: "DefaultEndpointsProtocol=https;AccountName=archive;"
                                           f"AccountKey={key};EndpointSuffix=core.windows.net")
KEY_FILE = st.tuples(PEM, HEX).map(lambda t: json.dumps({
    "type": "service_account", "project_id": "p", "private_key_id": t[1], "private_key": t[0],
    "client_email": "writer@p.iam.gserviceaccount.com"}))
ANY_SECRET = st.one_of(PEM, BASE64, HEX, PASSWORD, SAS)


def secret_for(key: str) -> st.SearchStrategy[str]:
    """A secret of the kind the key holds (the S3 keys of an S3 run are sent: header-safe)."""
    name = key.lower()
    kinds = [("private.key.id", HEX), ("private.key", PEM), ("keyfile", KEY_FILE),
             ("connection", CONNECTION_STRING), ("sas", SAS), ("access", ACCESS_KEY),
             ("session", BASE64), ("s3.secret", st.one_of(BASE64, PASSWORD)),
             ("s3a.secret", st.one_of(BASE64, PASSWORD))]
    return next((kind for word, kind in kinds if word in name.replace("-", ".")), ANY_SECRET)


def secrets_config() -> st.SearchStrategy[dict[str, str]]:
    """A drawn secret for every key, under Spark's prefixes as often as not."""
    keys = sorted({*plugin_secret_keys(), *HADOOP_CREDENTIAL_KEYS})
    return st.fixed_dictionaries({key: st.tuples(st.sampled_from(["", "spark.", "spark.hadoop."]),
                                                 secret_for(key)) for key in keys}).map(
        lambda drawn: {prefix + key: value for key, (prefix, value) in drawn.items()})


# -- the oracle -----------------------------------------------------------------------------
WINDOW = 16
_RUNS = re.compile(r"[A-Za-z0-9+/=%_.~!*\-]{16,}")


def secret_cores(value: str) -> list[str]:
    """The parts of a secret that are secret: a PEM's body lines, a key file's key and key
    id, a SAS's signature, a connection string's key; else the value (and URL-quoted)."""
    if value.lstrip().startswith("{"):
        data = json.loads(value)
        return [*secret_cores(data["private_key"]), data["private_key_id"]]
    if "-----BEGIN" in value:
        return [line for line in value.splitlines() if "-----" not in line]
    fields = dict(part.split("=", 1) for part in re.split(r"[;&]", value) if "=" in part)
    if "sig" in fields:
        return [fields["sig"], base64.b64encode(base64.b64decode(_unquote(fields["sig"]))).decode()]
    if "AccountKey" in fields:
        return [fields["AccountKey"]]
    return [value, quote(value, safe="")]


def _unquote(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text)


def pieces(secrets: list[str]) -> dict[str, str]:
    """Every recognisable window of every secret -> the secret it comes from."""
    found: dict[str, str] = {}
    for secret in secrets:
        for core in secret_cores(secret):
            for i in range(max(1, len(core) - WINDOW + 1)):
                window = core[i:i + WINDOW]
                if len(window) == WINDOW and len(set(window)) >= 8:
                    found.setdefault(window, secret)
    return found


def leaks(secrets: list[str], outputs: dict[str, str]) -> list[str]:
    """``where: piece`` for each output holding a piece of a secret."""
    windows = pieces(secrets)
    found = []
    for where, text in outputs.items():
        for run in _RUNS.findall(text):
            for i in range(len(run) - WINDOW + 1):
                if run[i:i + WINDOW] in windows:
                    found.append(f"{where}: ...{run[max(0, i - 20):i + WINDOW + 20]}...")
                    break
    return found


# -- a real job, and everything it shows ------------------------------------------------------
def run_everything(url: str, config: dict[str, str], reports: Path, caplog: Any,
                   capsys: Any) -> dict[str, str]:
    """Run the jobs and the CLI at DEBUG; return every text they produced, by where."""
    config = {**config, "outcommit.summary-report-dir": reports.as_uri()}
    outputs: dict[str, str] = {}
    caplog.clear()
    capsys.readouterr()
    with caplog.at_level(logging.DEBUG):
        committer = outcommit.create_committer(url, config)
        job = JobContext(url, config=committer.config)
        committer.setup_job(job)
        messages = []
        for index in range(2):
            task = job.task_attempt(index)
            committer.setup_task(task)
            committer.filesystem(task).pipe_file(f"{committer.work_path(task)}/part-{index}.txt",
                                                 b"row\n")
            messages.append(committer.commit_task(task))
        committer.commit_job(job, messages)
        store = outcommit.open_store(url, config)
        outputs["_SUCCESS"] = store.read_bytes(store.join(store.strip(url), SUCCESS_FILE)).decode()

        failing_url = url + "-failing"
        inner = outcommit.open_store(failing_url, config)
        failing = FaultInjectingStore(inner, [Fault("save_json", path_contains=SUCCESS_FILE, times=-1)])
        doomed = outcommit.create_committer(failing_url, config, store=failing)
        job = JobContext(failing_url, config=doomed.config)
        doomed.setup_job(job)
        try:
            doomed.commit_job(job, [])
        except outcommit.JobCommitError as exc:
            outputs["job commit error"] = _error_text(exc)
            outputs["failed report"] = json.dumps(exc.summary.to_dict())  # type: ignore[union-attr]
        else:
            raise AssertionError("the injected fault did not fail the job commit")
        doomed.abort_job(job)
        doomed.cleanup_job(job)

        misspelt = {**config, "outcommit.s3.secret-kee": config.get("fs.s3a.secret.key", "x")}
        try:
            outcommit.create_committer(url, misspelt)
        except outcommit.ConfigError as exc:
            outputs["config error"] = _error_text(exc)

        conf = [arg for key, value in config.items() for arg in ("--conf", f"{key}={value}")]
        for command in (["success", url], ["jobs", "list", url], ["capabilities", url],
                        ["jobs", "abort", url, "no-such-job"], ["success", failing_url]):
            main([*command, "--json", *conf])
            out, err = capsys.readouterr()
            outputs[" ".join(command[:2]) + " --json"] = out + err
    outputs["logs"] = caplog.text
    for report in sorted(reports.glob("*")):
        outputs[f"report {report.name}"] = report.read_text()
    assert any(name.startswith("report summary-") for name in outputs), sorted(outputs)
    return outputs


def _error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc)


def check_no_secret_leaves(url: str, config: dict[str, str], secrets: dict[str, str],
                           tmp_path: Path, caplog: Any, capsys: Any, also: tuple[str, ...] = ()) -> str:
    """Run everything with ``secrets`` set beside ``config``; none of them (nor ``also``:
    secrets the emulator's own settings hold) may be found in what it produced. Returns
    the logs."""
    reports = tmp_path / f"reports-{uuid.uuid4().hex}"
    reports.mkdir()
    outputs = run_everything(url, {**secrets, **config}, reports, caplog, capsys)
    assert "config {" in outputs["logs"]  # the configuration was logged, and DEBUG was on
    found = leaks([*secrets.values(), *also], outputs)
    assert not found, "\n".join(found[:10])
    return outputs["logs"]


def store_config(store: str, request: pytest.FixtureRequest) -> tuple[str, dict[str, str]]:
    """(a fresh destination, the settings its emulator needs) of a store of the run."""
    if store == "file":
        return f"file://{request.getfixturevalue('tmp_path')}/out-{uuid.uuid4().hex}", {}
    if store == "memory":
        return f"memory://secrets/{uuid.uuid4().hex}", {}
    if store == "s3":
        server = request.getfixturevalue("s3_server")
        keep = {k: v for k, v in server.config.items() if k.startswith(STORE_KEYS["s3"])}
        return f"s3://outcommit-test/{uuid.uuid4().hex}", {**keep, "outcommit.retry.backoff-ms": "0"}
    if store == "azure":
        server = request.getfixturevalue("azurite_server")
        server.create_container("secrets")
        return f"abfs://secrets/{uuid.uuid4().hex}", server.config()
    server = request.getfixturevalue("gcs_server")
    server.create_bucket("outcommit-secrets")
    return f"gs://outcommit-secrets/{uuid.uuid4().hex}", server.config()


def drawn_for(store: str, drawn: dict[str, str]) -> dict[str, str]:
    """The drawn secrets a run of ``store`` may set: not under the keys its emulator needs."""
    reserved = STORE_KEYS.get(store, ())
    return {key: value for key, value in drawn.items()
            if not any(key.split("spark.hadoop.", 1)[-1].split("spark.", 1)[-1].startswith(r)
                       for r in reserved)}


STORES = ["file", "memory", *(["s3", "azure", "gcs"] if long_run() else [])]


@pytest.fixture
def quiet_servers() -> Iterator[None]:
    """The emulators' own request logs are not the job's output."""
    noisy = [logging.getLogger(name) for name in ("werkzeug", "gcp_storage_emulator")]
    levels = [logger.level for logger in noisy]
    for logger in noisy:
        logger.setLevel(logging.WARNING)
    yield
    for logger, level in zip(noisy, levels, strict=True):
        logger.setLevel(level)


@pytest.mark.generative
@pytest.mark.parametrize("store", STORES)
@budget(25)
@given(drawn=secrets_config())
def test_no_secret_leaves_a_real_job(store: str, drawn: dict[str, str], request, caplog, capsys,
                                     quiet_servers) -> None:
    """CI: file and memory, 25 examples each (about 5 s together); the long run: 500 each,
    and the emulators' stores too."""
    url, config = store_config(store, request)
    check_no_secret_leaves(url, config, drawn_for(store, drawn), request.getfixturevalue("tmp_path"),
                           caplog, capsys)


# -- the same check, fixed secrets, every store (CI) -------------------------------------------
FIXED = {
    "spark.hadoop.fs.gs.auth.service.account.private.key": _pem(bytes(range(7, 71))),
    "spark.hadoop.fs.gs.auth.service.account.private.key.id": "7c3a9e1f0b2d4c6e8a0f1b3d5c7e9a1b",
    "fs.gs.auth.service.account.json.keyfile": json.dumps({
        "type": "service_account", "private_key_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "private_key": _pem(bytes(range(90, 160)))}),
    "fs.s3a.bucket.logs.secret.key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Jd3kQ2v",
    "fs.azure.account.key.archive.dfs.core.windows.net": base64.b64encode(bytes(range(40, 104))).decode(),
    "fs.azure.sas.logs.archive.blob.core.windows.net":
        "sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2031-01-01T00:00:00Z&sig=Zk9yZWlnbiUyQnNpZ25hdHVyZTEyMzQ%3D",
    "fs.azure.account.oauth2.client.secret": "Qx7~vB3.tR9-kL2_mN5!pW8*",
    "javax.jdo.option.ConnectionPassword": "hive-Pa55word-9f8e7d6c",
}


@pytest.mark.parametrize("store", ["file", "memory",
                                   pytest.param("s3", marks=pytest.mark.s3),
                                   pytest.param("azure", marks=pytest.mark.azure),
                                   pytest.param("gcs", marks=pytest.mark.gcs)])
def test_no_fixed_secret_leaves_a_real_job(store: str, request, caplog, capsys, quiet_servers) -> None:
    url, config = store_config(store, request)
    secrets = dict(FIXED)
    if store == "s3":  # the credentials the job signs with, and the token it sends
        secrets |= {"outcommit.s3.access-key": "AKIA7C3A9E1F0B2D4C6E",
                    "fs.s3a.secret.key": "dGhlLXNpZ25pbmctc2VjcmV0LTg0MjY3NTM5",
                    "spark.hadoop.fs.s3a.session.token": base64.b64encode(bytes(range(1, 90))).decode()}
    # Azurite's account key is the one secret the job really uses there: never shown either.
    also = tuple(config["outcommit.azure.connection-string"].split("AccountKey=")[1].split(";")[:1]
                 if store == "azure" else ())
    logs = check_no_secret_leaves(url, config, secrets, request.getfixturevalue("tmp_path"), caplog,
                                  capsys, also)
    if store == "s3":  # botocore's DEBUG records were there, with the session token sent
        assert "x-amz-security-token:<redacted>" in logs.lower()
