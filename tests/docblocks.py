"""The Python code blocks of README.md and docs/*.md, for the tests that run them as written.

A block is named by its page and its first line (``docs/reading.md: import os``): a new
or changed block is a new name, which ``tests/docs/test_code_blocks.py`` refuses until it
says how the block runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: PySpark blocks that tests/core/spark/test_spark_docs.py runs on the test cluster's session.
RUN_IN_SPARK_TESTS = frozenset({
    "README.md: import outcommit.spark",
    "docs/pyspark.md: from pyspark.sql import SparkSession",
    'docs/pyspark.md: df.write.format("outcommit").mode("append").option("conflictMode", "fail").save(url)',
    'docs/pyspark.md: events = spark.read.format("outcommit").load("s3://bucket/events")',
    "docs/pyspark.md: import outcommit.spark",
    "docs/streaming.md: import outcommit.spark",
})
BLOCK = re.compile(r"^```python\n(?P<body>.*?)^```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Block:
    page: str       # relative to the repository: README.md, docs/reading.md
    line: int       # of the opening fence
    source: str

    @property
    def name(self) -> str:
        first = next(line for line in self.source.splitlines() if line.strip())
        return f"{self.page}: {first.strip()}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks() -> dict[str, Block]:
    """Every ```python block, by name."""
    found: dict[str, Block] = {}
    for path in pages():
        text = path.read_text()
        for match in BLOCK.finditer(text):
            block = Block(str(path.relative_to(ROOT)), text[:match.start()].count("\n") + 1,
                          match.group("body"))
            assert block.name not in found, f"two blocks named {block.name!r}: start one differently"
            found[block.name] = block
    return found
