"""outcommit.write_dataset: pyarrow's call, Polars', pandas' and DuckDB's data, committed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import given
from hypothesis import strategies as st

import outcommit
from generative import budget
from outcommit import ConfigError, DestinationExistsError, NotCommittedError, open_store
from outcommit.read import dataset
from outcommit.testing.conformance import leftovers

ROWS = 1000


def table(rows: int = ROWS, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + rows), pa.int64()),
                     "day": [f"2026-11-0{1 + i % 3}" for i in range(rows)],
                     "v": [float(i) / 2 for i in range(rows)]})


def pyarrow_table() -> Any:
    return table()


def pyarrow_reader() -> Any:
    data = table()
    return pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=300))


def pyarrow_dataset() -> Any:
    return ds.dataset(table())


def batch_generator() -> Any:
    return iter(table().to_batches(max_chunksize=128))


def polars_frame() -> Any:
    pl = pytest.importorskip("polars")
    return pl.from_arrow(table())


def pandas_frame() -> Any:
    pandas = pytest.importorskip("pandas")
    if not hasattr(pandas.DataFrame, "__arrow_c_stream__"):
        pytest.skip("pandas < 2.2 exports no Arrow stream")
    return table().to_pandas()


def duckdb_relation() -> Any:
    duckdb = pytest.importorskip("duckdb")
    return duckdb.sql(f"select range::bigint as id, '2026-11-0' || (1 + range % 3) as day, "
                      f"range / 2 as v from range({ROWS})")


INPUTS: dict[str, Callable[[], Any]] = {
    "pyarrow-table": pyarrow_table, "pyarrow-reader": pyarrow_reader,
    "pyarrow-dataset": pyarrow_dataset, "batch-generator": batch_generator,
    "polars": polars_frame, "pandas": pandas_frame, "duckdb": duckdb_relation}


def rows_of(url: str, config: dict[str, Any] | None = None) -> list[tuple[int, str]]:
    data = dataset(url, config).to_table()
    return sorted(zip(data["id"].to_pylist(), [str(d) for d in data["day"].to_pylist()], strict=True))


EXPECTED = sorted((i, f"2026-11-0{1 + i % 3}") for i in range(ROWS))


@pytest.mark.parametrize("scheme", ["file", "memory"])
@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_every_input_kind_is_written_partitioned_and_committed(kind: str, scheme: str, tmp_path) -> None:
    url = f"file://{tmp_path}/out" if scheme == "file" else f"memory://wd-{uuid.uuid4().hex}/out"
    result = outcommit.write_dataset(INPUTS[kind](), url, partitioning=["day"], max_rows_per_file=400)
    assert rows_of(url) == EXPECTED
    assert result.rows == ROWS and result.committer == "v1"
    assert result.summary.metrics["rows.written"] == ROWS
    store = open_store(url)
    assert leftovers(store, store.strip(url)) == []


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["polars", "pandas", "duckdb", "pyarrow-reader"])
def test_on_s3_through_the_magic_committer(kind: str, s3_config, s3_root) -> None:
    url = f"{s3_root}/events"
    result = outcommit.write_dataset(INPUTS[kind](), url, partitioning=["day"], config=s3_config)
    assert result.committer == "magic"
    assert rows_of(url, s3_config) == EXPECTED
    store = open_store(url, s3_config)
    assert leftovers(store, store.strip(url)) == []


def test_a_local_path_is_a_file_destination(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    outcommit.write_dataset(table(), "relative/out", format="csv")
    assert (tmp_path / "relative" / "out" / "_SUCCESS").is_file()
    assert ds.dataset(tmp_path / "relative" / "out", format="csv").count_rows() == ROWS


def test_a_stream_is_written_as_it_arrives_not_gathered_first(tmp_path) -> None:
    """100 batches (50 MiB of Arrow data) pass through in a few MiB: each is written and
    released before the next is pulled."""
    peak, total = 0, 0

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal peak, total
        for n in range(100):
            batch = pa.RecordBatch.from_arrays(  # a mapping needs pyarrow 16; 15 is the floor
                [pa.array(range(n * 65536, (n + 1) * 65536), pa.int64())], names=["id"])
            total += batch.nbytes
            peak = max(peak, pa.total_allocated_bytes())
            yield batch
            del batch

    result = outcommit.write_dataset(batches(), f"file://{tmp_path}/out", max_rows_per_group=65536)
    assert result.rows == 100 * 65536
    assert total == 50 * 1024 * 1024 and peak < total / 6, (peak, total)


def test_a_failing_stream_is_not_retried_and_leaves_nothing(tmp_path) -> None:
    """A one-pass stream cannot feed a second attempt (it would find the stream drained and
    commit no rows): the job fails, and nothing is visible or left behind."""
    pulled = []

    def failing() -> Iterator[pa.RecordBatch]:
        pulled.append(1)
        yield from table().to_batches(max_chunksize=100)[:3]
        raise OSError("the source went away")

    url = f"file://{tmp_path}/out"
    with pytest.raises(outcommit.CommitError, match="source went away"):
        outcommit.write_dataset(failing(), url, partitioning=["day"])
    assert pulled == [1]
    with pytest.raises(NotCommittedError):
        dataset(url)
    assert leftovers(open_store(url), str(tmp_path / "out")) == []


def test_existing_data_behaviour_maps_to_conflict_modes(tmp_path) -> None:
    url = f"file://{tmp_path}/out"
    outcommit.write_dataset(table(), url, partitioning=["day"])
    with pytest.raises(DestinationExistsError, match="existing_data_behavior='overwrite_or_ignore'"):
        outcommit.write_dataset(table(), url, partitioning=["day"])        # pyarrow's default: error
    outcommit.write_dataset(table(10, start=ROWS), url, partitioning=["day"],
                            existing_data_behavior="overwrite_or_ignore")
    assert len(rows_of(url)) == ROWS + 10
    outcommit.write_dataset(table(10), url, existing_data_behavior="delete_matching")
    assert len(rows_of(url)) == 10                     # no partitioning: the whole destination
    outcommit.write_dataset(table(5), url, config={"outcommit.committer.conflict-mode": "append"})
    assert len(rows_of(url)) == 15                     # no behaviour given: the configured mode


def test_delete_matching_partitions_is_refused_where_the_whole_destination_would_go(tmp_path) -> None:
    """pyarrow deletes only the partitions it writes; v1's replace deletes them all, so
    it is refused before anything is written."""
    url = f"file://{tmp_path}/out"
    outcommit.write_dataset(table(), url, partitioning=["day"])
    with pytest.raises(ConfigError, match="dynamic-partition-overwrite"):
        outcommit.write_dataset(table(3), url, partitioning=["day"], existing_data_behavior="delete_matching")
    assert rows_of(url) == EXPECTED


@pytest.mark.s3
def test_delete_matching_replaces_only_the_partitions_written_with_partitioned(s3_config, s3_root) -> None:
    url = f"{s3_root}/events"
    outcommit.write_dataset(table(), url, partitioning=["day"], config=s3_config)
    new = pa.table({"id": pa.array([-1, -2], pa.int64()), "day": ["2026-11-01"] * 2, "v": [0.0, 0.0]})
    outcommit.write_dataset(new, url, partitioning=["day"], config=s3_config, committer="partitioned",
                            existing_data_behavior="delete_matching")
    kept = [r for r in EXPECTED if r[1] != "2026-11-01"]
    assert rows_of(url, s3_config) == sorted([*kept, (-2, "2026-11-01"), (-1, "2026-11-01")])


def test_pyarrow_arguments_are_taken_as_pyarrow_means_them(tmp_path) -> None:
    url = f"file://{tmp_path}/out"
    schema = pa.schema([("day", pa.string()), ("id", pa.int32())])
    outcommit.write_dataset(
        table(), url, format=ds.ParquetFileFormat(), schema=schema, basename_template="chunk-{i}.parquet",
        partitioning=ds.partitioning(pa.schema([("day", pa.string())]), flavor="hive"),
        max_rows_per_file=200, max_rows_per_group=50, use_threads=True, create_dir=True)
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.parquet"))
    assert files[0] == "day=2026-11-01/chunk-0.parquet" and len(files) == 6
    written = dataset(url).to_table()
    assert written.schema.field("id").type == pa.int32() and "v" not in written.schema.names
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "out" / files[0]).metadata.row_group(0).num_rows == 50


BAD_CALLS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"data": object()}, TypeError, "give it a pyarrow Table"),
    ({"data": ["a", "b"]}, TypeError, "iterable must yield pyarrow RecordBatches"),
    ({"data": {"id": [1]}}, TypeError, "give it a pyarrow Table"),
    ({"file_visitor": print}, TypeError, "committed_files"),
    ({"filesystem": object()}, ConfigError, "opens the store from the URL"),
    ({"storage_options": {"aws_endpoint_url": "http://x"}}, ConfigError, "not an outcommit configuration"),
    ({"existing_data_behavior": "overwrite"}, ConfigError, "use one of error"),
    ({"partitioning_flavor": "filename"}, ConfigError, "Hive partitions"),
    ({"partitioning": ds.partitioning(pa.schema([("day", pa.string())]))}, ConfigError, "Hive partitions"),
    ({"format": "ipc"}, ConfigError, "unknown format 'ipc'"),
    ({"format": ds.IpcFileFormat()}, ConfigError, "parquet, csv or json"),
    ({"basename_template": "part.parquet"}, ConfigError, "has no {i}"),
    ({"basename_template": "../escape-{i}.parquet"}, ConfigError, "plain file name"),
    ({"basename_template": "_hidden-{i}.parquet"}, ConfigError, "plain file name"),
    ({"schema": pa.schema([("missing", pa.int64())])}, Exception, "no column 'missing'"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_CALLS,
                         ids=[f"{next(iter(k))}-{i}" for i, (k, _, _) in enumerate(BAD_CALLS)])
def test_bad_input_is_one_clear_line_and_loses_nothing(kwargs, error, message, tmp_path) -> None:
    url = f"file://{tmp_path}/out"
    outcommit.write_dataset(table(), url, partitioning=["day"])
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    call = {"data": table(), "existing_data_behavior": "overwrite_or_ignore", **kwargs}
    with pytest.raises(error, match=message) as raised:
        outcommit.write_dataset(call.pop("data"), url, **call)
    assert "\n" not in str(raised.value)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
    assert rows_of(url) == EXPECTED


batch_sizes = st.lists(st.integers(min_value=0, max_value=40), max_size=8)


@pytest.mark.generative
@budget(25)
@given(sizes=batch_sizes, partitions=st.integers(min_value=1, max_value=4),
       per_file=st.integers(min_value=0, max_value=30), as_list=st.booleans())
def test_any_batches_are_read_back_exactly_once(sizes: list[int], partitions: int, per_file: int,
                                                as_list: bool) -> None:
    """Whatever the batches (empty ones too), partitions and file size: the committed
    dataset holds exactly the rows given, once."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.int64())])
    batches, start = [], 0
    for size in sizes:
        ids = list(range(start, start + size))
        batches.append(pa.record_batch([pa.array(ids, pa.int64()),
                                        pa.array([i % partitions for i in ids], pa.int64())],
                                       schema=schema))
        start += size
    url = f"memory://wd-{uuid.uuid4().hex}/out"
    data = batches if as_list else iter(batches)
    outcommit.write_dataset(data, url, partitioning=["p"], max_rows_per_file=per_file, schema=schema)
    read = dataset(url).to_table() if start else None
    assert (sorted(read["id"].to_pylist()) if read is not None else []) == list(range(start))
