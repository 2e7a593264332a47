"""The Azure store against Azurite (a Blob account): measured capabilities, copy-based rename, recovery."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from outcommit import JobContext, UnsafeCommitterError, create_committer, describe_capabilities, open_store
from outcommit.testing.conformance import leftovers, run_tasks, visible_files
from outcommit.testing.faults import Fault, FaultInjectingStore
from outcommit_azure import BLOB_CAPABILITIES, AzureStore
from outcommit_azure.emulator import ACCOUNT_KEY

pytestmark = pytest.mark.azure


def http_503(message: str) -> BaseException:
    from azure.core.exceptions import HttpResponseError

    error = HttpResponseError(message=f"ServerBusy: {message}")
    error.status_code = 503
    return error


def test_blob_account_is_measured_and_blocklist_is_the_default(azure_root: str, azure_config: dict) -> None:
    store = open_store(azure_root, azure_config)
    assert isinstance(store, AzureStore)
    assert store.hierarchical_namespace is False  # asked the account: Azurite has no HNS
    assert store.capabilities == BLOB_CAPABILITIES
    for scheme in ("abfs", "abfss", "az"):
        url = azure_root.replace("abfs://", f"{scheme}://", 1)
        assert create_committer(url, azure_config).name == "blocklist"
        assert create_committer(url, azure_config, "manifest").name == "manifest"
        with pytest.raises(UnsafeCommitterError, match=r"fs\.rename\.directory\.atomic"):
            create_committer(url, azure_config, "v1")
    caps = describe_capabilities(azure_root, azure_config)["capabilities"]
    assert caps["fs.rename.file.atomic"] and not caps["fs.etags.preserved-in-rename"]


def test_secrets_are_not_logged(azure_root: str, azure_config: dict,
                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="outcommit"):
        committer = create_committer(azure_root, azure_config)
    assert ACCOUNT_KEY not in caplog.text and ACCOUNT_KEY not in repr(committer.config)


def test_an_unreachable_endpoint_is_one_clear_error_in_seconds(azure_root: str, azure_config: dict) -> None:
    """A connection string naming a closed port: the SDK retried for 2 min 51 s, then
    raised its ServiceRequestError. Now one TCP connection, a store error naming the
    endpoint and the key to check, and never the account key."""
    from outcommit.errors import StoreUnreachableError

    connection = azure_config["outcommit.azure.connection-string"]
    blob_endpoint = next(p for p in connection.split(";") if p.startswith("BlobEndpoint="))
    closed = connection.replace(blob_endpoint, "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1")
    config = {**azure_config, "outcommit.azure.connection-string": closed}
    with pytest.raises(StoreUnreachableError, match=r"http://127\.0\.0\.1:1/devstoreaccount1") as caught:
        create_committer(azure_root, config, "blocklist").setup_job(JobContext(azure_root))
    assert "outcommit.azure.connection-string" in str(caught.value)
    assert ACCOUNT_KEY not in str(caught.value)


def test_the_endpoint_probe_yields_to_a_proxy_and_to_its_key(azure_root: str, azure_config: dict,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A network that reaches the endpoint only through a proxy refuses the direct probe
    while the SDK (which honours HTTP(S)_PROXY) would work: found in review."""
    from outcommit.errors import StoreUnreachableError

    closed = "http://127.0.0.1:1/devstoreaccount1"
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StoreUnreachableError, match=r"outcommit\.azure\.connection\.probe=false"):
        AzureStore._probe(closed)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    AzureStore._probe(closed)  # the proxy serves it: no direct connection is tried
    monkeypatch.delenv("HTTP_PROXY")

    connection = azure_config["outcommit.azure.connection-string"]
    blob_endpoint = next(p for p in connection.split(";") if p.startswith("BlobEndpoint="))
    config = {**azure_config, "outcommit.azure.connection-string":
              connection.replace(blob_endpoint, f"BlobEndpoint={closed}")}
    with pytest.raises(StoreUnreachableError):
        _ = open_store(azure_root, config).service
    assert open_store(azure_root, {**config, "outcommit.azure.connection.probe": "false"}).service


def test_rename_refuses_to_overwrite_and_records_its_source(azure_root: str, azure_config: dict) -> None:
    store = open_store(azure_root, azure_config)
    root = store.strip(azure_root)
    store.write_bytes(f"{root}/a", b"payload")
    store.write_bytes(f"{root}/taken", b"old")
    with pytest.raises(FileExistsError):
        store.rename_file(f"{root}/a", f"{root}/taken")
    assert store.read_bytes(f"{root}/taken") == b"old" and store.exists(f"{root}/a")
    known = store.info(f"{root}/a")
    assert known is not None
    assert store.rename_outcome(f"{root}/a", f"{root}/b", known) == "not-done"
    store.rename_file(f"{root}/a", f"{root}/b")
    assert store.read_bytes(f"{root}/b") == b"payload" and not store.exists(f"{root}/a")
    assert store.info(f"{root}/b").etag != known.etag  # copy-based: a new etag
    assert store.rename_outcome(f"{root}/a", f"{root}/b", known) == "done"  # x-ms-copy-source
    store.write_bytes(f"{root}/c", b"payload")  # same bytes, but not copied from the source
    assert store.rename_outcome(f"{root}/a", f"{root}/c", known) == "unknown"
    with pytest.raises(FileExistsError):
        store.create_exclusive(f"{root}/b", b"x")


def test_delete_failing_after_the_copy_is_recovered(azure_root: str, azure_config: dict,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.storage.blob import BlobClient

    real_delete = BlobClient.delete_blob
    failed: list[str] = []

    def flaky_delete(self: BlobClient, *args: Any, **kwargs: Any) -> Any:
        if "/tasks/" in self.blob_name and len(failed) < 2:
            failed.append(self.blob_name)
            raise ConnectionError(f"connection reset deleting {self.blob_name}")
        return real_delete(self, *args, **kwargs)

    store = open_store(azure_root, azure_config)
    committer = create_committer(azure_root, azure_config, "manifest", store=store)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    messages, expected = run_tasks(committer, job)
    monkeypatch.setattr(BlobClient, "delete_blob", flaky_delete)
    summary = committer.commit_job(job, messages)
    monkeypatch.undo()
    assert len(failed) == 2 and summary.metrics["rename.recovered"] == 2
    view = open_store(azure_root, azure_config)
    assert visible_files(view, view.strip(azure_root)) == expected
    assert leftovers(view, view.strip(azure_root)) == []


@pytest.mark.parametrize(("fault", "metric"), [
    (Fault("rename_file", path_contains="/tasks/", times=2, error=http_503), "store.throttled"),
    (Fault("rename_file", path_contains="/tasks/", when="after", times=2), "rename.recovered"),
])
def test_throttled_or_interrupted_renames_reach_the_right_outcome(azure_root: str, azure_config: dict,
                                                                  fault: Fault, metric: str) -> None:
    fault = Fault(fault.operation, fault.path_contains, fault.when, fault.times, error=fault.error)
    faulty = FaultInjectingStore(open_store(azure_root, azure_config), [fault])
    committer = create_committer(azure_root, azure_config, "manifest", store=faulty)
    job = JobContext(azure_root, config=committer.config)
    committer.setup_job(job)
    messages, expected = run_tasks(committer, job)
    summary = committer.commit_job(job, messages)
    assert summary.metrics[metric] == 2
    view = open_store(azure_root, azure_config)
    assert visible_files(view, view.strip(azure_root)) == expected
