"""What the cluster tests share: destinations on each store, and the exactly-once oracle."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from spark_helpers import (
    Figures,
    as_strings,
    leftovers,
    pending_uploads,
    read_back,
    row_digest,
    visible_files,
)

from outcommit import load_success, open_store

# part-<task>-<seq>-<jobId>-a<attempt>[...]: the staging committers may add the job id again.
PART_NAME = re.compile(r"part-(\d{5})-\d{3}-.*?-a(\d+)")


@dataclass(frozen=True)
class Target:
    """A fresh destination on one store, and the config that reaches it."""

    store: str
    url: str
    config: dict[str, str]


def attempts_per_task(files: list[str]) -> dict[int, set[int]]:
    """Task index -> attempt numbers whose files are visible (two means duplicated data)."""
    found: dict[int, set[int]] = defaultdict(set)
    for path in files:
        match = PART_NAME.search(path.rsplit("/", 1)[-1])
        assert match, f"unexpected data file name {path}"
        found[int(match.group(1))].add(int(match.group(2)))
    return dict(found)


def success_of(target: Target) -> Any:
    store = open_store(target.url, target.config)
    return load_success(store, store.join(store.strip(target.url), "_SUCCESS"))


def assert_exactly_once(target: Target, committer: str, expected: list[Any], tasks: int,
                        figures: Figures) -> None:
    """The destination holds exactly the input, each task's data from one attempt, nothing leaked.

    ``expected`` are the input rows (Spark Rows); the figures row is filled on the way, so
    the table shows what was found even when an assertion fails.
    """
    want = as_strings(expected)
    got = read_back(target.url, target.config)
    figures.store, figures.committer = target.store, committer
    figures.rows_in, figures.rows_out = len(want), len(got)
    figures.uploads_left = pending_uploads(target.url, target.config)
    files = visible_files(target.url, target.config)
    per_task = attempts_per_task(files)
    assert {t: a for t, a in per_task.items() if len(a) > 1} == {}, \
        f"a task's data is visible from several attempts: {files}"
    assert sorted(per_task) == list(range(tasks)), f"tasks missing from the output: {files}"
    assert row_digest(got) == row_digest(want)
    assert sorted(got) == sorted(want)
    left = leftovers(target.url, target.config)
    assert left == [], f"temporary state left after the job: {left}"
    summary = success_of(target)
    assert (summary.committer, summary.success) == (committer, True)
    assert summary.metrics["rows.written"] == len(want)
    assert summary.metrics["files.committed"] == len(files)
    assert {name.rsplit("/", 1)[-1] for name in summary.filenames} <= {f.rsplit("/", 1)[-1] for f in files}


def assert_nothing_visible(target: Target, figures: Figures) -> None:
    """After a failed job: no data, no _SUCCESS, no temporary state, no pending upload."""
    figures.store = target.store
    figures.rows_out = len(read_back(target.url, target.config))
    figures.uploads_left = pending_uploads(target.url, target.config)
    assert visible_files(target.url, target.config) == []
    left = leftovers(target.url, target.config)
    assert left == [], f"temporary state left after the job: {left}"
    store = open_store(target.url, target.config)
    assert not store.exists(store.join(store.strip(target.url), "_SUCCESS"))
