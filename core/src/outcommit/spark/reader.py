"""The read side of the ``outcommit`` data source: ``spark.read.format("outcommit").load(url)``.

pip's PySpark has no Hadoop connector for ``s3://``, ``gs://`` or ``abfs://``, so Spark
cannot read back what outcommit wrote there; and ``spark.read.parquet`` of a directory
reads whatever is in it. This reader lists exactly the committed files
(:func:`outcommit.read.committed_files_with_sizes`: a batch job's ``_SUCCESS``, or a
streaming destination's batch log) and reads them through outcommit's stores, with the
partition columns Spark's own reader would give them (:mod:`.partitions`).

Where each piece runs: ``schema()`` in a Python process of the driver (lists the
destination, reads one file's footer); ``reader()`` and ``partitions()`` in another
(prunes with the query's filters, groups the files into input partitions); ``read()``
in a Python worker per input partition, through a store shared by the process.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import DataType, StructField, StructType

from ..errors import NotCommittedError, OptionError
from ..factory import shared_store
from ..read import committed_files_with_sizes
from .logs import reported_to_spark
from .options import READ_FORMATS, ReadPlan
from .partitions import PartitionColumn, discover, session_zone
from .pruning import keeps
from .session import SessionSnapshot

log = logging.getLogger("outcommit.spark")

BATCH_ROWS = 65_536
#: Spark's spark.sql.files.openCostInBytes default: what opening a file costs, in bytes.
OPEN_COST_BYTES = 4 * 1024 * 1024
_SUMMARIES = ("_metadata", "_common_metadata")


# -- listing ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DataFile:
    """A committed file, its size and its partition values (in the listing's column order)."""

    url: str
    size: int
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Listing:
    """Exactly the committed files of a destination, and their partition columns."""

    files: tuple[DataFile, ...]
    columns: tuple[PartitionColumn, ...]
    fmt: str


def _file_format(plan: ReadPlan, urls: Sequence[str]) -> str:
    if plan.fmt is not None:
        return plan.fmt
    found = sorted({u.rsplit(".", 1)[-1].lower() for u in urls} & set(READ_FORMATS))
    if len(found) > 1:
        raise OptionError(f"{plan.destination} holds {' and '.join(found)} files: say which to read "
                          f"with .option('format', ...)")
    return found[0] if found else "parquet"


def list_committed(plan: ReadPlan, given: Mapping[str, DataType] | None = None) -> Listing:
    """The committed files and their partition values (``given``: a user schema's types)."""
    try:
        found = committed_files_with_sizes(plan.destination, plan.config,
                                           require_success=plan.require_success)
    except NotCommittedError:
        raise NotCommittedError(
            f"{plan.destination} has no _SUCCESS report and no streaming batch log: no outcommit "
            "job or query has committed there (a failed write leaves neither); "
            ".option('requireSuccess', 'false') reads whatever a reader following Spark's rule "
            "sees there") from None
    found = [(u, s) for u, s in found if posixpath.basename(u) not in _SUMMARIES]
    store = shared_store(plan.destination, plan.config)
    base = store.url(store.strip(plan.destination).rstrip("/"))
    relative_dirs = [posixpath.dirname(u[len(base):].lstrip("/")) for u, _ in found]
    columns, values = discover(relative_dirs, session_zone(plan.time_zone), plan.infer_partition_types,
                               dict(given or {}))
    files = tuple(DataFile(u, s, v) for (u, s), v in zip(found, values, strict=True))
    return Listing(files, tuple(columns), _file_format(plan, [u for u, _ in found]))


# -- schema ----------------------------------------------------------------------------------------
def _spark_compatible(arrow_type: pa.DataType) -> pa.DataType:
    """An Arrow type Spark has, for one it lacks (as Spark's Parquet reader widens them)."""
    import pyarrow.types as t

    if t.is_dictionary(arrow_type):
        return _spark_compatible(arrow_type.value_type)
    widened = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
               pa.uint64(): pa.decimal128(20, 0), pa.float16(): pa.float32(), pa.date64(): pa.date32(),
               pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    if arrow_type in widened:
        return widened[arrow_type]
    if t.is_large_list(arrow_type):
        return pa.list_(arrow_type.value_field)
    return arrow_type


def _file_schema(store: Any, url: str, fmt: str) -> pa.Schema:
    """The Arrow schema of one file: a Parquet footer, or what pyarrow infers from the
    first block of a CSV or JSON file."""
    path = store.strip(url)
    with store.open(path, "rb") as handle:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(handle).schema_arrow
        if fmt == "csv":
            import pyarrow.csv as pacsv

            return pacsv.open_csv(handle).schema
        import pyarrow.json as pajson

        if hasattr(pajson, "open_json"):  # pyarrow >= 19: the first block only
            return pajson.open_json(handle).schema
        return pajson.read_json(handle).schema


def infer_schema(plan: ReadPlan, listing: Listing) -> StructType:
    """The data columns of the first committed file, then the partition columns, all
    nullable (as Spark's file sources read them)."""
    from pyspark.sql.pandas.types import from_arrow_type

    if not listing.files:
        raise OptionError(f"{plan.destination} holds no committed file to take the columns from: "
                          "give them with spark.read.format('outcommit').schema('id long, ...')")
    first = listing.files[0].url
    arrow = _file_schema(shared_store(plan.destination, plan.config), first, listing.fmt)
    partition_names = {c.name for c in listing.columns}
    fields = []
    for arrow_field in arrow:
        if arrow_field.name in partition_names:
            continue  # the directory's value wins, as in Spark
        try:
            data_type = from_arrow_type(_spark_compatible(arrow_field.type), prefer_timestamp_ntz=True)
        except Exception as error:
            raise OptionError(f"column {arrow_field.name!r} of {first} is {arrow_field.type}, which "
                              f"Spark has no type for ({error}): give the columns with "
                              ".schema(...)") from None
        fields.append(StructField(arrow_field.name, data_type, nullable=True))
    fields += [StructField(c.name, c.data_type, nullable=True) for c in listing.columns]
    return StructType(fields)


# -- input partitions --------------------------------------------------------------------------------
def group_files(files: Sequence[DataFile], max_bytes: int) -> list[list[DataFile]]:
    """Spark's ``FilePartition.getFilePartitions`` for whole files: largest first, each
    partition filled until the next file would exceed ``max_bytes`` (a file costs its
    size plus ``OPEN_COST_BYTES``)."""
    groups: list[list[DataFile]] = []
    current: list[DataFile] = []
    size = 0
    for data_file in sorted(files, key=lambda f: (-f.size, f.url)):
        if current and size + data_file.size > max_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(data_file)
        size += data_file.size + OPEN_COST_BYTES
    if current:
        groups.append(current)
    return groups


@dataclass(frozen=True)
class FilesPartition(InputPartition):
    """One input partition: the files one Spark task reads."""

    files: tuple[DataFile, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", len(self.files))


class OutcommitReader(DataSourceReader):
    """Plans input partitions on the driver; reads them in the tasks."""

    def __init__(self, plan: ReadPlan, listing: Listing, schema: StructType,
                 session: SessionSnapshot) -> None:
        self.plan = plan
        self.schema = schema
        self.session = session
        self.fmt = listing.fmt
        self.partition_names = tuple(c.name for c in listing.columns)
        self.files: tuple[DataFile, ...] = listing.files
        self.filters: list[Filter] = []

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader into every task before it asks for the partitions:
        # the listing (every file of the table) stays on the driver.
        state = dict(self.__dict__)
        state["files"] = ()
        state["filters"] = []
        return state

    def partitions(self) -> list[InputPartition]:
        with reported_to_spark("read planning"):
            kept = [f for f in self.files
                    if keeps(self.filters, dict(zip(self.partition_names, f.values, strict=True)))]
            groups = group_files(kept, self.plan.max_partition_bytes)
            log.debug("reading %s: %d of %d committed files in %d input partitions", self.plan.destination,
                      len(kept), len(self.files), len(groups))
            return [FilesPartition(tuple(g)) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        with reported_to_spark("read"):
            if not isinstance(partition, FilesPartition):
                return  # Spark's one empty partition of a read with no files
            from pyspark import TaskContext

            context = TaskContext.get()
            if context is not None:
                self.session.check(context.getLocalProperty, self.plan.option_keys)
            yield from self._batches(partition.files)

    def _batches(self, files: Sequence[DataFile]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(self.schema, timezone="UTC")
        store = shared_store(self.plan.destination, self.plan.config)
        for data_file in files:
            constants = dict(zip(self.partition_names, data_file.values, strict=True))
            for batch in read_file(store, data_file.url, self.fmt, target, set(constants)):
                yield project(batch, target, constants)


class PruningReader(OutcommitReader):
    """:class:`OutcommitReader` that takes the query's filters (Spark asks only with
    ``spark.sql.python.filterPushdown.enabled``, and refuses a reader that implements
    ``pushFilters`` without it: hence a class of its own)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        self.filters = list(filters)
        # Every filter goes back to Spark, which evaluates it on the rows: pruning only
        # skips files that cannot hold a row the query keeps.
        yield from filters


# -- reading one file ----------------------------------------------------------------------------------
def read_file(store: Any, url: str, fmt: str, target: pa.Schema, skip: set[str]) -> Iterator[pa.RecordBatch]:
    """The batches of one file, its columns typed as ``target`` says where it names them."""
    wanted = [f for f in target if f.name not in skip]
    with store.open(store.strip(url), "rb") as handle:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(handle)
            present = set(parquet.schema_arrow.names)
            columns = [f.name for f in wanted if f.name in present]
            yield from parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns)
        elif fmt == "csv":
            import pyarrow.csv as pacsv

            types = {f.name: f.type for f in wanted}
            reader = pacsv.open_csv(handle, convert_options=pacsv.ConvertOptions(column_types=types))
            yield from reader
        else:
            import pyarrow.json as pajson

            table = pajson.read_json(handle, parse_options=pajson.ParseOptions(
                explicit_schema=pa.schema(wanted), unexpected_field_behavior="ignore"))
            yield from table.to_batches(max_chunksize=BATCH_ROWS)


def project(batch: pa.RecordBatch, target: pa.Schema, constants: Mapping[str, Any]) -> pa.RecordBatch:
    """``batch`` as exactly ``target`` (Spark checks the first batch's schema): partition
    columns from the directory, missing columns null, the rest cast."""
    import pyarrow.compute as pc

    rows = batch.num_rows
    arrays = []
    for target_field in target:
        if target_field.name in constants:
            arrays.append(pa.array([constants[target_field.name]] * rows, type=target_field.type))
        elif target_field.name in batch.schema.names:
            column = batch.column(target_field.name)
            if column.type != target_field.type:
                column = pc.cast(column, options=pc.CastOptions(target_field.type, allow_time_truncate=True))
            arrays.append(column)
        else:
            arrays.append(pa.nulls(rows, target_field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)
