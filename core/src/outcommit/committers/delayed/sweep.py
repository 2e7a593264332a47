"""The pending-upload sweep: abort the uploads under a destination that nobody will complete.

Stragglers of the job itself and leftovers of crashed jobs cost storage until aborted.
The sweep lists the uploads under the destination *directory* (never an adjacent prefix:
``dataset1/`` is not ``dataset10/``) and never aborts one that may belong to another
live job: an upload is skipped when a directory on its path, from the bucket down to its
parent, holds another job's directory — a job writing to the bucket root or to a parent
of this destination, one writing to a sub-directory of it, or one writing here at the
same time. A crashed job's directory keeps protecting its uploads until that job is
aborted (docs/s3.md says how).

Other tools' uploads have no job directory. By default (Hadoop's
``fs.s3a.committer.abort.pending.uploads``) the sweep aborts them too; with the scope
``before-job`` it spares every upload initiated after the job began (:data:`BEFORE_JOB`).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from outcommit.multipart import PendingUpload
from outcommit.parallel import outcomes, run_all
from outcommit.paths import is_inside

from .layout import JOB_DIR_PREFIXES
from .operations import CommitOperations, Logger

#: Sweep scopes: every pending upload under the destination (Hadoop's), or only those
#: initiated before the job began.
ALL, BEFORE_JOB = "all", "before-job"
SCOPES = (ALL, BEFORE_JOB)
#: With BEFORE_JOB, uploads initiated up to this long before the job's start are spared
#: too: the start is the store's Last-Modified of the job's marker (S3: whole seconds, from
#: another server than the one dating the upload), the upload's time the store's too.
CLOCK_ALLOWANCE = timedelta(seconds=5)


@dataclass(frozen=True)
class Sweep:
    """What a sweep did: aborted, left to other live jobs (named by their directories), and
    spared as initiated after the job began (scope BEFORE_JOB)."""

    aborted: int
    skipped: int
    owners: list[str]
    spared: int = 0


def initiated_since(upload: PendingUpload, cutoff: datetime) -> bool:
    """Was ``upload`` initiated at or after ``cutoff``? True when the store gives no time:
    an upload not known to be older is spared."""
    when = upload.initiated
    if when is None:
        return True
    return (when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)) >= cutoff


def ancestors(path: str) -> list[str]:
    """Every directory above a store path, from the bucket down: ``b/x/y/f`` -> b, b/x, b/x/y."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def other_jobs_by_directory(ops: CommitOperations, own_root: str,
                            uploads: Sequence[PendingUpload]) -> dict[str, list[str]]:
    """Directories on the uploads' paths that hold another job's directory, with its names.

    One listing per distinct directory (the bucket and the destination's ancestors are
    shared by every upload): a job's directory is always a child of its destination.
    """
    directories = sorted({d for u in uploads for d in ancestors(u.path)})

    def others(directory: str) -> list[str]:
        return [c.name for c in ops.store.list_dir(directory)
                if c.is_dir and c.name.startswith(JOB_DIR_PREFIXES) and c.path != own_root]

    # An error is raised: unknown means abort nothing, rather than another job's upload.
    listed = run_all(others, directories, ops.threads, "outcommit-sweep")
    return {d: names for d, names in zip(directories, listed, strict=True) if names}


def sweep(ops: CommitOperations, own_root: str, destination: str, log: Logger,
          running: AbstractSet[tuple[str, str]] = frozenset(),
          spare_since: datetime | None = None) -> Sweep:
    """Abort the pending uploads under the destination that no other live job may own.

    ``running``: ``(path, upload_id)`` of this job's uploads being completed while the
    sweep runs (a set that shrinks as they complete), never touched. It is copied before
    the listing: an upload of the job that is listed was still in it then.
    ``spare_since``: uploads initiated at or after it (the store's clock) are left alone.
    """
    completing = frozenset(running)  # one C-level copy: atomic under the GIL
    pending = [p for p in ops.mp.list_pending(ops.dest + "/") if is_inside(p.path, ops.dest)
               and (p.path, p.upload_id) not in completing]
    spared = 0
    if spare_since is not None:
        older = [p for p in pending if not initiated_since(p, spare_since)]
        spared = len(pending) - len(older)
        if spared:
            log.info("not aborting %d pending uploads under %s initiated since %s (the job's "
                     "start, less %s): sweep scope %s", spared, destination,
                     spare_since.isoformat(), CLOCK_ALLOWANCE, BEFORE_JOB)
        pending = older
    busy = other_jobs_by_directory(ops, own_root, pending)
    owned = [p for p in pending if any(d in busy for d in ancestors(p.path))]
    owners = sorted({name for names in busy.values() for name in names})
    if owned:
        log.warning("not aborting %d pending uploads under %s: they may belong to the live jobs %s",
                    len(owned), destination, ", ".join(owners[:3]))
    orphans = [p for p in pending if p not in owned]
    aborted = 0
    for outcome in outcomes(lambda p: ops.mp.abort(p.path, p.upload_id), orphans, ops.threads,
                            "outcommit-sweep"):
        if outcome.error is not None:
            log.warning("could not abort upload %s to %s: %s", outcome.item.upload_id,
                        ops.store.url(outcome.item.path), outcome.error)
        aborted += bool(outcome.result)
    if aborted:
        log.info("aborted %d other pending uploads under %s", aborted, destination)
    return Sweep(aborted=aborted, skipped=len(owned), owners=owners, spared=spared)
