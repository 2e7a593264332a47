"""Exactly-once micro-batches: a batch log per destination, and readers of the committed batches.

    import outcommit.streaming
    outcommit.streaming.committed_files("s3://bucket/events")   # the committed batches' files
    outcommit.streaming.dataset("s3://bucket/events")           # as a pyarrow dataset

The Structured Streaming sink (``df.writeStream.format("outcommit")``) is in
``outcommit.spark``; the per-batch protocol any engine can drive is :class:`StreamingSink`.
The sink also keeps Spark's ``_spark_metadata`` log, so Spark's own readers of the
destination see exactly the committed batches too (``spark_metadata``).
"""

from __future__ import annotations

from .log import DEFAULT_COMPACT_INTERVAL, LOG_DIR, BatchAlreadyCommitted, BatchLog, BatchLogError
from .reader import committed_batches, committed_files, dataset
from .records import BatchEntry, CommittedFile, Decision, JobRecord
from .sink import BatchIdentity, BatchOutcome, BatchRolledBack, BatchTaskResult, StreamingSink
from .spark_metadata import SPARK_METADATA_DIR, SparkMetadataError

__all__ = [
    "DEFAULT_COMPACT_INTERVAL",
    "LOG_DIR",
    "SPARK_METADATA_DIR",
    "BatchAlreadyCommitted",
    "BatchEntry",
    "BatchIdentity",
    "BatchLog",
    "BatchLogError",
    "BatchOutcome",
    "BatchRolledBack",
    "BatchTaskResult",
    "CommittedFile",
    "Decision",
    "JobRecord",
    "SparkMetadataError",
    "StreamingSink",
    "committed_batches",
    "committed_files",
    "dataset",
]
