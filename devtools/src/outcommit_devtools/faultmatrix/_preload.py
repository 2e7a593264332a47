"""Imported once by the fork server: every child then starts with these modules loaded.

Without it each killed driver would pay ~1 s of imports (boto3, s3fs, adlfs, gcsfs).
A library that is not installed is skipped: its binding simply cannot run.
"""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

for _module in ("boto3", "botocore.client", "s3fs", "adlfs", "azure.storage.blob", "gcsfs",
                "outcommit", "outcommit.committers.fileoutput", "outcommit.committers.manifest",
                "outcommit_devtools.faultmatrix.driverproc"):
    try:
        importlib.import_module(_module)
    except ImportError:
        pass

try:
    from outcommit.plugins import get_registry

    get_registry().load()  # entry points found and plugins imported before any fork
except Exception:  # a broken plugin shows up in the child, with its own error
    pass
