"""How Spark finds the ``outcommit`` data source without ``outcommit.spark.register(spark)``.

PySpark 4 looks, once per driver JVM, for top-level Python modules named ``pyspark_*``
that define ``DefaultSource``, a Python data source, and registers each under its
``name()`` for every session (``pyspark.sql.worker.lookup_data_sources``). So
``df.write.format("outcommit")`` and ``spark.read.format("outcommit")`` work in any
session whose driver Python has outcommit installed.

What Spark registers this way cannot know the session's config (its driver-side steps
run in processes with no session to ask): options and the environment only. A task
that finds outcommit or store settings in the session stops before it writes or reads,
asking for ``outcommit.spark.register(spark)``, which replaces this registration with
one that carries them.

Spark imports this module, unguarded, while looking for every data source: an error
here would break all Python data sources of the session, so none may leave it.
"""

from __future__ import annotations

import logging

try:
    from outcommit.spark.datasource import OutcommitDataSource as DefaultSource
except Exception:  # PySpark too old, a broken install: outcommit just is not found
    logging.getLogger("outcommit.spark").debug("outcommit data source unavailable", exc_info=True)

__all__ = ["DefaultSource"]
