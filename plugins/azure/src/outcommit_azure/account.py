"""The Azure account a store works in: its configuration keys, the credentials they give,
the Blob service client made from them, the one connection that proves its endpoint, and
where a refused credential came from (for the one-line error, never the secret)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from outcommit.config import Config
from outcommit.errors import ConfigError, StoreUnreachableError
from outcommit.multipart import DEFAULT_PART_SIZE
from outcommit.storeio import connect_once

CONNECTION_STRING_KEY = "outcommit.azure.connection-string"
ACCOUNT_NAME_KEY = "outcommit.azure.account-name"
ACCOUNT_KEY_KEY = "outcommit.azure.account-key"
SAS_TOKEN_KEY = "outcommit.azure.sas-token"
HNS_KEY = "outcommit.azure.hns"
BLOCK_SIZE_KEY = "outcommit.azure.block-size"
PROBE_KEY = "outcommit.azure.connection.probe"
#: Seconds the one TCP connection made before the first request may take.
PROBE_TIMEOUT = 10.0

CONFIG_KEYS: dict[str, str] = {
    CONNECTION_STRING_KEY: "Azure Storage connection string (secret: never logged)",
    ACCOUNT_NAME_KEY: "storage account name (with account-key, sas-token or Azure AD credentials)",
    ACCOUNT_KEY_KEY: "storage account key (secret)",
    SAS_TOKEN_KEY: "shared access signature (secret)",
    HNS_KEY: "auto (default: ask the account), true or false: hierarchical namespace",
    BLOCK_SIZE_KEY: f"blocklist: bytes per staged block (default {DEFAULT_PART_SIZE}); a writer "
                    "keeps one block per file in memory until it is staged",
    PROBE_KEY: "true (default): before the first request, check the Blob endpoint accepts "
               "connections (skipped where a proxy serves it), so a wrong endpoint fails in "
               "seconds with a clear error instead of after the SDK's retries",
}

#: Credentials: never logged, shown or written (declared to core's redaction).
SECRET_KEYS = frozenset({CONNECTION_STRING_KEY, ACCOUNT_KEY_KEY, SAS_TOKEN_KEY})


def credentials(config: Config, url: str) -> dict[str, Any]:
    """The Blob client's options from the configuration (and the account in ``url``)."""
    options: dict[str, Any] = {}
    connection = config.get_str(CONNECTION_STRING_KEY)
    if connection:
        options["connection_string"] = connection
    netloc = urlsplit(url).netloc
    # ``abfss://container@account.dfs.core.windows.net/``: the account follows the '@';
    # in ``abfs://container/path`` the host part is the container.
    account = config.get_str(ACCOUNT_NAME_KEY) or (netloc.split("@", 1)[1] if "@" in netloc else None)
    if account and not connection:
        options["account_name"] = account.split(".", 1)[0]
    for key, option in ((ACCOUNT_KEY_KEY, "account_key"), (SAS_TOKEN_KEY, "sas_token")):
        value = config.get_str(key)
        if value:
            options[option] = value
    return options


def make_service(creds: dict[str, Any], store_url: str) -> Any:
    """A synchronous BlobServiceClient from :func:`credentials` (ConfigError when none)."""
    from azure.storage.blob import BlobServiceClient

    if "connection_string" in creds:
        return BlobServiceClient.from_connection_string(creds["connection_string"])
    if "account_name" in creds:
        url = f"https://{creds['account_name']}.blob.core.windows.net"
        credential: Any = creds.get("account_key") or creds.get("sas_token")
        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        elif "account_key" in creds:
            credential = {"account_name": creds["account_name"],
                          "account_key": creds["account_key"]}
        return BlobServiceClient(url, credential=credential)
    raise ConfigError(f"no Azure credentials for {store_url}: set {CONNECTION_STRING_KEY}, or "
                      f"{ACCOUNT_NAME_KEY} with {ACCOUNT_KEY_KEY}, {SAS_TOKEN_KEY} or Azure AD login")


def probe_endpoint(url: str) -> None:
    """One TCP connection to the Blob endpoint: a wrong or closed one fails now, in
    seconds, not after the SDK's retries (a closed port: nearly 3 minutes, then its
    traceback). The message names the endpoint, never a key. Skipped where a proxy
    serves the endpoint (the SDK honours HTTPS_PROXY; a direct connection may be
    refused there while the SDK's requests go through)."""
    parts = urlsplit(url)
    if parts.scheme in getproxies() and not proxy_bypass(parts.hostname or ""):
        return
    try:
        connect_once(url, PROBE_TIMEOUT)
    except OSError as exc:
        raise StoreUnreachableError(
            f"cannot reach the Azure Blob endpoint {parts.scheme}://{parts.netloc}{parts.path} "
            f"({type(exc).__name__}: {exc}, within {PROBE_TIMEOUT:g} s): check "
            f"{CONNECTION_STRING_KEY} (its BlobEndpoint) or {ACCOUNT_NAME_KEY}, and that the "
            f"service is up and reachable from here ({PROBE_KEY}=false skips this check)") from exc


def credential_source(config: Config) -> tuple[str, str]:
    """Where the service client's credentials come from, and how to fix them: the
    configuration key (and the kind of secret in a connection string), never a secret."""
    connection = config.get_str(CONNECTION_STRING_KEY)
    if connection:
        names = {part.partition("=")[0].strip().lower() for part in connection.split(";")}
        if "sharedaccesssignature" in names:
            return (f"the SharedAccessSignature in {CONNECTION_STRING_KEY}",
                    f"Check the SAS token in {CONNECTION_STRING_KEY}: its signature, its "
                    "start and expiry times, and the account it was made for")
        if "accountkey" in names:
            return (f"the AccountKey in {CONNECTION_STRING_KEY}",
                    f"Check AccountName and AccountKey in {CONNECTION_STRING_KEY} (a key "
                    "regenerated since, or copied incompletely)")
        return (f"{CONNECTION_STRING_KEY} (no AccountKey or SharedAccessSignature in it)",
                f"Add the account's key or a SAS token to {CONNECTION_STRING_KEY}")
    if config.get_str(ACCOUNT_KEY_KEY):
        return (f"the account key in {ACCOUNT_KEY_KEY}",
                f"Check {ACCOUNT_NAME_KEY} and {ACCOUNT_KEY_KEY} (a key regenerated since, "
                "or copied incompletely)")
    if config.get_str(SAS_TOKEN_KEY):
        return (f"the SAS token in {SAS_TOKEN_KEY}",
                f"Check {SAS_TOKEN_KEY}: its signature, its start and expiry times, and "
                "the account it was made for")
    return ("DefaultAzureCredential (Azure AD: environment, managed identity, Azure CLI "
            "login)", f"Check the identity DefaultAzureCredential finds (az login, "
            f"AZURE_CLIENT_ID...), or set {ACCOUNT_KEY_KEY} or {SAS_TOKEN_KEY}")
