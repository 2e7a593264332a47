"""Run by tests/core/spark/test_connect.py in its own process: a Spark Connect client that
never calls outcommit.spark.register: the server finds the data source by itself.

argv: server URL, destination URL. Prints one JSON line: what the client saw.
"""

import json
import sys

from pyspark.sql import SparkSession

url, destination = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.remote(url).getOrCreate()
df = spark.range(3000).selectExpr("id", "concat('2026-11-0', cast(id % 3 + 1 as string)) as date")
df.repartition(3).write.format("outcommit").mode("append").option("partitionBy", "date").save(destination)
events = spark.read.format("outcommit").load(destination)
print(json.dumps({
    "session": type(spark).__module__,
    "schema": events.schema.simpleString(),
    "rows": events.count(),
    "first_day": events.where("date = '2026-11-01'").count(),
    "ids": events.agg({"id": "sum"}).first()[0],
}))
