"""The sink's copy of its batch log in Spark's format (``_spark_metadata``), without Spark:
written only from the batch log's entries, after them, exclusively; a batch whose file a
dead driver never wrote gets it from the next commit or the replay; another writer's
Spark log is refused before anything is published. ``spark_view`` reads it as Spark does
(``test_spark_reads_the_sink.py`` checks the same with Spark itself).
"""

from __future__ import annotations

import json
import string
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from batches import assert_exactly_once, run_batch
from hypothesis import given
from hypothesis import strategies as st

import outcommit.streaming as streaming
from generative import budget
from outcommit import open_store
from outcommit.streaming import StreamingSink
from outcommit.streaming.spark_metadata import SPARK_METADATA_DIR, SparkMetadataError, spark_uri
from outcommit.testing.conformance import visible_files


class Died(BaseException):
    """The driver 'dies' at a step: nothing after it runs."""


@pytest.fixture(params=["file", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def url_config(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if request.param == "file":
        return f"file://{tmp_path}/out", {}
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}/out", {}
    return f"{request.getfixturevalue('s3_root')}/out", dict(request.getfixturevalue("s3_config"))


def names(url: str, config: dict[str, Any]) -> list[str]:
    store = open_store(url, config)
    return sorted(i.name for i in store.list_dir(store.join(store.strip(url), SPARK_METADATA_DIR)))


def dies_at(step: str, batch: int) -> Any:
    def die(name: str, batch_id: int) -> None:
        if (name, batch_id) == (step, batch):
            raise Died
    return die


def test_every_batch_gets_its_file_and_compactions_replace_them(url_config: Any) -> None:
    url, config = url_config
    sink = StreamingSink(url, config, compact_interval=3)
    for batch_id in range(7):
        sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
    # Compactions 2 and 5; what compaction 2 covers went with compaction 5, as in the batch log.
    assert names(url, config) == ["2.compact", "3", "4", "5.compact", "6"]
    assert_exactly_once(url, config, range(7))


def test_a_driver_dead_between_the_entry_and_sparks_file_leaves_it_to_the_replay(url_config: Any) -> None:
    """Killed after batch 1's entry, before its _spark_metadata file: Spark's readers see
    batch 0 (behind, never wrong); the restart's replay of batch 1 writes it."""
    url, config = url_config
    first = StreamingSink(url, config, on_step=dies_at("logged", 1))
    first.commit_batch(0, run_batch(first, "run-a", 0))
    with pytest.raises(Died):
        first.commit_batch(1, run_batch(first, "run-a", 1))
    assert names(url, config) == ["0"]
    restarted = StreamingSink(url, config)
    assert restarted.commit_batch(1, run_batch(restarted, "run-b", 1)).replayed
    assert names(url, config) == ["0", "1"]
    assert_exactly_once(url, config, range(2))


def test_a_missing_file_is_written_before_a_later_batchs(tmp_path: Path) -> None:
    """Spark's reader needs every batch since the last compaction: an engine that goes on to
    batch 2 without replaying batch 1 must not leave a hole (Spark fails on one)."""
    url = f"file://{tmp_path}/out"
    first = StreamingSink(url, on_step=dies_at("logged", 1))
    first.commit_batch(0, run_batch(first, "run-a", 0))
    with pytest.raises(Died):
        first.commit_batch(1, run_batch(first, "run-a", 1))
    restarted = StreamingSink(url)
    restarted.commit_batch(2, run_batch(restarted, "run-b", 2))
    assert names(url, {}) == ["0", "1", "2"]
    assert_exactly_once(url, {}, range(3))


@pytest.mark.parametrize(("interval", "first", "expected"), [
    (2, 2, ["1.compact", "2"]),          # the streaming machine's shrunk case
    (3, 5, ["2.compact", "5.compact"]),  # two compactions: Spark derives the interval from them
])
def test_a_query_that_starts_at_a_later_batch_gets_empty_files_below_it(
        tmp_path: Path, interval: int, first: int, expected: list[str]) -> None:
    """A query whose checkpoint began elsewhere starts at batch n > 0. Spark's reader needs
    every batch since the compaction before the newest: it failed ("1.compact doesn't exist",
    found by the streaming machine). Below the log's first batch nothing was committed
    here, and empty files say so."""
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url, compact_interval=interval)
    sink.commit_batch(first, run_batch(sink, "run-a", first))
    assert names(url, {}) == expected
    assert_exactly_once(url, {}, range(first, first + 1))


def test_a_replay_finds_the_same_bytes(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url)
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    path = tmp_path / "out" / SPARK_METADATA_DIR / "0"
    before = path.read_bytes()
    replay = StreamingSink(url)
    assert replay.commit_batch(0, run_batch(replay, "run-b", 0)).replayed
    assert path.read_bytes() == before


def another_writers_spark_log(tmp_path: Path, batch: int) -> Path:
    """``<tmp>/out/_spark_metadata`` holding Spark's file sink's entry for ``batch`` (a file
    elsewhere): another writer's log. Returns the log's directory."""
    meta = tmp_path / "out" / SPARK_METADATA_DIR
    meta.mkdir(parents=True)
    (meta / str(batch)).write_text('v1\n{"path":"file:///elsewhere/part-0.parquet","size":1,"isDir":false,'
                                   '"modificationTime":1,"blockReplication":1,"blockSize":1,"action":"add"}')
    return meta


def test_another_writers_spark_log_is_refused_before_anything_is_published(tmp_path: Path) -> None:
    """Spark's file sink wrote this destination before: our batch 0 would have been logged
    with Spark's readers reading the other writer's files. Refused, nothing published."""
    url, meta = f"file://{tmp_path}/out", another_writers_spark_log(tmp_path, 0)
    sink = StreamingSink(url)
    results = run_batch(sink, "run-a", 0)
    with pytest.raises(SparkMetadataError, match=r"_spark_metadata/0 exists, and batch 0 is not in "
                                                  r"outcommit's batch log: another writer"):
        sink.commit_batch(0, results)
    store = open_store(url)
    assert streaming.BatchLog(store, store.strip(url)).get(0) is None
    assert visible_files(store, store.strip(url)) == {}
    sink.abort_batch(0, results)
    assert (meta / "0").read_text().startswith("v1\n{\"path\":\"file:///elsewhere/")


def test_another_writers_later_batch_is_refused_before_anything_is_published(tmp_path: Path) -> None:
    """Spark's file sink reached batch 150 here: Spark's readers read its newest batch and
    would show its files, never our batch 0's. Refused before the commit, nothing published."""
    url, meta = f"file://{tmp_path}/out", another_writers_spark_log(tmp_path, 150)
    sink = StreamingSink(url)
    results = run_batch(sink, "run-a", 0)
    with pytest.raises(SparkMetadataError, match=r"_spark_metadata/150 exists, and batch 150 is not "
                                                  r"in outcommit's batch log: another writer"):
        sink.commit_batch(0, results)
    store = open_store(url)
    assert streaming.BatchLog(store, store.strip(url)).get(0) is None
    assert visible_files(store, store.strip(url)) == {}
    assert sorted(p.name for p in meta.iterdir()) == ["150"]


def test_spark_uris_stay_file_uris_on_local_disks(tmp_path: Path) -> None:
    """On a local disk the destination's own URL has no authority: ``file:///abs/path``."""
    url = f"file://{tmp_path}/out"
    sink = StreamingSink(url)
    sink.commit_batch(0, run_batch(sink, "run-a", 0))
    lines = (tmp_path / "out" / SPARK_METADATA_DIR / "0").read_text().split("\n")[1:]
    paths = [json.loads(line)["path"] for line in lines]
    assert paths and all(p.startswith(f"file://{tmp_path}/out/part-") for p in paths), paths


def test_a_file_another_writer_created_meanwhile_fails_the_sync(tmp_path: Path) -> None:
    """Another writer creates _spark_metadata/0 while batch 0 commits (after the check before
    it): our exclusive create meets it, reads it, and fails naming it instead of leaving
    Spark's readers on the other writer's files unseen. The batch stays logged."""
    url = f"file://{tmp_path}/out"
    meta = tmp_path / "out" / SPARK_METADATA_DIR

    def other_writer(step: str, batch_id: int) -> None:
        if step == "decided":
            meta.mkdir(parents=True, exist_ok=True)
            (meta / "0").write_text("v1\n")

    sink = StreamingSink(url, on_step=other_writer)
    with pytest.raises(SparkMetadataError, match=r"_spark_metadata/0 names other files than batch 0 of "
                                                  r"outcommit's batch log: another writer"):
        sink.commit_batch(0, run_batch(sink, "run-a", 0))
    assert (meta / "0").read_text() == "v1\n"
    assert [e.batch_id for e in streaming.committed_batches(url)] == [0]


_NAME_CHARS = string.ascii_letters + string.digits + " %#?=:;,@!$&'()*+[]{}^`|<>\"\\~-_.é東"


@pytest.mark.generative
@budget(50)
@given(st.lists(st.text(_NAME_CHARS, min_size=1, max_size=12).filter(lambda s: s not in (".", "..")),
                min_size=1, max_size=3))
def test_a_uri_names_its_file_for_any_name(parts: list[str]) -> None:
    """Whatever a partition value's directory holds (``%3A``, spaces, ``#``), the URI is one
    Java's URI parser accepts and decodes to the file's own path."""
    store = open_store("file:///tmp")
    path = "/data/" + "/".join(parts)
    uri = spark_uri(store, path)
    allowed = set(string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:@/%")
    assert set(uri.removeprefix("file://")) <= allowed, uri
    assert unquote(uri.removeprefix("file://")) == path


def batch_requests(sink: StreamingSink, batch_id: int) -> dict[str, int]:
    """The requests of one batch's tasks and commit, by name."""
    before = dict(sink.store.iostatistics.snapshot()["counters"])
    sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
    after = sink.store.iostatistics.snapshot()["counters"]
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


@pytest.mark.s3
def test_spark_log_costs_a_batch_one_listing_and_one_put(s3_root: str, s3_config: dict[str, Any]) -> None:
    """What keeping Spark's log adds to a batch on S3 (not a compaction): the listing of
    _spark_metadata/ before the commit point and the batch's file, nothing else."""
    counts = {}
    for keep in (False, True):
        sink = StreamingSink(f"{s3_root}/cost-{keep}", dict(s3_config), spark_metadata=keep)
        for batch_id in range(2):
            sink.commit_batch(batch_id, run_batch(sink, "run-a", batch_id))
        counts[keep] = batch_requests(sink, 2)
    added = {k: counts[True].get(k, 0) - counts[False].get(k, 0) for k in {*counts[True], *counts[False]}}
    added = {k: v for k, v in added.items() if v}
    print(f"\nbatch 2 without Spark's log: {counts[False]}\nadded by it: {added}")
    assert added == {"object_list_request": 1, "object_put_request": 1}, added
