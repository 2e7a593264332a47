"""The publish journal of the rename committers: what a job commit is about to make visible.

``v1`` and ``manifest`` publish a job by moving files into the destination one rename at
a time; a driver that dies half-way leaves part of the output visible. The journal, saved
once per job (not per job attempt) after conflict handling and before the first file
moves, is what lets anyone who comes later act on evidence rather than guess:

* a repeated job commit, or the next job attempt after recovery, knows the publish has
  begun: conflict handling must not run again (``fail`` would refuse the job's own
  files, ``replace`` would delete them), and ``_SUCCESS`` lists every file, also those an
  earlier attempt already moved;
* an abort removes exactly what this job published: a destination file listed here whose
  source has been moved away and whose size (and etag, where renames keep it) is the
  journal's. The size check keeps the abort from deleting a file someone else wrote at a
  journaled destination after the job's rename (the source is gone, so only the content
  can tell). It holds only if the journal's sizes and etags are what the store reported
  for the sources (a listing), never a claim read from the store such as a manifest's: a
  wrong size would make the abort keep the job's own file.

It is data on the store, so loading it checks that it belongs to this job and that every
path stays inside the destination and the job's temporary directory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import capabilities as caps
from ..errors import CorruptFileError
from ..paths import is_inside
from ..store import FileInfo, Store
from ..success import SUCCESS_FILE

JOURNAL_FILE = "_publish-journal.json"
JOURNAL_TYPE = "outcommit.PublishJournal/1"


@dataclass(frozen=True)
class Entry:
    """One file the job commit publishes (store paths); size and etag as the store listed
    the source before the first rename."""

    source: str
    dest: str
    size: int
    etag: str | None = None


@dataclass(frozen=True)
class Journal:
    job_id: str
    entries: tuple[Entry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"type": JOURNAL_TYPE, "jobId": self.job_id, "saved": int(time.time() * 1000),
                "files": [{"s": e.source, "d": e.dest, "z": e.size, **({"e": e.etag} if e.etag else {})}
                          for e in self.entries]}


def journal_path(store: Store, job_dir: str) -> str:
    return store.join(job_dir, JOURNAL_FILE)


def exists(store: Store, job_dir: str) -> bool:
    """Has the job's publish begun? (One request; the journal is not read.)"""
    return store.exists(journal_path(store, job_dir))


def save(store: Store, job_dir: str, job_id: str, entries: Iterable[Entry]) -> Journal:
    journal = Journal(job_id, tuple(entries))
    store.save_json(journal_path(store, job_dir), journal.to_dict())
    return journal


def load(store: Store, job_dir: str, job_id: str, dest: str) -> Journal | None:
    """The job's journal, or None when its publish has not begun.

    ``dest`` is the job's destination (store path): every entry must publish inside it.
    """
    path = journal_path(store, job_dir)
    where = store.url(path)
    try:
        data = store.load_json(path)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or data.get("type") != JOURNAL_TYPE:
        raise CorruptFileError(where, "type", f"expected {JOURNAL_TYPE!r}")
    if data.get("jobId") != job_id:
        raise CorruptFileError(where, "jobId", f"belongs to job {data.get('jobId')!r}, not {job_id}")
    files = data.get("files")
    if not isinstance(files, list):
        raise CorruptFileError(where, "files", "must be a list")
    success = store.join(dest, SUCCESS_FILE)
    entries = []
    for index, item in enumerate(files):
        field = f"files[{index}]"
        if not isinstance(item, dict):
            raise CorruptFileError(where, field, "is not an object")
        source, target, size, etag = item.get("s"), item.get("d"), item.get("z"), item.get("e")
        if not isinstance(source, str) or not is_inside(source, job_dir):
            raise CorruptFileError(where, field + ".s", "is not inside the job's temporary directory")
        if not isinstance(target, str) or not is_inside(target, dest) or target == success \
                or is_inside(target, job_dir):
            raise CorruptFileError(where, field + ".d", "is not a data file of the job's destination")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise CorruptFileError(where, field + ".z", "must be a size in bytes")
        if etag is not None and not isinstance(etag, str):
            raise CorruptFileError(where, field + ".e", "must be a string")
        entries.append(Entry(source, target, size, etag))
    return Journal(job_id, tuple(entries))


def published_by_us(store: Store, entry: Entry, sources: Sequence[str]) -> bool:
    """Does the destination hold this entry's file, moved there by this job?

    ``sources`` are every place the file may still wait (a recovered v1 task moves to the
    next job attempt's directory): while it waits anywhere, what the destination holds is
    not ours.
    """
    return holds(store, entry) and not any(store.exists(source) for source in sources)


def holds(store: Store, entry: Entry) -> bool:
    """Is this entry's file at its destination: same size, and same etag where renames
    keep etags (a file written there since by anyone else differs)?"""
    found = store.info(entry.dest)
    if found is None or found.is_dir or found.size != entry.size:
        return False
    return not (entry.etag and found.etag and found.etag != entry.etag
                and store.has_capability(caps.ETAGS_PRESERVED_IN_RENAME))


def rollback(store: Store, journal: Journal,
             sources_of: Callable[[Entry], Sequence[str]] = lambda e: (e.source,),
             parallel: Callable[[Callable[[Entry], bool], Sequence[Entry]], list[bool]] | None = None,
             ) -> int:
    """Delete the files this job's interrupted publish made visible; returns how many."""
    def undo(entry: Entry) -> bool:
        if not published_by_us(store, entry, sources_of(entry)):
            return False
        store.delete(entry.dest)
        return True

    entries = list(journal.entries)
    results = parallel(undo, entries) if parallel else [undo(e) for e in entries]
    return sum(results)


def entries_from(files: Iterable[tuple[FileInfo, str]]) -> list[Entry]:
    """Entries of (source listing, destination path) pairs."""
    return [Entry(info.path, dest, info.size, info.etag) for info, dest in files]
