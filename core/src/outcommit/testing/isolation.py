"""Conformance scenarios of containment: concurrent tasks and jobs, adjacent destinations,
awkward names, and task messages that are not the committer's.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from .. import capabilities as caps
from ..context import JobContext
from ..errors import CommitError, CorruptFileError
from ..store import Store
from ..success import SUCCESS_FILE, load_success
from .suite import ConformanceBase, visible_files


class IsolationScenarios(ConformanceBase):
    """Containment and no leaks between tasks, jobs and destinations."""

    def test_concurrent_task_commits_with_subdirectories(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        tasks = 6
        files = {i: {f"sub/part-{i}.txt": f"{i}".encode(), f"sub/deeper/d-{i}.txt": b"d",
                     f"year=2024/month={i % 2}/p-{i}.txt": b"p"} for i in range(tasks)}
        for i in range(tasks):
            task = job.task_attempt(i)
            committer.setup_task(task)
            self.write(committer, task, files[i])
        messages: list[dict[str, Any]] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(tasks)

        def commit(i: int) -> None:
            try:
                barrier.wait()
                messages.append(committer.commit_task(job.task_attempt(i)))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=commit, args=(i,)) for i in range(tasks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        committer.commit_job(job, messages)
        expected = {k: v for i in range(tasks) for k, v in files[i].items()}
        found = visible_files(store, store.strip(dest))
        assert found == expected
        assert not any("sub/sub" in path or "deeper/deeper" in path for path in found)
        self.assert_no_leaks(store, dest)

    def test_adjacent_destinations(self, make, store: Store, test_root: str) -> None:  # type: ignore[no-untyped-def]
        root = test_root
        one, ten = f"{root}/dataset1", f"{root}/dataset10"
        c1, c10 = make(one), make(ten)
        j1, j10 = JobContext(one, config=c1.config), JobContext(ten, config=c10.config)
        c1.setup_job(j1)
        c10.setup_job(j10)
        m10 = self.run_task(c10, j10, 0, {"ten.txt": b"10"})
        m1 = self.run_task(c1, j1, 0, {"one.txt": b"1"})
        # dataset1's abort must not touch dataset10's pending work...
        c1.abort_job(j1)
        c1.cleanup_job(j1)
        c10.commit_job(j10, [m10])
        assert visible_files(store, store.strip(ten)) == {"ten.txt": b"10"}
        if c1.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            assert visible_files(store, store.strip(one)) == {}
        # ...and a commit of dataset1 must not take dataset10's output.
        c1b = make(one)
        j1b = JobContext(one, config=c1b.config)
        c1b.setup_job(j1b)
        m1b = self.run_task(c1b, j1b, 0, {"one.txt": b"1b"})
        c1b.commit_job(j1b, [m1b])
        assert m1 and visible_files(store, store.strip(one)) == {"one.txt": b"1b"}
        assert visible_files(store, store.strip(ten)) == {"ten.txt": b"10"}
        self.assert_no_leaks(store, one)
        self.assert_no_leaks(store, ten)

    def test_two_concurrent_jobs_with_distinct_ids(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        ca, cb = make(dest, **{"outcommit.committer.conflict-mode": "append"}), \
            make(dest, **{"outcommit.committer.conflict-mode": "append"})
        ja, jb = JobContext(dest, config=ca.config), JobContext(dest, config=cb.config)
        assert ja.job_id != jb.job_id
        ca.setup_job(ja)
        cb.setup_job(jb)
        ma = self.run_task(ca, ja, 0, {"a.txt": b"job a"})
        mb = self.run_task(cb, jb, 0, {"b.txt": b"job b"})
        ca.commit_job(ja, [ma])
        if cb.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT):
            assert visible_files(store, store.strip(dest)) == {"a.txt": b"job a"}
        cb.commit_job(jb, [mb])
        assert visible_files(store, store.strip(dest)) == {"a.txt": b"job a", "b.txt": b"job b"}
        report = load_success(store, store.join(store.strip(dest), SUCCESS_FILE))
        assert report.jobId == jb.job_id
        self.assert_no_leaks(store, dest)

    @pytest.mark.parametrize("name", ["with space/file name.txt", "ünïcødé/données €.txt",
                                      "日本語/ファイル.txt"])
    def test_paths_with_spaces_and_unicode(self, make, store: Store, test_root: str,  # type: ignore[no-untyped-def]
                                           name: str) -> None:
        dest = test_root + "/out put/ünï"
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        message = self.run_task(committer, job, 0, {name: b"content"})
        committer.commit_job(job, [message])
        assert visible_files(store, store.strip(dest)) == {name: b"content"}
        self.assert_no_leaks(store, dest)

    def test_corrupt_task_message_is_refused(self, make, store: Store, dest: str) -> None:  # type: ignore[no-untyped-def]
        committer = make(dest)
        job = JobContext(dest, config=committer.config)
        committer.setup_job(job)
        message = self.run_task(committer, job, 0, self.files_of(0))
        other_job = {**message, "jobId": str(uuid.uuid4())}
        with pytest.raises((CorruptFileError, CommitError)):
            committer.commit_job(job, [other_job])
        assert visible_files(store, store.strip(dest)) == {} or \
            not committer.has_capability(caps.OUTPUT_INVISIBLE_UNTIL_JOB_COMMIT)
        committer.abort_job(job)
        self.assert_no_leaks(store, dest)
