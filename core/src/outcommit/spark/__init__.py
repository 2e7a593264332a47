"""PySpark integration: the ``outcommit`` data source.

    import outcommit.spark
    outcommit.spark.register(spark)       # reads the session's outcommit and store config
    df.write.format("outcommit").mode("overwrite").option("partitionBy", "date").save("s3://b/t")
    spark.read.format("outcommit").load("s3://b/t")
    outcommit.spark.save(df, "s3://b/t", mode="errorifexists", partition_by=["date"])

Spark also finds the data source without ``register`` (the ``pyspark_outcommit`` module),
but then without the session's config. pyspark is imported only here, on first use, so
core works without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import SparkVersionError
from ..install import install_command
from .options import DATA_SOURCE_OPTIONS, FAIL_TASK_ONCE_OPTION, WritePlan, build_plan
from .session import SQL_SETTINGS, session_config

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
    ``spark.hadoop.mapreduce.*``, ``spark.sql.sources.writeJobUUID``) and the SQL settings
    the reader follows (session time zone, partition type inference, filter pushdown) are
    read now: call ``register`` again after changing them (a task that finds them changed
    stops with that advice). Options given on a write or read always win.
    """
    _check_pyspark()
    from .datasource import OutcommitDataSource

    # The session's runtime config only: it starts as a copy of the SparkConf (builder,
    # spark-defaults, --conf), so spark.conf.set/unset after the session started take
    # effect, and Spark Connect (which has no SparkContext on the client) works alike.
    conf: dict[str, str] = dict(spark.conf.getAll)
    sql: dict[str, str] = {}
    for key in SQL_SETTINGS:
        try:
            value = spark.conf.get(key)
        except Exception:  # a Spark without the setting: the reader's default
            continue
        if value is not None:
            sql[key] = str(value)
    # A subclass per registration carries this session's config to the driver processes
    # that run the data source (they have no session to ask).
    source = type("OutcommitDataSource", (OutcommitDataSource,),
                  {"spark_conf": session_config(conf), "sql_conf": sql, "registered": True,
                   "through_connect": type(spark).__module__.startswith("pyspark.sql.connect"),
                   "__module__": OutcommitDataSource.__module__})
    spark.dataSource.register(source)


def save(df: Any, url: str, *, mode: str = "errorifexists", partition_by: str | Sequence[str] = (),
         format: str | None = None, **options: str) -> bool:
    """``df.write.format("outcommit")...save(url)`` taking what Spark refuses for Python
    data sources: every save mode, and partition columns as a list.

    Spark accepts only ``append`` and ``overwrite`` for a Python data source
    (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``) and refuses ``.partitionBy()`` ("The provided
    partitioning or clustering columns do not match the existing table's"), before the
    data source is asked. Here ``errorifexists`` (``error``, Spark's default) is
    ``append`` with ``conflictMode=fail``; ``ignore`` writes nothing when the destination
    holds data (the committer's own test) and otherwise writes as ``errorifexists``, so a
    writer racing it makes it fail rather than mix. Registers the data source first, so
    the session's current config applies. Returns False when ``ignore`` skipped the write.
    """
    from ..errors import DestinationExistsError, OptionError

    chosen = mode.strip().lower()
    if chosen not in SAVE_MODES:
        raise OptionError(f"save mode {mode!r}: use one of {', '.join(SAVE_MODES)}")
    spark_mode, conflict = SAVE_MODES[chosen]
    given = {k.lower(): v for k, v in options.items()}
    if conflict and given.get("conflictmode", conflict).strip().lower() != conflict:
        raise OptionError(f"save mode {mode!r} means conflictMode={conflict}; it cannot be given "
                          f"with conflictMode={given['conflictmode']}: use mode='append' for that")
    settings = dict(options)
    if conflict:
        settings["conflictMode"] = conflict
    columns = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    if columns:
        settings["partitionBy"] = ",".join(columns)
    if format is not None:
        settings["format"] = format
    spark = df.sparkSession
    register(spark)
    if chosen == "ignore":
        from ..conflictmodes import check_destination_free
        from ..factory import create_committer

        plan = build_plan({**settings, "path": url}, False, session_config(dict(spark.conf.getAll)))
        try:
            check_destination_free(create_committer(plan.destination, plan.config, plan.committer))
        except DestinationExistsError:
            return False
    df.write.format(SOURCE_NAME).mode(spark_mode).options(**settings).save(url)
    return True


#: Spark's save modes -> (the mode given to Spark, the conflict mode it implies).
SAVE_MODES: dict[str, tuple[str, str | None]] = {
    "errorifexists": ("append", "fail"), "error": ("append", "fail"), "default": ("append", "fail"),
    "ignore": ("append", "fail"), "append": ("append", None), "overwrite": ("overwrite", None),
}


__all__ = ["DATA_SOURCE_OPTIONS", "FAIL_TASK_ONCE_OPTION", "SAVE_MODES", "SOURCE_NAME",
           "SparkVersionError", "WritePlan", "build_plan", "register", "save", "session_config"]
