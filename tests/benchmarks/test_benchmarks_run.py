"""Every benchmark still runs end to end (tiny parameters; figures come from `make bench`).

A benchmark broken by a change in what it measures is only found when someone needs
its figures; these runs find it at once. They assert that the script completes and
prints its table, not the figures: the figures are the benchmark's to report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True,
                            text=True, timeout=600)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stdout


def test_fileoutput_commit_benchmark_runs() -> None:
    out = run("fileoutput_commit.py", "--tasks", "2", "--files", "5", "--repeat", "1")
    assert "v1 / v2 job commit time:" in out


def test_manifest_commit_benchmark_runs() -> None:
    out = run("manifest_commit.py", "--tasks", "3", "--files", "2", "--no-emulators")
    assert "manifest" in out and "v1" in out


def test_partitioned_write_benchmark_runs() -> None:
    out = run("partitioned_write.py", "--rows", "20000", "--tasks", "2", "--repeat", "1")
    assert "StreamingWriter / write_dataset:" in out
    assert "split by partition alone, 65,536-row batches" in out


@pytest.mark.s3
def test_s3_commit_benchmark_runs() -> None:
    out = run("s3_commit.py", "--tasks", "2", "--files", "2", "--size", "1024", "--threads", "4")
    assert "magic" in out and "directory" in out


@pytest.mark.azure
def test_azure_gcs_commit_benchmark_runs() -> None:
    out = run("azure_gcs_commit.py", "--files", "200", "--azurite-max", "200")
    assert "Azure Blob: blocklist" in out and "GCS: manifest, objects.move" in out


@pytest.mark.s3
def test_s3_commit_scale_benchmark_counts_requests() -> None:
    out = run("s3_commit_scale.py", "--files", "50", "--tasks", "5", "--cpu-requests", "5")
    assert "client CPU per request" in out
    # Job commit of 50 files: one completion each, and 8 more requests whatever the size.
    assert "[ok] 50 files (latency only): requests = files + small constant: 58 = 50 + 8" in out
    assert "driver peak RSS" in out


@pytest.mark.s3
def test_delete_files_benchmark_runs() -> None:
    out = run("delete_files.py", "--files", "2500", "--single", "40", "--partitions", "20")
    assert "s3 (DeleteObjects, moto)" in out and "{'DeleteObjects': 3} (the same both ways)" in out
    assert "{'delete': 40} (the same both ways, 8 at once)" in out
    assert "{'delete': 20, 'list_dir': 1, 'list_files': 21} (the same both ways, 8 at once)" in out


@pytest.mark.s3
def test_conflict_modes_benchmark_runs() -> None:
    out = run("conflict_modes.py", "--files", "20", "--partitions", "8", "--old-files", "4",
              "--connections", "4")
    rows = [line.split() for line in out.splitlines() if line.startswith(("magic ", "partitioned "))]
    assert len(rows) == 8
    # (committer, mode, destination) -> round trips. magic: check || record, 20 files on 4
    # connections = 5 rounds of completions, _SUCCESS, the state's deletion; the listing of
    # the destination runs beside the record (in series before: +1, +2 with old files).
    # partitioned: 8 files = 2 rounds; its 8 partitions' listings on 4 threads are 2 rounds
    # beside the record: +1 (in series before: +8). Old files: the pending uploads listed
    # after the scope, then their DeleteObjects: +2.
    trips = {(r[0], r[1], r[2]): float(r[6]) for r in rows}
    assert trips == {("magic", "append", "empty"): 8.0, ("magic", "fail", "empty"): 8.0,
                     ("magic", "replace", "empty"): 8.0, ("magic", "replace", "old-files"): 10.0,
                     ("partitioned", "append", "empty"): 5.0, ("partitioned", "fail", "empty"): 6.0,
                     ("partitioned", "replace", "empty"): 6.0, ("partitioned", "replace", "old-files"): 8.0}


@pytest.mark.s3
def test_spark_write_benchmark_runs_without_spark() -> None:
    out = run("spark_write.py", "--engines", "local", "--layouts", "task", "--rows", "2000",
              "--tasks", "2", "--repeat", "1", "--delay-ms", "1")
    assert "added latency 1 ms per request" in out
    # The unsafe baselines' requests, exactly: one PUT per file (s3fs), three (Arrow's multipart).
    assert "2 requests (1.0/file): PutObject 2" in out
    assert "6 requests (3.0/file): CreateMultipartUpload 2, UploadPart 2, CompleteMultipartUpload 2" in out
    assert "safe / direct:" in out and "safe / write_dataset:" in out


@pytest.mark.s3
def test_small_files_benchmark_runs() -> None:
    out = run("s3_small_files.py", "--tasks", "2", "--files", "3", "--delay-ms", "1")
    lines = [line for line in out.splitlines() if "requests" in line]
    assert len(lines) == 4  # directory and magic, without and with the proxy
    assert all("CreateMultipartUpload 6, UploadPart 6, CompleteMultipartUpload 6" in line for line in lines)


@pytest.mark.spark
def test_spark_task_memory_benchmark_runs() -> None:
    pytest.importorskip("pyspark")  # the minimum-versions environment has no Spark
    out = run("spark_task_memory.py", "--rows", "1000,2000", "--pad", "4")
    assert "worker peak RSS" in out and "Arrow size x2.0" in out


def by_operation(line: str) -> dict[str, int]:
    """A peers.py row's requests by operation ("PutObject 3, UploadPart 3 (runs ...)")."""
    detail = line.split("rows ok", 1)[1].rsplit(" (runs", 1)[0]
    return {name: int(count) for name, count in (item.strip().rsplit(" ", 1) for item in detail.split(","))}


@pytest.mark.s3
def test_peers_benchmark_counts_requests_and_reads_rows_back() -> None:
    pytest.importorskip("polars")
    pytest.importorskip("deltalake")
    out = run("peers.py", "--ci", "--rounds", "1", "--delay-ms", "1", "--jobs", "whole,tasks",
              "--systems", "polars,deltalake,dataset,local,api")
    assert "added latency 1 ms per request" in out
    # Every output read back: its rows and the sum of their ids are the input's.
    rows = [line for line in out.splitlines() if "rows ok" in line]
    assert "WRONG" not in out and len(rows) == 8, out
    polars, delta, dataset, local, api, dataset_tasks, local_tasks, api_tasks = map(by_operation, rows)
    # One table of 3 days: Polars one PUT per file, Arrow three (its multipart).
    assert polars == {"PutObject": 3}
    assert dataset == {"CreateMultipartUpload": 3, "UploadPart": 3, "CompleteMultipartUpload": 3}
    assert delta["PutObject"] >= 4  # its 3 files and its log entry (the rest is delta-rs's)
    # outcommit's magic: per file a create, a part and a completion; per job a constant:
    # the marker (PUT, HEAD at the task's and job's checks, DELETE), the commit record,
    # _SUCCESS, the pendingset (+ the API task's claim), the sweep, the state's listings
    # and deletion. The job directory's listing is sent twice now and then on a loaded
    # machine (a retried request, counted at the server): 2 or 3.
    job = {"HeadObject": 2, "DeleteObject": 1, "ListMultipartUploads": 1, "DeleteObjects": 1}
    for counted, puts, files in ((local, 4, 3), (api, 5, 3), (local_tasks, 5, 6), (api_tasks, 7, 6)):
        assert counted.pop("List") in (2, 3), counted
        heads = job["HeadObject"] + (files // 3 - 1)  # one more job check per task
        assert counted == {**job, "HeadObject": heads, "PutObject": puts, "CreateMultipartUpload": files,
                           "UploadPart": files, "CompleteMultipartUpload": files}, counted
    assert dataset_tasks == {"CreateMultipartUpload": 6, "UploadPart": 6, "CompleteMultipartUpload": 6}
    assert "local / deltalake:" in out and "local / dataset:" in out and "api / dataset:" in out


@pytest.mark.s3
def test_critical_path_benchmark_pins_the_sequential_round_trips() -> None:
    # A chain can only come out too long, never too short: a request the scheduler of a
    # loaded machine starts after its neighbour's answer lengthens it. Each cell keeps its
    # shortest chain of up to three runs (the requests themselves are the same every run).
    cells: dict[tuple[str, ...], list[str]] = {}
    for _ in range(3):
        out = run("critical_path.py", "--engines", "api,local", "--files", "1,7", "--delay-ms", "200",
                  "--rows", "1600")
        for line in out.splitlines():
            if line.startswith(("api ", "local ")):
                key, cell = tuple(line.split()[:3]), line.split()
                if key not in cells or int(cell[5]) < int(cells[key][5]):
                    cells[key] = cell
        assert len(cells) == 12, out
        if all(int(c[5]) == (11 if c[0] == "api" else 10) for c in cells.values()):
            break
    for (engine, committer, files), cell in cells.items():
        # (setup, data, task, job). The local engine's task sends no claim (the driver
        # receives its message): one round trip less than the committer API's tasks.
        serial, kinds = int(cell[5]), tuple(int(v) for v in cell[6:10])
        expected = 11 if engine == "api" else 10
        assert serial == expected == sum(kinds), (engine, committer, files, cell)
        assert kinds[0] == 1 and kinds[3] >= 4, cell
    # The committer API's phases, marked between its calls: exact. The magic committer
    # creates its uploads while writing (1) and waits for its parts in task commit; the
    # staging committers upload everything in task commit (create, part, pendingset,
    # claim, job check); job commit: check and record, completions, sweep, _SUCCESS, cleanup.
    magic = " ".join(cells[("api", "magic", "7")][10:])
    assert "setup 1, writes 1, task commit 4, job commit 5" in magic
    for committer in ("directory", "partitioned"):
        assert "setup 1, task commit 5, job commit 5" in " ".join(cells[("api", committer, "7")][10:])


@pytest.mark.s3
def test_job_commit_model_benchmark_measures_and_models() -> None:
    out = run("job_commit_model.py", "--files", "48", "--processes", "1,2", "--model-files", "1000000",
              "--prefixes", "1,10")
    assert "measured: 48 files committed with outcommit.job-commit.processes=1" in out
    assert "measured: 48 files committed with outcommit.job-commit.processes=2" in out
    # One round of completions and the four round trips beside it (check beside the record,
    # the sweep after the markers' deletion, _SUCCESS, the state's deletion).
    assert "4 round trips in sequence beside the completions (measured)" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("this machine", "16-core driver"))]
    assert len(rows) == 4 and all(row[-1] in ("cpu", "connections", "prefix") for row in rows), out


@pytest.mark.s3
def test_job_commit_model_measures_each_thread_count_with_connections_kept_alive() -> None:
    out = run("job_commit_model.py", "--files", "16", "--processes", "1", "--threads", "8,64",
              "--keep-alive", "--model-files", "1000000", "--prefixes", "1")
    for threads in (8, 64):
        assert (f"measured: 16 files committed with outcommit.job-commit.processes=1, "
                f"outcommit.s3.light-requests=false, outcommit.committer.threads={threads}, ") in out, out
    assert "behind the fault proxy: connections kept alive" in out
    # Through the proxy, the same round trips beside the completions as against moto itself.
    assert "4 round trips in sequence beside the completions (measured)" in out


@pytest.mark.s3
def test_client_cpu_benchmark_runs_every_path() -> None:
    out = run("client_cpu.py", "--requests", "10", "--repeat", "1", "--profile", "3", "--commit-files", "16")
    names = ("store", "store-light", "boto3", "trimmed", "resigned", "resigned-urllib3", "resigned-session",
             "crt-sign", "crt-http", "floor")
    table = out.split("ms of client CPU per request", 1)[1].split("\n\n", 1)[0]
    rows = [line.split() for line in table.splitlines()[2:]]
    assert [r[0] for r in rows] == list(names), table
    for row in rows:  # five figures, or the C runtime's paths without awscrt installed
        assert (len(row) == 6 and all(float(v) > 0 for v in row[1:])) or \
            (row[0].startswith("crt-") and "n/a (no awscrt)" in " ".join(row)), row
    assert "profile of the store path, CompleteMultipartUpload (10 requests" in out
    assert "job commit of a magic job of 16 files" in out
