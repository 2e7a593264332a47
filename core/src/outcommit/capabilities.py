"""Capability names and declarations.

A store declares what it guarantees and a committer declares what it needs; both are
plain data, probed by name. An unknown capability is always answered ``False``: the
pessimistic answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# --- store capabilities -------------------------------------------------------------
RENAME_FILE_ATOMIC = "fs.rename.file.atomic"
"""Renaming one file makes the destination appear whole or not at all."""
RENAME_DIRECTORY_ATOMIC = "fs.rename.directory.atomic"
"""Renaming a directory is a single atomic, O(1) operation."""
LISTING_CONSISTENT = "fs.listing.consistent"
"""A file is listed as soon as its write has completed."""
MULTIPART_DELAYED_COMPLETION = "fs.multipart.delayed-completion"
"""Parts uploaded by one process can be completed later by another (S3 multipart)."""
BLOCKLIST_DELAYED_COMPLETION = "fs.blocklist.delayed-completion"
"""Blocks staged under an object's final name by one process are committed as a block list
later by another (Azure Blob Put Block / Put Block List; ``outcommit.multipart.BlockLists``)."""
ETAGS_AVAILABLE = "fs.etags.available"
"""``info()`` reports an etag for files."""
ETAGS_PRESERVED_IN_RENAME = "fs.etags.preserved-in-rename"
"""A renamed file keeps its etag (so a rename can be verified by etag)."""
CREATE_EXCLUSIVE = "fs.create.exclusive"
"""Create-if-absent is atomic (O_EXCL, If-None-Match, generation 0)."""
DELETE_BATCH = "fs.delete.batch"
"""Many files are deleted in few requests (``outcommit.store.BatchDelete``)."""
OBJECT_METADATA = "fs.object.metadata"
"""A file can carry user metadata (``outcommit.store.ObjectMetadata``)."""

STORE_CAPABILITIES: tuple[str, ...] = (
    RENAME_FILE_ATOMIC,
    RENAME_DIRECTORY_ATOMIC,
    LISTING_CONSISTENT,
    MULTIPART_DELAYED_COMPLETION,
    BLOCKLIST_DELAYED_COMPLETION,
    ETAGS_AVAILABLE,
    ETAGS_PRESERVED_IN_RENAME,
    CREATE_EXCLUSIVE,
    DELETE_BATCH,
    OBJECT_METADATA,
)

# --- committer capabilities -----------------------------------------------------------
TASK_COMMIT_REPEATABLE = "task-commit.repeatable"
"""A task commit that failed or timed out may be retried, or another attempt committed."""
JOB_COMMIT_REPEATABLE = "job-commit.repeatable"
"""A job commit that failed part-way may be called again and reach the right result."""
JOB_RECOVERABLE = "job.recoverable"
"""Committed tasks of a failed job attempt can be recovered into the next attempt."""
OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT = "output.invisible-until-job-commit"
"""No task output is visible in the destination before job commit."""
DYNAMIC_PARTITION_OVERWRITE = "dynamic-partition-overwrite"
"""Only the partitions a job writes are replaced."""
TASK_COMMIT_ISOLATED = "task-commit.isolated"
"""Any attempt may commit its task without the driver's permission, harmlessly.

Committing an attempt publishes nothing and changes nothing that a job commit given the
task messages reads for another attempt: the job commits exactly the attempts named in
its messages. Engines that cannot ask a commit coordinator before task commit (a PySpark
data source's task returns its message before Spark's coordinator decides) commit tasks
on the executor only with this capability; otherwise the driver commits the attempts it
accepted.
"""

COMMITTER_CAPABILITIES: tuple[str, ...] = (
    TASK_COMMIT_REPEATABLE,
    JOB_COMMIT_REPEATABLE,
    JOB_RECOVERABLE,
    OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT,
    DYNAMIC_PARTITION_OVERWRITE,
    TASK_COMMIT_ISOLATED,
)


@dataclass(frozen=True)
class Capabilities:
    """A frozen set of capability names with the probe that every caller uses."""

    names: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, *names: str) -> Capabilities:
        return cls(frozenset(names))

    @classmethod
    def from_mapping(cls, values: Mapping[str, bool]) -> Capabilities:
        return cls(frozenset(name for name, present in values.items() if present))

    def has_capability(self, name: str) -> bool:
        return name in self.names

    def missing(self, required: Iterable[str]) -> list[str]:
        return [name for name in required if name not in self.names]

    def with_(self, *names: str) -> Capabilities:
        return Capabilities(self.names | frozenset(names))

    def without(self, *names: str) -> Capabilities:
        return Capabilities(self.names - frozenset(names))

    def as_dict(self, universe: Iterable[str]) -> dict[str, bool]:
        return {name: name in self.names for name in universe}

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(sorted(self.names))
