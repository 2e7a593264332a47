"""Two drivers on one destination (issue 27): a run that lost its lease and keeps running,
a second query, a committer changed across a restart.

Drivers interleave step by step (``interleave.Driver``: each commit runs in its own
thread and stops at the sink's step hook; only one runs at a time). The oracle is
``batches.assert_exactly_once``: the log names exactly each batch's rows, every logged
file exists, nothing else is visible, nothing is left behind (records, decisions,
temporary state, pending uploads).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from batches import QUERY, assert_exactly_once, run_batch
from interleave import Driver

import outcommit.streaming as streaming
from outcommit import CorruptFileError, open_store
from outcommit.streaming import BatchAlreadyCommitted, BatchLogError, BatchRolledBack, StreamingSink
from outcommit.testing.conformance import leftovers
from outcommit.testing.faults import Fault, FaultInjectingStore

OLD, NEW = f"{QUERY}-b0-rrun-a", f"{QUERY}-b0-rrun-b"


@pytest.fixture(params=["file-v1", "file-v2", "file-manifest", "memory-manifest",
                        pytest.param("s3-magic", marks=pytest.mark.s3)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any], str]:
    store, committer = request.param.split("-")
    if store == "file":
        return f"file://{tmp_path}/out", {}, committer
    if store == "memory":
        return f"memory://{uuid.uuid4().hex}/out", {}, committer
    return f"{request.getfixturevalue('s3_root')}/out", dict(request.getfixturevalue("s3_config")), committer


def sink_for(target: tuple[str, dict[str, Any], str], driver: Driver | None = None) -> StreamingSink:
    url, config, committer = target
    return StreamingSink(url, config, committer, on_step=driver.on_step if driver else None)


def start_old_run(target: Any, stop: str) -> Driver:
    """Run a commits batch 0 and stops at ``stop`` (it lost its lease there, and runs on)."""
    old = Driver("old", stops={(stop, 0)})
    sink = sink_for(target, old)
    old.start(lambda: sink.commit_batch(0, run_batch(sink, "run-a", 0)))
    assert old.stopped_at == (stop, 0)
    return old


def test_a_run_fenced_off_before_it_decided_fails_and_the_new_run_commits(target: Any) -> None:
    """Split brain (issue 27, 1): the old run committed batch 0's job and stopped before its
    entry; the restarted run rolled it back and committed; the old run resumed and logged.
    It had deleted the old run's files, the old run's entry won, and the new run deleted its
    own: a logged batch of missing files. Now the rollback's "abort" decision fences the old
    run off: it never logs, and says why."""
    url, config, _ = target
    old = start_old_run(target, "job-committed")
    new = Driver("new", stops={("job-committed", 0)})
    sink = sink_for(target, new)
    new.start(lambda: sink.commit_batch(0, run_batch(sink, "run-b", 0)))
    old.resume()  # the old run's entry creation comes first
    # The loss itself: an entry naming the files the new run's rollback deleted.
    streaming.committed_files(url, config)
    assert isinstance(old.error, BatchRolledBack), f"the old run's commit ended with {old.error!r}"
    assert re.search(rf"job {OLD} was rolled back by {NEW} while this run committed it", str(old.error))
    outcome = new.finish()
    assert not outcome.replayed and outcome.entry.job_id == NEW and outcome.rolled_back == [OLD]
    assert_exactly_once(url, config, range(1))


def test_a_run_that_decided_to_commit_is_finished_by_the_new_run(target: Any) -> None:
    """The old run decided "commit" (all its files visible) and stopped before its entry:
    the new run's rollback must not delete them; it logs them (the exclusive entry decides)
    and its own batch is a replay. The old run then finds its own entry: both succeed."""
    url, config, _ = target
    old = start_old_run(target, "decided")
    sink = sink_for(target)
    outcome = sink.commit_batch(0, run_batch(sink, "run-b", 0))
    assert outcome.replayed and outcome.entry.job_id == OLD
    assert old.finish().entry.job_id == OLD
    assert_exactly_once(url, config, range(1))
    assert "-rrun-a-" in streaming.committed_batches(url, config)[0].files[0].path


def test_a_run_that_resumes_after_the_new_run_logged_the_batch_cleans_up(target: Any) -> None:
    """The new run commits the whole batch while the old run is stopped; the fence is lifted
    with the batch logged; the old run then decides "commit", meets the new run's entry,
    deletes what it published after the rollback, and fails."""
    url, config, _ = target
    old = start_old_run(target, "job-committed")
    sink = sink_for(target)
    assert sink.commit_batch(0, run_batch(sink, "run-b", 0)).entry.job_id == NEW
    with pytest.raises(BatchAlreadyCommitted, match=f"job {NEW}"):
        old.finish()
    assert_exactly_once(url, config, range(1))


def test_the_old_run_logging_first_makes_the_new_run_a_replay(target: Any) -> None:
    url, config, _ = target
    new = Driver("new", stops={("job-committed", 0)})
    old = start_old_run(target, "decided")
    sink = sink_for(target, new)
    results = run_batch(sink, "run-b", 0)
    old.finish()  # logged before the new run's commit began
    outcome = new.start(lambda: sink.commit_batch(0, results)).finish()
    assert outcome.replayed and outcome.entry.job_id == OLD
    assert_exactly_once(url, config, range(1))


def start_query_a(url: str) -> Driver:
    """Query A commits batches 0-2 and stops in batch 3 between its job commit and its entry."""
    a = Driver("query-a", stops={("job-committed", 3)})
    a_sink = StreamingSink(url, {}, "v1", on_step=a.on_step)
    for batch_id in range(3):
        a_sink.commit_batch(batch_id, run_batch(a_sink, "run-a", batch_id))
    a.start(lambda: a_sink.commit_batch(3, run_batch(a_sink, "run-a", 3)))
    assert a.stopped_at == ("job-committed", 3)
    return a


def test_a_second_query_is_refused_and_never_rolls_the_first_back(tmp_path: Path) -> None:
    """Query B commits batch 7 while query A's batch 3 is between its job commit and its
    entry (issue 27, 2): B rolled A's job back (the record's query id ignored) and A logged
    missing files. The log belongs to A: B is refused before it writes anything."""
    url = f"file://{tmp_path}/out"
    a = start_query_a(url)
    other = str(uuid.uuid4())
    b_sink = StreamingSink(url, {}, "v1")
    refused = error_of(lambda: b_sink.commit_batch(7, run_batch(b_sink, "run-z", 7, query=other)))
    a.finish()
    # The loss itself: A's entry 3 naming the files B's rollback deleted.
    streaming.committed_files(url, {})
    refusal = rf"belongs to query {QUERY}, not to query {other}: one streaming query per destination"
    assert isinstance(refused, BatchLogError) and re.search(refusal, str(refused)), repr(refused)
    assert_exactly_once(url, {}, range(4))


def test_a_second_querys_empty_batch_and_aborts_leave_the_first_alone(tmp_path: Path) -> None:
    """B's batch without tasks (no task claimed the log for it) is refused too, and its
    aborts, even of the very batch A has in flight and with no query id, roll back nothing."""
    url = f"file://{tmp_path}/out"
    a = start_query_a(url)
    other = str(uuid.uuid4())
    b_sink = StreamingSink(url, {}, "v1")
    refusal = rf"belongs to query {QUERY}, not to query {other}: one streaming query per destination"
    with pytest.raises(BatchLogError, match=refusal):
        b_sink.commit_batch(7, [], query_id=other)
    assert b_sink.abort_batch(7, [], query_id=other) == []
    assert b_sink.abort_batch(3, []) == []  # no task message: no query id
    a.finish()
    assert_exactly_once(url, {}, range(4))


def error_of(call: Callable[[], object]) -> Exception | None:
    """What ``call`` raised (None if it returned): checked after the other driver ran."""
    try:
        call()
    except Exception as exc:
        return exc
    return None


def test_a_query_never_rolls_back_another_querys_records(tmp_path: Path) -> None:
    """A record of another query (a log from before claims were recorded) is left alone."""
    url = f"file://{tmp_path}/out"
    other = StreamingSink(url, {}, "v1")
    run_batch(other, "run-z", 0, query="other-query")  # its driver is committing it elsewhere
    (tmp_path / "out" / "_outcommit_log" / "_query.json").unlink()  # as an older release left it
    sink = StreamingSink(url, {}, "v1")
    outcome = sink.commit_batch(0, run_batch(sink, "run-a", 0))
    assert outcome.rolled_back == []
    (record,) = streaming.BatchLog(sink.store, sink.log.dest).jobs()
    assert record.query_id == "other-query"


def test_another_runs_abort_fences_a_run_that_published(target: Any) -> None:
    """Shrunk by the state machine (on the code before the fence): run b published batch 0
    and stopped before its entry; run c, a second live run of the query, failed the batch and
    Spark aborted it: the abort deleted b's files; b resumed and logged them."""
    url, config, _ = target
    b = Driver("b", stops={("job-committed", 0)})
    b_sink = sink_for(target, b)
    b.start(lambda: b_sink.commit_batch(0, run_batch(b_sink, "run-b", 0)))
    c_sink = sink_for(target)
    c_results = run_batch(c_sink, "run-c", 0)
    assert c_sink.abort_batch(0, c_results) == [f"{QUERY}-b0-rrun-b", f"{QUERY}-b0-rrun-c"]
    b.resume()
    assert isinstance(b.error, BatchRolledBack), b.error
    final = sink_for(target)
    final.commit_batch(0, run_batch(final, "run-d", 0))
    assert_exactly_once(url, config, range(1))


def test_a_run_whose_job_was_rolled_back_before_its_commit_is_told_so(tmp_path: Path) -> None:
    """Shrunk by the state machine: run c wrote batch 0, run d (a second live run) wrote it
    too and Spark aborted d's batch, which rolled back c's job; c's commit then failed with
    "job ... is not active", which said nothing of why."""
    url = f"file://{tmp_path}/out"
    c = StreamingSink(url, {}, "v1")
    c_results = run_batch(c, "run-c", 0)
    d = StreamingSink(url, {}, "v1")
    d.abort_batch(0, run_batch(d, "run-d", 0))
    with pytest.raises(BatchRolledBack, match=rf"job {QUERY}-b0-rrun-c was rolled back by the abort "
                                              "of batch 0 while this run committed it"):
        c.commit_batch(0, c_results)
    final = StreamingSink(url, {}, "v1")
    final.commit_batch(0, run_batch(final, "run-e", 0))
    assert_exactly_once(url, {}, range(1))


@pytest.mark.s3
@pytest.mark.parametrize(("first", "then"), [("magic", "directory"), ("directory", "magic")])
def test_a_restart_with_another_committer_rolls_back_through_the_dead_jobs(
        first: str, then: str, s3_root: str, s3_config: dict[str, Any]) -> None:
    """A magic run writes batch 0 and dies; the query restarts with directory (issue 27, 3).
    The rollback aborted the dead job through the current committer: the magic job's
    directory (its marker reads as live) and its pending uploads stayed for good."""
    url, config = f"{s3_root}/out", dict(s3_config)
    dead = StreamingSink(url, config, first)
    run_batch(dead, "run-a", 0)  # tasks wrote (and committed): the driver dies before its commit
    store = open_store(url, config)
    assert leftovers(store, store.strip(url)), "the dead run left nothing to roll back"

    restarted = StreamingSink(url, config, then)
    outcome = restarted.commit_batch(0, run_batch(restarted, "run-b", 0))
    assert outcome.rolled_back == [OLD]
    assert_exactly_once(url, config, range(1))


def test_a_job_of_a_committer_that_cannot_act_here_is_refused_not_skipped(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    dead = StreamingSink(url, {}, "v1")
    run_batch(dead, "run-a", 0)
    path = tmp_path / "out" / "_outcommit_log" / "_jobs" / f"{OLD}.json"
    path.write_text(path.read_text().replace('"v1"', '"magic"'))
    restarted = StreamingSink(url, {}, "manifest")
    with pytest.raises(BatchLogError, match=rf"job {OLD} of batch 0 .* was started by committer "
                                            r"'magic', which cannot act here .*nothing was deleted"):
        restarted.commit_batch(0, run_batch(restarted, "run-b", 0))


# -- decisions whose create response was lost; a failed commit's abort -------------------------------

def lose_create_responses(sink: StreamingSink, monkeypatch: pytest.MonkeyPatch, suffix: str) -> list[str]:
    """The exclusive create of a path ending with ``suffix`` is performed, then answered with
    FileExistsError (a client retrying a create whose first response was lost)."""
    real = sink.store.create_exclusive
    hit: list[str] = []

    def lossy(path: str, data: bytes) -> None:
        real(path, data)
        if path.endswith(suffix):
            hit.append(path)
            raise FileExistsError(path)

    monkeypatch.setattr(sink.store, "create_exclusive", lossy)
    return hit


def test_a_decision_whose_create_response_was_lost_is_recognised(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"file://{tmp_path}/out"
    dying = StreamingSink(url, {}, "v1", on_step=lambda step, _b: step == "job-committed" and _die())
    with pytest.raises(_Died):
        dying.commit_batch(0, run_batch(dying, "run-a", 0))
    sink = StreamingSink(url, {}, "v1")
    hit = lose_create_responses(sink, monkeypatch, ".decision")
    outcome = sink.commit_batch(0, run_batch(sink, "run-b", 0))  # its abort, then its commit: both lost
    assert [p.rsplit("/", 1)[1] for p in hit] == [f"{OLD}.decision", f"{NEW}.decision"]
    assert outcome.entry.job_id == NEW and outcome.rolled_back == [OLD]
    assert_exactly_once(url, {}, range(1))


def test_an_abort_after_the_commit_decision_finishes_the_batch(tmp_path: Path) -> None:
    """The entry's create failed after the job decided to commit; Spark then aborts the
    batch. Its files were visible and decided: the abort logs them, never deletes them (a
    rollback elsewhere may be logging them this very moment)."""
    url = f"file://{tmp_path}/out"
    store = FaultInjectingStore(open_store(url), [Fault("create_exclusive", path_contains="/0.json",
                                                        error=lambda m: OSError(f"lost: {m}"))])
    sink = StreamingSink(url, {}, "v1", store=store)
    results = run_batch(sink, "run-a", 0)
    with pytest.raises(OSError, match="lost"):
        sink.commit_batch(0, results)
    assert sink.abort_batch(0, results) == [OLD]
    assert [e.job_id for e in streaming.committed_batches(url)] == [OLD]
    assert_exactly_once(url, {}, range(1))


class _Died(BaseException):
    pass


def _die() -> None:
    raise _Died


def test_a_tampered_decision_is_reported_and_nothing_is_deleted(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/out"
    dying = StreamingSink(url, {}, "v1", on_step=lambda step, _b: step == "job-committed" and _die())
    with pytest.raises(_Died):
        dying.commit_batch(0, run_batch(dying, "run-a", 0))
    published = sorted(p.name for p in (tmp_path / "out").glob("part-*"))
    (tmp_path / "out" / "_outcommit_log" / "_jobs" / f"{OLD}.decision").write_text('{"decision": "maybe"}')
    sink = StreamingSink(url, {}, "v1")
    with pytest.raises(CorruptFileError, match=rf"_jobs/{OLD}\.decision: field 'format'"):
        sink.commit_batch(0, run_batch(sink, "run-b", 0))
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*")) == published
