"""The ``outcommit`` command: plugins, capabilities, _SUCCESS reports, pending uploads, jobs.

Plugins add subcommands through the ``register_commands`` hook (the development tools
add ``demo``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .commands import Command as Command  # its home before commands.py
from .committer import AbortPreview
from .errors import OutcommitError
from .plugins import get_registry
from .redaction import scrub
from .version import __version__

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``12h``, ``7d``."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use e.g. 90s, 30m, 12h, 7d")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def print_json(data: Any, indent: int | None = 2) -> None:
    """The commands' ``--json`` output, scrubbed of secrets (``outcommit.redaction``): a
    message may quote a setting or an SDK's error, and scripts keep what they read."""
    print(scrub(json.dumps(data, indent=indent)))


def _config(pairs: Sequence[str] | None) -> dict[str, str]:
    """The ``--conf`` pairs. Only outcommit reads them, so every key must be one that an
    installed component reads (``--conf endpoint=...`` named none: did you mean
    fs.s3a.endpoint?), not only ``outcommit.`` keys and Hadoop's families as in a job."""
    config: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise OutcommitError(f"--conf {pair!r}: use KEY=VALUE")
        config[key.strip()] = value
    if config:
        from .factory import resolve_config
        from .keys import check

        check(resolve_config(config), every_key=True)
    return config


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = get_registry()
    plugins = registry.plugins()
    if args.json:
        print_json([vars(p) for p in plugins])
        return 0
    stores = registry.stores()
    committers = registry.committers()
    print(f"{'plugin':<12} {'distribution':<18} {'version':<9} schemes / committers")
    for p in plugins:
        things = []
        if p.schemes:
            things.append("schemes: " + ", ".join(
                f"{s} (default {stores[s].default_committer})" for s in p.schemes))
        if p.committers:
            things.append("committers: " + ", ".join(p.committers))
        if p.error:
            things.append(f"ERROR: {p.error}")
        print(f"{p.name:<12} {p.distribution or '-':<18} {p.version or '-':<9} {'; '.join(things) or '-'}")
    print()
    for name, spec in sorted(committers.items()):
        print(f"  {name:<12} {spec.description}")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from .keys import catalogue, markdown_table

    if args.write_docs:
        from pathlib import Path

        from .docsgen import generated_sections, render

        for name, section, body in generated_sections():
            doc = Path(args.write_docs) / name
            doc.write_text(render(doc.read_text(), section, body))
            print(f"updated {doc} ({section})")
        return 0
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    infos = catalogue()
    if args.json:
        print_json([vars(i) | {"aliases": list(i.aliases)} for i in infos])
        return 0
    for info in infos:
        aliases = f"  (also {', '.join(info.aliases)})" if info.aliases else ""
        print(f"{info.key}{aliases}\n    [{info.plugin}] {info.description}")
    return 0


def cmd_capabilities(args: argparse.Namespace) -> int:
    from .factory import describe_capabilities

    info = describe_capabilities(args.url, _config(args.conf))
    if args.json:
        print_json(info)
        return 0
    print(f"{info['url']}  store {info['store']} (plugin {info['plugin']})")
    for name, present in info["capabilities"].items():
        print(f"  {'yes' if present else 'no ':<4} {name}")
    print(f"default committer: {info['default_committer']}")
    print(f"safe committers:   {', '.join(info['safe_committers']) or 'none'}")
    for name, c in info["committers"].items():
        if c["missing"]:
            print(f"  {name}: unsafe here, store lacks {', '.join(c['missing'])}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """``outcommit check URL [--full]``: one line per check; exit 1 when any failed."""
    from .check import check, run_suites, suites_to_run

    config = _config(args.conf)
    lines = check(args.url, config)
    report = ""
    if args.full and all(line.ok for line in lines):
        committers = suites_to_run(args.url, config, args.committer or ())
        suites, report = run_suites(args.url, config, committers)
        lines += suites
    ok = all(line.ok for line in lines)
    if args.json:
        print_json({"url": args.url, "ok": ok, "checks": [line.to_dict() for line in lines]})
    else:
        width, result_width = (max(len(getattr(line, f)) for line in lines) for f in ("check", "result"))
        for line in lines:
            print(scrub(line.text(width, result_width)))
        if report and not ok:  # pytest's own account of what failed, for the plugin's author
            print(scrub(report), file=sys.stderr)
    return 0 if ok else 1


def cmd_success(args: argparse.Namespace) -> int:
    from .factory import open_store
    from .success import SUCCESS_FILE, load_success

    store = open_store(args.url, _config(args.conf))
    path = store.strip(args.url)
    if not path.endswith("/" + SUCCESS_FILE):
        path = store.join(path, SUCCESS_FILE)
    info = store.info(path)
    if info is None:
        dest = path.rsplit("/", 1)[0]
        streaming = _streaming_report(args, store, dest)
        if streaming is not None:
            return streaming
        text = (f"no {SUCCESS_FILE} at {store.url(path)}: the job was not committed "
                "(or committed without a report)")
        print(text, file=sys.stderr)
        if args.json:  # a script reading stdout learns why, as for a corrupt report
            print(json.dumps({"url": store.url(path), "success": False, "error": "NotCommitted",
                              "message": text}))
        return 1
    if info.size == 0:
        # Hadoop's FileOutputCommitter (Spark's own writes) leaves an empty marker.
        if args.json:
            print(json.dumps({"url": store.url(path), "legacy": True, "success": True}))
        else:
            print(f"{store.url(path)}: legacy FileOutputCommitter marker: no report "
                  "(the job succeeded; zero-byte _SUCCESS files carry nothing more)")
        return 0
    report = load_success(store, path)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0 if report.success else 1
    print(f"{store.url(path)}: valid _SUCCESS report")
    print(f"  success:   {report.success}")
    print(f"  committer: {report.committer}")
    print(f"  job:       {report.jobId} ({report.jobIdSource or 'unknown source'})")
    print(f"  when:      {report.date} on {report.hostname}")
    print(f"  files:     {report.metrics.get('files.committed', len(report.filenames))}"
          f" (listed: {len(report.filenames)})")
    for name in report.filenames[: args.files]:
        print(f"    {name}")
    if report.metrics:
        print("  metrics:")
        for key, value in sorted(report.metrics.items()):
            print(f"    {key} = {value}")
    if report.diagnostics:
        print("  diagnostics:")
        for key, text in sorted(report.diagnostics.items()):
            print(f"    {key} = {text}")
    counters = report.iostatistics.get("counters") or {}
    if counters:
        print("  iostatistics (Hadoop's names):")
        for key, value in sorted(counters.items()):
            print(f"    {key} = {value}")
    return 0 if report.success else 1


def _streaming_report(args: argparse.Namespace, store: Any, dest: str) -> int | None:
    """A streaming destination has no ``_SUCCESS``: its batch log is the report. Shown and
    checked (every logged file there); None where ``dest`` has no batch log."""
    from .streaming import LOG_DIR, BatchLog
    from .streaming.reader import committed_batches, has_batch_log

    if not has_batch_log(store, dest):
        return None
    url = store.url(dest)
    entries = committed_batches(url, _config(args.conf), verify=True)
    if not entries:
        text = (f"{url}: a streaming destination: its batch log has no committed batch yet "
                f"({store.url(store.join(dest, LOG_DIR))}), no {'_SUCCESS'} (a batch log is the report)")
        print(text, file=sys.stderr)
        if args.json:
            print(json.dumps({"url": url, "streaming": True, "success": False, "batches": 0,
                              "error": "NotCommitted", "message": text}))
        return 1
    latest = entries[-1]
    owner = BatchLog(store, dest).owner() or latest.query_id
    ids = [e.batch_id for e in entries]
    files = sum(len(e.files) for e in entries)
    rows = sum(e.rows for e in entries)
    if args.json:
        shown = {**latest.to_dict(), "files": [f.to_dict() for f in latest.files[: args.files]]}
        print(json.dumps({"url": url, "streaming": True, "success": True, "queryId": owner,
                          "batches": len(entries), "firstBatch": ids[0], "latestBatch": ids[-1],
                          "files": files, "rows": rows, "bytes": sum(e.bytes for e in entries),
                          "latest": shown}, indent=2))
        return 0
    span = f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else str(ids[0])
    print(f"{url}: a streaming destination: its batch log has {len(entries)} committed batches "
          f"({span}) of query {owner}, no _SUCCESS (the batch log is the report; every logged "
          "file is there)")
    when = datetime.fromtimestamp(latest.committed_at, timezone.utc).isoformat(timespec="seconds")
    print(f"  batch {latest.batch_id}: job {latest.job_id}, {latest.committer}, {len(latest.files)} files, "
          f"{latest.rows} rows, committed {when}")
    for f in latest.files[: args.files]:
        print(f"    {f.path}")
    print(f"  all batches: {files} files, {rows} rows")
    print("  read them with outcommit.streaming.committed_files (docs/streaming.md)")
    return 0


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def cmd_batches(args: argparse.Namespace) -> int:
    """``outcommit batches URL [BATCH]``: a streaming destination's committed batches, one
    line each, from its batch log (the report a streaming destination has instead of
    ``_SUCCESS``); a batch id shows that batch's files. No command showed the log."""
    from .streaming.reader import committed_batches

    url = args.url.rstrip("/")
    entries = committed_batches(url, _config(args.conf))
    if args.batch is not None:
        return _show_batch(args, url, entries)
    if args.json:
        print_json({"url": url, "batches": [{k: v for k, v in e.to_dict().items() if k != "files"}
                                             | {"files": len(e.files)} for e in entries]})
        return 0
    if not entries:
        print(f"{url}: no committed batch yet (a streaming query's first batch may be running)")
        return 0
    print(f"{url}: {len(entries)} committed batches")
    print(f"{'batch':>7}  {'files':>6}  {'rows':>10}  {'committed at':<25}  job")
    for e in entries:
        print(f"{e.batch_id:>7}  {len(e.files):>6}  {e.rows:>10}  {_when(e.committed_at):<25}  "
              f"{e.job_id or '-'} ({e.committer})")
    return 0


def _show_batch(args: argparse.Namespace, url: str, entries: Sequence[Any]) -> int:
    """One batch: its job and its files (URLs), or a one-line error naming the batches there."""
    found = [e for e in entries if e.batch_id == args.batch]
    if not found:
        there = f"{entries[0].batch_id}..{entries[-1].batch_id}" if entries else "none yet"
        raise OutcommitError(f"{url}: batch {args.batch} is not in its batch log (committed: {there}); "
                             "outcommit batches URL lists them")
    entry = found[0]
    if args.json:
        print_json({"url": url, **entry.to_dict(),
                    "files": [{**f.to_dict(), "url": f"{url}/{f.path}"} for f in entry.files]})
        return 0
    print(f"{url}: batch {entry.batch_id} of query {entry.query_id}: job {entry.job_id or '-'}, "
          f"{entry.committer}, {len(entry.files)} files, {entry.rows} rows, {entry.bytes} bytes, "
          f"committed {_when(entry.committed_at)}")
    for f in entry.files:
        print(f"  {url}/{f.path}  {f.rows} rows  {f.size} bytes")
    return 0


def cmd_uploads(args: argparse.Namespace) -> int:
    from .factory import open_store

    store = open_store(args.url, _config(args.conf))
    multipart = store.multipart() or store.block_lists()
    if multipart is None:
        raise OutcommitError(f"{store.scheme}:// has no multipart uploads to list")
    if args.action == "abort" and not multipart.abortable:
        # Azure block lists: no request removes one writer's uncommitted blocks safely.
        raise OutcommitError(
            f"{store.scheme}:// cannot abort uncommitted blocks: the service discards them when "
            "a block list is committed for the name, or a week after the last block was staged "
            "(docs/azure.md)")
    directory = store.strip(args.url).rstrip("/") + "/"
    uploads = multipart.list_pending(directory)
    if args.older_than is not None:  # list and check too: 'check --older-than 24h' in a cron job
        cutoff = datetime.now(timezone.utc) - args.older_than
        uploads = [u for u in uploads if u.initiated is None or _aware(u.initiated) <= cutoff]
    def as_json(upload: Any, **extra: Any) -> dict[str, Any]:
        return {"url": store.url(upload.path), "upload_id": upload.upload_id,
                "initiated": upload.initiated.isoformat() if upload.initiated else None, **extra}

    if args.action in ("list", "check"):
        if args.json:
            print_json([as_json(u) for u in uploads])
        else:
            for u in uploads:
                initiated = u.initiated.isoformat() if u.initiated else "-"
                print(f"{store.url(u.path)}\t{u.upload_id}\t{initiated}")
        if args.action == "check":
            print(f"{len(uploads)} pending upload(s) under {store.url(directory)}", file=sys.stderr)
            return 1 if uploads else 0
        return 0
    if not args.force:
        if args.json:
            print_json([as_json(u, aborted=False) for u in uploads])
        else:
            for u in uploads:
                print(f"would abort {store.url(u.path)} {u.upload_id}")
            print(f"{len(uploads)} upload(s) would be aborted" + (": add --force to abort them"
                                                                   if uploads else ""))
        return 1 if uploads else 0
    from .parallel import outcomes
    from .progress import Progress

    results = []
    log = logging.getLogger("outcommit.cli")
    progress = Progress("aborting uploads", len(uploads), log, unit="upload")
    for outcome in outcomes(lambda u: multipart.abort(u.path, u.upload_id), uploads, 16):
        results.append(as_json(outcome.item, aborted=bool(outcome.result),
                               error=str(outcome.error) if outcome.error else None))
        progress.advance()
    progress.close()
    aborted = sum(1 for r in results if r["aborted"])
    if args.json:
        print_json(results)
    else:
        print(f"aborted {aborted} of {len(uploads)} pending upload(s) under {store.url(directory)}")
    return 0 if all(r["error"] is None for r in results) else 1


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
        return str(committer.job_status(job_id, attempts))
    except Exception as exc:  # the store failed: a job it cannot tell about is not safe to touch
        logging.getLogger("outcommit.cli").warning("status of job %s: %s", job_id, exc)
        return "unknown"


def _owned(committer: Any, job_id: str, args: argparse.Namespace,
           made: dict[str, Any]) -> tuple[Any, str]:
    """The committer that made job ``job_id``, as its markers say, and its name: committers
    that share a layout (``v1``, ``v2``, ``manifest``: ``_temporary/``) misread each other's
    jobs. An explicit ``--committer`` that contradicts the markers is refused; a committer
    that cannot act here is None (listed as ``unknown``; an abort is refused)."""
    from .factory import create_committer

    try:
        owner = committer.job_owner(job_id)
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
            made[owner] = create_committer(args.url, _config(args.conf), owner)
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

    from .errors import UnsafeCommitterError
    from .factory import create_committer

    conf = _config(args.conf)
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
    from .context import JobContext

    found: dict[str, _Found] = {}
    for committer in searched:
        try:
            jobs = committer.leftover_jobs()
        except Exception as exc:  # the store failed: the other layouts are still listed
            logging.getLogger("outcommit.cli").warning("jobs of %s's layout: %s", committer.name, exc)
            continue
        for job_id, attempts in sorted(jobs.items()):
            evidence = committer.job_evidence(JobContext(committer.destination, job_id=job_id))
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
    from .context import JobContext

    job = JobContext(args.url, job_id=found.job_id, attempt=max(found.attempts, default=0))
    if status == "foreign":  # only its directory would go
        what, flags = FOREIGN, ["--foreign", "--force"]
        evidence = committer.job_evidence(job)
        preview = AbortPreview([evidence.store.url(f.path) for f in evidence.store.list_files(evidence.root)],
                               [], [])
    else:
        what, risky = JOB_ABORTS.get(status, JOB_ABORTS["unknown"])
        flags = ["--force", *(["--interrupted"] if risky else [])]
        preview = committer.abort_preview(job)
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
    from .context import JobContext

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
        committer.cleanup_committed_job(job)
    else:
        committer.abort_job(job)
        committer.cleanup_job(job)
    if job.job_id in committer.leftover_jobs():
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
    from .context import JobContext

    if status != "foreign":
        raise OutcommitError(f"job {args.job_id} is {status}, outcommit's own state: --foreign is "
                             "only for state outcommit did not write; leave it out")
    if not args.foreign:
        raise OutcommitError(f"job {args.job_id} is foreign: {FOREIGN}. Add --foreign only if you "
                             "know that nothing uses it any more")
    where = committer.job_evidence(JobContext(args.url, job_id=args.job_id)).root
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
    committer.delete_foreign_state(args.job_id)
    report(True, f"deleted {shown}, foreign state (not outcommit's)")
    return 0


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


DESCRIPTION = """Safe output commits for Python data pipelines: inspect what is installed,
what a store guarantees, a job's _SUCCESS report, and pending multipart uploads."""

EXAMPLES = {
    "plugins": "  outcommit plugins\n  outcommit plugins --json | jq '.[].schemes'",
    "config": "  outcommit config\n  outcommit config --json\n  outcommit config --write-docs docs",
    "capabilities": "  outcommit capabilities s3://bucket/table --conf outcommit.s3.region=eu-west-1\n"
                    "  outcommit capabilities gs://bucket/table --json",
    "check": "  outcommit check s3://bucket/events --conf fs.s3a.endpoint=http://127.0.0.1:9000\n"
             "  outcommit check abfs://data/events --json\n"
             "  outcommit check gs://bucket/events --full --committer manifest",
    "success": "  outcommit success s3://bucket/events\n"
               "  outcommit success file:///data/events/_SUCCESS --files 100\n"
               "  outcommit success abfs://data/events --json",
    "batches": "  outcommit batches s3://bucket/events\n"
               "  outcommit batches s3://bucket/events 41          # batch 41's files\n"
               "  outcommit batches file:///data/events --json",
    "uploads": "  outcommit uploads list s3://bucket/events/\n"
               "  outcommit uploads check s3://bucket/events/     # exit 1 while any is pending\n"
               "  outcommit uploads abort s3://bucket/events/ --older-than 24h --force",
    "jobs": "  outcommit jobs list s3://bucket/events\n"
            "  outcommit jobs abort s3://bucket/events 5c0e0b9e-7d2a-4f4e-9a53-0f8ad1b9e3c1 --dry-run\n"
            "  outcommit jobs abort s3://bucket/events 5c0e0b9e-7d2a-4f4e-9a53-0f8ad1b9e3c1 "
            "--committer magic --force\n"
            "  outcommit jobs abort file:///data/events 0 --foreign --force   "
            "# Hadoop's _temporary/0, listed as foreign",
}


def _subparser(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=help[0].upper() + help[1:] + ".",
        epilog="examples:\n" + EXAMPLES[name], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def _conf_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE",
                        help="configuration, as in code or Spark (repeatable), e.g. "
                             "--conf outcommit.s3.endpoint=http://127.0.0.1:9000")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="outcommit", description=DESCRIPTION,
                                     epilog="'outcommit <command> --help' shows each command's "
                                            "options and examples")
    parser.add_argument("--version", action="version", version=f"outcommit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    p = _subparser(sub, "plugins", "installed plugins, versions, schemes and committers")
    p.set_defaults(func=cmd_plugins)

    p = _subparser(sub, "config", "every configuration key the installed plugins read")
    p.add_argument("--markdown", action="store_true", help="the table of docs/configuration.md")
    p.add_argument("--write-docs", metavar="DOCS_DIR",
                   help="regenerate the key and option tables in DOCS_DIR/*.md")
    p.set_defaults(func=cmd_config)

    p = _subparser(sub, "capabilities", "what a store guarantees and which committers are safe")
    p.add_argument("url", help="a destination URL (the store is asked, nothing is written)")
    _conf_option(p)
    p.set_defaults(func=cmd_capabilities)

    p = _subparser(sub, "check", "check a store before a job: endpoint, credentials, bucket, "
                                 "capabilities (probed), committer; --full: the test suites there")
    p.add_argument("url", help="a destination URL (probes write under <url>/_outcommit_check_<id>/, "
                               "removed after)")
    p.add_argument("--full", action="store_true",
                   help="also run the store contract and the committer conformance suites against "
                        "the store (needs pytest: outcommit[testing]); minutes on a remote store")
    p.add_argument("--committer", action="append", metavar="NAME",
                   help="--full: the committers whose conformance runs (repeatable; default: every "
                        "committer safe on the store)")
    _conf_option(p)
    p.set_defaults(func=cmd_check)

    p = _subparser(sub, "success", "show and validate a job's _SUCCESS report, or a streaming "
                                   "destination's batch log")
    p.add_argument("url", help="destination directory or its _SUCCESS file")
    _conf_option(p)
    p.add_argument("--files", type=int, default=10, help="how many file names to show (default 10)")
    p.set_defaults(func=cmd_success)

    p = _subparser(sub, "batches", "a streaming destination's committed batches (its batch log)")
    p.add_argument("url", help="the streaming destination")
    p.add_argument("batch", nargs="?", type=int, help="a batch id: show that batch's files")
    _conf_option(p)
    p.set_defaults(func=cmd_batches)

    p = _subparser(sub, "uploads", "pending multipart uploads under a directory")
    p.add_argument("action", choices=["list", "abort", "check"],
                   help="list them; abort them; check: exit 1 when any is pending")
    p.add_argument("url", help="the directory (its exact prefix: out/dataset1/ is not out/dataset10/)")
    p.add_argument("--older-than", type=parse_duration, default=None, metavar="DURATION",
                   help="only uploads initiated longer ago than this (e.g. 90m, 24h, 7d): "
                        "what list shows, check counts and abort aborts")
    p.add_argument("--force", action="store_true", help="really abort (default: show what would be)")
    _conf_option(p)
    p.set_defaults(func=cmd_uploads)

    p = _subparser(sub, "jobs", "jobs that left temporary state under a destination; abort one")
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
    _conf_option(p)
    p.set_defaults(func=cmd_jobs)

    for command in sorted(get_registry().commands().values(), key=lambda c: c.name):
        p = sub.add_parser(command.name, help=f"{command.help} (from plugin {command.plugin})",
                           description=command.help[0].upper() + command.help[1:] + ".",
                           epilog="examples:\n" + "".join(f"  {line}\n" for line in
                                                            command.examples.splitlines()),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if command.arguments:
            command.load(command.arguments)(p)
        p.set_defaults(func=lambda args, _c=command: _c.load(_c.target)(args))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in words if not word.startswith("-")), None)
    missing = get_registry().missing_command(command) if command else None
    if missing:  # argparse would say "invalid choice: 'demo'"
        print(f"outcommit {command}: {missing}", file=sys.stderr)
        return 2
    args = parser.parse_args(words)
    from .progress import show_bars

    show_bars(sys.stderr.isatty())  # a live bar for long stages, on a terminal only
    try:
        result: Any = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OutcommitError as exc:
        print(f"outcommit {args.command}: {exc}", file=sys.stderr)
        if getattr(args, "json", False):  # a script reading stdout gets the error as JSON too
            print_json({"error": type(exc).__name__, "message": str(exc)}, indent=None)
        return 2
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
