"""``python -m outcommit_devtools.faultmatrix``: run the fault matrix and print it.

Starts the emulators it needs (moto, Azurite, the GCS emulator) on 127.0.0.1, runs every
cell, prints one line per cell while running, then the table, the counts and every
WRONG cell with its detail. Exit status 1 when any cell is WRONG.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

from .bindings import STORES, open_bindings, started_servers
from .report import counts, counts_line, render, write_docs
from .runner import CellResult, Matrix, plan
from .scenarios import SIZES


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m outcommit_devtools.faultmatrix",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", choices=SIZES, default="ci",
                        help="ci: the test suite's cells; full: every k, every store fault")
    parser.add_argument("--stores", type=_list, default=list(STORES),
                        help=f"comma-separated bindings (default: {','.join(STORES)})")
    parser.add_argument("--committers", type=_list, default=None,
                        help="comma-separated committers (default: every registered one)")
    parser.add_argument("--only", default="", help="run only cells whose id contains this text")
    parser.add_argument("--write-docs", type=Path, default=None, metavar="PATH",
                        help="replace the generated section of this size in PATH "
                             "(needs every store and committer)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no line per cell")
    args = parser.parse_args(argv)
    # Stopped with SIGTERM (kill, a CI timeout): leave through the finally blocks, so the
    # emulators this command started stop with it instead of outliving it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    unknown = sorted(set(args.stores) - set(STORES))
    if unknown:
        parser.error(f"unknown stores: {', '.join(unknown)} (choose from {', '.join(STORES)})")
    if args.write_docs and (args.only or args.committers or set(args.stores) != set(STORES)):
        parser.error("--write-docs needs the whole matrix: no --only, --committers or --stores")
    cells = [c for c in plan(args.size, args.stores, args.committers) if args.only in c.id]
    started = time.monotonic()
    finished = 0

    def progress(result: CellResult) -> None:
        nonlocal finished
        finished += 1
        if not args.quiet:
            print(f"[{finished:4d}/{len(cells)}] {result.verdict.outcome:8s} {result.seconds:6.2f}s "
                  f"{result.cell.id}", flush=True)

    with started_servers(args.stores) as servers, open_bindings(args.stores, servers) as bindings, \
            tempfile.TemporaryDirectory(prefix="outcommit-faultmatrix-") as scratch:
        results = Matrix(bindings.__getitem__, scratch).run_many(cells, progress)
    elapsed = time.monotonic() - started
    print()
    print(render(results, details=True))
    print()
    print(f"{args.size} matrix: {counts_line(counts(results))} ({elapsed:.0f} s)")
    if args.write_docs:
        write_docs(args.write_docs, results, args.size)
        print(f"wrote the {args.size} matrix into {args.write_docs}")
    return 1 if counts(results)["WRONG"] else 0


if __name__ == "__main__":
    sys.exit(main())
