"""``outcommit demo``: the README's first command runs the job and verifies itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def run_demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A subprocess: the demo starts (and stops) its own SparkSession.
    return subprocess.run([sys.executable, "-m", "outcommit.cli", "demo", *args],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def test_demo_default_run_on_embedded_s3_verifies_itself() -> None:
    pytest.importorskip("outcommit_s3.embedded")
    from outcommit.plugins import get_registry

    if "magic" not in get_registry().committers():
        pytest.skip("the S3 plugin does not register the magic committer yet")
    result = run_demo("--rows", "60000", "--tasks", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "committer:        magic" in out
    assert "pending uploads:  0 left" in out
    assert "task retries:     1" in out
    assert "-> OK" in out


def test_demo_without_java_says_what_to_install(tmp_path: object) -> None:
    env = {"PATH": os.path.dirname(sys.executable), "JAVA_HOME": ""}
    result = run_demo("--store", "file", env=env)
    assert result.returncode == 2
    assert "apt-get install -y openjdk-17-jre-headless" in result.stderr
    assert "JAVA_HOME" in result.stderr


def test_demo_checksum_is_order_independent_and_counts_duplicates() -> None:
    import pyarrow as pa

    from outcommit_devtools.demo import checksum, generate_local

    table = pa.concat_tables(generate_local(5000, 3))
    reversed_rows = table.take(list(range(table.num_rows - 1, -1, -1)))
    assert checksum(reversed_rows) == checksum(table)
    # A partition column read back as a dictionary or plain string compares equal.
    date = table.schema.get_field_index("date")
    assert checksum(table.set_column(date, "date", table["date"].dictionary_encode())) == checksum(table)
    assert checksum(table.slice(1))[1] != checksum(table)[1]
    doubled = pa.concat_tables([table.slice(1), table.slice(1, 1)])  # row 0 lost, row 1 twice
    assert doubled.num_rows == table.num_rows and checksum(doubled) != checksum(table)
