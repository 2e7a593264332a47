"""Exact requests and sequential round trips of the blocklist committer's job commit, abort
and cleanup on Azurite (``tests/jobtrace.py``; the S3 committers': test_s3_job_commit_pins).

Pinned so that a change of how the delayed family's job commit is organised provably
changes neither; a change that means to updates them here, with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobtrace import RUNS, JobTrace, Pin, azure_operation, job_trace, settled
from outcommit import JobContext, create_committer
from outcommit.testing.conformance import leftovers, visible_files
from outcommit_azure.emulator import Azurite

pytestmark = pytest.mark.azure

FILES = 3
TASKS = 2


def start(url: str, config: dict[str, Any]) -> tuple[Any, JobContext]:
    committer = create_committer(url, config, "blocklist")
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    for index in range(TASKS):
        task = job.task_attempt(index)
        committer.setup_task(task)
        fs, base = committer.filesystem(task), committer.work_path(task)
        for n in range(FILES):
            with fs.open(f"{base}/d={n}/part-{index}-{n}.bin", "wb") as f:
                f.write(bytes([65 + n]) * (100 + index))
        committer.commit_task(task)
    return committer, job


def outcome(committer: Any) -> tuple[int, list[str]]:
    return len(visible_files(committer.store, committer.dest)), leftovers(committer.store, committer.dest)


#: Job commit by discovery; requests by method, ``restype`` and ``comp`` (Put Block List:
#: the completions; a directory is a name prefix, deleted blob by blob).
PINS = {
    "commit": Pin({"DELETE": 7, "GET": 4, "GET container list": 6, "HEAD": 1, "PUT": 2,
                   "PUT blocklist": 6}, 12),
    "abort": Pin({"DELETE": 7, "GET": 2, "GET container list": 4, "HEAD": 2, "PUT": 1}, 12),
    "cleanup": Pin({"DELETE": 6, "GET": 2, "GET container list": 3, "HEAD": 1}, 9),
}


def pinned_jobs(trace: JobTrace, url: str, config: dict[str, Any]) -> None:
    """Commit one job, abort a second, clean up a third: each call in its phase."""
    committer, job = start(f"{url}/committed", config)
    with trace.pinned("commit"):
        committer.commit_job(job)
    assert outcome(committer) == (FILES * TASKS, [])
    committer, job = start(f"{url}/aborted", config)
    with trace.pinned("abort"):
        committer.abort_job(job)
    assert outcome(committer) == (0, [])
    committer, job = start(f"{url}/cleaned", config)
    with trace.pinned("cleanup"):
        committer.cleanup_job(job)
    assert outcome(committer) == (0, [])


def test_job_commit_abort_and_cleanup_requests_are_pinned(azurite, azure_config, azure_root):
    server, account = azurite.endpoint.rsplit("/", 1)
    runs = iter(range(RUNS))

    def measure() -> dict[str, Pin]:
        with job_trace(server, azure_operation) as trace:
            config = {**azure_config, **Azurite(endpoint=f"{trace.proxy.url}/{account}").config()}
            pinned_jobs(trace, f"{azure_root}/run{next(runs)}", config)
            return trace.pins()
    assert settled(measure, PINS) == PINS
