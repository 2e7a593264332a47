"""The streaming sink's ``_spark_metadata`` on Azurite: each file's URI is the one Spark
resolves for the destination as the user gave it, ``@account.host`` included (the store's
own URL drops it: Spark's ABFS connector cannot resolve ``abfss://container/out/part-0``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pytest

from outcommit import open_store
from outcommit.engine.tasks import WriteSettings, write_attempt
from outcommit.streaming import BatchIdentity, BatchTaskResult, StreamingSink
from outcommit.streaming.spark_metadata import SPARK_METADATA_DIR

pytestmark = pytest.mark.azure

CONTAINER = "outcommit-tests"  # conftest's: Azurite has it


def commit_one_batch(sink: StreamingSink) -> None:
    """Batch 0, one task writing two files, committed."""
    identity = BatchIdentity(str(uuid.uuid4()), 0, "run-a")
    job = sink.begin_task(identity)
    assert job is not None
    rows = pa.table({"id": pa.array(range(40), pa.int64())})
    attempt = write_attempt(sink.committer, job.task_attempt(0, 0), rows.to_batches(),
                            WriteSettings(max_rows_per_file=20))
    sink.commit_batch(0, [BatchTaskResult(identity, job.job_id, attempt)])


def spark_paths(url: str, config: dict[str, Any]) -> list[str]:
    """The ``path`` of every line of ``_spark_metadata/0``."""
    store = open_store(url, config)
    data = store.read_bytes(store.join(store.strip(url), SPARK_METADATA_DIR, "0"))
    return [json.loads(line)["path"] for line in data.decode().split("\n")[1:] if line]


def test_spark_metadata_uris_carry_the_destinations_authority(azure_config: dict[str, Any]) -> None:
    url = f"abfss://{CONTAINER}@devstoreaccount1.dfs.core.windows.net/{uuid.uuid4().hex}/out"
    sink = StreamingSink(url, azure_config)
    commit_one_batch(sink)
    paths = spark_paths(url, azure_config)
    assert len(paths) == 2 and all(p.startswith(f"{url}/part-") for p in paths), paths
    store = sink.store
    for path in paths:  # each names a file the batch committed
        assert store.exists(store.join(store.strip(url), path.removeprefix(f"{url}/"))), path

