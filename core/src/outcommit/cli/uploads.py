"""``outcommit uploads``: pending multipart uploads under a directory: list, check, abort.
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import datetime, timezone
from typing import Any

from ..errors import OutcommitError
from .common import aware, conf_option, conf_pairs, parse_duration, print_json, subparser

EXAMPLES = {
    "uploads": "  outcommit uploads list s3://bucket/events/\n"
               "  outcommit uploads check s3://bucket/events/     # exit 1 while any is pending\n"
               "  outcommit uploads abort s3://bucket/events/ --older-than 24h --force",
}


def cmd_uploads(args: argparse.Namespace) -> int:
    from ..factory import open_store

    store = open_store(args.url, conf_pairs(args.conf))
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
        uploads = [u for u in uploads if u.initiated is None or aware(u.initiated) <= cutoff]
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
    from ..parallel import outcomes
    from ..progress import Progress

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


def add_parsers(sub: Any) -> None:
    """The parsers of ``uploads``."""
    p = subparser(sub, "uploads", EXAMPLES["uploads"], "pending multipart uploads under a directory")
    p.add_argument("action", choices=["list", "abort", "check"],
                   help="list them; abort them; check: exit 1 when any is pending")
    p.add_argument("url", help="the directory (its exact prefix: out/dataset1/ is not out/dataset10/)")
    p.add_argument("--older-than", type=parse_duration, default=None, metavar="DURATION",
                   help="only uploads initiated longer ago than this (e.g. 90m, 24h, 7d): "
                        "what list shows, check counts and abort aborts")
    p.add_argument("--force", action="store_true", help="really abort (default: show what would be)")
    conf_option(p)
    p.set_defaults(func=cmd_uploads)
