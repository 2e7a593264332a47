"""A losing attempt killed after the job committed leaves nothing on Azure (Azurite).

The CI failure of tests/core/spark/test_cluster_speculation.py[azure-manifest]: the losing
attempt's Python worker closed a data file after the driver's job commit had deleted
``_temporary/<jobId>`` (a blob appears at its close), and was destroyed before its task
commit or abort could run: the blob stayed. The scenario is tests/zombies.py.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from outcommit import JobContext, create_committer, open_store
from outcommit.testing.suite import leftovers
from zombies import zombie_outlives_its_job

pytestmark = pytest.mark.azure


@pytest.mark.parametrize("committer", ["manifest", "v2"])
def test_zombie_closing_its_file_after_job_cleanup_leaves_nothing(
        azure_root: str, azure_config: dict[str, Any], committer: str) -> None:
    outcome = zombie_outlives_its_job(committer, azure_root, azure_config, "close")
    assert outcome.left == [], f"the killed zombie left temporary state: {outcome.left}"
    assert outcome.zombie.startswith("refused: TaskCommitError"), outcome.zombie
    assert outcome.visible == {"date=1/part-00000-000-won-a1.txt": b"written by the winning attempt\n"}


def test_what_a_zombie_killed_in_its_check_left_goes_at_the_next_jobs_setup(
        azure_root: str, azure_config: dict[str, Any]) -> None:
    """Killed between its blob's close and the check after it, the zombie leaves that
    blob (the limit); the next job's setup on the destination deletes it."""
    outcome = zombie_outlives_its_job("manifest", azure_root, azure_config, "check")
    assert outcome.zombie == "killed"
    assert [p for p in outcome.left if p.endswith("-zombie-a0.txt")], outcome.left
    following = JobContext(azure_root, config=azure_config)
    committer = create_committer(azure_root, azure_config, "manifest")
    committer.setup_job(following)
    store = open_store(azure_root, azure_config)
    left = leftovers(store, store.strip(azure_root))
    assert not [p for p in left if outcome.job_id in p], f"the ended job's state stayed: {left}"
    committer.abort_job(following)
    committer.cleanup_job(following)
    assert leftovers(store, store.strip(azure_root)) == []


@pytest.mark.parametrize("discarded", [False, True], ids=["dropped", "discarded"])
def test_a_file_dropped_unclosed_after_job_cleanup_leaves_nothing(
        azure_root: str, azure_config: dict[str, Any], discarded: bool) -> None:
    """A blob is uploaded when its file is garbage-collected unclosed (adlfs closes it in
    its finalizer): a failing attempt's writer that dropped its file (or the engine's
    discard of it, a no-op on Azure) after the job's cleanup left that blob, unchecked."""
    committer = create_committer(azure_root, azure_config, "manifest")
    job = JobContext(azure_root, config=azure_config)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    stream = committer.filesystem(task).open(committer.work_path(task) + "/part-0.txt", "wb")
    stream.write(b"written by a failing attempt\n")
    committer.abort_job(job)
    committer.cleanup_job(job)
    if discarded:
        stream.discard()  # what outcommit.engine.formats.OpenFile.discard does
    del stream
    gc.collect()
    store = open_store(azure_root, azure_config)
    assert leftovers(store, store.strip(azure_root)) == []


class Interrupted(Exception):
    """What an engine raises into an attempt it stops (Spark's interrupt of its worker)."""


def test_an_attempt_interrupted_after_job_cleanup_leaves_nothing(
        azure_root: str, azure_config: dict[str, Any]) -> None:
    """The engine's own path (``write_attempt``): the attempt wrote a first batch, the job
    was aborted and cleaned up, then the attempt was interrupted. Its writer's discard does
    nothing on Azure and its file is never closed: the writer drops it before the task's
    abort, whose deletion then takes the blob its garbage collection uploaded (the order
    this guards; a writer that keeps its file longer is the test above)."""
    import pyarrow as pa

    from outcommit.engine.tasks import WriteSettings, write_attempt

    committer = create_committer(azure_root, azure_config, "manifest")
    job = JobContext(azure_root, config=azure_config)
    committer.setup_job(job)

    def batches() -> Any:
        yield pa.table({"a": list(range(100))}).to_batches()[0]
        committer.abort_job(job)
        committer.cleanup_job(job)
        raise Interrupted("stopped by the engine")

    with pytest.raises(Interrupted):
        write_attempt(committer, job.task_attempt(0, 1), batches(), WriteSettings(fmt="json"))
    gc.collect()
    store = open_store(azure_root, azure_config)
    assert leftovers(store, store.strip(azure_root)) == []
