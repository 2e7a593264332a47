"""Job and task-attempt contexts: the identities every committer call is made with."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .errors import ConfigError

# Spark's key: a job UUID chosen by the driver and shared by all of its task attempts.
SPARK_JOB_UUID_KEY = "spark.sql.sources.writeJobUUID"

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _check_id(value: str, what: str) -> str:
    # Ids become path segments: refuse anything that could escape a directory.
    if not _SAFE_ID.match(value) or value in (".", ".."):
        raise ConfigError(
            f"invalid {what} {value!r}: use letters, digits, '_', '-', '.' (at most 128)"
        )
    return value


@dataclass(frozen=True)
class JobContext:
    """One attempt of a job writing to one destination.

    ``job_id`` is a UUID unless the caller gives one (e.g. Spark's
    ``spark.sql.sources.writeJobUUID``); ``job_id_source`` records where it came from.
    A restarted driver uses the same ``job_id`` with ``attempt`` + 1.

    ``task_messages``: the driver commits this job with its tasks' commit messages (Spark,
    the local engine, Ray, Dask, the streaming sink do), never by discovering what the
    tasks left on the store; committers may then skip what only discovery reads (a
    task's claim: one request per task).
    """

    destination: str
    job_id: str = ""
    attempt: int = 0
    config: Config = field(default_factory=Config)
    job_id_source: str = ""
    task_messages: bool = False

    def __init__(self, destination: str, job_id: str | None = None, attempt: int = 0,
                 config: Config | Mapping[str, Any] | None = None,
                 job_id_source: str | None = None, task_messages: bool = False) -> None:
        cfg = config if isinstance(config, Config) else Config(config or {})
        source = job_id_source
        if not job_id:
            spark_uuid = cfg.raw(SPARK_JOB_UUID_KEY)
            if spark_uuid:
                job_id, source = spark_uuid, source or SPARK_JOB_UUID_KEY
            else:
                job_id, source = str(uuid.uuid4()), source or "generated"
        elif not source:
            source = "caller"
        if attempt < 0:
            raise ConfigError(f"job attempt must be >= 0, got {attempt}")
        object.__setattr__(self, "destination", destination)
        object.__setattr__(self, "job_id", _check_id(str(job_id), "job id"))
        object.__setattr__(self, "attempt", int(attempt))
        object.__setattr__(self, "config", cfg)
        object.__setattr__(self, "job_id_source", source)
        object.__setattr__(self, "task_messages", bool(task_messages))

    def task_attempt(self, index: int, attempt: int = 0) -> TaskAttemptContext:
        return TaskAttemptContext(job=self, index=index, attempt=attempt)

    def next_attempt(self) -> JobContext:
        """The context of the restarted driver: same job id, attempt + 1."""
        return JobContext(self.destination, self.job_id, self.attempt + 1, self.config,
                          self.job_id_source, self.task_messages)

    def to_dict(self) -> dict[str, Any]:
        return {"destination": self.destination, "jobId": self.job_id,
                "jobAttempt": self.attempt, "jobIdSource": self.job_id_source,
                "taskMessages": self.task_messages, "config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobContext:
        return cls(data["destination"], data["jobId"], int(data["jobAttempt"]),
                   Config(data.get("config") or {}), data.get("jobIdSource"),
                   data.get("taskMessages") is True)


@dataclass(frozen=True)
class TaskAttemptContext:
    """One attempt of one task of a job attempt."""

    job: JobContext
    index: int
    attempt: int = 0

    def __post_init__(self) -> None:
        if self.index < 0 or self.attempt < 0:
            raise ConfigError(f"task index and attempt must be >= 0: {self.index}, {self.attempt}")

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def task_id(self) -> str:
        """Identical for every attempt of the task (Hadoop's TaskID)."""
        return f"task_{self.job.job_id}_{self.index:06d}"

    @property
    def attempt_id(self) -> str:
        """Unique per attempt and job attempt (Hadoop's TaskAttemptID)."""
        return f"attempt_{self.job.job_id}_{self.job.attempt:04d}_{self.index:06d}_{self.attempt}"

    @property
    def config(self) -> Config:
        return self.job.config

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job.to_dict(), "index": self.index, "attempt": self.attempt}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskAttemptContext:
        return cls(JobContext.from_dict(data["job"]), int(data["index"]), int(data["attempt"]))
