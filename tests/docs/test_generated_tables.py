"""The docs' key and option tables are the code's: regenerate them, nothing may change."""

from __future__ import annotations

from pathlib import Path

import pytest

from outcommit.docsgen import generated_sections, render

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(("name", "section", "body"), generated_sections(),
                         ids=[f"{n}:{s}" for n, s, _ in generated_sections()])
def test_generated_table_is_current(name: str, section: str, body: str) -> None:
    text = (DOCS / name).read_text()
    assert render(text, section, body) == text, (
        f"docs/{name} ({section}) is stale: run 'outcommit config --write-docs docs'")
    assert body.count("\n") > 5
