"""``outcommit jobs``: jobs that left temporary state under a destination, found in every
installed committer's layout; and the abort of one, refused where its status says it is unsafe.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import Any

from ..committer import AbortPreview
from ..errors import OutcommitError
from ..plugins import get_registry
from .common import conf_option, conf_pairs, print_json, subparser

EXAMPLES = {
    "jobs": "  outcommit jobs list s3://bucket/events\n"
            "  outcommit jobs abort s3://bucket/events 5c0e0b9e-7d2a-4f4e-9a53-0f8ad1b9e3c1 --dry-run\n"
            "  outcommit jobs abort s3://bucket/events 5c0e0b9e-7d2a-4f4e-9a53-0f8ad1b9e3c1 "
            "--committer magic --force\n"
            "  outcommit jobs abort file:///data/events 0 --foreign --force   "
            "# Hadoop's _temporary/0, listed as foreign",
}


#: What ``outcommit jobs abort`` does per job status, and whether it needs --interrupted.
JOB_ABORTS = {
    "committed": ("its _SUCCESS says it committed: only its temporary state is deleted", False),
    "abort-kept": ("an abort of it began and did not finish, or could not undo its commit: "
                   "the files that commit published, proved by its state, are deleted, then "
                   "the state", False),
    "not-committed": ("its commit never began: its pending uploads and state are deleted", False),
    "live": ("its markers say it is running: its driver may still commit it", True),
    "commit-began": ("its commit began, and nothing says whether it finished (another job's "
                     "_SUCCESS may hide its own, or _SUCCESS is disabled) or was aborted: "
                     "the files it published would be deleted", True),
    "unknown": ("its committer cannot tell its status", True),
}
#: State in a committer's layout that holds no file outcommit writes (``--foreign``).
FOREIGN = ("it holds no outcommit marker, commit record or abort note: another tool's state "
           "(Hadoop's FileOutputCommitter leaves _temporary/<appAttempt>, its S3A magic "
           "committer __magic_job-<id>), or an outcommit job whose markers went before its "
           "cleanup failed: only its directory would be deleted, not what its writer published "
           "or left pending ('outcommit uploads')")


def _status(committer: Any, job_id: str, attempts: list[int]) -> str:
    try:
        return str(committer.recovery.job_status(job_id, attempts))
    except Exception as exc:  # the store failed: a job it cannot tell about is not safe to touch
        logging.getLogger("outcommit.cli").warning("status of job %s: %s", job_id, exc)
        return "unknown"


def _owned(committer: Any, job_id: str, args: argparse.Namespace,
           made: dict[str, Any]) -> tuple[Any, str]:
    """The committer that made job ``job_id``, as its markers say, and its name: committers
    that share a layout (``v1``, ``v2``, ``manifest``: ``_temporary/``) misread each other's
    jobs. An explicit ``--committer`` that contradicts the markers is refused; a committer
    that cannot act here is None (listed as ``unknown``; an abort is refused)."""
    from ..factory import create_committer

    try:
        owner = committer.recovery.job_owner(job_id)
    except Exception as exc:  # the store failed: the status says 'unknown' below
        logging.getLogger("outcommit.cli").warning("committer of job %s: %s", job_id, exc)
        return committer, committer.name
    if owner is None or owner == committer.name:
        return committer, committer.name
    if args.committer and args.action == "abort":
        raise OutcommitError(f"job {job_id} was set up by committer {owner} (its marker says), "
                             f"not {committer.name}: run this with --committer {owner}")
    if owner not in made:
        try:
            made[owner] = create_committer(args.url, conf_pairs(args.conf), owner)
        except OutcommitError as exc:  # not installed here, unsafe here, or a tampered marker
            if args.action == "abort":
                raise OutcommitError(f"job {job_id} was set up by committer {owner!r} (its marker "
                                     f"says), which cannot act on {args.url} here: {exc}") from exc
            logging.getLogger("outcommit.cli").warning(
                "job %s was set up by committer %r, which cannot act here: %s", job_id, owner, exc)
            made[owner] = None
    return made[owner], owner


@dataclass(frozen=True)
class _Found:
    """A job's state found in a committer's layout (``outcommit jobs``)."""

    job_id: str
    attempts: list[int]
    committer: Any        # the committer whose layout holds it (made for the URL)
    state: str            # the URL of the job's state directory


def _layouts(args: argparse.Namespace) -> tuple[dict[str, Any], list[Any]]:
    """The committers that may act here, by name (the one ``--committer`` names or the
    destination's own, and every other that is safe on the store), and the committers whose
    layouts are searched: the named one alone with ``--committer``, else every installed
    committer that can be made for the URL. Listing only reads, so one the store cannot make
    safe is searched too (Hadoop's v1 leaves ``_temporary/`` on S3), but acts on nothing."""
    import warnings

    from ..errors import UnsafeCommitterError
    from ..factory import create_committer

    conf = conf_pairs(args.conf)
    chosen = create_committer(args.url, conf, args.committer)
    if args.committer:
        return {chosen.name: chosen}, [chosen]
    safe, searched = {chosen.name: chosen}, [chosen]
    for name in sorted(get_registry().committers()):
        if name == chosen.name:
            continue
        try:
            try:
                safe[name] = create_committer(args.url, conf, name)
                searched.append(safe[name])
            except UnsafeCommitterError:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "using unsafe committer": it only lists
                    searched.append(create_committer(args.url, conf, name, allow_unsafe=True))
        except Exception as exc:  # a committer of another store's kind: nothing of it here
            logging.getLogger("outcommit.cli").debug("committer %s cannot list %s: %s",
                                                     name, args.url, exc)
    return safe, searched


def _leftovers(searched: list[Any]) -> list[_Found]:
    """Every job with state in the layouts of ``searched``, once per state directory:
    ``v1``, ``v2`` and ``manifest`` share ``_temporary/`` (the first committer that finds
    a job lists it; its marker then names the one that made it)."""
    from ..context import JobContext

    found: dict[str, _Found] = {}
    for committer in searched:
        try:
            jobs = committer.recovery.state.leftover_jobs()
        except Exception as exc:  # the store failed: the other layouts are still listed
            logging.getLogger("outcommit.cli").warning("jobs of %s's layout: %s", committer.name, exc)
            continue
        for job_id, attempts in sorted(jobs.items()):
            evidence = committer.recovery.state.job_evidence(JobContext(committer.destination, job_id=job_id))
            state = evidence.store.url(evidence.root) if evidence is not None else \
                f"{committer.name}:{job_id}"
            found.setdefault(state, _Found(job_id, attempts, committer, state))
    return sorted(found.values(), key=lambda f: (f.job_id, f.state))


def cmd_jobs(args: argparse.Namespace) -> int:
    made, searched = _layouts(args)  # made: the committers that may act here
    jobs = _leftovers(searched)
    if args.action == "list":
        return _list_jobs(args, jobs, made, searched)
    if args.job_id is None:
        raise OutcommitError("outcommit jobs abort needs the job id (outcommit jobs list shows them)")
    matching = [f for f in jobs if f.job_id == args.job_id]
    if not matching:
        where = (f"{searched[0].name}'s layout" if args.committer else
                 f"the layout of any installed committer ({', '.join(c.name for c in searched)})")
        raise OutcommitError(f"no temporary state of job {args.job_id} under {args.url} in {where}: "
                             "nothing to abort ('outcommit jobs list' shows the jobs)")
    if len(matching) > 1:
        raise OutcommitError(f"job {args.job_id} has state in several layouts "
                             f"({', '.join(f.state for f in matching)}): name its --committer")
    found = matching[0]
    committer, _ = _owned(found.committer, args.job_id, args, made)
    status = _status(committer, args.job_id, found.attempts)
    if args.dry_run:
        return _dry_run(args, committer, found, status)
    if status == "foreign" or args.foreign:
        return _delete_foreign(committer, args, status)  # its directory alone, whoever lists it
    if committer.name not in made:  # listed by a committer the store cannot make safe
        raise OutcommitError(
            f"job {args.job_id} is in the layout of {committer.name}, which is not safe on "
            f"{args.url}: abort it with --committer {committer.name} --conf "
            "outcommit.committer.allow-unsafe=true")
    return _abort_job(args, committer, found.attempts, status)


def _list_jobs(args: argparse.Namespace, jobs: list[_Found], made: dict[str, Any],
               searched: list[Any]) -> int:
    rows: list[dict[str, Any]] = []
    for found in jobs:
        owner, name = _owned(found.committer, found.job_id, args, made)
        status = "unknown" if owner is None else _status(owner, found.job_id, found.attempts)
        rows.append({"jobId": found.job_id, "attempts": found.attempts, "status": status,
                     "committer": None if status == "foreign" else name, "state": found.state})
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        listed = ",".join(map(str, row["attempts"])) or "none"
        print(f"{row['jobId']}\tattempts {listed}\t{row['status']}\t{row['committer'] or '-'}"
              f"\t{row['state']}")
    foreign = sum(row["status"] == "foreign" for row in rows)
    layouts = (f"{searched[0].name}'s layout" if args.committer else
               f"the layouts of {', '.join(c.name for c in searched)}")
    print(f"{len(rows)} job(s) with temporary state under {args.url} in {layouts}"
          + (f" ({foreign} foreign: not outcommit's)" if foreign else ""), file=sys.stderr)
    return 0


def _dry_run(args: argparse.Namespace, committer: Any, found: _Found, status: str) -> int:
    """``jobs abort --dry-run``: what an abort of this job would remove, whatever its status
    (live included), read from the store; nothing is changed."""
    from ..context import JobContext

    job = JobContext(args.url, job_id=found.job_id, attempt=max(found.attempts, default=0))
    if status == "foreign":  # only its directory would go
        what, flags = FOREIGN, ["--foreign", "--force"]
        evidence = committer.recovery.state.job_evidence(job)
        preview = AbortPreview([evidence.store.url(f.path) for f in evidence.store.list_files(evidence.root)],
                               [], [])
    else:
        what, risky = JOB_ABORTS.get(status, JOB_ABORTS["unknown"])
        flags = ["--force", *(["--interrupted"] if risky else [])]
        preview = committer.recovery.abort_preview(job)
    others = _other_uploads(committer, preview) if status != "foreign" else []
    if args.json:
        print_json({"jobId": found.job_id, "committer": None if status == "foreign" else committer.name,
                    "url": args.url, "status": status, "dryRun": True, "flags": flags,
                    "state": preview.state, "published": preview.published,
                    "uploads": preview.uploads, "otherUploads": others})
        return 0
    print(f"dry run, nothing changed: job {found.job_id} at {args.url} is {status}: {what}.")
    print(f"its abort ('outcommit jobs abort {args.url} {found.job_id} {' '.join(flags)}') would:")
    print(f"  delete its temporary state, {found.state}: {len(preview.state)} file(s)")
    for label, items in (("delete the files its interrupted commit published", preview.published),
                         ("abort its pending uploads", preview.uploads)):
        if items:
            print(f"  {label}: {len(items)}")
            for item in items:
                print(f"    {item}")
    if others:
        print(f"  abort the other pending uploads under {args.url} that no live job owns (of "
              f"{len(others)} pending there now: 'outcommit uploads list')")
    return 0


def _other_uploads(committer: Any, preview: AbortPreview) -> list[str]:
    """Pending uploads under the destination that are not the job's own: the sweep of an
    abort aborts those no live job owns (where the committer sweeps)."""
    multipart = committer.store.multipart()
    if multipart is None or not getattr(committer, "abort_pending", False):
        return []
    own = set(preview.uploads)
    pending = multipart.list_pending(committer.dest.rstrip("/") + "/")
    return [f"{committer.store.url(u.path)} {u.upload_id}" for u in pending
            if f"{committer.store.url(u.path)} {u.upload_id}" not in own]


def _abort_job(args: argparse.Namespace, committer: Any, attempts: list[int], status: str) -> int:
    from ..context import JobContext

    what, risky = JOB_ABORTS.get(status, JOB_ABORTS["unknown"])
    if risky and not args.interrupted:
        raise OutcommitError(f"job {args.job_id} is {status}: {what}. Add --interrupted only if "
                             "you know its driver is gone and its commit never finished "
                             "(--dry-run shows what its abort would remove)")
    def report(done: bool, text: str) -> None:
        if args.json:
            print_json({"jobId": args.job_id, "committer": committer.name, "url": args.url,
                        "status": status, "aborted": done, "message": text})
        else:
            print(text)

    if not args.force:
        report(False, f"would abort job {args.job_id} of {committer.name} at {args.url} ({status}): "
                      f"{what}; pending uploads under the destination that no live job owns are "
                      "aborted too. Add --force to abort it (--dry-run lists what goes)")
        return 1
    job = JobContext(args.url, job_id=args.job_id, attempt=max(attempts, default=0),
                     config=committer.config)
    if status == "committed":  # decided above: never roll back, whatever _SUCCESS says now
        committer.recovery.state.cleanup_committed_job(job)
    else:
        committer.abort_job(job)
        committer.cleanup_job(job)
    if job.job_id in committer.recovery.state.leftover_jobs():
        text = (f"job {job.job_id}: the abort could not finish (see the log above); its temporary "
                "state stays: run this again once the cause is fixed (a corrupt journal or record "
                "never heals: inspect it, then remove the files it names and the state by hand)")
        print(text, file=sys.stderr)
        if args.json:
            report(False, text)
        return 1
    report(True, f"aborted job {job.job_id} at {args.url} ({status})")
    return 0


def _delete_foreign(committer: Any, args: argparse.Namespace, status: str) -> int:
    """``jobs abort`` of state that is not outcommit's: only with ``--foreign`` (which only
    such state accepts), and then only its directory goes."""
    from ..context import JobContext

    if status != "foreign":
        raise OutcommitError(f"job {args.job_id} is {status}, outcommit's own state: --foreign is "
                             "only for state outcommit did not write; leave it out")
    if not args.foreign:
        raise OutcommitError(f"job {args.job_id} is foreign: {FOREIGN}. Add --foreign only if you "
                             "know that nothing uses it any more")
    where = committer.recovery.state.job_evidence(JobContext(args.url, job_id=args.job_id)).root
    shown = committer.store.url(where)

    def report(done: bool, text: str) -> None:
        if args.json:
            print_json({"jobId": args.job_id, "committer": None, "url": args.url,
                        "status": status, "aborted": done, "message": text})
        else:
            print(text)

    if not args.force:
        report(False, f"would delete {shown}, foreign state (not outcommit's), and nothing else. "
                      "Add --force to delete it")
        return 1
    committer.recovery.delete_foreign_state(args.job_id)
    report(True, f"deleted {shown}, foreign state (not outcommit's)")
    return 0


def add_parsers(sub: Any) -> None:
    """The parsers of ``jobs``."""
    p = subparser(sub, "jobs", EXAMPLES["jobs"],
                  "jobs that left temporary state under a destination; abort one")
    p.add_argument("action", choices=["list", "abort"],
                   help="list them; abort one (what an interrupted job commit published goes too)")
    p.add_argument("url", help="the job's destination")
    p.add_argument("job_id", nargs="?", help="abort: the job id (outcommit jobs list shows them)")
    p.add_argument("--committer", help="the job's committer (default: every installed committer's "
                                       "layout is searched; its marker names the one that made it)")
    p.add_argument("--force", action="store_true", help="really abort (default: show what would be)")
    p.add_argument("--interrupted", action="store_true",
                   help="also abort a job that looks live, or whose commit began with no evidence "
                        "that it finished: its driver is gone and its commit never finished")
    p.add_argument("--foreign", action="store_true",
                   help="delete state that is not outcommit's (listed as foreign: no outcommit "
                        "marker, such as Hadoop's own _temporary/0): only its directory goes")
    p.add_argument("--dry-run", action="store_true",
                   help="abort: show what the abort would remove (its state, the files its "
                        "interrupted commit published, its pending uploads), whatever the job's "
                        "status, live included; nothing is changed")
    conf_option(p)
    p.set_defaults(func=cmd_jobs)
