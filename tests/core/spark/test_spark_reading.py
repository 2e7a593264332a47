"""docs/reading.md's Spark rows: Spark skips a running v1 job's _temporary files; the outcommit
data source reads the committed files."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_spark_reads_what_the_table_says(spark: Any, running_v1_destination: str,
                                         reading_table: dict[str, str]) -> None:
    rows = spark.read.parquet(running_v1_destination).count()
    assert str(rows) == reading_table["spark.read.parquet(dest)"]


def test_the_outcommit_data_source_reads_what_the_table_says(spark: Any, running_v1_destination: str,
                                                             reading_table: dict[str, str]) -> None:
    rows = spark.read.format("outcommit").load(running_v1_destination).count()
    assert str(rows) == reading_table['spark.read.format("outcommit").load(dest)']
