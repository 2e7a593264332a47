"""Structured Streaming queries into the outcommit sink, run in their own driver process.

    python stream_query.py spec.json

``spec.json`` lists queries: ``[{"input": DIR, "checkpoint": DIR, "dest": URL,
"options": {...}}, ...]``. Each reads the Parquet files of its input one per micro-batch
(``maxFilesPerTrigger=1``), spreads each batch over two tasks, and writes to its
destination with ``trigger(availableNow)``: it ends once every input file is committed.
The queries run side by side in one driver (one JVM start for all of them). The tests
start it in a new session and SIGKILL the whole process group (Python driver, its JVM,
the Python workers) while every query's sink is held at a test hook, then start it
again from the same checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

SCHEMA = "id long, part long, payload string"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", help="JSON file: the queries to run")
    args = parser.parse_args(argv)
    with open(args.spec) as f:
        specs = json.load(f)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    # Task slots beyond the cores: a query held at a hook keeps its tasks' slots.
    spark = (SparkSession.builder.master(f"local[{4 * len(specs)}]").appName("outcommit-stream-test")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import outcommit.spark

    outcommit.spark.register(spark)
    queries = []
    for spec in specs:
        stream = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(spec["input"])
                  .repartition(2))
        query = (stream.writeStream.format("outcommit").option("checkpointLocation", spec["checkpoint"])
                 .options(**spec["options"]).trigger(availableNow=True).start(spec["dest"]))
        queries.append(query)
        print(json.dumps({"event": "started", "dest": spec["dest"], "queryId": str(query.id),
                          "runId": str(query.runId)}), flush=True)
    failed = 0
    for spec, query in zip(specs, queries, strict=True):
        try:
            query.awaitTermination()
        except Exception as exc:
            failed += 1
            print(json.dumps({"event": "failed", "dest": spec["dest"], "error": str(exc)[:4000]}), flush=True)
            continue
        progress = query.lastProgress or {}
        print(json.dumps({"event": "finished", "dest": spec["dest"], "lastBatch": progress.get("batchId")}),
              flush=True)
    if not failed:
        import outcommit.streaming

        for spec in specs:
            if not spec["dest"].startswith("file://"):
                continue  # this JVM has no S3 or Azure filesystem: local destinations only
            # docs/streaming.md's Spark recipes: exactly the committed batches' files.
            files = outcommit.streaming.committed_files(spec["dest"])
            frame = spark.read.option("basePath", spec["dest"]).parquet(*files)
            rows = frame.count()
            distinct = frame.select("id").distinct().count()
            # Spark's own reader on the destination itself: through the sink's _spark_metadata.
            whole = spark.read.parquet(spec["dest"])
            print(json.dumps({"event": "spark-read", "dest": spec["dest"], "rows": rows,
                              "distinct": distinct, "columns": sorted(frame.columns),
                              "dirRows": whole.count(), "dirDistinct": whole.select("id").distinct().count(),
                              "dirColumns": sorted(whole.columns)}), flush=True)
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
