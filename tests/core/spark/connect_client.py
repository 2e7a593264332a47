"""Run by tests/core/spark/test_connect.py in its own process: a Spark Connect client session.

argv: server URL, destination URL. Prints one JSON line: what the client saw.
"""

import json
import sys

from pyspark.sql import SparkSession

import outcommit.spark

url, destination = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.remote(url).getOrCreate()
outcommit.spark.register(spark)
df = spark.range(3000).selectExpr("id", "concat('2026-11-0', cast(id % 3 + 1 as string)) as date")
df.repartition(3).write.format("outcommit").mode("append").option("partitionBy", "date") \
    .option("committer", "v1").save(destination)
rows = spark.read.parquet(destination).count()
try:
    df.write.format("outcommit").mode("append").option("partitonBy", "date").save(destination + "-typo")
    typo = ""
except Exception as error:  # the AnalysisException of pyspark.errors.exceptions.connect
    typo = str(error).splitlines()[0]
# Spark Connect leaves secret-looking keys out of what clients see: register cannot pass
# them on, and the tasks say so (or the write gives the key as an option).
spark.conf.set("spark.hadoop.fs.s3a.secret.key", "not-for-clients")
outcommit.spark.register(spark)
try:
    df.write.format("outcommit").mode("append").save(destination + "-hidden")
    hidden = ""
except Exception as error:
    hidden = next((line for line in str(error).splitlines() if "outcommit.errors." in line), str(error))
df.write.format("outcommit").mode("append").option("fs.s3a.secret.key", "not-for-clients") \
    .save(destination + "-given")
given = spark.read.format("outcommit").option("fs.s3a.secret.key", "not-for-clients") \
    .load(destination + "-given").count()
print(json.dumps({"session": type(spark).__module__, "rows": rows, "typo": typo, "hidden": hidden,
                  "given": given}))
