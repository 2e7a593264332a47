"""Exact requests and sequential round trips of the S3 committers' job commit, abort and cleanup.

Pinned so that a change of how job commit is organised (its stages, its thread pools)
provably changes neither; a change that means to (a faster commit) updates them here,
with the reason. Through the traced proxy in front of moto (``tests/jobtrace.py``):
requests by S3 operation, round trips as the longest chain of requests each sent after
the one before was answered.

A job of two tasks of three files each, committed with the tasks' messages as engines
do (or by discovery), on four threads: the completions go in two rounds.
"""

from __future__ import annotations

from typing import Any

import pytest
from s3_helpers import outcome, run_task, start

from jobtrace import RUNS, JobTrace, Pin, job_trace, s3_operation, settled

pytestmark = pytest.mark.s3

FILES = 3
TASKS = 2


def files_of(index: int) -> dict[str, bytes]:
    return {f"d={n}/part-{index}-{n}.parquet": bytes([65 + n]) * (100 + index) for n in range(FILES)}


def tasks(committer: Any, job: Any) -> list[dict[str, Any]]:
    return [run_task(committer, job, i, files_of(i)) for i in range(TASKS)]


def pinned_job(trace: JobTrace, url: str, config: dict[str, Any], name: str, discovery: bool,
               teardown: bool) -> None:
    """Commit one job; abort a second and clean up a third (``teardown``): each call in its phase."""
    committer, job = start(f"{url}/committed", config, name)
    messages = tasks(committer, job)
    with trace.pinned("commit"):
        committer.commit_job(job, None if discovery else messages)
    assert len(outcome(f"{url}/committed", config)[0]) == FILES * TASKS
    if not teardown:
        return
    committer, job = start(f"{url}/aborted", config, name)
    tasks(committer, job)
    with trace.pinned("abort"):
        committer.abort_job(job)
    assert outcome(f"{url}/aborted", config) == ({}, [])
    committer, job = start(f"{url}/cleaned", config, name)
    tasks(committer, job)
    with trace.pinned("cleanup"):
        committer.cleanup_job(job)
    assert outcome(f"{url}/cleaned", config) == ({}, [])


#: Check || (load, then record || the conflict mode's listings), two rounds of completions
#: (with the job's end, its state's listing and the sweep beside them), _SUCCESS, the
#: state's deletion. By discovery: the job directory's listings and the pendingsets' GETs.
COMMIT = {"CompleteMultipartUpload": 6, "DeleteObject": 1, "DeleteObjects": 1, "HeadObject": 1,
          "ListMultipartUploads": 1, "ListObjectsV2": 2, "PutObject": 2}
#: (committer, conflict mode, discovery) -> the job commit's pin. Listings of the
#: destination: one more for fail and replace; partitioned: one per partition (three).
PINS: dict[tuple[str, str, bool], Pin] = {
    ("magic", "append", False): Pin(COMMIT, 5),
    ("magic", "append", True): Pin({**COMMIT, "GetObject": 4, "ListObjectsV2": 5}, 9),
    ("magic", "fail", False): Pin({**COMMIT, "ListObjectsV2": 3}, 5),
    ("magic", "replace", False): Pin({**COMMIT, "ListObjectsV2": 3}, 5),
    ("directory", "replace", False): Pin({**COMMIT, "ListObjectsV2": 3}, 5),
    ("partitioned", "replace", False): Pin({**COMMIT, "ListObjectsV2": 5}, 5),
    ("partitioned", "fail", False): Pin({**COMMIT, "ListObjectsV2": 5}, 5),
}
#: Abort and cleanup of a job whose two tasks committed: the same for the three committers.
ABORT = Pin({"AbortMultipartUpload": 6, "DeleteObject": 1, "DeleteObjects": 1, "GetObject": 2,
             "HeadObject": 2, "ListMultipartUploads": 1, "ListObjectsV2": 4, "PutObject": 1}, 14)
CLEANUP = Pin({"AbortMultipartUpload": 6, "DeleteObject": 1, "DeleteObjects": 1, "GetObject": 2,
               "HeadObject": 1, "ListMultipartUploads": 1, "ListObjectsV2": 3}, 11)

#: Abort and cleanup pinned once per committer (they do not depend on the conflict mode).
TEARDOWN = {("magic", "append", False), ("directory", "replace", False), ("partitioned", "replace", False)}


@pytest.mark.parametrize(("name", "mode", "discovery"), list(PINS))
def test_job_commit_abort_and_cleanup_requests_are_pinned(name, mode, discovery, s3_server, s3_config,
                                                          s3_root):
    teardown = (name, mode, discovery) in TEARDOWN
    expected = {"commit": PINS[(name, mode, discovery)]}
    if teardown:
        expected.update(abort=ABORT, cleanup=CLEANUP)
    runs = iter(range(RUNS))

    def measure() -> dict[str, Pin]:
        with job_trace(s3_server.endpoint_url, s3_operation) as trace:
            config = {**s3_config, "outcommit.s3.endpoint": trace.proxy.url,
                      "outcommit.committer.conflict-mode": mode}
            pinned_job(trace, f"{s3_root}/run{next(runs)}", config, name, discovery, teardown)
            return trace.pins()
    assert settled(measure, expected) == expected
