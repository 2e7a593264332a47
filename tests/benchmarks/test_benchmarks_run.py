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


@pytest.mark.s3
def test_s3_commit_benchmark_runs() -> None:
    out = run("s3_commit.py", "--tasks", "2", "--files", "2", "--size", "1024", "--threads", "4")
    assert "magic" in out and "directory" in out


@pytest.mark.azure
def test_azure_gcs_commit_benchmark_runs() -> None:
    out = run("azure_gcs_commit.py", "--files", "200", "--azurite-max", "200")
    assert "Azure Blob: blocklist" in out and "GCS: manifest, objects.move" in out
