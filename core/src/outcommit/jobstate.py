"""A job's state as the evidence of what happened to it: its markers, its commit record,
the note its abort leaves (:data:`ABORT_NOTE`), and what ``outcommit jobs`` reads of them.

Every committer that keeps state says where with :class:`JobEvidence`
(``JobState.job_evidence``, :mod:`.recovery`); the functions here read and write the parts all share.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .context import JobContext
from .errors import CorruptFileError
from .store import Store

#: A job attempt's liveness marker, written at job setup, deleted when the job ends.
JOB_MARKER = "_job.json"
#: Written into a job's state by an abort that could not undo its commit (and kept it).
ABORT_NOTE = "_abort-kept.json"


@dataclass(frozen=True)
class JobEvidence:
    """Where a job's state lives and what in it tells its status (``JobState.job_evidence``)."""

    store: Store
    root: str                                   # the job's directory
    marker: Callable[[int], str]                # the liveness marker of a job attempt
    began: Callable[[Sequence[int]], bool]      # did a job commit of these attempts begin?
    #: Names of the files only outcommit writes in a job's state (markers, commit records,
    #: abort notes...): Hadoop's committers, whose layouts ours follow, write none of them.
    own_names: frozenset[str] = frozenset({JOB_MARKER, ABORT_NOTE})
    #: Beginnings of names only outcommit's layout gives in a job's state, at any depth (the
    #: job's task and attempt directories, named for its id): what an attempt killed after
    #: the job ended left holds no file of ``own_names``, and is ours all the same.
    own_prefixes: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """The note an abort that kept the state leaves (:data:`ABORT_NOTE`)."""
        return self.store.join(self.root, ABORT_NOTE)

    def is_ours(self) -> bool:
        """Does the job's directory hold a file only outcommit writes, at any depth? (A
        listing of the directory: asked only of state that shows no marker, no abort note
        and no commit record where the committer looks for them.)"""
        inside = len(self.root.rstrip("/")) + 1
        return any(info.path.rpartition("/")[2] in self.own_names
                   or any(part.startswith(self.own_prefixes) for part in info.path[inside:].split("/"))
                   for info in self.store.list_files(self.root))


def attempts_in(store: Store, job_dir: str) -> list[int]:
    """The job attempt numbers whose directories are in ``job_dir`` ('0', '00', '1'...)."""
    return sorted(int(c.name) for c in store.list_dir(job_dir)
                  if c.is_dir and c.name.isascii() and c.name.isdigit())




# -- the abort note -------------------------------------------------------------------------------
def save_abort_note(evidence: JobEvidence, job: JobContext, destination: str, committer: str,
                    kept: bool, error: BaseException | None = None) -> None:
    """The note of an abort of ``job``: that it began (``kept=False``), or that it kept the
    job's state as evidence (``kept=True``, and why)."""
    evidence.store.save_json(evidence.note, {
        "jobId": job.job_id, "jobAttempt": job.attempt, "destination": destination,
        "committer": committer, "time": time.time(), "kept": kept,
        "reason": f"{type(error).__name__}: {error}" if error else ""})


def abort_note(evidence: JobEvidence | None, job: JobContext) -> dict[str, Any] | None:
    """The abort note of this job attempt (or a later one), None when there is none; a
    note that cannot be parsed counts as one (``{}``). A later attempt set up after it
    is a new start."""
    if evidence is None:
        return None
    try:
        data = evidence.store.load_json(evidence.note)
    except FileNotFoundError:
        return None
    except CorruptFileError:
        return {}
    if not isinstance(data, dict):
        return {}
    attempt = data.get("jobAttempt")
    return data if not isinstance(attempt, int) or attempt >= job.attempt else None


# -- what outcommit jobs reads ------------------------------------------------------------------
def status(evidence: JobEvidence | None, job: JobContext, attempts: Sequence[int],
           committed: Callable[[], bool]) -> str:
    """What the state of ``job`` says, first match: ``committed`` (``committed()``: its
    ``_SUCCESS``), ``live`` (its markers), ``abort-kept`` (an abort began and did not
    finish, or could not undo the commit), ``commit-began`` (no evidence that it
    finished or was aborted), ``not-committed`` (its state holds a file only outcommit
    writes), ``foreign`` (none: another tool's, such as Hadoop's own ``_temporary/0``);
    ``unknown`` where the committer keeps no state."""
    if evidence is None:
        return "unknown"
    if committed():
        return "committed"
    if any(evidence.store.exists(evidence.marker(a)) for a in attempts):
        return "live"
    if abort_note(evidence, job) is not None:  # this attempt's abort (or a later one's)
        return "abort-kept"
    if evidence.began(attempts):
        return "commit-began"
    # Hadoop's FileOutputCommitter leaves _temporary/0, its S3A magic committer
    # __magic_job-<id>: in our layouts, but not ours to judge or delete.
    return "not-committed" if evidence.is_ours() else "foreign"


def owner(evidence: JobEvidence | None) -> str | None:
    """The committer that set the job up, as its markers say (any job attempt's, however
    that committer names its attempt directories); None when no marker is left (the job
    ended) or the committer keeps no state."""
    if evidence is None:
        return None
    for child in evidence.store.list_dir(evidence.root):
        if not child.is_dir:
            continue
        try:
            data = evidence.store.load_json(evidence.store.join(child.path, JOB_MARKER))
        except (OSError, CorruptFileError):
            continue
        name = data.get("committer") if isinstance(data, dict) else None
        if isinstance(name, str) and name:
            return name
    return None
