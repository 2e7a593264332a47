"""The fault matrix's pairings of a committer made for other stores only
(``CommitterSpec.made_for``): one ``refused`` cell each, predicted as the factory refuses
(before any capability: ``memmp://`` declares all S3's committers require), never a
column of scenarios run on a store the committer would write wrong URIs into."""

from __future__ import annotations

from outcommit_devtools.faultmatrix import Matrix, plan
from outcommit_devtools.faultmatrix.bindings import Servers, open_bindings

IN_PROCESS = ["file", "memory", "memmp"]
ELSEWHERE = ["magic", "directory", "partitioned", "blocklist"]


def test_committers_made_for_other_stores_are_refused_cells(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cells = plan("ci", IN_PROCESS, [*ELSEWHERE, "memmp-magic"])
    refused = {(c.store, c.committer) for c in cells if c.scenario is None}
    ran = {(c.store, c.committer) for c in cells if c.scenario is not None}
    assert ran == {("memmp", "memmp-magic")}
    assert refused == {(s, c) for s in IN_PROCESS for c in ELSEWHERE} | {("file", "memmp-magic"),
                                                                          ("memory", "memmp-magic")}
    with open_bindings(IN_PROCESS, Servers()) as bindings:
        results = Matrix(bindings.__getitem__, str(tmp_path)).run_many(
            [c for c in cells if c.scenario is None])
    verdicts = {(r.cell.store, r.cell.committer): (r.verdict.outcome, r.verdict.detail) for r in results}
    assert {outcome for outcome, _ in verdicts.values()} == {"refused"}, verdicts
    assert verdicts["memmp", "magic"][1] == "made for s3://, s3a:// only; safe: memmp-magic"
    assert verdicts["memmp", "blocklist"][1] == "made for abfs://, abfss://, az:// only; safe: memmp-magic"
    assert verdicts["file", "memmp-magic"][1] == "made for memmp:// only; safe: manifest, v1, v2"


def test_the_matrix_binds_memmp_with_its_committer() -> None:
    """memmp-magic gets its column on memmp:// (it had no binding: no cell ran it)."""
    cells = plan("ci", ["memmp"])
    assert {c.committer for c in cells if c.scenario is not None} == {"memmp-magic"}
