"""The job commit fan-out's pure parts: shares by prefix, and the per-prefix token bucket."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generative import budget
from outcommit.committers.delayed.fanout import TokenBucket, prefix_of, prefix_rate, shares
from outcommit.committers.delayed.files import PendingCommit
from outcommit.config import Config
from outcommit.errors import ConfigError


def commit(prefix: str, n: int) -> PendingCommit:
    return PendingCommit(bucket="b", key=f"{prefix}/f{n}", upload_id=f"u{n}", etags=("e",), length=1,
                         job_id="j")


@pytest.mark.generative
@budget(100)
@given(sizes=st.lists(st.integers(1, 20), min_size=1, max_size=12), count=st.integers(1, 5))
def test_shares_keep_each_prefix_whole_and_cover_every_upload_once(sizes: list[int], count: int) -> None:
    """(CI: 100 examples, ~0.2 s.)"""
    commits = [commit(f"d={p}", n) for p, size in enumerate(sizes) for n in range(size)]
    split = shares(commits, count)
    assert sorted(i for share in split for i in share) == list(range(len(commits)))
    assert len(split) <= count
    owners = {prefix_of(commits[i]): k for k, share in enumerate(split) for i in share}
    assert all(owners[prefix_of(commits[i])] == k for k, share in enumerate(split) for i in share)
    if len(sizes) >= count:  # greedy by size: no share exceeds the mean by more than a group
        assert max(map(len, split)) <= len(commits) / count + max(sizes)


def test_the_bucket_lets_rate_takes_a_second_through() -> None:
    """A virtual clock: the sleeps the bucket asks for are what the rate allows."""
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(10, clock=lambda: now[0], sleep=sleep)
    for _ in range(30):
        bucket.take()
    # 10 at once (a second's burst), then 20 more at 10 a second: 2 seconds of sleeping.
    assert slept[0] == pytest.approx(0.1) and sum(slept) == pytest.approx(2.0)


def test_a_prefix_rate_must_be_a_positive_number() -> None:
    assert prefix_rate(Config({})) == 3500
    assert prefix_rate(Config({"outcommit.job-commit.prefix-rate": "100"})) == 100
    with pytest.raises(ConfigError, match=r"prefix-rate='0'.*S3: 3500"):
        prefix_rate(Config({"outcommit.job-commit.prefix-rate": "0"}))
