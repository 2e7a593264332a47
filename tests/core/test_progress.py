"""Job-commit progress: log lines at a steady cadence (files done/total, rate, ETA) with
the job id as a record field, and a live tqdm bar where one is asked for."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pyarrow as pa
import pytest

import outcommit
from outcommit import progress as progress_module
from outcommit.engine.local import LocalDriver
from outcommit.progress import Progress, show_bars


class Clock:
    """time.monotonic for the progress module: moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", fake)
    return fake


def test_lines_come_at_the_configured_cadence_with_rate_and_eta(clock, caplog):
    log = logging.getLogger("outcommit.test.progress")
    config = outcommit.Config({"outcommit.progress.interval-seconds": "10"})
    with caplog.at_level(logging.INFO, logger=log.name):
        progress = Progress("completing uploads", 100, log, config, unit="upload")
        for _ in range(40):                 # 40 uploads, one every 0.5 s: 20 s in all
            clock.now += 0.5
            progress.advance()
        progress.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "completing uploads: 20/100 uploads (20%), 2 uploads/s, ETA 40 s",
        "completing uploads: 40/100 uploads (40%), 2 uploads/s, ETA 30 s",
        "completing uploads: 40 uploads in 20.0 s",
    ]


def test_zero_interval_logs_only_the_final_line(clock, caplog):
    log = logging.getLogger("outcommit.test.progress")
    config = outcommit.Config({"outcommit.progress.interval-seconds": "0"})
    with caplog.at_level(logging.INFO, logger=log.name):
        progress = Progress("renaming files", 5, log, config)
        for _ in range(5):
            clock.now += 100
            progress.advance()
        progress.close()
    assert [r.getMessage() for r in caplog.records] == ["renaming files: 5 files in 500.0 s"]


def test_a_real_job_commit_reports_progress_with_the_job_id_as_a_field(tmp_path, clock, caplog):
    """Every advance 11 s apart: each task merged by v1's job commit is a log line."""
    original = Progress.advance

    def slow_advance(self: Progress, count: int = 1) -> None:
        clock.now += 11
        original(self, count)

    url = f"file://{tmp_path}/progress"
    with caplog.at_level(logging.INFO, logger="outcommit"), \
            pytest.MonkeyPatch.context() as patch:
        patch.setattr(Progress, "advance", slow_advance)
        result = LocalDriver(url, committer="v1").run([pa.table({"id": [i]}) for i in range(3)])
    records = [r for r in caplog.records if "merging committed tasks" in r.getMessage()]
    assert [r.getMessage().split("] ", 1)[1].split(",")[0] for r in records] == [
        "merging committed tasks: 1/3 tasks (33%)", "merging committed tasks: 2/3 tasks (67%)",
        "merging committed tasks: 3/3 tasks (100%)", "merging committed tasks: 3 tasks in 33.0 s"]
    job_id = result.summary.jobId
    assert all(getattr(r, "job_id", None) == job_id for r in records)


def test_a_bar_is_drawn_when_asked_for(capsys):
    log = logging.getLogger("outcommit.test.progress")
    show_bars(True)
    try:
        progress = Progress("completing uploads", 3, log, unit="upload")
        for _ in range(3):
            progress.advance()
        progress.close()
    finally:
        show_bars(False)
    assert "completing uploads:   0%" in capsys.readouterr().err   # drawn, then cleared (leave=False)
    progress = Progress("completing uploads", 3, log, outcommit.Config({"outcommit.progress.bar": "true"}))
    progress.advance(3)
    progress.close()
    assert "completing uploads:   0%|          | 0/3" in capsys.readouterr().err
    progress = Progress("completing uploads", 3, log)   # neither: no bar
    progress.advance(3)
    progress.close()
    assert capsys.readouterr().err == ""


def test_the_cli_draws_a_bar_on_a_terminal_only(tmp_path: Path) -> None:
    """``outcommit demo`` (local engine) on a pseudo-terminal draws v1's job-commit bar; with
    stderr a pipe it draws none."""
    args = [sys.executable, "-m", "outcommit.cli", "demo", "--engine", "local", "--store", "file",
            "--rows", "4000", "--tasks", "3", "--json"]
    main, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # 120 columns
    try:
        done = subprocess.run(args, stdout=subprocess.PIPE, stderr=follower, timeout=300, cwd=tmp_path)
    finally:
        os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:          # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    terminal = b"".join(chunks).decode(errors="replace")
    assert done.returncode == 0, terminal[-3000:]
    assert "merging committed tasks:" in terminal and "/3 [" in terminal
    piped = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert piped.returncode == 0 and "merging committed tasks:" not in piped.stderr
