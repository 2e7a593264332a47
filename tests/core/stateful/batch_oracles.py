"""What the batch machine reads back from the store to judge a step (its oracles).

A mixin of :class:`batch_machine.BatchProtocol`: the visible files and every
``_SUCCESS`` under the example's root, a job's temporary state, ``outcommit jobs list``,
``outcommit.read.committed_files``, and what must be left at the end of an example.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from batch_actors import Job
from batch_model import DESTINATIONS, HIDDEN_CANARY, PENDING_CANARY, Traits, World, inside

from outcommit.committer import TEMPORARY_DIR
from outcommit.errors import CorruptFileError
from outcommit.factory import create_committer
from outcommit.paths import hidden_from_readers
from outcommit.read import committed_files
from outcommit.store import Store
from outcommit.success import SUCCESS_FILE
from outcommit.testing.conformance import leftovers


class ModelViolation(AssertionError):
    """The store or a call disagreed with the reference model."""


class StoreOracles:
    """Reading the store back; the machine provides the state these methods compare."""

    committer_name: str
    base: Store
    root: str
    config: dict[str, str]
    traits: Traits
    world: World
    jobs: list[Job]
    success: dict[str, set[str | None] | None]
    success_names: dict[str, set[str]]
    committed_jobs: set[str]
    pending_canary: str | None
    local_dir: str | None
    hidden_canary: bytes | None
    _read_cache: dict[tuple[str, str, int], bytes]
    detail: list[str]

    def path(self, relative: str) -> str:
        return self.base.join(self.root, relative)

    def url(self, relative: str) -> str:
        return self.base.url(self.path(relative))

    def note(self, what: str) -> None:
        """A line of the example's story (what ``Tried.detailed`` counts)."""
        self.detail.append(what)

    def violation(self, what: str) -> ModelViolation:
        return ModelViolation(f"{self.committer_name} on {self.base.scheme}: {what}")

    def _read(self, info: Any) -> bytes:
        if info.etag is None:
            return self.base.read_bytes(info.path)
        key = (info.path, info.etag, info.size)
        if key not in self._read_cache:
            self._read_cache[key] = self.base.read_bytes(info.path)
        return self._read_cache[key]

    def observe(self) -> tuple[dict[str, bytes], dict[str, Any], set[str]]:
        """(visible data files by root-relative path, each destination's parsed _SUCCESS,
        the URLs of every file under the root)."""
        visible: dict[str, bytes] = {}
        successes: dict[str, Any] = {}
        self.hidden_canary: bytes | None = None
        everything: set[str] = set()
        for info in self.base.list_files(self.root):
            relative = info.path[len(self.root.rstrip("/")) + 1:]
            everything.add(self.base.url(info.path))
            if relative.endswith("/" + SUCCESS_FILE) and relative[:-len(SUCCESS_FILE) - 1] in DESTINATIONS:
                try:
                    successes[relative[:-len(SUCCESS_FILE) - 1]] = self.base.load_json(info.path)
                except (FileNotFoundError, CorruptFileError) as exc:
                    successes[relative[:-len(SUCCESS_FILE) - 1]] = {"unreadable": str(exc)}
            if not hidden_from_readers(relative):
                visible[relative] = self._read(info)
            elif relative == HIDDEN_CANARY[0]:
                self.hidden_canary = self._read(info)
        return visible, successes, everything

    def success_problems(self, successes: dict[str, Any], everything: set[str]) -> list[str]:
        problems = []
        for dest in DESTINATIONS:
            report, allowed = successes.get(dest), self.success[dest]
            if report is None:
                if allowed is not None and None not in allowed:
                    problems.append(f"{dest}/_SUCCESS is missing: expected job {sorted(map(str, allowed))}")
                continue
            job_id = report.get("jobId")
            if report.get("success") is not True:
                problems.append(f"{dest}/_SUCCESS is not a successful job's report: {report}")
                continue
            committed = {j.job_id for j in self.jobs if j.dest == dest and j.job_id in self.committed_jobs}
            if job_id not in (allowed if allowed is not None else committed) or job_id not in committed:
                problems.append(f"{dest}/_SUCCESS names job {job_id}, which did not commit there "
                                f"(expected {sorted(map(str, allowed or committed))})")
                continue
            names = set(report.get("filenames", []))
            if len(names) < 100 and names != self.success_names.get(job_id, names):
                problems.append(f"{dest}/_SUCCESS of {job_id} lists {sorted(names)}, expected "
                                f"{sorted(self.success_names[job_id])}")
            gone = sorted(names - everything)
            if gone:
                problems.append(f"{dest}/_SUCCESS of {job_id} names files that are not there "
                                f"(readers fail on it): {gone[:3]}")
        return problems

    def check_each_task_one_attempt(self, job: Job) -> None:
        """Exclusive and complete, per task: its files are all one acceptable attempt's."""
        if not self.traits.invisible:
            return  # v2's tasks published as they committed: the world check covers them
        for task in job.tasks:
            found = {}
            for name in task.names:
                info = self.base.info(self.path(posixpath.join(job.dest, name)))
                found[name] = None if info is None else self.base.read_bytes(info.path)
            if not any(found == {n: o.get(n) for n in task.names} for o in task.output or []):
                raise self.violation(f"task {task.index} of {job.job_id}: its committed files are "
                                     f"not one attempt's output: {found}")

    def check_committed_files(self, job: Job) -> None:
        """``outcommit.read.committed_files``: exactly the files the model says are there."""
        under = self.world.under(job.dest)
        if not self.world.certain(under):
            return
        expected = sorted(self.url(p) for p, data in self.world.expected().items() if inside(p, job.dest))
        got = committed_files(self.url(job.dest), self.config)
        if got != expected:
            raise self.violation(f"committed_files({job.dest}) after {job.job_id}'s commit: {got}, "
                                 f"expected {expected}")

    def state_root(self, job: Job) -> str:
        prefix = {"magic": "__magic_job-", "memmp-magic": "__magic_job-", "blocklist": "__magic_job-",
                  "directory": "__staging_job-", "partitioned": "__staging_job-"}.get(self.committer_name)
        if prefix is None:
            return self.path(posixpath.join(job.dest, TEMPORARY_DIR, job.job_id))
        return self.path(posixpath.join(job.dest, prefix + job.job_id))

    def state_left(self, job: Job) -> bool:
        """Is anything of the job's temporary state on the store?"""
        return bool(self.base.list_files(self.state_root(job))) or self.base.is_dir(self.state_root(job))

    def check_state_gone(self, job: Job) -> None:
        """No leaks: once a job commit or abort returned, the job's state is gone."""
        left = self.base.list_files(self.state_root(job))
        if left or self.base.is_dir(self.state_root(job)):
            raise self.violation(f"{job.job_id} ({job.status}) left its state: "
                                 f"{[f.path for f in left][:4] or self.state_root(job)}")

    def check_jobs_list(self, dest: str) -> None:
        """``outcommit jobs list`` (``leftover_jobs``, ``job_status``) shows every running
        job as live, and a committed one whose state is left as committed."""
        committer = create_committer(self.url(dest), self.config, self.committer_name, store=self.base)
        listed = committer.recovery.state.leftover_jobs()
        for job in self.jobs_where(lambda j: j.dest == dest):
            if job.status == "live" and not job.doomed and not job.commit_began and \
                    job.job_id not in self.committed_jobs:  # v2 restarted after its commit
                if job.job_id not in listed:
                    raise self.violation(f"jobs list of {dest} misses the live job {job.job_id}: {listed}")
                status = committer.recovery.job_status(job.job_id, listed[job.job_id])
                if status != "live":
                    raise self.violation(f"jobs list says {job.job_id} is {status}, not live")
            elif job.status == "committed" and job.job_id in listed and \
                    self.success[dest] == {job.job_id}:
                status = committer.recovery.job_status(job.job_id, listed[job.job_id])
                if status != "committed":
                    raise self.violation(f"jobs list says the committed {job.job_id} is {status}")

    def check_nothing_left(self) -> None:
        left = [item for item in leftovers(self.base, self.root)
                if PENDING_CANARY not in item]
        if left:
            raise self.violation(f"left behind: {left[:5]}")
        mp = self.base.multipart()
        if self.pending_canary is not None and mp is not None:
            pending = [u.upload_id for u in mp.list_pending(self.path(posixpath.dirname(PENDING_CANARY)))]
            if self.pending_canary not in pending:
                raise self.violation("the pending upload beside the destinations was aborted")
        local = self.local_dir
        if local and os.path.isdir(local):
            files = [os.path.join(d, n) for d, _, names in os.walk(local) for n in names]
            if files:
                raise self.violation(f"local staging files left: {files[:3]}")
