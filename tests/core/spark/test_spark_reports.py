"""What the Spark engine says of a write (issue 29, item 6): the conflict mode's source as
its user spelled it (it named outcommit.committer.conflict-mode for
fs.s3a.committer.staging.conflict-mode), in the log and in ``_SUCCESS``; and console lines
that clear the line Spark's progress bar is drawn on instead of running into it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from spark_helpers import events

from outcommit import load_success, open_store
from outcommit.spark.logs import CLEAR_LINE, console_formatter
from outcommit.spark.options import build_plan

HADOOP_KEY = "fs.s3a.committer.staging.conflict-mode"


def test_the_conflict_modes_source_is_the_key_as_spelled() -> None:
    plan = build_plan({"path": "file:///tmp/x", HADOOP_KEY: "replace"}, False)
    assert (plan.conflict_mode, plan.conflict_reason) == ("replace", f"write option {HADOOP_KEY}=replace")
    plan = build_plan({"path": "file:///tmp/x"}, False, {f"spark.hadoop.{HADOOP_KEY}": "fail"})
    assert plan.conflict_reason == f"Spark config spark.hadoop.{HADOOP_KEY}=fail"


def test_console_lines_clear_the_progress_bars_line_on_a_terminal() -> None:
    record = logging.LogRecord("outcommit.spark", logging.INFO, __file__, 1, "job %s: committed", ("j",),
                               None)
    on_terminal = console_formatter({"TERM": "xterm-256color"}).format(record)
    assert on_terminal.startswith(CLEAR_LINE) and on_terminal.endswith("INFO outcommit: job j: committed")
    for environ in ({}, {"TERM": "dumb"}):  # a log file gets no control characters
        assert console_formatter(environ).format(record).endswith("INFO outcommit: job j: committed")
        assert "\x1b" not in console_formatter(environ).format(record)


@pytest.mark.spark
def test_success_names_the_write_option_that_set_the_conflict_mode(spark: Any, local_dest: str) -> None:
    events(spark, rows=100, partitions=2).write.format("outcommit").mode("append") \
        .option(HADOOP_KEY, "append").save(local_dest)
    store = open_store(local_dest)
    diagnostics = load_success(store, store.join(store.strip(local_dest), "_SUCCESS")).diagnostics
    assert diagnostics["conflict-mode"] == "append"
    assert diagnostics["conflict-mode.source"] == f"write option {HADOOP_KEY}=append"
