"""A losing attempt killed after the job committed leaves nothing on Azure (Azurite).

The CI failure of tests/core/spark/test_cluster_speculation.py[azure-manifest]: the losing
attempt's Python worker closed a data file after the driver's job commit had deleted
``_temporary/<jobId>`` (a blob appears at its close), and was destroyed before its task
commit or abort could run: the blob stayed. The scenario is tests/zombies.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from zombies import zombie_outlives_its_job

pytestmark = pytest.mark.azure


@pytest.mark.parametrize("committer", ["manifest", "v2"])
def test_zombie_closing_its_file_after_job_cleanup_leaves_nothing(
        azure_root: str, azure_config: dict[str, Any], committer: str) -> None:
    outcome = zombie_outlives_its_job(committer, azure_root, azure_config, "close")
    assert outcome.left == [], f"the killed zombie left temporary state: {outcome.left}"
    assert outcome.zombie.startswith("refused: TaskCommitError"), outcome.zombie
    assert outcome.visible == {"date=1/part-00000-000-won-a1.txt": b"written by the winning attempt\n"}
