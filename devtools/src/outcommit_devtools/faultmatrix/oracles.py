"""The oracles of a cell (docs/protocol.md#correctness-properties) and the verdict.

What is read from the store after a scenario: the data files of each destination with
their bytes, the temporary state left behind (``_temporary``, ``__magic*``,
``__staging*``, pending uploads, local staging directories), ``_SUCCESS``, and a
fingerprint of everything outside the destinations (canaries in the parent directory,
an adjacent ``dataset10``, pending uploads next to the destination, the bucket root).
The verdict compares them with the scenario's expectation (``expectations.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from outcommit import capabilities as caps
from outcommit.store import Store
from outcommit.success import SUCCESS_FILE

from .expectations import Expectation, Limit

Files = dict[str, bytes]
TEMPORARY_NAMES = ("_temporary",)
TEMPORARY_PREFIXES = ("__magic", "__staging")

OUTCOMES = ("correct", "loud", "limit", "refused", "n/a", "WRONG")


def _relative(path: str, root: str) -> str:
    return path[len(root.rstrip("/")) + 1:]


def _hidden(rel: str) -> bool:
    return any(part.startswith(("_", ".")) for part in rel.split("/"))


def visible(store: Store, dest: str) -> Files:
    """Data files under ``dest`` (no component starting with '_' or '.') with their bytes."""
    return {rel: store.read_bytes(info.path) for info in store.list_files(dest)
            if not _hidden(rel := _relative(info.path, dest))}


def _is_temporary(rel: str) -> bool:
    return any(part in TEMPORARY_NAMES or part.startswith(TEMPORARY_PREFIXES) for part in rel.split("/"))


def leftovers(store: Store, dest: str, local_dirs: Iterable[str] = ()) -> list[str]:
    """Temporary state that a finished job must not leave behind."""
    left = [info.path for info in store.list_files(dest) if _is_temporary(_relative(info.path, dest))]
    left += [entry.path + "/" for entry in store.list_dir(dest)
             if entry.is_dir and _is_temporary(entry.name)]
    multipart = store.multipart()
    if multipart is not None:
        left += [f"pending upload {u.path}" for u in multipart.list_pending(dest.rstrip("/") + "/")]
    for local in local_dirs:
        for folder, _dirs, names in os.walk(local):
            left += [f"local {os.path.join(folder, n)}" for n in names]
    return sorted(set(left))


def fingerprint_outside(store: Store, root: str, container: str, dests: Iterable[str]) -> dict[str, str]:
    """Everything under the cell ``root`` outside ``dests``, and the container's top level.

    Files by size and etag (or bytes where there is no etag), pending uploads by id:
    a job that touches anything here has escaped its destination.
    """
    inside = [d.rstrip("/") + "/" for d in dests]
    found: dict[str, str] = {}
    for info in store.list_files(root):
        if any((info.path + "/").startswith(d) for d in inside):
            continue
        found[info.path] = f"{info.size}:{info.etag or store.read_bytes(info.path)!r}"
    if container != root:
        for entry in store.list_dir(container):
            found.setdefault(entry.path, "dir" if entry.is_dir else f"{entry.size}:{entry.etag}")
    multipart = store.multipart()
    if multipart is not None:
        for upload in multipart.list_pending(root.rstrip("/") + "/"):
            if not any((upload.path + "/").startswith(d) for d in inside):
                found[f"pending {upload.path}"] = upload.upload_id
    return found


def read_success(store: Store, dest: str) -> dict[str, Any] | None:
    path = store.join(dest, SUCCESS_FILE)
    try:
        data = store.load_json(path)
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else {"invalid": repr(data)[:200]}


@dataclass
class Destination:
    """One destination of a scenario: what was there, what should be, what is.

    ``expected``: the acceptable final contents if the job(s) committed (more than one
    when the engine lets either of two committed attempts of a task win).
    ``success_job``/``success_files``: whose ``_SUCCESS`` must be there and the files it
    must list (None: no job may leave a new success=true ``_SUCCESS``).
    ``before_commit``: the contents just before job commit, for committers declaring
    output.invisible-until-job-commit.
    """

    url: str
    path: str
    prefix: str
    before: Files
    expected: list[Files] = field(default_factory=list)
    after: Files = field(default_factory=dict)
    leftovers: list[str] = field(default_factory=list)
    success: dict[str, Any] | None = None
    success_before: dict[str, Any] | None = None
    success_job: str | None = None
    success_files: list[set[str]] = field(default_factory=list)
    before_commit: Files | None = None


@dataclass
class Observation:
    """What a scenario did and what the store shows afterwards."""

    dests: list[Destination]
    error: BaseException | None = None
    written: dict[str, set[bytes]] = field(default_factory=dict)
    outside_before: dict[str, str] = field(default_factory=dict)
    outside_after: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    outcome: str
    detail: str = ""
    limits: tuple[str, ...] = ()


def error_text(error: BaseException) -> str:
    """The error and its causes, as one line: where the cause of a failure must be named."""
    parts, seen = [], set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)


def _diff(label: str, got: Files, want: Files) -> str:
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    changed = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    bits = [f"{name} {', '.join(items[:4])}{' …' if len(items) > 4 else ''}"
            for name, items in (("unexpected", extra), ("missing", missing), ("wrong bytes", changed))
            if items]
    return f"{label}: " + "; ".join(bits)


def _check_success(d: Destination) -> list[str]:
    s = d.success
    if d.success_job is None:
        if s is not None and s != d.success_before and s.get("success") is True:
            return [f"{d.url}: a job that did not commit wrote a success=true _SUCCESS"]
        return []
    if s is None:
        return [f"{d.url}: no _SUCCESS after a committed job"]
    problems = []
    if s.get("success") is not True or s.get("jobId") != d.success_job:
        problems.append(f"{d.url}: _SUCCESS says success={s.get('success')} jobId={s.get('jobId')}, "
                        f"expected success=true for job {d.success_job}")
    names = s.get("filenames")
    if not isinstance(names, list):
        return [*problems, f"{d.url}: _SUCCESS has no filenames list"]
    listed = {str(n)[len(d.prefix):] if str(n).startswith(d.prefix) else f"(outside) {n}" for n in names}
    if len(names) < 100 and d.success_files and listed not in d.success_files:
        problems.append(_diff(f"{d.url}: _SUCCESS filenames", dict.fromkeys(listed, b""),
                              dict.fromkeys(d.success_files[0], b"")))
    return problems


def _strict(obs: Observation, has_invisible: bool) -> tuple[list[str], list[str]]:
    """(violations of the state, violations of cleanliness/containment)."""
    state: list[str] = []
    clean: list[str] = []
    for d in obs.dests:
        if obs.error is None:
            if not any(d.after == e for e in d.expected):
                state.append(_diff(f"{d.url} after commit", d.after, d.expected[0] if d.expected else {}))
        elif d.after != d.before:
            state.append(_diff(f"{d.url} after the failed job", d.after, d.before))
        state += _check_success(d)
        if has_invisible and d.before_commit is not None and d.before_commit != d.before:
            state.append(_diff(f"{d.url} before job commit (output.invisible-until-job-commit)",
                               d.before_commit, d.before))
        if d.leftovers:
            clean.append(f"{d.url}: leftovers {', '.join(d.leftovers[:4])}"
                         f"{' …' if len(d.leftovers) > 4 else ''}")
    if obs.outside_after != obs.outside_before:
        changed = sorted(k for k in set(obs.outside_after) | set(obs.outside_before)
                         if obs.outside_after.get(k) != obs.outside_before.get(k))
        clean.append(f"outside the destination changed: {', '.join(changed[:4])}")
    return state, clean


def _relaxed(obs: Observation, limits: Iterable[Limit]) -> list[str]:
    """State violations that remain when the cell may show ``limits``.

    A failed job may leave: files of attempts that reached task commit (``allows_written``),
    part of its own output (``allows_partial``), old data deleted by ``replace``
    (``allows_replaced``). A committed job must hold all of its output; beyond it, only
    files of attempts that reached task commit.
    """
    chosen = list(limits)
    allow_written = any(limit.allows_written for limit in chosen)
    allow_partial = any(limit.allows_partial for limit in chosen)
    allow_replaced = any(limit.allows_replaced for limit in chosen)
    problems = []
    for d in obs.dests:
        extra: dict[str, set[bytes]] = {}
        if allow_written:
            for name, contents in obs.written.items():
                extra.setdefault(name, set()).update(contents)
        if obs.error is None:
            if not any(_within(d.after, e, extra) for e in d.expected):
                problems.append(f"{d.url}: beyond the documented limits after commit")
            problems += _check_success(d)
            continue
        allowed = {k: {v} for k, v in d.before.items()}
        for name, contents in extra.items():
            allowed.setdefault(name, set()).update(contents)
        if allow_partial:
            for files in d.expected:
                for name, data in files.items():
                    allowed.setdefault(name, set()).add(data)
        stray = sorted(k for k, v in d.after.items() if v not in allowed.get(k, set()))
        lost = sorted(k for k in d.before if k not in d.after) if not allow_replaced else []
        if stray or lost:
            problems.append(f"{d.url}: beyond the documented limits: "
                            + "; ".join(p for p in (stray and f"unexpected {', '.join(stray[:4])}",
                                                    lost and f"lost {', '.join(lost[:4])}") if p))
        problems += _check_success(d)
    return problems


def _within(after: Files, expected: Files, extra: Mapping[str, set[bytes]]) -> bool:
    """All of ``expected`` is there; anything else is one of the ``extra`` files."""
    return all(after.get(k) == v for k, v in expected.items()) and all(
        v in extra.get(k, set()) for k, v in after.items() if k not in expected)


def judge(obs: Observation, expectation: Expectation, has: Mapping[str, bool]) -> Verdict:
    """Classify one cell: correct, loud, limit or WRONG.

    Leaks, changes outside the destination, a failure that does not name its cause and a
    failure where the committer promised success are WRONG whatever the limits; a state
    that only a declared limit explains is ``limit``.
    """
    state, clean = _strict(obs, has.get(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT, False))
    outcome = "correct" if obs.error is None else "loud"
    problems: list[str] = []
    if outcome not in expectation.outcomes:
        got = "the job committed" if obs.error is None else f"it failed: {error_text(obs.error)[:500]}"
        problems.append(f"expected {' or '.join(sorted(expectation.outcomes))} "
                        f"({expectation.why}); {got}")
    elif obs.error is not None:
        text = error_text(obs.error)
        if expectation.causes and not any(c in text for c in expectation.causes):
            problems.append(f"the error does not name the cause ({' / '.join(expectation.causes)}): "
                            f"{text[:500]}")
        misleading = [w for w in expectation.misleading if w in text]
        if misleading:
            problems.append(f"misleading error (says '{misleading[0]}'): {text[:500]}")
    if not problems and not clean:
        if not state:
            return Verdict(outcome, "; ".join(obs.notes))
        if expectation.limits and not _relaxed(obs, expectation.limits):
            alone = tuple(limit.id for limit in expectation.limits if not _relaxed(obs, [limit]))
            return Verdict("limit", "; ".join(state),
                           alone or tuple(limit.id for limit in expectation.limits))
    return Verdict("WRONG", " | ".join([*problems, *state, *clean]))
