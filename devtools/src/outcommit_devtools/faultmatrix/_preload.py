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

try:  # botocore's models parsed once here, not again in every child (the S3 plugin's shared loader)
    import boto3

    from outcommit_s3 import client as _s3_client

    _session = boto3.session.Session()
    _s3_client._share_loader(_session)
    _session.client("s3", region_name="us-east-1", aws_access_key_id="preload",
                    aws_secret_access_key="preload")
except Exception:  # no S3 plugin or no boto3: its cells cannot run anyway
    pass
