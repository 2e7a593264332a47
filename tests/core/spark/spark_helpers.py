"""Reading what a Spark write left behind: visible data, leftovers, pending uploads."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from outcommit import open_store
from outcommit.committer import is_hidden


def visible_files(url: str, config: dict[str, str] | None = None) -> list[str]:
    """Data files under the destination (no path component starting with '_' or '.')."""
    store = open_store(url, config or {})
    root = store.strip(url)
    rels = [f.path[len(root) + 1:] for f in store.list_files(root)]
    return sorted(r for r in rels if not any(is_hidden(p) for p in r.split("/")))


def wait_for_stragglers(spark: Any) -> None:
    """Return once no task of an earlier (failed) job is still running.

    Spark fails a job without waiting for its running tasks, which may go on writing
    after the data source's abort. A barrier stage needs every task slot at the same
    time, so it can only run once those stragglers have finished. The Python worker of a
    killed task may still be writing after that: on the test cluster the executors' hooks
    say when every worker is idle.
    """
    from outcommit_devtools.sparkhooks import Hooks

    slots = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(slots), slots).barrier().mapPartitions(lambda it: it).collect()
    hooks = Hooks.of(spark)
    if hooks is not None:
        hooks.wait_idle()


def leftovers(url: str, config: dict[str, str] | None = None) -> list[str]:
    """Temporary state that must not survive a commit or an abort: directories and uploads."""
    store = open_store(url, config or {})
    root = store.strip(url)
    found = [f.path for f in store.list_files(root)
             if any(marker in f.path for marker in ("/_temporary", "/__magic", "/__staging"))]
    multipart = store.multipart()
    if multipart is not None:
        found += [f"pending upload {p}" for p in multipart.list_pending(root)]
    return found


def pending_uploads(url: str, config: dict[str, str] | None = None) -> int | None:
    """Multipart uploads pending under the destination; None on a store without them."""
    store = open_store(url, config or {})
    multipart = store.multipart()
    return None if multipart is None else len(multipart.list_pending(store.strip(url)))


def row_digest(rows: list[tuple[Any, ...]]) -> tuple[int, str]:
    """Row count and an order-independent checksum."""
    acc = 0
    for row in rows:  # a sum, not a xor: a duplicated row changes it
        acc += int.from_bytes(hashlib.sha256(repr(row).encode()).digest()[:8], "big")
    return len(rows), f"{acc % (1 << 64):016x}"


def read_back(url: str, config: dict[str, str] | None = None, fmt: str = "parquet") -> list[tuple[str, ...]]:
    """Every row under the destination (Hive partitions included), as sorted-column strings."""
    import pyarrow.dataset as ds

    store = open_store(url, config or {})
    root = store.strip(url)
    files = [f"{root}/{rel}" for rel in visible_files(url, config)]
    if not files:
        return []
    dataset = ds.dataset(files, filesystem=store.fs, format=fmt, partitioning="hive",
                         partition_base_dir=root)
    table = dataset.to_table()
    columns = sorted(table.column_names)
    return [tuple(str(row[c]) for c in columns) for row in table.select(columns).to_pylist()]


def as_strings(rows: list[Any]) -> list[tuple[str, ...]]:
    """Spark Rows in the shape of read_back."""
    out = []
    for row in rows:
        d = row.asDict()
        out.append(tuple(str(d[c]) for c in sorted(d)))
    return out


DATES = ["2024-05-01", "2024-05-02", "2024-05-03"]


def events(spark: Any, rows: int = 3000, partitions: int = 4, first_id: int = 0) -> Any:
    from pyspark.sql import functions as F

    dates = F.array(*[F.lit(d) for d in DATES])
    return (spark.range(first_id, first_id + rows, 1, partitions)
            .withColumn("date", F.element_at(dates, (F.col("id") % len(DATES) + 1).cast("int")))
            .withColumn("user", (F.col("id") * 7919 % 1000).cast("long"))
            .withColumn("amount", F.col("id") * 0.25))


@dataclass
class Figures:
    """One cluster test's figures, as the closing note reports them."""

    test: str
    store: str = ""
    committer: str = ""
    speculative: int = 0           # speculative attempts Spark launched (its own task records)
    killed: int = 0                # executor JVMs SIGKILLed (and recorded as lost by Spark)
    rows_in: int = 0               # rows the job must make visible (0 for a job that fails)
    rows_out: int = 0              # rows read back from the destination
    uploads_left: int | None = None  # pending multipart uploads; None: the store has none
    note: str = ""                 # what else happened, e.g. how the losing attempt ended

    HEADER = ("test", "store", "committer", "speculative", "killed", "rows in", "rows out", "uploads left",
              "note")

    def cells(self) -> tuple[str, ...]:
        uploads = "-" if self.uploads_left is None else str(self.uploads_left)
        return (self.test, self.store, self.committer, str(self.speculative), str(self.killed),
                str(self.rows_in), str(self.rows_out), uploads, self.note)

    @classmethod
    def table(cls, rows: list[Figures]) -> list[str]:
        total = cls("total", speculative=sum(r.speculative for r in rows), killed=sum(r.killed for r in rows),
                    rows_in=sum(r.rows_in for r in rows), rows_out=sum(r.rows_out for r in rows),
                    uploads_left=sum(r.uploads_left or 0 for r in rows))
        lines = [cls.HEADER, *(r.cells() for r in rows), total.cells()]
        widths = [max(len(line[i]) for line in lines) for i in range(len(cls.HEADER))]
        out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
               for line in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return out
