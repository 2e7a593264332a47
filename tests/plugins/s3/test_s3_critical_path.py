"""The round trips a magic job makes one after another, counted by the fault proxy (issue 30).

Every request goes through ``outcommit_devtools.faultproxy`` in ``floor`` mode (no answer
before ``FLOOR_MS`` after its request arrived) with tracing on; the count is the longest
chain of requests each sent after the one before it was answered
(:func:`~outcommit_devtools.faultproxy.critical_path`): a count of round trips, not a
timing. The floor is far above the client's CPU per request, so requests sent together
overlap at the proxy however loaded the machine is.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from s3_helpers import outcome

import outcommit
from outcommit import JobContext
from outcommit_devtools.faultproxy import (
    PHASE_PATH,
    TRACE_PATH,
    CriticalPath,
    FaultProxy,
    Trace,
    critical_path,
)

pytestmark = pytest.mark.s3

FLOOR_MS = 400


@pytest.fixture
def traced(s3_server: Any) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint_url, delay_ms=FLOOR_MS, delay_mode="floor", trace=True) as proxy:
        yield proxy


def mark(proxy: FaultProxy, phase: str) -> None:
    request = urllib.request.Request(proxy.url + PHASE_PATH + urllib.parse.quote(phase), method="PUT")
    with urllib.request.urlopen(request) as answer:
        answer.read()


def recorded(proxy: FaultProxy) -> CriticalPath:
    with urllib.request.urlopen(proxy.url + TRACE_PATH + "?reset=1") as answer:
        return critical_path(Trace.requests_of(json.loads(answer.read())))


def test_a_magic_task_of_many_small_files_sends_them_in_one_round(
        traced: FaultProxy, s3_config: dict[str, Any], s3_root: str) -> None:
    """48 small files of one task: their creates go out together while the task writes, and
    their parts together at task commit, as the connections allow (64). Before, the
    per-attempt pool had 16 threads and a file's last part waited in one of them for its
    upload's start: 13 round trips for this task (10 of creates and parts), where the bytes
    in flight, 48 KB, were never the bound. Task commit: the pendingset, the claim, the check."""
    # A chain can only come out too long, never too short (a request a loaded machine's
    # scheduler starts after its neighbour's answer): the least of up to three jobs.
    runs = []
    for _ in range(3):
        runs.append(_one_job(traced, s3_config, s3_root))
        if runs[-1][0].by_phase["task"] == 5:
            break
    path, files, url = min(runs, key=lambda run: run[0].by_phase["task"])
    assert path.peak_in_flight >= 48, path.by_phase
    # create, part; pendingset, claim, check.
    assert path.by_phase["task"] == 5, [r.describe() for r in path.chain]
    assert outcome(url, s3_config) == (files, [])  # read straight from the server


def _one_job(traced: FaultProxy, s3_config: dict[str, Any],
             s3_root: str) -> tuple[CriticalPath, dict[str, bytes], str]:
    config = {**s3_config, "outcommit.s3.endpoint": traced.url, "outcommit.committer.threads": "64"}
    url = f"{s3_root}/many-{uuid.uuid4().hex[:8]}"
    committer = outcommit.create_committer(url, config, "magic")
    job = JobContext(url, config=committer.config)
    recorded(traced)  # an earlier run's requests are not this one's
    mark(traced, "setup")
    committer.setup_job(job)
    mark(traced, "task")
    task = job.task_attempt(0)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    files = {f"day={d:02d}/part-0.bin": bytes([d]) * 1000 for d in range(48)}
    for rel, data in files.items():
        with fs.open(f"{base}/{rel}", "wb") as f:
            f.write(data)
    message = committer.commit_task(task)
    mark(traced, "job commit")
    committer.commit_job(job, [message])
    return recorded(traced), files, url
