"""References point into this repository: a cited page and anchor exist.

Code and docs cited the correctness properties in a design document this repository does
not have; they live in docs/protocol.md, under anchors that every reference resolves.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: Where references are written: the distributions, their tests, the docs and the README.
TREES = ("core/src", "plugins", "devtools/src", "tests", "benchmarks", "docs")

# docs/x.md#anchor in code and prose; [text](x.md#anchor) between the docs' own pages.
CITED = re.compile(r"docs/(?P<page>[\w.-]+\.md)#(?P<anchor>[\w-]+)")
LINKED = re.compile(r"\]\((?P<page>[\w.-]+\.md)#(?P<anchor>[\w-]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$", re.MULTILINE)
EXPLICIT = re.compile(r'<a id="(?P<anchor>[\w-]+)"></a>')


def texts() -> dict[Path, str]:
    found = {ROOT / "README.md": (ROOT / "README.md").read_text()}
    for tree in TREES:
        for path in (ROOT / tree).rglob("*"):
            if path.suffix in (".py", ".md", ".toml") and ".egg-info" not in str(path) \
                    and path != Path(__file__).resolve():  # its patterns would match themselves
                found[path] = path.read_text()
    return found


def anchors(page: Path) -> set[str]:
    """The anchors of a page: its headings' (as GitHub makes them) and explicit ones."""
    text = page.read_text()
    slugs = {re.sub(r"[^\w\- ]", "", m["title"].lower()).replace(" ", "-")
             for m in HEADING.finditer(text)}
    return slugs | {m["anchor"] for m in EXPLICIT.finditer(text)}


def test_nothing_cites_a_design_document_this_repository_lacks() -> None:
    name = "DESIGN" + ".md"  # not written whole: this file would cite it
    assert not (ROOT / name).exists()
    citing = sorted(str(p.relative_to(ROOT)) for p, text in texts().items() if name in text)
    assert citing == [], f"{name} is not in this repository: cite docs/protocol.md instead"


def test_every_cited_page_and_anchor_exists() -> None:
    missing = []
    for path, text in texts().items():
        pattern_matches = [*CITED.finditer(text)]
        if path.is_relative_to(DOCS):
            pattern_matches += LINKED.finditer(text)
        for match in pattern_matches:
            page = DOCS / match["page"]
            if not page.exists() or match["anchor"] not in anchors(page):
                missing.append(f"{path.relative_to(ROOT)}: {match['page']}#{match['anchor']}")
    assert missing == []


def test_the_correctness_properties_have_their_anchors() -> None:
    assert {"correctness-properties", "complete", "exclusive", "concurrent", "abortable",
            "continuity", "no-leaks", "containment"} <= anchors(DOCS / "protocol.md")
