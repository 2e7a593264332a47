"""The streaming writer: batches as they arrive, one open file per partition, bounded memory."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from generative import budget
from outcommit.engine.writer import StreamingWriter, fully_typed, split_by_partition


def date_of(i: int, dates: int, skewed: bool) -> str:
    if skewed:  # nearly every row in one partition, one in a thousand in ten rare ones
        return f"2026-12-{(i // 1000) % 10 + 1:02d}" if i % 1000 == 0 else "2026-11-01"
    return f"2026-11-{(i % dates) + 1:02d}"


def batches(count: int, rows: int, dates: int = 3, skewed: bool = False):
    for b in range(count):
        start = b * rows
        ids = pa.array(range(start, start + rows), pa.int64())
        yield pa.RecordBatch.from_pydict({
            "id": ids,
            "date": pa.array([date_of(i, dates, skewed) for i in range(start, start + rows)]),
            "payload": pa.array([f"row {i} " + "x" * 150 for i in range(start, start + rows)]),
        })


def writer(tmp_path: Path, **kwargs) -> StreamingWriter:
    return StreamingWriter(fsspec.filesystem("file", auto_mkdir=True), str(tmp_path / "out"), 3,
                           "job", 0, **kwargs)


def test_partitions_spread_over_batches_get_one_file_each(tmp_path: Path) -> None:
    written = writer(tmp_path, partition_by=["date"]).write_batches(batches(5, 1000))
    assert sorted(w.path.split("/")[0] for w in written) == [f"date=2026-11-0{d}" for d in (1, 2, 3)]
    assert sum(w.rows for w in written) == 5000
    table = ds.dataset(str(tmp_path / "out"), format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 5000 and sorted(table.column("id").to_pylist()) == list(range(5000))
    assert "date" not in pq.read_schema(str(tmp_path / "out" / written[0].path)).names


def test_split_by_partition_keeps_each_groups_rows_in_order() -> None:
    # Two key columns with a null, interleaved groups, and a batch that is a slice of a
    # bigger one (its row numbers do not start at 0 in the underlying buffers).
    whole = pa.RecordBatch.from_pydict({
        "id": list(range(40)),
        "a": [["x", "y", None][i % 3] for i in range(40)],
        "b": [i % 2 for i in range(40)],
    })
    batch = whole.slice(5, 30)
    expected: dict[str, list[int]] = {}
    for row in batch.to_pylist():
        a = "__HIVE_DEFAULT_PARTITION__" if row["a"] is None else row["a"]
        expected.setdefault(f"a={a}/b={row['b']}", []).append(row["id"])
    got = split_by_partition(batch, ["a", "b"])
    assert [d for d, _ in got] == sorted(expected)
    assert {d: part.column("id").to_pylist() for d, part in got} == expected
    assert all(part.schema.names == ["id"] for _, part in got)


@pytest.mark.parametrize(("option", "value", "files"), [
    ("max_rows_per_file", 700, 8),       # 5000 rows: 7 full files and one of 100
    ("max_bytes_per_file", 20_000, None),  # encoded bytes: 5000 rows are ~93 KB as Parquet
])
def test_files_roll_over_by_rows_or_bytes(tmp_path: Path, option: str, value: int,
                                          files: int | None) -> None:
    written = writer(tmp_path, **{option: value}).write_batches(batches(5, 1000))
    assert sum(w.rows for w in written) == 5000
    if files is not None:
        assert len(written) == files and max(w.rows for w in written) == 700
    else:
        assert len(written) > 1
        assert all(w.bytes < 1.2 * value for w in written), [w.bytes for w in written]
    back = ds.dataset([str(tmp_path / "out" / w.path) for w in written], format="parquet").to_table()
    assert sorted(back.column("id").to_pylist()) == list(range(5000))


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_formats_stream_too(tmp_path: Path, fmt: str) -> None:
    written = writer(tmp_path, fmt=fmt, partition_by=["date"]).write_batches(batches(3, 500))
    assert len(written) == 3 and sum(w.rows for w in written) == 1500
    lines = sum(len((tmp_path / "out" / w.path).read_text().splitlines()) for w in written)
    assert lines == 1500 + (3 if fmt == "csv" else 0)  # csv has a header per file


def _peak_arrow_memory(tmp_path: Path, count: int, skewed: bool = False) -> tuple[int, int]:
    """(peak bytes Arrow held while streaming ``count`` batches, their total size)."""
    peak = total = 0
    w = writer(tmp_path, partition_by=["date"], options={"row_group_size": 20_000})
    for batch in batches(count, 5000, skewed=skewed):
        total += batch.nbytes
        w.write_batch(batch)
        del batch
        peak = max(peak, pa.total_allocated_bytes())
    assert sum(x.rows for x in w.close()) == count * 5000
    return peak, total


@pytest.mark.parametrize("skewed", [False, True], ids=["even", "rare-partitions"])
def test_memory_follows_the_open_files_not_the_partition(tmp_path: Path, skewed: bool) -> None:
    """Twice the data (~47 MB, then ~95 MB as Arrow) streams through in the same memory,
    also when rare partitions buffer a few rows of every batch for a long time."""
    small_peak, small_total = _peak_arrow_memory(tmp_path / "small", 50, skewed)
    large_peak, large_total = _peak_arrow_memory(tmp_path / "large", 100, skewed)
    assert large_total > 1.9 * small_total
    assert large_peak < 1.2 * small_peak, (small_peak, large_peak)
    assert large_peak < large_total / 4


def test_a_failed_stream_leaves_no_file_open_to_be_committed(tmp_path: Path) -> None:
    w = writer(tmp_path, partition_by=["date"])

    def failing():
        yield from batches(2, 100)
        raise RuntimeError("the source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        w.write_batches(failing())
    assert w._open == {}


def _wide_rows(rows: int, start: int = 0) -> pa.RecordBatch:
    """About 1 KB a row, hardly compressible by snappy's standards (hex digests)."""
    import hashlib

    ids = range(start, start + rows)
    return pa.RecordBatch.from_pydict({
        "id": pa.array(ids, pa.int64()),
        "s": pa.array([hashlib.sha256(str(i).encode()).hexdigest() * 16 for i in ids])})


@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
def test_a_file_rolls_over_within_a_batch_at_about_max_bytes(tmp_path: Path, compression: str) -> None:
    """Spark hands over batches of 10,000 rows (here ~10 MB each): a file ended at the first
    batch boundary past the limit, 10x maxBytesPerFile (user trial)."""
    limit = 1_000_000
    written = writer(tmp_path, max_bytes_per_file=limit, options={"compression": compression}) \
        .write_batches(_wide_rows(10_000, start) for start in (0, 10_000))
    assert sum(w.rows for w in written) == 20_000
    full, last = written[:-1], written[-1]
    # "About": within one row group's estimate error and the footer of the limit.
    assert all(0.9 * limit < w.bytes < 1.1 * limit for w in full), [w.bytes for w in written]
    assert last.bytes < 1.1 * limit
    back = ds.dataset([str(tmp_path / "out" / w.path) for w in written], format="parquet").to_table()
    assert sorted(back.column("id").to_pylist()) == list(range(20_000))


@pytest.mark.parametrize("row_group_size", [1000, 3000, 25_000])
def test_row_groups_hold_at_most_row_group_size_rows(tmp_path: Path, row_group_size: int) -> None:
    """All pending batches were written as one row group: rowGroupSize=1000 gave groups of
    10,000 rows, the size of Spark's batches (user trial)."""
    written = writer(tmp_path, options={"row_group_size": row_group_size}).write_batches(
        batches(4, 10_000, dates=1))
    meta = pq.ParquetFile(tmp_path / "out" / written[0].path).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(groups) == 40_000
    assert max(groups) == min(row_group_size, 40_000)
    assert all(g == row_group_size for g in groups[:-1]), groups


def test_row_groups_keep_to_the_byte_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch larger than the row group byte budget is split, not written as one group."""
    import outcommit.engine.formats as writer_module

    monkeypatch.setattr(writer_module, "ROW_GROUP_BYTES", 1_000_000)
    written = writer(tmp_path).write_batches([_wide_rows(5000)])   # ~5 MB as Arrow
    meta = pq.ParquetFile(tmp_path / "out" / written[0].path).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(groups) == 5000 and len(groups) >= 5
    assert all(meta.row_group(i).total_byte_size < 1_200_000 for i in range(meta.num_row_groups))


@pytest.mark.parametrize("given", ["schema", "empty batch"])
def test_task_0_without_rows_writes_one_file_with_the_schema(tmp_path: Path, given: str) -> None:
    """Spark's rule (FileFormatWriter): so that an all-empty job can be read back."""
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    w = StreamingWriter(fsspec.filesystem("file", auto_mkdir=True), str(tmp_path / "out"), 0,
                        "job", 0, schema=schema if given == "schema" else None)
    written = w.write_batches([] if given == "schema" else [pa.RecordBatch.from_pylist([], schema)])
    assert [w.rows for w in written] == [0]
    back = pq.read_table(tmp_path / "out" / written[0].path)
    assert back.schema == schema and back.num_rows == 0


@pytest.mark.parametrize(("task", "kwargs"), [
    (1, {}), (0, {"partition_by": ["s"]}), (0, {"fmt": "csv"}), (0, {"fmt": "json"})])
def test_other_empty_tasks_write_nothing(tmp_path: Path, task: int, kwargs: dict) -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    w = StreamingWriter(fsspec.filesystem("file", auto_mkdir=True), str(tmp_path / "out"), task,
                        "job", 0, schema=schema, **kwargs)
    assert w.write_batches([pa.RecordBatch.from_pylist([], schema)]) == []


@pytest.mark.parametrize("given", ["schema", "empty batch"])
@pytest.mark.parametrize("columns", [[], [("id", pa.int64()), ("s", pa.null())],
                                     [("id", pa.int64()), ("l", pa.list_(pa.null()))]],
                         ids=["no-columns", "a-null-column", "a-list-of-nulls"])
def test_a_schema_that_does_not_type_every_column_writes_no_file(
        tmp_path: Path, given: str, columns: list) -> None:
    """Ray hands a task empty blocks of no columns (a filter by expression), and an empty
    pandas object column becomes Arrow's null: task 0's file was the first a reader took
    the dataset's columns from (none; or 's' as null, and the other tasks' strings failed
    to read: 'Unsupported cast from string to null')."""
    schema = pa.schema(columns)
    w = StreamingWriter(fsspec.filesystem("file", auto_mkdir=True), str(tmp_path / "out"), 0,
                        "job", 0, schema=schema if given == "schema" else None)
    assert w.write_batches([pa.RecordBatch.from_pylist([], schema)]) == []
    assert not (tmp_path / "out").exists()


def test_task_0_with_rows_writes_no_extra_file(tmp_path: Path) -> None:
    w = StreamingWriter(fsspec.filesystem("file", auto_mkdir=True), str(tmp_path / "out"), 0,
                        "job", 0)
    assert [x.rows for x in w.write_batches(batches(1, 10))] == [10]


# -- generative: task 0's file of an empty write ----------------------------------------------------
ATOMIC_TYPES = st.sampled_from([
    pa.int8(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64(), pa.float32(), pa.float64(),
    pa.bool_(), pa.string(), pa.large_string(), pa.binary(), pa.date32(), pa.timestamp("s"),
    pa.timestamp("ms"), pa.timestamp("us", tz="UTC"), pa.timestamp("ns", tz="Europe/Zurich"),
    pa.time64("us"), pa.decimal128(10, 2), pa.decimal128(38, 0), pa.null()])
TYPES = st.recursive(ATOMIC_TYPES, lambda inner: st.one_of(
    st.builds(pa.list_, inner), st.builds(lambda t: pa.struct([("f", t)]), inner),
    st.builds(lambda t: pa.dictionary(pa.int32(), t), st.sampled_from([pa.string(), pa.int64()]))),
    max_leaves=3)
SCHEMAS = st.lists(TYPES, max_size=4).map(
    lambda types: pa.schema([(f"c{i}", t) for i, t in enumerate(types)]))


@pytest.mark.generative
@budget(40)
@given(schema=SCHEMAS, compression=st.sampled_from(["snappy", "zstd", "none"]))
def test_task_0s_file_of_an_empty_write_has_the_schema_a_task_with_rows_writes(
        tmp_path: Path, schema: pa.Schema, compression: str) -> None:
    """Readers take the columns from the first file (task 0's): the schema-only file must
    read back as exactly what a task with rows writes for that schema (Parquet turns some
    types into others: timestamp[s] into ms, dictionaries...), and it is written only for
    a schema that types every column, nested ones included."""
    fs, base = fsspec.filesystem("file", auto_mkdir=True), str(tmp_path / uuid.uuid4().hex)
    options = {"compression": compression}
    rows = StreamingWriter(fs, f"{base}/rows", 1, "job", 0, options=options).write_batches(
        [pa.RecordBatch.from_arrays([pa.nulls(1, t) for t in schema.types], schema=schema)])
    empty = StreamingWriter(fs, f"{base}/empty", 0, "job", 0, options=options, schema=schema) \
        .write_batches([])
    typed = len(schema) > 0 and all(fully_typed(t) for t in schema.types)
    assert len(empty) == (1 if typed else 0)
    if typed:
        written = pq.read_schema(f"{base}/empty/{empty[0].path}")
        assert written == pq.read_schema(f"{base}/rows/{rows[0].path}")
        assert pq.read_metadata(f"{base}/empty/{empty[0].path}").num_rows == 0
