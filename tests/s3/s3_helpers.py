"""Helpers shared by the S3 test modules: start a job, run a task, read the outcome."""

from __future__ import annotations

from typing import Any

import outcommit
from outcommit import JobContext
from outcommit.testing.conformance import leftovers, visible_files


def start(url: str, config: dict[str, Any], name: str = "magic", store: Any = None,
          **extra: str) -> tuple[Any, JobContext]:
    """A committer for ``url`` and a job set up with it."""
    committer = outcommit.create_committer(url, {**config, **extra}, name, store=store)
    job = JobContext(url, config=committer.config)
    committer.setup_job(job)
    return committer, job


def run_task(committer: Any, job: JobContext, index: int, files: dict[str, bytes],
             attempt: int = 0) -> dict[str, Any]:
    """Set up, write ``files`` through the committer's filesystem and commit one task attempt."""
    task = job.task_attempt(index, attempt)
    committer.setup_task(task)
    fs, base = committer.filesystem(task), committer.work_path(task)
    for rel, data in files.items():
        fs.pipe_file(f"{base}/{rel}", data)
    return committer.commit_task(task)


def outcome(url: str, config: dict[str, Any]) -> tuple[dict[str, bytes], list[str]]:
    """(visible files with their content, leftover temporary state) under ``url``."""
    store = outcommit.open_store(url, config)
    return visible_files(store, store.strip(url)), leftovers(store, store.strip(url))
