"""The model's side of a job commit: whether it must succeed, and what it changes.

A mixin of :class:`batch_machine.BatchProtocol`. Conflict modes act on what readers see,
in the scope the committer gives them (the destination, or the partitions written); a
commit interrupted midway leaves any of its files and may have deleted any old data its
``replace`` meant to; a later try may run that ``replace`` again, on what was written
since too; another job's ``replace`` over the files an interrupted commit had published
leaves it unable to finish (loudly).
"""

from __future__ import annotations

import posixpath
from typing import Any

from batch_actors import Job, ProcessDied, messages_of
from batch_model import DESTINATIONS, inside, partition_of
from batch_oracles import StoreOracles

from outcommit.errors import CommitError, CorruptFileError
from outcommit.success import SUCCESS_FILE


class JobCommits(StoreOracles):
    """What a job commit must do, and what it did, in the model."""

    def own_paths(self, job: Job) -> set[str]:
        return {posixpath.join(job.dest, name) for name in job.names}

    def partitions(self, job: Job, names: list[str] | None = None) -> set[str]:
        return {partition_of(name) for name in (job.names if names is None else names)}

    def scope(self, job: Job) -> list[str]:
        return self.world.in_scope(job.dest, self.traits.scope, self.partitions(job))

    def others_data(self, job: Job, paths: list[str]) -> bool | None:
        """Data other than the job's own output (``v2``'s own published files count: its
        tasks published them, and a later attempt under ``fail`` meets them, a limit)."""
        own = self.own_paths(job) if self.traits.invisible else set()
        return self.world.holds_data(p for p in paths if p not in own)

    def replace_deletes(self, job: Job, paths: list[str], certain: bool = True) -> None:
        """``job``'s replace deletes (or may delete) ``paths``. Another job whose interrupted
        commit had published some of them cannot finish it any more: its sources moved and
        its published files are gone (it fails loudly; an abort removes the rest)."""
        for path in paths:
            (self.world.delete if certain else self.world.maybe_delete)(path)
        hit = set(paths)
        for other in self.jobs:
            if other is not job and other.commit_began and hit & self.own_paths(other):
                other.damaged = True

    def nested_in(self, dest: str) -> list[str]:
        return [d for d in DESTINATIONS if inside(d, dest)]

    def replaced(self, job: Job, paths: list[str], certain: bool = True) -> None:
        """``replace`` deleted (or, not ``certain``, may have deleted) these paths and the
        destination's _SUCCESS; a nested destination's _SUCCESS may have gone with its data."""
        self.replace_deletes(job, paths, certain)
        allowed = self.success[job.dest]
        self.success[job.dest] = {None} if certain else (None if allowed is None else allowed | {None})
        for nested in self.nested_in(job.dest):
            self.success[nested] = None

    def expect_commit_refusal(self, job: Job) -> bool | None:
        if not self.traits.invisible:  # v2 checks its tasks' published files are still there
            gone = [self.world.allowed(posixpath.join(job.dest, name))
                    for task in job.tasks for output in task.output or [] for name in output]
            return True if {None} in gone else (None if any(None in g for g in gone) else False)
        if job.mode != "fail" or not self.traits.fail_at_commit:
            return False
        others = self.others_data(job, self.scope(job))
        if job.commit_began:  # a resumed commit may skip the check it passed before
            return False if others is False else None
        return others

    def expect_resume_failure(self, job: Job) -> bool | None:
        """A resumed commit whose published files another job's ``replace`` deleted may
        fail (loudly): nothing can publish them again."""
        return None if job.commit_began and job.damaged else False

    def run_job_commit(self, job: Job, die_after: int | None = None,
                       fail_after: int | None = None) -> None:
        assert job.driver is not None and job.driver_store is not None
        how = f" (dies after {die_after})" if die_after is not None else (
            f" (request {fail_after + 1} fails)" if fail_after is not None else "")
        self.detail.append(f"commit_job {job.job_id}.{job.ctx.attempt}{how}")
        messages = messages_of(job) if job.flow == "messages" else None
        store = job.driver_store
        if job.status == "committed":
            self.repeated_commit(job, messages)
            return
        refusal = self.expect_commit_refusal(job)
        if refusal is False:
            refusal = self.expect_resume_failure(job)
        resumed = job.commit_began
        if not resumed and job.mode == "replace" and self.traits.replace_at == "commit":
            job.replace_targets = set(self.world.present(p for p in self.scope(job)
                                                         if p not in self.own_paths(job)))
        if die_after is not None:
            store.die_after(die_after)
        if fail_after is not None:
            store.fail_once_after(fail_after)
        try:
            summary = job.driver.commit_job(job.ctx, messages)
        except ProcessDied:
            self.note(f"driver of {job.job_id} killed in its job commit")
            job.driver, job.driver_store = None, None
            self.commit_interrupted(job)
            return
        except CommitError as exc:
            self.note(f"commit of {job.job_id} failed: {exc}")
            if fail_after is None and refusal is False:
                raise self.violation(f"job commit of {job.job_id} failed: {type(exc).__name__}: "
                                     f"{exc}") from exc
            if fail_after is None:
                job.doomed = "its job commit was refused (conflict mode fail)"
            self.commit_interrupted(job)
            return
        finally:
            store.fail_at = None
            # A dead driver stays dead, every thread of it: one still running beside the
            # commit (the commit record's creation) wrote after its process had died.
            if not store.dead:
                store.left = None
        if refusal is True:
            why = ("files its tasks published are gone" if not self.traits.invisible else
                   f"{job.dest} holds other jobs' data and the conflict mode is fail")
            raise self.violation(f"job commit of {job.job_id} succeeded although {why}")
        if summary.success is not True or summary.jobId != job.job_id:
            raise self.violation(f"commit_job of {job.job_id} returned {summary.to_dict()}")
        self.job_committed(job, resumed, clean=fail_after is None)

    def repeated_commit(self, job: Job, messages: list[dict[str, Any]] | None) -> None:
        """``commit_job`` of a job whose commit finished: its report, nothing changes. Where
        another job's _SUCCESS has replaced its own, nothing says it finished (a documented
        limit, docs/protocol.md): it is refused, or it commits again, its _SUCCESS back.
        Committing again resumes from the record of the finished commit (journal, commit
        record), naming its files; a later attempt begun after the cleanup had deleted that
        record commits as a new one: its report names what it recovered and ran again (none:
        the model reruns no task of a committed job), and its ``replace`` may take the job's
        own earlier files, to the committer other data now."""
        assert job.driver is not None
        hidden = self.success[job.dest] != {job.job_id}
        try:
            summary = job.driver.commit_job(job.ctx, messages)
        except CommitError as exc:
            if not hidden:
                raise self.violation(f"a repeated commit of the committed job {job.job_id} "
                                     f"failed: {exc}") from exc
            self.note(f"repeated commit of {job.job_id} refused (another job's _SUCCESS): {exc}")
            return
        if summary.jobId != job.job_id:
            raise self.violation(f"a repeated commit of {job.job_id} returned {summary.jobId}'s report")
        if hidden:  # it may have run again: its report is back, a replace may have run again
            self.success[job.dest] = {job.job_id} | (self.success[job.dest] or set())
            if job.record_gone:
                self.success_names[job.job_id] = set()
            if job.mode == "replace" and self.traits.replace_at == "commit":
                own = set() if job.record_gone else self.own_paths(job)
                self.replace_deletes(job, [p for p in self.scope(job) if p not in own], certain=False)
        job.leftover = False
        self.check_state_gone(job)

    def commit_interrupted(self, job: Job) -> None:
        """A job commit died or failed: any of its files may be visible, any old data a
        ``replace`` meant to delete may be gone (a resumed commit's ``replace`` may run again,
        on what was written since too). Its _SUCCESS, if written, says it committed."""
        resumed, job.commit_began, job.began_attempt = job.commit_began, True, job.ctx.attempt
        for task in job.tasks if self.traits.invisible else ():  # v2's tasks published already
            for output in task.output or []:
                for name, data in output.items():
                    self.world.maybe_put(posixpath.join(job.dest, name), data)
        if job.mode == "replace" and self.traits.replace_at == "commit":
            own = self.own_paths(job)
            later = {p for p in self.scope(job) if p not in own} if resumed else set()
            self.replaced(job, sorted(job.replace_targets | later), certain=False)
        try:
            report = self.base.load_json(self.path(posixpath.join(job.dest, SUCCESS_FILE)))
        except (FileNotFoundError, CorruptFileError):
            report = None
        if isinstance(report, dict) and report.get("jobId") == job.job_id and report.get("success"):
            self.note(f"{job.job_id} had passed its commit point (_SUCCESS)")
            self.job_committed(job, resumed=True, clean=False)

    def job_committed(self, job: Job, resumed: bool, clean: bool) -> None:
        """The job's commit finished: its output visible, ``replace`` done, its _SUCCESS."""
        if job.mode == "replace" and self.traits.replace_at == "commit":
            own = self.own_paths(job)
            others = [p for p in self.scope(job) if p not in own]
            first = [p for p in others if p in job.replace_targets or not resumed]
            self.replace_deletes(job, first)
            # written since the first try: a resumed commit may not delete it again
            self.replace_deletes(job, [p for p in others if p not in first], certain=False)
            self.replaced(job, [], certain=True)
        for task in job.tasks if self.traits.invisible else ():  # v2's tasks published already
            outputs = task.output or []
            for name in task.names:
                self.world.paths[posixpath.join(job.dest, name)] = {o.get(name) for o in outputs}
        job.status, job.commit_began = "committed", False
        job.leftover = not clean
        self.success[job.dest] = {job.job_id}
        self.committed_jobs.add(job.job_id)
        self.success_names[job.job_id] = {self.url(posixpath.join(job.dest, n)) for n in job.names}
        self.check_each_task_one_attempt(job)
        self.check_committed_files(job)
        if clean:
            self.check_state_gone(job)
