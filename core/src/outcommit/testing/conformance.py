"""The shared conformance suite: lifecycle, failure and abort scenarios for any committer x store.

Subclass it in a test module and provide the fixtures; pytest collects the subclass::

    class TestV1OnFile(CommitterConformance):
        @pytest.fixture
        def committer_name(self):
            return "v1"

        @pytest.fixture
        def destination_root(self, tmp_path):
            return f"file://{tmp_path}"

Fixtures a subclass provides: ``committer_name``, ``destination_root`` (the URL of a
directory of the store: each test works in a new directory below it, which the suite
removes after, pending uploads and all) and optionally ``config`` (dict). ``job_commit_fault`` (class
attribute) is a fault that makes this committer's job commit fail part-way;
``task_publish_operation`` the store operation by which its task commit publishes the
attempt (for the straggler scenario; None skips it).

The oracles are the correctness properties of docs/protocol.md#correctness-properties:
complete, exclusive, abortable, continuity of correctness, no leaks, containment.
"""

from __future__ import annotations

from ..extras import require

require("pytest", "testing", "outcommit.testing.conformance (the committer conformance suite)")

# After the check: a missing pytest names the extra that brings it.
from .isolation import IsolationScenarios  # noqa: E402
from .lifecycle import LifecycleScenarios  # noqa: E402
from .recovery import RecoveryScenarios  # noqa: E402
from .suite import JOB_STATE_PREFIXES as JOB_STATE_PREFIXES  # noqa: E402
from .suite import ConformanceBase as ConformanceBase  # noqa: E402
from .suite import Files as Files  # noqa: E402
from .suite import leftovers as leftovers  # noqa: E402
from .suite import run_tasks as run_tasks  # noqa: E402
from .suite import visible_files as visible_files  # noqa: E402


class CommitterConformance(LifecycleScenarios, RecoveryScenarios, IsolationScenarios):
    """Abstract suite: not collected itself (no ``Test`` prefix), run by subclasses. The
    scenarios live by concern: ``lifecycle``, ``recovery``, ``isolation`` (fixtures and
    oracles: ``suite``)."""
