"""What Spark refuses for a Python data source before outcommit is asked, what
docs/pyspark.md says about each refusal (its exact text, so searching the error finds the
fix), and ``outcommit.spark.save``, which takes every save mode and ``partition_by``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import DATES, events, visible_files

import outcommit.spark
from outcommit.errors import OptionError

pytestmark = pytest.mark.spark

PYSPARK_MD = Path(__file__).resolve().parents[3] / "docs" / "pyspark.md"


def spark_error(action: Any) -> str:
    """The first line of the error Spark raises, as a user sees it (SQLSTATE left out)."""
    with pytest.raises(Exception) as info:
        action()
    line = next(line for line in str(info.value).splitlines() if line.strip())
    return re.sub(r"\s*SQLSTATE: \w+$", "", line.strip())


def test_sparks_refusals_are_quoted_in_the_docs_with_their_fix(spark: Any, local_dest: str) -> None:
    df = events(spark, rows=10, partitions=1)
    refusals = {
        "default save mode": spark_error(lambda: df.write.format("outcommit").save(local_dest)),
        "ignore": spark_error(lambda: df.write.format("outcommit").mode("ignore").save(local_dest)),
        "partitionBy": spark_error(lambda: df.write.format("outcommit").mode("append")
                                   .partitionBy("date").save(local_dest)),
    }
    assert refusals["default save mode"] == (
        '[UNSUPPORTED_DATA_SOURCE_SAVE_MODE] The data source "outcommit" cannot be written in the '
        '"ErrorIfExists" mode. Please use either the "Append" or "Overwrite" mode instead.')
    assert refusals["partitionBy"].endswith(
        "The provided partitioning or clustering columns do not match the existing table's.")
    page = " ".join(PYSPARK_MD.read_text().split())
    for what, text in refusals.items():
        assert text in page, f"docs/pyspark.md does not quote Spark's refusal of {what}: {text}"
    assert visible_files(local_dest) == []


def test_errorifexists_fails_on_data_and_ignore_skips_it(spark: Any, local_dest: str) -> None:
    df = events(spark, rows=300, partitions=2)
    assert outcommit.spark.save(df, local_dest, partition_by=["date"]) is True   # errorifexists
    before = visible_files(local_dest)
    assert {f.split("/")[0] for f in before} == {f"date={d}" for d in DATES}
    with pytest.raises(Exception, match=r"outcommit\.errors\.DestinationExistsError: destination "
                                        r"file://.* already has data"):
        outcommit.spark.save(df, local_dest, mode="errorifexists", partition_by="date")
    assert outcommit.spark.save(df, local_dest, mode="ignore", partition_by="date") is False
    assert visible_files(local_dest) == before
    assert outcommit.spark.save(df, f"{local_dest}-new", mode="ignore", format="json") is True
    assert len(visible_files(f"{local_dest}-new")) == 2
    outcommit.spark.save(events(spark, rows=30, partitions=1), local_dest, mode="overwrite")
    assert spark.read.format("outcommit").load(local_dest).count() == 30


def test_save_refuses_a_mode_it_does_not_know_and_a_contradiction() -> None:
    with pytest.raises(OptionError, match="save mode 'upsert': use one of errorifexists, error"):
        outcommit.spark.save(object(), "file:///tmp/x", mode="upsert")
    with pytest.raises(OptionError, match="conflictMode=fail; it cannot be given with conflictMode=append"):
        outcommit.spark.save(object(), "file:///tmp/x", conflictMode="append")
