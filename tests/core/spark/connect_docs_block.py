"""Run by tests/core/spark/test_connect.py in its own process: docs/pyspark.md's Spark
Connect block, as written but for the server's address and the bucket (the test renames
them), with the ``df`` the page assumes made on the same Connect session first.

argv: server URL, the block's file. Prints one JSON line: the session's module.
"""

import json
import sys

from pyspark.sql import SparkSession

import outcommit
import outcommit.spark

url, block_file = sys.argv[1], sys.argv[2]
# getOrCreate: the block's own builder call then returns this same session.
spark = SparkSession.builder.remote(url).getOrCreate()
df = spark.range(300).selectExpr("id", "concat('2026-11-0', cast(id % 3 + 1 as string)) as date")
with open(block_file) as f:
    source = f.read()
namespace = {"__name__": "__docs__", "SparkSession": SparkSession, "outcommit": outcommit, "df": df}
exec(compile(source, "docs/pyspark.md (the Spark Connect block)", "exec"), namespace)
print(json.dumps({"session": type(namespace["spark"]).__module__}))
