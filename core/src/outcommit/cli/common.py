"""What the ``outcommit`` commands share: ``--conf`` and ``--json`` options, durations and
times as the commands print them, and each command's parser with its examples."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import OutcommitError
from ..redaction import scrub

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


def conf_pairs(pairs: Sequence[str] | None) -> dict[str, str]:
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
        from ..factory import resolve_config
        from ..keys import check

        check(resolve_config(config), every_key=True)
    return config


def iso_time(seconds: float) -> str:
    """A batch log's commit time (epoch seconds), as the commands print it."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def aware(moment: datetime) -> datetime:
    """A naive time as UTC: some stores report upload times without a zone."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def subparser(sub: Any, name: str, examples: str, help: str) -> argparse.ArgumentParser:
    """Command ``name``'s parser: its help, its examples (the epilog) and ``--json``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=help[0].upper() + help[1:] + ".",
        epilog="examples:\n" + examples, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def conf_option(parser: argparse.ArgumentParser) -> None:
    """``--conf KEY=VALUE``, for the commands that open a store."""
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE",
                        help="configuration, as in code or Spark (repeatable), e.g. "
                             "--conf outcommit.s3.endpoint=http://127.0.0.1:9000")
