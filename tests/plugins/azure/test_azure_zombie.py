"""A losing attempt killed after the job committed leaves nothing on Azure (Azurite).

The CI failure of tests/core/spark/test_cluster_speculation.py[azure-manifest]: the losing
attempt's Python worker closed a data file after the driver's job commit had deleted
``_temporary/<jobId>`` (a blob appears at its close), and was destroyed before its task
commit or abort could run: the blob stayed. The scenario is tests/zombies.py.
"""

from __future__ import annotations

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
