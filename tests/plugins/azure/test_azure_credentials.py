"""Credentials the account refuses: one store error naming the endpoint, the container and
where the credentials came from, never the SDK's traceback, never the secret."""

from __future__ import annotations

import base64
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from outcommit import JobContext, create_committer, open_store
from outcommit.config import Config
from outcommit.errors import StoreCredentialsError, StorePermissionError
from outcommit_azure import AzureStore
from outcommit_azure.emulator import ACCOUNT, ACCOUNT_KEY

CONTAINER = "outcommit-tests"  # conftest's: Azurite has it
pytestmark = pytest.mark.azure

#: A well-formed key (base64, 64 bytes) that is not the account's.
WRONG_KEY = base64.b64encode(b"not the key of devstoreaccount1".ljust(64, b".")).decode()
CONNECTION_STRING = "outcommit.azure.connection-string"


def with_wrong_key(config: dict[str, Any]) -> dict[str, Any]:
    connection = config[CONNECTION_STRING]
    assert ACCOUNT_KEY in connection
    return {**config, CONNECTION_STRING: connection.replace(ACCOUNT_KEY, WRONG_KEY)}


def blob_endpoint(config: dict[str, Any]) -> str:
    return next(p for p in config[CONNECTION_STRING].split(";")
                if p.startswith("BlobEndpoint=")).partition("=")[2]


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "outcommit.cli", *argv], capture_output=True,
                          text=True, timeout=120)


def conf_args(config: dict[str, Any]) -> list[str]:
    return [arg for k, v in config.items() for arg in ("--conf", f"{k}={v}")]


def test_outcommit_success_with_a_wrong_key_is_one_line_and_exit_2(azure_root: str,
                                                                  azure_config: dict) -> None:
    """A user's trial: a 33-line traceback ending in the SDK's HttpResponseError
    (AuthorizationFailure) and exit 1, which docs/success.md says means 'not committed'."""
    done = cli("success", f"{azure_root}/t", "--json", *conf_args(with_wrong_key(azure_config)))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith("outcommit success: Azure Storage rejected the credentials for info on "
                           f"{azure_root}/t/_SUCCESS")
    assert f"container {CONTAINER!r}" in line
    assert f"account endpoint {blob_endpoint(azure_config)}" in line
    assert f"the AccountKey in {CONNECTION_STRING}" in line
    assert '"error": "StoreCredentialsError"' in done.stdout
    for secret in (WRONG_KEY, ACCOUNT_KEY):
        assert secret not in done.stderr and secret not in done.stdout


@pytest.mark.parametrize("committer", ["blocklist", "manifest"])
def test_setup_job_with_a_wrong_key_is_a_credentials_error(azure_root: str, azure_config: dict,
                                                          committer: str) -> None:
    config = with_wrong_key(azure_config)
    store = open_store(azure_root, config)
    with pytest.raises(StoreCredentialsError) as caught:
        create_committer(azure_root, config, committer).setup_job(JobContext(azure_root))
    message = str(caught.value)
    assert "\n" not in message and "AuthorizationFailure" in message
    assert blob_endpoint(azure_config) in message and f"container {CONTAINER!r}" in message
    assert CONNECTION_STRING in message
    assert WRONG_KEY not in message and ACCOUNT_KEY not in message
    assert not store.is_transient(caught.value)  # never retried: the same key fails again


def test_a_sas_without_write_permission_is_a_permission_error(azure_root: str,
                                                              azure_config: dict) -> None:
    """Valid credentials lacking the permission (AuthorizationPermissionMismatch) are not
    'rejected credentials': the message says to grant the permission. A SAS with a wrong
    signature is rejected credentials. The signature is in neither message."""
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(ACCOUNT, CONTAINER, account_key=ACCOUNT_KEY,
                                 permission=ContainerSasPermissions(read=True, list=True),
                                 expiry=datetime.now(timezone.utc) + timedelta(hours=1))
    signature = sas.partition("sig=")[2].partition("&")[0]

    def config(token: str) -> dict[str, Any]:
        connection = f"BlobEndpoint={blob_endpoint(azure_config)};SharedAccessSignature={token}"
        return {**azure_config, CONNECTION_STRING: connection}

    with pytest.raises(StorePermissionError, match="AuthorizationPermissionMismatch") as refused:
        create_committer(azure_root, config(sas), "blocklist").setup_job(JobContext(azure_root))
    assert f"the SharedAccessSignature in {CONNECTION_STRING}" in str(refused.value)
    forged = sas.replace(f"sig={signature}", "sig=" + base64.b64encode(b"x" * 32).decode())
    with pytest.raises(StoreCredentialsError, match="rejected the credentials") as rejected:
        create_committer(azure_root, config(forged), "blocklist").setup_job(JobContext(azure_root))
    for caught in (refused, rejected):
        assert signature not in str(caught.value) and "\n" not in str(caught.value)


def test_no_azure_ad_token_names_default_azure_credential() -> None:
    """No key and no SAS: the SDK asks DefaultAzureCredential, whose failure is raised
    before any request (no response). No emulator: the error is made here."""
    from azure.core.exceptions import ClientAuthenticationError

    store = AzureStore("abfs://data/t", Config({"outcommit.azure.account-name": "myaccount"}))
    failure = ClientAuthenticationError(message="DefaultAzureCredential failed to retrieve a token "
                                                "from the included credentials.\nAttempted: ...")
    error = store.translate_error(failure, "info", "data/t/_SUCCESS")
    assert isinstance(error, StoreCredentialsError)
    assert "DefaultAzureCredential" in str(error) and "https://myaccount.blob.core.windows.net" in str(error)
    assert "\n" not in str(error)
    assert store.translate_error(ValueError("not Azure's"), "info", None) is None
