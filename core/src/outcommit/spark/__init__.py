"""PySpark integration: ``outcommit.spark.register(spark)`` adds the ``outcommit`` data source.

    import outcommit.spark
    outcommit.spark.register(spark)
    df.write.format("outcommit").mode("overwrite").option("partitionBy", "date").save("s3://b/t")

pyspark is imported only here, on first use, so core works without it.
"""

from __future__ import annotations

from typing import Any

from ..errors import SparkVersionError
from ..install import install_command
from .options import DATA_SOURCE_OPTIONS, FAIL_TASK_ONCE_OPTION, WritePlan, build_plan, session_config

SOURCE_NAME = "outcommit"
MIN_PYSPARK = (4, 0)


def _check_pyspark() -> str:
    try:
        import pyspark
    except ImportError:
        raise SparkVersionError(
            f"outcommit.spark needs PySpark >= 4.0: {install_command('outcommit', 'spark')}") from None
    version = getattr(pyspark, "__version__", "0")
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parts < MIN_PYSPARK:
        raise SparkVersionError(
            f"outcommit.spark needs PySpark >= 4.0 (Python data source writers); found {version}. "
            "Upgrade with pip install 'pyspark>=4.0'")
    return version


def register(spark: Any) -> None:
    """Register the ``outcommit`` data source with ``spark`` (a SparkSession).

    The session's committer and store config (``spark.outcommit.*``, ``spark.hadoop.fs.*``,
    ``spark.hadoop.mapreduce.*``, ``spark.sql.sources.writeJobUUID``) is read now: call
    ``register`` again after changing it. Options given on a write always win.
    """
    _check_pyspark()
    from .datasource import OutcommitDataSource

    # The session's runtime config only: it starts as a copy of the SparkConf (builder,
    # spark-defaults, --conf), so spark.conf.set/unset after the session started take
    # effect, and Spark Connect (which has no SparkContext on the client) works alike.
    conf: dict[str, str] = dict(spark.conf.getAll)
    # A subclass per registration carries this session's config to the driver processes
    # that run the data source (they have no session to ask).
    source = type("OutcommitDataSource", (OutcommitDataSource,),
                  {"spark_conf": session_config(conf), "__module__": OutcommitDataSource.__module__})
    spark.dataSource.register(source)


__all__ = ["DATA_SOURCE_OPTIONS", "FAIL_TASK_ONCE_OPTION", "SOURCE_NAME", "SparkVersionError",
           "WritePlan", "build_plan", "register", "session_config"]
