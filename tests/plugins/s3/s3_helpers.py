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


class HttpFaults:
    """Faults at the HTTP layer of a real boto3 client (botocore ``before-send`` hooks).

    ``answer(operation, status, code, times)`` makes the next ``times`` requests of an
    operation get an S3 error response without reaching the server; ``act_then_drop``
    lets the request reach the server (it acts) and then loses the response, as a reset
    connection would. botocore's own retry logic sees them as it would see the real thing.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sent: dict[str, int] = {}

    def _hook(self, operation: str, handler: Any) -> None:
        def counted(request: Any, **kwargs: Any) -> Any:
            self.sent[operation] = self.sent.get(operation, 0) + 1
            return handler(request)
        self.client.meta.events.register_first(f"before-send.s3.{operation}", counted,
                                               unique_id=f"outcommit-test-{operation}")

    def answer(self, operation: str, status: int, code: str, times: int = -1) -> None:
        from botocore.awsrequest import AWSResponse

        left = [times]

        def handler(request: Any) -> Any:
            if left[0] == 0:
                return None
            left[0] -= 1
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f"<Message>injected {code}</Message></Error>").encode()
            return AWSResponse(request.url, status, {"Content-Type": "application/xml"},
                               _Body(body))
        self._hook(operation, handler)

    def act_then_drop(self, operation: str, times: int = 1) -> None:
        from botocore.exceptions import ConnectionClosedError
        from botocore.httpsession import URLLib3Session

        left = [times]
        session = URLLib3Session()

        def handler(request: Any) -> Any:
            if left[0] == 0:
                return None
            left[0] -= 1
            session.send(request)  # the server acts...
            raise ConnectionClosedError(endpoint_url=request.url)  # ...and the answer is lost
        self._hook(operation, handler)

    def clear(self, operation: str) -> None:
        self.client.meta.events.unregister(f"before-send.s3.{operation}",
                                           unique_id=f"outcommit-test-{operation}")


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data
