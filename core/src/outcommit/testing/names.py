"""Hostile names, and the decoys a store that reinterprets a name would reach instead.

A store must act on exactly the path it is given (Hadoop's ``FileSystem`` never globs):
``p*.csv`` is one file, not a pattern that also matches ``pa.csv``; ``a%2Fb`` is one
name, not ``a/b``; ``café`` written composed (NFC) and decomposed (NFD) are two names.
:func:`segments` draws path segments full of what fsspec and the SDKs under it may read
as something else (glob characters, ``%``, ``#``, ``?``, ``+``, ``=``, spaces, quotes,
backslashes, leading and trailing dots and dashes, both Unicode forms);
:func:`decoys` lists, for one segment, the other names such a reading would match, to
be put beside it by the tests (the store contract, the fault matrix).

:func:`check_exact_names` is the property the store contract
(:meth:`~outcommit.testing.stores.StoreContract.test_operations_act_on_exactly_the_named_path`)
checks for each drawn path. Needs hypothesis (the ``testing`` extra installs it).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote, unquote_plus

import pytest
from hypothesis import strategies as st

from .. import capabilities as caps
from ..errors import UnsupportedNameError
from ..store import Store

#: What fsspec's glob (``*?[``), brace expansion, URL parsing (``%#?+``, ``&=;``) or a
#: shell may treat as syntax, and characters some services rewrite (``\``).
SPECIAL = "*?[]{}!%#+=&;,@$'\" \\^~`|()<>:"
#: Letters with a decomposed form (NFD differs from NFC), and a few that do not decompose.
UNICODE = "éüÅñçøßΩЖ中ﬁ"
ORDINARY = "abq1._-"

#: Names every store run of the contract tries first: the defects that named this property.
EXAMPLES = ("p*.csv", "q[1].csv", "a%2Fb", "a b+c=d", "café", unicodedata.normalize("NFD", "café"),
            "h#frag", "v?versionid=1", "v?versionId=1", "end#", "end?", ".dot.", "-dash-", "x{1,2}",
            "back\\slash", "100%")


@st.composite
def _segment(draw: st.DrawFn) -> str:
    text = draw(st.text(st.sampled_from(SPECIAL + UNICODE + ORDINARY), min_size=1, max_size=10))
    form = draw(st.sampled_from(("as drawn", "NFC", "NFD")))
    return text if form == "as drawn" else unicodedata.normalize(form, text)  # type: ignore[arg-type]


def segments() -> st.SearchStrategy[str]:
    """One path segment: never empty, ``.`` or ``..``, and without ``/`` or control characters."""
    return st.one_of(st.sampled_from(EXAMPLES), _segment()).filter(lambda s: s not in (".", ".."))


def relative_paths(max_depth: int = 3) -> st.SearchStrategy[list[str]]:
    """A relative path as its segments (1 to ``max_depth``)."""
    return st.lists(segments(), min_size=1, max_size=max_depth)


_BRACKET = re.compile(r"\[!?([^\]]+)\]")
_BRACE = re.compile(r"\{([^{}]*)\}")


def decoys(segment: str) -> list[str]:
    """Other names that a store reading ``segment`` as a glob, a URL, an escaped or
    normalised name would reach: names the pattern matches, the unquoted forms, what is
    left before ``#`` or ``?``, the other Unicode form, ``\\`` read as ``/``, trailing dots
    dropped. Never ``segment`` itself, never empty, ``.`` or ``..``; may contain ``/``."""
    found = []
    glob_matches = [segment.replace("*", ""), segment.replace("*", "x"), segment.replace("?", "y"),
                    _BRACKET.sub(lambda m: m.group(1)[0] if not m.group(0).startswith("[!") else "Z",
                                 segment).replace("*", "").replace("?", "y")]
    found += [c for c in glob_matches if _glob_matches(segment, c)]
    brace = _BRACE.search(segment)
    if brace is not None:
        found.append(segment[:brace.start()] + brace.group(1).split(",")[0] + segment[brace.end():])
    found += [unquote(segment), unquote_plus(segment), segment.split("#")[0], segment.split("?")[0],
              unicodedata.normalize("NFC", segment), unicodedata.normalize("NFD", segment),
              segment.replace("\\", "/"), segment.rstrip(".")]
    kept: list[str] = []
    for name in found:
        parts = name.split("/")
        if name != segment and name not in kept and all(p not in ("", ".", "..") for p in parts):
            kept.append(name)
    return kept


#: The kinds of names the property must reach, by the characters that make them hostile
#: (:func:`kinds`): a test reports how many of its cases held each one.
KINDS = {"glob": "*?[]{}!", "quoting": "%+#=&;", "space": " ", "quote": "'\"",
         "backslash": "\\"}


def kinds(rel: Iterable[str]) -> list[str]:
    """The kinds of hostile name a path (its segments) holds: those of :data:`KINDS`, and
    ``unicode`` (a letter beyond ASCII), ``decomposed`` (not in NFC form), ``edge`` (a
    segment that begins or ends with a dot or a dash)."""
    text = "".join(rel)
    found = [kind for kind, chars in KINDS.items() if any(c in text for c in chars)]
    if not text.isascii():
        found.append("unicode")
    if unicodedata.normalize("NFC", text) != text:
        found.append("decomposed")
    if any(s[:1] in ".-" or s[-1:] in ".-" for s in rel):
        found.append("edge")
    return found


def _glob_matches(pattern: str, name: str) -> bool:
    try:
        return fnmatch.fnmatchcase(name, pattern)
    except re.error:  # not a pattern fnmatch can read: no glob would match it either
        return False


# -- the property: exactly the named path ------------------------------------------------------
def check_exact_names(store: Store, base: str, rel: list[str], skip: str = "") -> bool:
    """Every operation on ``base/<rel>`` acts on exactly that path and on none of its decoys
    (those holding a character of ``skip`` left out); a name the store cannot hold is
    refused with UnsupportedNameError and nothing is written. ``base``: a fresh directory.
    Returns whether the store held the name (False: refused, only the refusal checked)."""
    target, decoy_paths = _layout(store, base, rel, skip)
    others = _write_decoys(store, decoy_paths)
    try:
        store.write_bytes(target, b"target")
    except UnsupportedNameError as refused:
        assert store.url(target) in str(refused) and "\n" not in str(refused)
        _holds(store, base, others, "a refused name")
        return False
    _check_reads(store, base, target, others)
    _check_rename_and_deletes(store, base, rel, target, others)
    _check_trees(store, base, target, others)
    exclusive = store.exclusive_create()
    if exclusive is not None:
        exclusive.create_exclusive(target, b"claimed")
        with pytest.raises(FileExistsError):
            exclusive.create_exclusive(target, b"again")
        _holds(store, base, {**others, target: b"claimed"}, "an exclusive create")
    store.delete(base, recursive=True)
    return True


def decoy_paths(rel: list[str], taken: Iterable[str] = (), per_segment: int = 2,
                limit: int = 6) -> list[str]:
    """Decoys of the relative path ``rel`` (its segments): each segment in turn replaced
    by :func:`decoys` of it, ``per_segment`` each, at most ``limit``; none equal to a path
    of ``taken`` or to another decoy, and none the directory of one (a file cannot be)."""
    chosen: list[str] = []
    occupied = ["/".join(rel), *taken]
    for i, segment in enumerate(rel):
        for decoy in decoys(segment)[:per_segment]:
            path = "/".join([*rel[:i], decoy, *rel[i + 1:]])
            if len(chosen) < limit and not any(
                    path == p or p.startswith(path + "/") or path.startswith(p + "/")
                    for p in [*occupied, *chosen]):
                chosen.append(path)
    return chosen


def _layout(store: Store, base: str, rel: list[str], skip: str) -> tuple[str, list[str]]:
    """The target path and its decoys, none holding a character of ``skip``."""
    kept = [p for p in decoy_paths(rel, limit=12) if not any(c in p for c in skip)]
    return store.join(base, *rel), [store.join(base, p) for p in kept[:6]]


def _write_decoys(store: Store, paths: list[str]) -> dict[str, bytes]:
    """Write each decoy (its own path as content); one the store refuses is left out."""
    written = {}
    for path in paths:
        try:
            store.write_bytes(path, path.encode())
        except UnsupportedNameError:
            continue
        written[path] = path.encode()
    return written


def _holds(store: Store, base: str, expected: dict[str, bytes], what: str) -> None:
    """``base`` holds exactly ``expected``; else say what ``what`` lost, added or changed."""
    found = {f.path: store.read_bytes(f.path) for f in store.list_files(base)}
    if found != expected:
        lost = sorted(set(expected) - set(found))
        added = sorted(set(found) - set(expected))
        changed = sorted(p for p in set(found) & set(expected) if found[p] != expected[p])
        raise AssertionError(f"{what}: lost {lost}, added {added}, changed {changed}")


def _check_reads(store: Store, base: str, target: str, others: dict[str, bytes]) -> None:
    everything = {**others, target: b"target"}
    assert store.strip(store.url(target)) == target
    _holds(store, base, everything, "writing the target and its decoys")
    status = store.info(target)
    assert status is not None and status.path == target and status.size == 6 and not status.is_dir
    assert store.exists(target) and store.read_bytes(target) == b"target"
    when = store.modified(target)
    assert when is None or when.tzinfo is not None
    try:
        with store.open(target, "rb") as handle:
            assert handle.read() == b"target"
    except UnsupportedNameError:  # the store holds it; its fsspec filesystem would read another
        pass
    parent = posixpath.dirname(target)
    children = {parent + "/" + p[len(parent) + 1:].split("/")[0]
                for p in everything if p.startswith(parent + "/")}
    assert {c.path for c in store.list_dir(parent)} == children


def _check_rename_and_deletes(store: Store, base: str, rel: list[str], target: str,
                              others: dict[str, bytes]) -> None:
    moved = store.join(base, "moved", *rel)
    store.rename_file(target, moved)
    assert not store.exists(target) and store.read_bytes(moved) == b"target"
    _holds(store, base, {**others, moved: b"target"}, "a rename")
    store.rename_file(moved, target)
    store.delete(store.join(base, "moved"), recursive=True)
    _holds(store, base, {**others, target: b"target"}, "a rename back, a recursive delete")
    store.delete(target)
    _holds(store, base, others, "a delete")
    assert not store.exists(target) and store.info(target) is None and store.modified(target) is None
    store.write_bytes(target, b"target")
    store.delete_files([target])
    _holds(store, base, others, "delete_files")


def _check_trees(store: Store, base: str, target: str, others: dict[str, bytes]) -> None:
    """The same names as directories: a recursive delete (and a directory rename, where
    the store has one) takes exactly the tree it names."""
    tree = store.join(base, "tree")
    inside = {store.join(tree, p[len(base) + 1:], "in.txt"): b"in" for p in [target, *others]}
    for path, data in inside.items():
        store.write_bytes(path, data)
    gone = store.join(tree, target[len(base) + 1:])
    store.delete(gone, recursive=True)
    _holds(store, tree, {p: d for p, d in inside.items() if not p.startswith(gone + "/")},
           "a recursive delete")
    if store.has_capability(caps.RENAME_DIRECTORY_ATOMIC) and others:
        first = store.join(tree, next(iter(others))[len(base) + 1:])
        store.rename_dir(first, store.join(base, "renamed"))
        assert store.read_bytes(store.join(base, "renamed", "in.txt")) == b"in"
        assert not store.exists(first)
        store.delete(store.join(base, "renamed"), recursive=True)
    store.delete(tree, recursive=True)
    _holds(store, base, others, "recursive deletes")


__all__ = ["EXAMPLES", "KINDS", "SPECIAL", "UNICODE", "check_exact_names", "decoy_paths",
           "decoys", "kinds", "relative_paths", "segments"]
