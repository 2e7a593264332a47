"""From the data source's options (write, read, streaming) to a picklable plan.

Nothing here imports pyspark: the plan is built on the driver and travels, pickled, to
every task attempt, which recreates its committer from it (never a live client). Where
a plan's committer and store config comes from (the session, config keys given as
options), and the check that the session has not changed since: ``session.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..context import JobContext
from ..engine.formats import FORMATS, check_compression
from ..engine.tasks import WriteSettings
from ..errors import ConfigError, OptionError
from ..factory import resolve_config
from .session import (
    FILTER_PUSHDOWN_KEY,
    OPTION_CONFIG_PREFIXES,
    PARTITION_INFERENCE_KEY,
    TIME_ZONE_KEY,
    option_config,
    session_config,
)

# Where tests and plugins have imported them from.
from .session import SessionSnapshot as SessionSnapshot
from .session import watched_session_keys as watched_session_keys

CONFLICT_KEY = "outcommit.committer.conflict-mode"

# Options of the data source itself (Spark hands them over lower-cased): (default, meaning).
DATA_SOURCE_OPTIONS: dict[str, tuple[str, str]] = {
    "path": ("required", "destination URL: `file://`, `s3://`, `s3a://`, `gs://`, `abfs://`, "
                         "`hdfs://`, ... (or `.save(url)`)"),
    "format": ("`parquet`", "`parquet`, `csv` or `json` (JSON lines)"),
    "committer": ("per scheme", "committer name; wins over every config key"),
    "partitionBy": ("none", "comma-separated columns: `col=value/` directories, columns not "
                            "stored in the files (Spark refuses `.partitionBy()` for Python data "
                            "sources, hence an option); values escaped as Spark's own writer "
                            "escapes them (`%XX` for `/`, `=`, `:`, `%`, `#`, `?`, `*`, `\\`, quotes, "
                            "`{[]^` and control characters; `é`, `}` or `東京` as they are), null or "
                            "empty as `__HIVE_DEFAULT_PARTITION__`"),
    "conflictMode": ("from the save mode", "`fail`, `append` or `replace`"),
    "maxRowsPerFile": ("0 (no limit)", "roll to a new file after this many rows"),
    "maxBytesPerFile": ("0 (no limit)", "roll to a new file after about this many bytes, "
                                        "within an Arrow batch if need be; about: the rows still "
                                        "buffered are estimated from their Arrow size and the "
                                        "encoded/Arrow ratio measured so far, so a file ends "
                                        "within one row group's estimate error (plus the footer) "
                                        "of the limit: a few percent while the data compresses "
                                        "alike, several times the limit when it turns much less "
                                        "compressible inside one row group (lower rowGroupSize "
                                        "to bound that)"),
    "rowGroupSize": ("131072", "most Parquet rows per row group (fewer when 64 MiB of Arrow "
                               "data come first, and in a file's last group)"),
    "compression": ("`snappy`", "Parquet codec: `snappy`, `gzip`, `zstd`, `lz4`, `lz4_raw`, "
                                "`brotli`, `none` (or `uncompressed`); checked on the driver "
                                "(`lzo` cannot be written by pyarrow); CSV and JSON are written "
                                "uncompressed"),
}
_OPTION_NAMES = {name.lower(): name for name in DATA_SOURCE_OPTIONS}
# Test and demo hook, not a user option: the first attempt of this Spark partition fails
# after writing part of its data, without cleaning up, as a killed executor would.
FAIL_TASK_ONCE_OPTION = "_failtaskonce"


def options_markdown() -> str:
    """The option table of ``docs/pyspark.md``."""
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{name}` | {default} | {meaning} |"
             for name, (default, meaning) in DATA_SOURCE_OPTIONS.items()]
    rows.append("| `outcommit.*`, `fs.*`, `mapreduce.*`, `spark.hadoop.*` | | committer and store "
                "config for this write only (wins over the session config; checked like any config) |")
    return "\n".join(rows) + "\n"


def check_options(lowered: Mapping[str, str], known: Mapping[str, Any] | None = None,
                  kind: str = "write", hooks: tuple[str, ...] = (FAIL_TASK_ONCE_OPTION,)) -> None:
    """A misspelled option (``partitonBy``) must not silently change nothing."""
    table = DATA_SOURCE_OPTIONS if known is None else known
    names = {name.lower() for name in table}
    unknown = [k for k in lowered if k not in names and k not in hooks
               and not k.startswith(OPTION_CONFIG_PREFIXES)]
    if not unknown:
        return
    from ..keys import did_you_mean

    writing = {name.lower() for name in DATA_SOURCE_OPTIONS} - names
    problems = []
    for key in sorted(unknown):
        guesses = did_you_mean(key, table, cutoff=0.75)
        if kind == "read" and key in writing:
            hint = " (an option of writes, not reads: a read finds partition columns in directory names)"
        else:
            hint = f" (did you mean {' or '.join(guesses)}?)" if guesses else ""
        problems.append(f"{key!r}{hint}")
    raise OptionError(
        f"unknown {kind} option {', '.join(problems)}: the outcommit data source takes "
        f"{', '.join(table)}, and configuration keys starting with "
        f"{', '.join(OPTION_CONFIG_PREFIXES)}")


def _int_option(options: Mapping[str, str], key: str, default: int) -> int:
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OptionError(f"option {key}={value!r} is not an integer") from None
    if number < 0:
        raise OptionError(f"option {key}={number} must be >= 0")
    return number


@dataclass(frozen=True)
class WritePlan:
    """Everything a task attempt needs to write and commit, picklable."""

    destination: str
    committer: str | None
    config: dict[str, str]
    fmt: str = "parquet"
    partition_by: tuple[str, ...] = ()
    max_rows_per_file: int = 0
    max_bytes_per_file: int = 0
    file_options: dict[str, Any] = field(default_factory=dict)
    conflict_mode: str = "append"
    conflict_reason: str = ""
    fail_task_once: int | None = None
    #: The configuration keys the write's options set (normalised): they win over the session.
    option_keys: tuple[str, ...] = ()

    def settings(self) -> WriteSettings:
        return WriteSettings(self.fmt, self.partition_by, self.max_rows_per_file,
                             self.max_bytes_per_file, dict(self.file_options))

    def job_context(self, job_id: str | None = None) -> JobContext:
        """A new job (a fresh UUID unless Spark's writeJobUUID is in the config)."""
        return JobContext(self.destination, job_id, 0, Config(self.config),
                          job_id_source="caller" if job_id else None, task_messages=True)


def build_plan(options: Mapping[str, str], overwrite: bool,
               spark_conf: Mapping[str, str] | None = None) -> WritePlan:
    """Resolve options and Spark config into a plan; the option on the write wins.

    Conflict mode, first match: the ``conflictMode`` option (or an ``outcommit.`` key on the
    write); save mode ``overwrite`` -> replace; the Spark config's conflict mode
    (``spark.outcommit.committer.conflict-mode`` or Hadoop's staging key); save mode
    ``append`` -> append.
    """
    lowered = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    check_options(lowered)
    path = lowered.get("path", "").strip()
    if not path:
        raise OptionError("the outcommit data source needs a destination: "
                          "df.write.format('outcommit').save('s3://bucket/table') or .option('path', ...)")
    fmt = lowered.get("format", "parquet").strip().lower() or "parquet"
    if fmt not in FORMATS:
        raise OptionError(f"option format={fmt!r}: use one of {', '.join(FORMATS)}")
    partition_by = tuple(c.strip() for c in lowered.get("partitionby", "").split(",") if c.strip())
    if len(set(partition_by)) != len(partition_by):
        raise OptionError(f"option partitionBy names a column twice: {lowered['partitionby']!r}")

    write_config, config = option_config(lowered, spark_conf)
    session = session_config(spark_conf or {})

    mode, reason = _conflict_mode(lowered, write_config, session, overwrite)
    # Drop every spelling of the conflict mode key so the resolved one is the only one.
    config = {k: v for k, v in config.items()
              if resolve_config({k: v}).get_str(CONFLICT_KEY) is None}
    config[CONFLICT_KEY] = mode

    file_options = _file_options(fmt, lowered)
    fail_once = lowered.get(FAIL_TASK_ONCE_OPTION)
    committer = lowered.get("committer", "").strip() or None
    return WritePlan(
        destination=path, committer=committer, config=config, fmt=fmt,
        partition_by=partition_by, max_rows_per_file=_int_option(lowered, "maxrowsperfile", 0),
        max_bytes_per_file=_int_option(lowered, "maxbytesperfile", 0),
        file_options=file_options, conflict_mode=mode, conflict_reason=reason,
        fail_task_once=int(fail_once) if fail_once not in (None, "") else None,
        option_keys=tuple(resolve_config(write_config)))


def _conflict_mode(lowered: Mapping[str, str], write_config: Mapping[str, str],
                   session: Mapping[str, str], overwrite: bool) -> tuple[str, str]:
    """The conflict mode and what set it (build_plan's order of precedence)."""
    mode = lowered.get("conflictmode", "").strip().lower()
    configured = resolve_config(write_config).get_str(CONFLICT_KEY)
    if mode:
        reason = f"option conflictMode={mode}"
    elif configured:  # named as the user spelled it: fs.s3a.committer.staging.conflict-mode
        spelled = resolve_config(write_config).spelled(CONFLICT_KEY)
        mode, reason = configured.strip().lower(), f"write option {spelled}={configured}"
    elif overwrite:
        mode, reason = "replace", "save mode overwrite"
    elif resolve_config(session).get_str(CONFLICT_KEY):
        mode = str(resolve_config(session).get_str(CONFLICT_KEY)).strip().lower()
        reason = f"Spark config {resolve_config(session).spelled(CONFLICT_KEY)}={mode}"
    else:
        mode, reason = "append", "save mode append"
    if mode not in ("fail", "append", "replace"):
        raise OptionError(f"conflict mode {mode!r} ({reason}): use fail, append or replace")
    return mode, reason


def _file_options(fmt: str, lowered: Mapping[str, str]) -> dict[str, Any]:
    """The writer's options the data source's options set (Parquet: row group, codec)."""
    file_options: dict[str, Any] = {}
    try:
        codec = check_compression(fmt, lowered.get("compression"))
    except ConfigError as error:
        raise OptionError(f"option {error}") from None
    if fmt == "parquet":
        row_group = _int_option(lowered, "rowgroupsize", 0)
        if row_group:
            file_options["row_group_size"] = row_group
        if codec:
            file_options["compression"] = codec
    return file_options


# -- reading -----------------------------------------------------------------------------------------
READ_FORMATS = FORMATS
#: Spark's spark.sql.files.maxPartitionBytes default.
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024

# Options of a read (Spark hands them over lower-cased): (default, meaning).
READ_OPTIONS: dict[str, tuple[str, str]] = {
    "path": ("required", "the destination a batch job or a streaming query committed to (or `.load(url)`)"),
    "format": ("from the files' extension", "`parquet`, `csv` or `json` (JSON lines)"),
    "requireSuccess": ("`true`", "`false`: also read a destination with no `_SUCCESS` and no batch "
                                 "log: every file a reader following Spark's rule sees there, as "
                                 "`outcommit.read.committed_files(url, require_success=False)`"),
    "maxPartitionBytes": ("134217728 (128 MiB)", "most bytes of files per input partition (each file "
                                                 "counts 4 MiB more, as Spark's `openCostInBytes`); a "
                                                 "file is never split"),
}


def read_options_markdown() -> str:
    """The read option table of ``docs/pyspark.md``."""
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{name}` | {default} | {meaning} |" for name, (default, meaning) in READ_OPTIONS.items()]
    rows.append("| `outcommit.*`, `fs.*`, `mapreduce.*`, `spark.hadoop.*` | | store config for this read "
                "only (endpoint, credentials: wins over the session config) |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class ReadPlan:
    """What every step of a read needs, picklable."""

    destination: str
    config: dict[str, str]
    fmt: str | None = None  # None: from the files' extension
    require_success: bool = True
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    time_zone: str | None = None
    infer_partition_types: bool = True
    filter_pushdown: bool = False
    #: The configuration keys the read's options set (normalised): they win over the session.
    option_keys: tuple[str, ...] = ()


def _flag(lowered: Mapping[str, str], key: str, default: bool) -> bool:
    value = lowered.get(key, "").strip().lower()
    if not value:
        return default
    if value not in ("true", "false"):
        raise OptionError(f"option {key}={lowered[key]!r}: use true or false")
    return value == "true"


def build_read_plan(options: Mapping[str, str], spark_conf: Mapping[str, str] | None = None,
                    sql_conf: Mapping[str, str] | None = None) -> ReadPlan:
    """Resolve read options, the session config and the Spark SQL settings
    ``register(spark)`` read (time zone, partition type inference, filter pushdown)."""
    lowered = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    check_options(lowered, READ_OPTIONS, "read", hooks=())
    path = lowered.get("path", "").strip()
    if not path:
        raise OptionError("the outcommit data source reads a destination: "
                          "spark.read.format('outcommit').load('s3://bucket/table')")
    fmt = lowered.get("format", "").strip().lower() or None
    if fmt is not None and fmt not in READ_FORMATS:
        raise OptionError(f"option format={fmt!r}: use one of {', '.join(READ_FORMATS)}")
    size = lowered.get("maxpartitionbytes", "").strip()
    if size and (not size.isdigit() or int(size) < 1):
        raise OptionError(f"option maxPartitionBytes={size!r}: a number of bytes, at least 1")
    given, config = option_config(lowered, spark_conf)
    sql = {str(k): str(v) for k, v in (sql_conf or {}).items()}
    return ReadPlan(
        destination=path, config=config, fmt=fmt,
        require_success=_flag(lowered, "requiresuccess", True),
        max_partition_bytes=int(size) if size else DEFAULT_MAX_PARTITION_BYTES,
        time_zone=sql.get(TIME_ZONE_KEY) or None,
        infer_partition_types=sql.get(PARTITION_INFERENCE_KEY, "true").lower() != "false",
        filter_pushdown=sql.get(FILTER_PUSHDOWN_KEY, "false").lower() == "true",
        option_keys=tuple(resolve_config(given)))


# Options of the streaming sink on top of the write options (Spark passes checkpointLocation on).
STREAM_OPTIONS: dict[str, tuple[str, str]] = {
    "checkpointLocation": ("required by Spark", "the query's checkpoint (Spark's; the sink keeps its "
                                                "own batch log in the destination)"),
    "compactInterval": ("10", "every N-th batch the log is compacted into one file "
                              "(Spark's `fileSink.log.compactInterval`)"),
}


def stream_options_markdown() -> str:
    """The option table of ``docs/streaming.md``: the write options, then the sink's own."""
    path_default, path_meaning = DATA_SOURCE_OPTIONS["path"]
    options = {**DATA_SOURCE_OPTIONS,
               "path": (path_default, path_meaning.replace("`.save(url)`", "`.start(url)`")),
               "conflictMode": ("`append`", "every micro-batch appends: `append` is the only mode"),
               **STREAM_OPTIONS}
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{name}` | {default} | {meaning} |" for name, (default, meaning) in options.items()]
    rows.append("| `outcommit.*`, `fs.*`, `mapreduce.*`, `spark.hadoop.*` | | committer and store "
                "config for this query only (wins over the session config) |")
    return "\n".join(rows) + "\n"


# Test hooks, not user options: stop the query at a point (where a test SIGKILLs it).
PAUSE_AT_OPTION = "_pauseat"
HOOKS_DIR_OPTION = "_hooksdir"
PAUSE_POINTS = ("write", "commit-job-committed", "commit-logged")


@dataclass(frozen=True)
class StreamPlan:
    """A streaming write: the write plan, the log's compaction interval, the test hooks."""

    write: WritePlan
    compact_interval: int = 10
    pause_point: tuple[str, int] | None = None
    hooks_dir: str = ""


def build_stream_plan(options: Mapping[str, str], overwrite: bool,
                      spark_conf: Mapping[str, str] | None = None) -> StreamPlan:
    """The plan of ``df.writeStream.format("outcommit")``: append only, one job per micro-batch."""
    lowered = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    if overwrite:
        raise OptionError("the outcommit streaming sink supports the append output mode only "
                          "(as Spark's file sink): complete and update modes would rewrite the "
                          "destination every batch")
    mode = lowered.get("conflictmode", "append").strip().lower()
    if mode != "append":
        raise OptionError(f"conflictMode={mode!r}: a streaming sink appends every micro-batch; "
                          "only conflictMode=append is possible")
    interval = _int_option(lowered, "compactinterval", 10)
    if interval < 1:
        raise OptionError("option compactInterval must be >= 1")
    pause = lowered.get(PAUSE_AT_OPTION, "").strip()
    pause_point: tuple[str, int] | None = None
    if pause:
        point, _, batch = pause.rpartition(":")
        if point not in PAUSE_POINTS or not batch.isdigit():
            raise OptionError(f"{PAUSE_AT_OPTION}={pause!r}: use <point>:<batchId>, point one of "
                              f"{', '.join(PAUSE_POINTS)}")
        pause_point = (point, int(batch))
    hooks_dir = lowered.get(HOOKS_DIR_OPTION, "")
    if pause_point and not hooks_dir:
        raise OptionError(f"{PAUSE_AT_OPTION} needs {HOOKS_DIR_OPTION}")
    stream_only = {name.lower() for name in STREAM_OPTIONS} | {PAUSE_AT_OPTION, HOOKS_DIR_OPTION}
    write_options = {k: v for k, v in lowered.items() if k not in stream_only}
    write_options["conflictmode"] = "append"
    plan = build_plan(write_options, False, spark_conf)
    return StreamPlan(plan, interval, pause_point, hooks_dir)
