"""The cluster launcher itself: a cluster that does not come up says why and leaves nothing running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from outcommit_devtools.sparkcluster import ClusterError, executor_of, start_cluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def processes_with_env(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # gone, or not ours to read
    return found


def test_a_cluster_that_does_not_come_up_in_time_shows_its_logs_and_stops(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as info:
        start_cluster(tmp_path, workers=1, deadline_s=0.5)  # no JVM starts that fast
    message = str(info.value)
    assert "did not come up" in message and "1 alive workers" in message
    assert "--- master" in message and "--- worker1" in message  # the log tails
    assert processes_with_env(f"SPARK_WORKER_DIR={tmp_path}/worker1") == []


def test_a_process_outside_spark_has_no_executor() -> None:
    assert executor_of(os.getpid()) is None


def test_a_master_answering_html_before_json_counts_as_not_ready(tmp_path: Path) -> None:
    # CI saw a starting master answer /json/ with its HTML page (before it was elected
    # leader); the launcher must keep polling, not fail the whole Spark session fixture.
    import http.server
    import threading

    from outcommit_devtools.sparkcluster import SparkCluster

    answers = [b"<!DOCTYPE html><html><body>root</body></html>",
               b'{"workers": [{"state": "ALIVE"}, {"state": "DEAD"}]}']

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.pop(0) if len(answers) > 1 else answers[0]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        cluster = SparkCluster("spark://127.0.0.1:1", f"http://127.0.0.1:{server.server_port}",
                               tmp_path, "python")
        assert cluster.alive_workers() == 0  # the HTML answer
        assert cluster.alive_workers() == 1  # then the JSON status
    finally:
        server.shutdown()
        server.server_close()
