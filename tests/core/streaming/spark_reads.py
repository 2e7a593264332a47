"""Spark's own readers on streaming destinations, in their own driver process.

    python spark_reads.py spec.json

``spec.json``: ``{"read": [URL, ...], "stream": {"input": DIR, "checkpoint": DIR, "dest": URL,
"native": URL, "nativeCheckpoint": DIR, "options": {...}}}``. Each ``read`` destination is
read with ``spark.read.parquet(url)``; the ``stream`` query writes its input (one file per
micro-batch) through the outcommit sink to ``dest`` and through Spark's own file sink to
``native`` (whose ``_spark_metadata`` the test compares with the sink's), then reads ``dest``
back with ``spark.read.parquet`` and with ``spark.readStream.parquet`` into a memory table.
One JSON line per result on stdout. A separate driver: the test run's other Spark tests
hold a session on the standalone cluster, and one process holds one SparkContext.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

SCHEMA = "id long, part long"


def ids(frame: Any) -> list[int]:
    return sorted(row["id"] for row in frame.select("id").collect())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    with open(parser.parse_args(argv).spec) as f:
        spec = json.load(f)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("outcommit-spark-reads")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for url in spec.get("read", []):
        frame = spark.read.parquet(url)
        print(json.dumps({"event": "read", "dest": url, "ids": ids(frame),
                          "columns": sorted(frame.columns)}), flush=True)
    stream = spec.get("stream")
    if stream:
        import outcommit.spark

        outcommit.spark.register(spark)
        source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(stream["input"])
        (source.writeStream.format("outcommit").option("checkpointLocation", stream["checkpoint"])
         .options(**stream["options"]).trigger(availableNow=True).start(stream["dest"]).awaitTermination())
        (source.writeStream.format("parquet").option("checkpointLocation", stream["nativeCheckpoint"])
         .trigger(availableNow=True).start(stream["native"]).awaitTermination())
        frame = spark.read.parquet(stream["dest"])
        print(json.dumps({"event": "stream-read", "ids": ids(frame), "columns": sorted(frame.columns)}),
              flush=True)
        reread = (spark.readStream.schema(SCHEMA).parquet(stream["dest"]).writeStream.format("memory")
                  .queryName("reread").trigger(availableNow=True).start())
        reread.awaitTermination()
        print(json.dumps({"event": "stream-readStream", "ids": ids(spark.table("reread"))}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
