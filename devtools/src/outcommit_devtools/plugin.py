"""The development tools' plugin: adds ``outcommit demo`` to the CLI (entry point ``devtools``)."""

from __future__ import annotations

from outcommit import CommandRegistrar, hookimpl
from outcommit.commands import Command


@hookimpl
def register_commands(register: CommandRegistrar) -> None:
    register.add(Command(
        name="demo",
        help="run the demo job (PySpark + an embedded store) and verify its output",
        target="outcommit_devtools.demo:main",
        arguments="outcommit_devtools.demo:add_arguments",
        examples="outcommit demo                                   # PySpark + embedded S3, magic\n"
                 "outcommit demo --engine local --store file       # no Java needed\n"
                 "outcommit demo --store azure --rows 100000 --json"))
