"""Azure's refusals of the credentials, as outcommit store errors a user can act on.

The SDK (and adlfs over it) raises ``HttpResponseError`` for a request the account
refused: printed, a 30-line traceback ending in the service's text. The store's
operations (:func:`translated`) turn the refusals a user must fix into one line naming
the operation, the URL, the container, the account endpoint and where the credentials
came from (the configuration key, or ``DefaultAzureCredential``), never a secret:

* the credentials are rejected (a wrong or regenerated key, a bad or expired SAS, no
  token): :class:`~outcommit.errors.StoreCredentialsError`. Azure answers
  ``AuthenticationFailed`` (403) to a bad signature; Azurite answers
  ``AuthorizationFailure``, which Azure also uses when its firewall refuses the client;
* valid credentials lacking the permission (``AuthorizationPermissionMismatch`` and
  every other 403): :class:`~outcommit.errors.StorePermissionError`.

Both are ``PermissionError``, never retried (the committers retry throttling and
connection failures only). Everything else passes through unchanged: the store and the
committers read the SDK's own errors (404, 409, 412, ``InvalidBlockList``, 503).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from outcommit.errors import OutcommitError, StoreCredentialsError, StoreError, StorePermissionError

#: Error codes of a request whose credentials the account did not accept.
CREDENTIAL_CODES = frozenset({"AuthenticationFailed", "AuthorizationFailure",
                              "InvalidAuthenticationInfo", "NoAuthenticationInformation"})

F = TypeVar("F", bound=Callable[..., Any])


class Translating(Protocol):
    def translate_error(self, exc: BaseException, operation: str, path: str | None) -> StoreError | None: ...


def error_code(exc: BaseException) -> str:
    """The service's error code of an SDK error (``x-ms-error-code``), or ''."""
    code = getattr(exc, "error_code", None)
    return str(getattr(code, "value", code) or "")


def azure_error(exc: BaseException) -> BaseException | None:
    """The SDK's error behind ``exc``: itself, or the cause adlfs wrapped (its ``rm``
    raises ``RuntimeError(...) from`` the SDK's error)."""
    from azure.core.exceptions import AzureError

    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, AzureError):
            return seen
        # An error raised ``from None`` replaced the SDK's on purpose: not followed.
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return None


def translate(exc: BaseException, *, operation: str, url: str, container: str, endpoint: str,
              source: str, fix: str) -> StoreError | None:
    """The store error for ``exc`` when it is a refusal of the credentials, else None."""
    from azure.core.exceptions import ClientAuthenticationError

    found = azure_error(exc)
    if found is None:
        return None
    response = getattr(found, "response", None)
    status = getattr(found, "status_code", None) or getattr(response, "status_code", None)
    code = error_code(found)
    context = (f"{operation} on {url} (container {container!r}, account endpoint {endpoint}; "
               f"credentials: {source})")
    refusal = f"{status or ''} {code}".strip()
    if code in CREDENTIAL_CODES or status == 401:
        firewall = (". On Azure, AuthorizationFailure also means the account's firewall or "
                    "network rules refuse this client") if code == "AuthorizationFailure" else ""
        return StoreCredentialsError(
            f"Azure Storage rejected the credentials for {context}: {refusal}. {fix}{firewall}")
    if status == 403:
        return StorePermissionError(
            f"Azure Storage refused {context}: {refusal}: the credentials are valid but may not "
            f"do this there. Grant them a role with this permission on the container (e.g. "
            f"Storage Blob Data Contributor), or a SAS that allows it")
    if isinstance(found, ClientAuthenticationError) and response is None:
        # No request was answered: the key could not sign it, or no Azure AD token was found.
        reason = (str(found.message or found).strip().splitlines() or [""])[0]
        return StoreCredentialsError(
            f"no usable Azure credentials for {context}: {type(found).__name__}: {reason}. {fix}")
    return None


def translated(method: F) -> F:
    """``method`` of a store (or its block lists), raising a store error for a refusal of
    the credentials: the store's ``translate_error`` decides, given the first path."""

    @functools.wraps(method)
    def call(self: Translating, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OutcommitError:
            raise
        except Exception as exc:
            error = self.translate_error(exc, method.__name__, _first_path(args, kwargs))
            if error is None:
                raise
            raise error from exc

    return call  # type: ignore[return-value]


def _first_path(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    for value in (*args, kwargs.get("path"), kwargs.get("src"), kwargs.get("paths")):
        if isinstance(value, str):
            return value
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
            return value[0]  # delete_files: the batch's first path
    return None
