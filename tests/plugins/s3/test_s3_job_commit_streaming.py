"""Job commit holds pendingsets compressed and streams them; stores share a boto3 session.

A job of 100,000 files must not hold 100,000 commit objects (benchmarks/s3_commit_scale.py
measures the memory); here: what is kept between the passes, that every pass sees every
upload in order, that a duplicate across big tasks is still refused before anything is
completed, and that each store still has a client (and request counts) of its own.
"""

from __future__ import annotations

import pytest
from s3_helpers import outcome, run_task, start

import outcommit
from outcommit.committers.delayed import pendingsets
from outcommit.errors import CorruptFileError

pytestmark = pytest.mark.s3


@pytest.fixture
def config(s3_config):
    # Tasks of more than 2 files send a reference to their pendingset, not its entries.
    return {**s3_config, "outcommit.committer.unique-filenames": "false",
            "outcommit.s3.message.inline-commits": "2"}


def test_referenced_pendingsets_are_kept_compressed_and_streamed(config, s3_root):
    url = f"{s3_root}/stream"
    committer, job = start(url, config)
    messages = [run_task(committer, job, 0, {f"a{i}.txt": b"a" for i in range(3)}),
                run_task(committer, job, 1, {"b.txt": b"b"})]
    assert "commits" not in messages[0] and "commits" in messages[1]
    commits = pendingsets.from_messages(committer.layout(job), job, messages,
                                        committer.expectations(job), committer.threads)
    big, small = commits.loaded
    assert big.inline is None and big.packed and big.files == 3
    assert small.inline is not None and not small.packed
    keys = [c.key.rsplit("/", 1)[1] for c in commits]
    assert keys == ["a0.txt", "a1.txt", "a2.txt", "b.txt"] == [c.key.rsplit("/", 1)[1] for c in commits]
    assert len(commits) == 4 and commits.tasks == 2 and commits.length == 4

    summary = committer.commit_job(job, messages)
    assert summary.metrics["tasks.committed"] == 2 and summary.metrics["bytes.committed"] == 4
    visible, left = outcome(url, config)
    assert sorted(visible) == ["a0.txt", "a1.txt", "a2.txt", "b.txt"] and left == []


def test_a_duplicate_destination_across_referenced_pendingsets_is_refused(config, s3_root):
    url = f"{s3_root}/dup"
    committer, job = start(url, config)
    first = run_task(committer, job, 0, {"x.txt": b"0", "y.txt": b"0", "same.txt": b"0"})
    second = run_task(committer, job, 1, {"z.txt": b"1", "w.txt": b"1", "same.txt": b"1"})
    with pytest.raises(CorruptFileError, match="two uploads"):
        committer.commit_job(job, [first, second])
    visible, _ = outcome(url, config)
    assert visible == {}  # refused before a single completion
    committer.abort_job(job)


def test_stores_get_their_own_clients_from_a_shared_session(s3_config, s3_root):
    first = outcommit.open_store(s3_root, s3_config)
    second = outcommit.open_store(s3_root, s3_config)
    assert first.client is not second.client
    first.client.list_objects_v2(Bucket=s3_root.removeprefix("s3://").partition("/")[0], MaxKeys=1)
    counted = {k: v for k, v in first.iostatistics.snapshot()["counters"].items() if v}
    assert sum(counted.values()) >= 1
    assert not any(second.iostatistics.snapshot()["counters"].values())
