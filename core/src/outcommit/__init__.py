"""outcommit: safe, fast output commits for Python data pipelines on any fsspec store."""

from __future__ import annotations

from . import capabilities
from .capabilities import Capabilities
from .committer import Committer, CommitterSpec
from .config import Config, KeyFamily
from .context import JobContext, TaskAttemptContext
from .engine.dataset import write_dataset
from .errors import (
    CommitError,
    ConfigError,
    ContainmentError,
    CorruptCommitDataError,
    CorruptFileError,
    DestinationExistsError,
    JobCommitError,
    MissingDependencyError,
    NotCommittedError,
    OptionError,
    OutcommitError,
    PluginError,
    RenameError,
    StoreCredentialsError,
    StoreError,
    StoreNotFoundError,
    StorePermissionError,
    StoreUnreachableError,
    TaskCommitError,
    UnknownCommitterError,
    UnknownSchemeError,
    UnsafeCommitterError,
    UploadGoneError,
    UploadPendingError,
)
from .factory import create_committer, describe_capabilities, open_store
from .hookspecs import (
    CommandRegistrar,
    CommitterRegistrar,
    ConfigAliasRegistrar,
    ConfigFamilyRegistrar,
    ConfigKeyRegistrar,
    SelectorRegistrar,
    StoreRegistrar,
    hookimpl,
)
from .redaction import install_log_redaction
from .selection import CommitterSelector
from .store import FileInfo, Store, StoreSpec
from .success import SUCCESS_FILE, SuccessData, load_success
from .version import __version__ as __version__

# Every log record of the process is scrubbed of secrets, an SDK's as much as ours.
install_log_redaction()

__all__ = [
    "SUCCESS_FILE",
    "Capabilities",
    "CommandRegistrar",
    "CommitError",
    "Committer",
    "CommitterRegistrar",
    "CommitterSelector",
    "CommitterSpec",
    "Config",
    "ConfigAliasRegistrar",
    "ConfigError",
    "ConfigFamilyRegistrar",
    "ConfigKeyRegistrar",
    "ContainmentError",
    "CorruptCommitDataError",
    "CorruptFileError",
    "DestinationExistsError",
    "FileInfo",
    "JobCommitError",
    "JobContext",
    "KeyFamily",
    "MissingDependencyError",
    "NotCommittedError",
    "OptionError",
    "OutcommitError",
    "PluginError",
    "RenameError",
    "SelectorRegistrar",
    "Store",
    "StoreCredentialsError",
    "StoreError",
    "StoreNotFoundError",
    "StorePermissionError",
    "StoreRegistrar",
    "StoreSpec",
    "StoreUnreachableError",
    "SuccessData",
    "TaskAttemptContext",
    "TaskCommitError",
    "UnknownCommitterError",
    "UnknownSchemeError",
    "UnsafeCommitterError",
    "UploadGoneError",
    "UploadPendingError",
    "capabilities",
    "create_committer",
    "describe_capabilities",
    "hookimpl",
    "load_success",
    "open_store",
    "write_dataset",
]
