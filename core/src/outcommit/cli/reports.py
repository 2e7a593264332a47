"""``outcommit success`` and ``batches``: what a committed job or streaming query reports (its
``_SUCCESS``, or its batch log).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ..errors import OutcommitError
from .common import conf_option, conf_pairs, iso_time, print_json, subparser

EXAMPLES = {
    "success": "  outcommit success s3://bucket/events\n"
               "  outcommit success file:///data/events/_SUCCESS --files 100\n"
               "  outcommit success abfs://data/events --json",
    "batches": "  outcommit batches s3://bucket/events\n"
               "  outcommit batches s3://bucket/events 41          # batch 41's files\n"
               "  outcommit batches file:///data/events --json",
}


def cmd_success(args: argparse.Namespace) -> int:
    from ..factory import open_store
    from ..success import SUCCESS_FILE, load_success

    store = open_store(args.url, conf_pairs(args.conf))
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
    from ..streaming import LOG_DIR, BatchLog
    from ..streaming.reader import committed_batches, has_batch_log

    if not has_batch_log(store, dest):
        return None
    url = store.url(dest)
    entries = committed_batches(url, conf_pairs(args.conf), verify=True)
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




def cmd_batches(args: argparse.Namespace) -> int:
    """``outcommit batches URL [BATCH]``: a streaming destination's committed batches, one
    line each, from its batch log (the report a streaming destination has instead of
    ``_SUCCESS``); a batch id shows that batch's files. No command showed the log."""
    from ..streaming.reader import committed_batches

    url = args.url.rstrip("/")
    entries = committed_batches(url, conf_pairs(args.conf))
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
        print(f"{e.batch_id:>7}  {len(e.files):>6}  {e.rows:>10}  {iso_time(e.committed_at):<25}  "
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
          f"committed {iso_time(entry.committed_at)}")
    for f in entry.files:
        print(f"  {url}/{f.path}  {f.rows} rows  {f.size} bytes")
    return 0


def add_parsers(sub: Any) -> None:
    """The parsers of ``success``, ``batches``."""
    p = subparser(sub, "success", EXAMPLES["success"],
                  "show and validate a job's _SUCCESS report, or a streaming "
                  "destination's batch log")
    p.add_argument("url", help="destination directory or its _SUCCESS file")
    conf_option(p)
    p.add_argument("--files", type=int, default=10, help="how many file names to show (default 10)")
    p.set_defaults(func=cmd_success)

    p = subparser(sub, "batches", EXAMPLES["batches"],
                  "a streaming destination's committed batches (its batch log)")
    p.add_argument("url", help="the streaming destination")
    p.add_argument("batch", nargs="?", type=int, help="a batch id: show that batch's files")
    conf_option(p)
    p.set_defaults(func=cmd_batches)
