"""How a plugin adds a subcommand to the ``outcommit`` CLI (hook ``register_commands``).

A spec, as ``StoreSpec`` and ``CommitterSpec`` are: the CLI (``outcommit.cli``) runs what
the registry collected, and the hooks name the spec without importing the CLI.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """A subcommand a plugin adds to the CLI (hook ``register_commands``).

    ``target`` is ``"module:function"``; the module is imported only when the command
    runs, and the function gets the parsed arguments and returns the exit status.
    ``arguments`` (``"module:function"`` too, optional) adds the command's arguments to
    its ``argparse`` parser.
    """

    name: str
    help: str
    target: str
    arguments: str | None = None
    plugin: str = ""
    #: Example command lines shown by ``--help`` (one per line, without the indent).
    examples: str = ""

    def load(self, spec: str) -> Any:
        module, _, function = spec.partition(":")
        return getattr(importlib.import_module(module), function)
