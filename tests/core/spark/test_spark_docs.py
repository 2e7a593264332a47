"""The docs' PySpark blocks that write to S3 (or read from it) run here as written, on the test
cluster's session against the moto server (tests/docs/test_code_blocks.py lists them as run here).

The page's bucket is renamed to a fresh one and the AWS endpoint it names replaced by the
moto server's; the session gets moto's endpoint and keys (``spark.outcommit.s3.*``), as a
user's session gets theirs. What a block sets on the shared session is unset afterwards.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import events, read_back

import outcommit.spark
from docblocks import RUN_IN_SPARK_TESTS, blocks

pytestmark = [pytest.mark.spark, pytest.mark.s3]

WRITE_EVENTS = ("outcommit.spark.register(spark)\n"
                "df.write.format('outcommit').mode('append').option('partitionBy', 'date')"
                ".save('s3://bucket/events')")
#: A streaming DataFrame of the same rows: Parquet files the query reads from a directory.
STREAMING_EVENTS = ("df.write.parquet(source)\n"
                    "events = spark.readStream.schema(df.schema).parquet(source)")

#: Block name -> (what the page assumes exists before it runs, what the test does after it).
SPARK_BLOCKS: dict[str, tuple[str, str]] = {
    "README.md: import outcommit.spark": ("", ""),
    "docs/pyspark.md: from pyspark.sql import SparkSession": ("", ""),
    'docs/pyspark.md: df.write.format("outcommit").mode("append").option("conflictMode", "fail").save(url)':
        ("outcommit.spark.register(spark)\nurl = 's3://bucket/events'", ""),
    'docs/pyspark.md: events = spark.read.format("outcommit").load("s3://bucket/events")':
        (WRITE_EVENTS, "assert events.count() == 300"),
    "docs/pyspark.md: import outcommit.spark": ("", ""),
    # The query's first micro-batch starts at once: wait for it, then stop the query.
    "docs/streaming.md: import outcommit.spark":
        (STREAMING_EVENTS, "query.processAllAvailable()\nquery.stop()"),
}
#: Keys a block may set on the session (unset after it).
BLOCK_KEYS = ("spark.hadoop.fs.s3a.endpoint", "spark.outcommit.committer.s3")


def test_the_blocks_run_here_are_the_ones_the_docs_test_names() -> None:
    assert set(SPARK_BLOCKS) == set(RUN_IN_SPARK_TESTS) <= set(blocks())


@pytest.mark.parametrize("name", sorted(SPARK_BLOCKS))
def test_the_spark_block_runs_as_written(name: str, spark: Any, moto_server: Any, tmp_path: Path) -> None:
    bucket = f"docs-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    rename = {"s3://bucket/": f"s3://{bucket}/",
              "https://s3.eu-west-1.amazonaws.com": moto_server.endpoint_url,
              "file:///data/": f"file://{tmp_path}/"}
    session_keys = {f"spark.{key}": value for key, value in moto_server.config.items()}
    for key, value in session_keys.items():
        spark.conf.set(key, value)
    from pyspark.sql import functions as F

    df = events(spark, rows=300, partitions=3).withColumn("country", F.lit("DE"))
    namespace: dict[str, Any] = {"__name__": "__docs__", "outcommit": outcommit, "spark": spark, "df": df,
                                 "source": str(tmp_path / "source")}
    block = blocks()[name]
    setup, after = SPARK_BLOCKS[name]
    try:
        for part, text in (("setup", setup), ("block", block.source), ("after", after)):
            for old, new in rename.items():
                text = text.replace(old, new)
            exec(compile(text, f"{block.page}:{block.line} ({part})", "exec"), namespace)
    finally:
        if namespace.get("query") is not None:  # a streaming block's query, if it failed midway
            namespace["query"].stop()
        for key in (*session_keys, *BLOCK_KEYS):
            spark.conf.unset(key)
        outcommit.spark.register(spark)
    assert len(read_back(f"s3://{bucket}/events", moto_server.config)) == 300
