"""The sections of the docs generated from the code: ``outcommit config --write-docs``
writes them, ``tests/docs`` checks them.

At the top of the layers (with the engines and the CLI): it renders what the registry
knows (``outcommit.keys``) and what the Spark engine takes (``outcommit.spark.options``),
which nothing below may import.
"""

from __future__ import annotations

from .keys import families_markdown, markdown_table
from .spark.options import options_markdown, read_options_markdown, stream_options_markdown

#: Generated sections of the docs: (file under docs/, marker name, generator).
GENERATED = (("configuration.md", "config-keys", markdown_table),
             ("configuration.md", "config-families", families_markdown),
             ("pyspark.md", "write-options", options_markdown),
             ("pyspark.md", "read-options", read_options_markdown),
             ("streaming.md", "stream-options", stream_options_markdown))


def generated_sections() -> list[tuple[str, str, str]]:
    """(doc file, section name, its generated text), for the docs and their test."""
    return [(doc, name, generate()) for doc, name, generate in GENERATED]


def render(text: str, name: str, body: str) -> str:
    """``text`` with the section between ``<!-- generated: name -->`` and
    ``<!-- end generated: name -->`` replaced by ``body``."""
    begin, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise ValueError(f"no generated section {name!r} in the document")
    return f"{head}{begin}\n{body}{end}{rest.partition(end)[2]}"
