"""The ``outcommit`` command: plugins, capabilities, _SUCCESS reports, pending uploads, jobs.

Plugins add subcommands through the ``register_commands`` hook (the development tools
add ``demo``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..commands import Command as Command  # its home before commands.py
from ..errors import OutcommitError
from ..plugins import get_registry
from ..version import __version__
from . import info, jobs, reports, uploads
from .common import parse_duration as parse_duration
from .common import print_json as print_json
from .info import cmd_capabilities as cmd_capabilities
from .info import cmd_check as cmd_check
from .info import cmd_config as cmd_config
from .info import cmd_plugins as cmd_plugins
from .jobs import cmd_jobs as cmd_jobs
from .reports import cmd_batches as cmd_batches
from .reports import cmd_success as cmd_success
from .uploads import cmd_uploads as cmd_uploads

DESCRIPTION = """Safe output commits for Python data pipelines: inspect what is installed,
what a store guarantees, a job's _SUCCESS report, and pending multipart uploads."""


def build_parser() -> argparse.ArgumentParser:
    """The ``outcommit`` parser: the built-in command groups' parsers (a module each), then
    the commands plugins add."""
    parser = argparse.ArgumentParser(prog="outcommit", description=DESCRIPTION,
                                     epilog="'outcommit <command> --help' shows each command's "
                                            "options and examples")
    parser.add_argument("--version", action="version", version=f"outcommit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for group in (info, reports, uploads, jobs):
        group.add_parsers(sub)
    _plugin_commands(sub)
    return parser


def _plugin_commands(sub: Any) -> None:
    """The subcommands plugins register (``register_commands``: the development tools add
    ``demo``), each loaded only when it runs."""
    for command in sorted(get_registry().commands().values(), key=lambda c: c.name):
        p = sub.add_parser(command.name, help=f"{command.help} (from plugin {command.plugin})",
                           description=command.help[0].upper() + command.help[1:] + ".",
                           epilog="examples:\n" + "".join(f"  {line}\n" for line in
                                                            command.examples.splitlines()),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if command.arguments:
            command.load(command.arguments)(p)
        p.set_defaults(func=lambda args, _c=command: _c.load(_c.target)(args))


def main(argv: Sequence[str] | None = None) -> int:
    """``outcommit ...``: the exit status (2: bad input, with a one-line error naming the fix)."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in words if not word.startswith("-")), None)
    missing = get_registry().missing_command(command) if command else None
    if missing:  # argparse would say "invalid choice: 'demo'"
        print(f"outcommit {command}: {missing}", file=sys.stderr)
        return 2
    args = parser.parse_args(words)
    from ..progress import show_bars

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
