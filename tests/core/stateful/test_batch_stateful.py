"""The batch protocol's model-based tests (issue 27): one machine per committer and store.

CI runs ``v1``, ``v2`` and ``manifest`` on ``file`` and ``memory``, and the delayed
committers (``magic``, ``directory``, ``partitioned``) on the moto S3 server and core's
``memmp-magic`` on ``memmp://`` (S3's multipart semantics in this process), each with its
store's budget below (examples; steps per example: ``STEPS``): the whole set in about two
and a half minutes on the shared 2-core machine (``memmp-magic``'s 50 examples: under
20 s). ``make generative`` runs every
budget ``LONG_FACTOR`` (20) times over with a new seed, and the emulators' stores too:
Azurite (``blocklist``, ``manifest``, ``v2``) and the GCS emulator (``manifest``, ``v2``).
Failures a long run finds are saved in ``tests/hypothesis-examples/`` and replayed by
every CI run; their shrunk sequences are plain tests in ``test_batch_regressions.py``.
The machine and its model: ``batch_machine.py``, ``batch_model.py``. What each machine
tried (examples, distinct rule sequences) is printed at the end of the run.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from batch_machine import Binding, machine_for, remove_tree
from hypothesis.stateful import run_state_machine_as_test

from generative import budget, long_run

#: Examples per machine in CI (x20 in the long run), by store, and steps per example.
CI_EXAMPLES = {"memory": 100, "file": 40, "memmp": 50, "s3": 5, "azure": 5, "gcs": 5}
STEPS = 40
#: The emulators' stores run in the long run only.
LONG_ONLY = "the emulators' stores run in the long run only (make generative)"


def run(committer: str, binding: Binding, report: Any) -> None:
    machine = machine_for(committer, binding)
    try:
        run_state_machine_as_test(machine, settings=budget(CI_EXAMPLES[binding.name],
                                                           stateful_step_count=STEPS))
    finally:
        report(machine)


def fresh(prefix: str) -> Any:
    def new_root() -> str:
        return f"{prefix}/example-{uuid.uuid4().hex[:10]}"
    return new_root


@pytest.mark.generative
@pytest.mark.parametrize("store", ["file", "memory"])
@pytest.mark.parametrize("committer", ["v1", "v2", "manifest"])
def test_batch_protocol(committer: str, store: str, tmp_path: Path, tried_report: Any) -> None:
    prefix = f"file://{tmp_path}" if store == "file" else f"memory:///stateful-{uuid.uuid4().hex[:8]}"
    binding = Binding(store, fresh(prefix), {"outcommit.retry.backoff-ms": "0"}, remove_tree)
    run(committer, binding, tried_report)


@pytest.mark.generative
def test_batch_protocol_memmp(tried_report: Any) -> None:
    """The delayed family without a server: core's ``memmp-magic`` on ``memmp://`` (S3's
    multipart semantics in this process), checked by the same model as S3's committers."""
    prefix = f"memmp:///stateful-{uuid.uuid4().hex[:8]}"
    binding = Binding("memmp", fresh(prefix), {"outcommit.retry.backoff-ms": "0"}, remove_tree)
    run("memmp-magic", binding, tried_report)


@pytest.mark.generative
@pytest.mark.s3
@pytest.mark.parametrize("committer", ["magic", "directory", "partitioned"])
def test_batch_protocol_s3(committer: str, s3_config: dict[str, Any], s3_root: str,
                           tried_report: Any) -> None:
    binding = Binding("s3", fresh(s3_root), dict(s3_config), remove_tree,
                      local_dir=s3_config["outcommit.s3.staging.tmp-dir"])
    run(committer, binding, tried_report)


@pytest.mark.generative
@pytest.mark.azure
@pytest.mark.parametrize("committer", ["blocklist", "manifest", "v2"])
def test_batch_protocol_azure(committer: str, tried_report: Any, request: pytest.FixtureRequest) -> None:
    if not long_run():
        pytest.skip(LONG_ONLY)
    azurite = request.getfixturevalue("azurite_server")
    container = f"stateful-{uuid.uuid4().hex[:12]}"
    azurite.create_container(container)
    config = {**azurite.config(), "outcommit.retry.backoff-ms": "0",
              "outcommit.manifest.retry-backoff-ms": "0"}
    run(committer, Binding("azure", fresh(f"abfs://{container}"), config, remove_tree), tried_report)


@pytest.mark.generative
@pytest.mark.gcs
@pytest.mark.parametrize("committer", ["manifest", "v2"])
def test_batch_protocol_gcs(committer: str, tried_report: Any, request: pytest.FixtureRequest) -> None:
    if not long_run():
        pytest.skip(LONG_ONLY)
    emulator = request.getfixturevalue("gcs_server")
    bucket = f"stateful-{uuid.uuid4().hex[:12]}"
    emulator.create_bucket(bucket)
    config = {**emulator.config(), "outcommit.retry.backoff-ms": "0",
              "outcommit.manifest.retry-backoff-ms": "0"}
    run(committer, Binding("gcs", fresh(f"gs://{bucket}"), config, remove_tree), tried_report)
