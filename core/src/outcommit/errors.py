"""Exceptions raised by outcommit. Every message says what to do about it."""

from __future__ import annotations

from typing import Any

from .redaction import scrub


class OutcommitError(Exception):
    """Base class of every error raised on purpose by outcommit.

    Its message is scrubbed of secrets (:func:`outcommit.redaction.scrub`): it may quote a
    value, or wrap an SDK's error that does, and it reaches logs, ``_SUCCESS`` diagnostics,
    the CLI and tracebacks.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(scrub(a) if isinstance(a, str) else a for a in args))


class ConfigError(OutcommitError, ValueError):
    """A configuration value is missing, malformed or unknown."""


class PluginError(OutcommitError):
    """A plugin could not be loaded or registered something invalid."""


class UnknownSchemeError(OutcommitError, KeyError):
    """No installed plugin provides a store for a URL scheme."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownCommitterError(OutcommitError, KeyError):
    """No installed plugin provides a committer of that name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsafeCommitterError(OutcommitError):
    """The committer needs a store capability that the store does not have."""

    def __init__(self, message: str, *, committer: str, scheme: str, missing: list[str],
                 safe: list[str]) -> None:
        super().__init__(message)
        self.committer = committer
        self.scheme = scheme
        self.missing = missing
        self.safe = safe


class CorruptFileError(OutcommitError, ValueError):
    """A persisted commit file (_SUCCESS, manifest, pending file) is invalid or tampered with."""

    def __init__(self, path: str, field: str | None, problem: str) -> None:
        where = f" field '{field}'" if field else ""
        super().__init__(f"{path}:{where} {problem}")
        self.path = path
        self.field = field
        self.problem = problem


class CommitError(OutcommitError):
    """A commit operation failed; the message says which step and why."""


class TaskCommitError(CommitError):
    """Task commit failed or is not allowed (e.g. the job is already committed)."""


class JobCommitError(CommitError):
    """Job commit failed. ``summary`` holds the success=false report with diagnostics."""

    def __init__(self, message: str, summary: object | None = None) -> None:
        super().__init__(message)
        self.summary = summary


class DestinationExistsError(CommitError, FileExistsError):
    """The destination (or a file in it) exists and the conflict mode is ``fail``."""


class ContainmentError(CommitError):
    """A path lies outside the job's destination or its temporary areas."""


class NotCommittedError(OutcommitError):
    """A reader asked for committed output where no job has committed (no ``_SUCCESS``)."""


class CorruptCommitDataError(JobCommitError, CorruptFileError):
    """Job commit refused a corrupt or tampered commit file (names the file and field)."""

    def __init__(self, message: str, summary: object | None, cause: CorruptFileError) -> None:
        OutcommitError.__init__(self, message)
        self.summary = summary
        self.path = cause.path
        self.field = cause.field
        self.problem = cause.problem


class RenameError(CommitError, OSError):
    """A rename did not happen, or the store cannot show that it did."""


class UploadGoneError(CommitError):
    """A multipart upload is neither pending nor complete at its destination (aborted, replaced)."""


class UploadPendingError(CommitError):
    """The store kept refusing to complete an upload that is still pending (throttling, outages)."""


class StoreError(OutcommitError):
    """A store could not be reached, refused the credentials or lacks the bucket.

    The message names the endpoint, the bucket or container, where the credentials came
    from (never the secret), and the fix.
    """


class StoreUnreachableError(StoreError, ConnectionError):
    """The store's endpoint cannot be reached (refused, unresolvable, timed out)."""


class StoreCredentialsError(StoreError, PermissionError):
    """No credentials were found, or the store rejected them (unknown key, bad signature)."""


class StorePermissionError(StoreError, PermissionError):
    """The credentials are valid but may not do this operation on this bucket or key."""


class StoreNotFoundError(StoreError):
    """The bucket or container of the destination does not exist."""


class OptionError(ConfigError):
    """An engine's write option is missing, invalid or unknown."""


class UnsupportedNameError(OutcommitError, ValueError):
    """A path holds a name the store cannot hold exactly (the service or its client would
    act on another name): refused before any request, naming the character and the fix."""


class UnsupportedWriteError(OutcommitError, ValueError):
    """A write the committer's filesystem cannot accept (append, copy, reserved or '..' paths)."""


class MissingDependencyError(OutcommitError, ImportError):
    """An optional requirement is not installed: the message names the extra that brings it."""

    def __init__(self, message: str, module: str | None = None) -> None:
        super().__init__(message)
        self.name = module  # ImportError's: the module that is missing


class SparkVersionError(OutcommitError):
    """PySpark is missing or too old for Python data sources."""


class InjectedFailure(OutcommitError, RuntimeError):
    """A failure a test or the demo asked for (an engine's failure-injection hook)."""


class InjectedFault(OutcommitError, OSError):
    """The error a ``outcommit.testing.faults.Fault`` raises unless told otherwise."""
