"""docs/plugins.md is complete: the plugin it describes, built from its code blocks alone,
installs and passes the store contract and the committer conformance suites."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugins.md"
# A fenced block whose first line names its file: "# file: <path>".
BLOCK = re.compile(r"```(?:python|toml)\n# file: (?P<path>\S+)\n(?P<body>.*?)```", re.DOTALL)


def test_the_documented_plugin_builds_installs_and_passes_both_suites(tmp_path: Path) -> None:
    project = tmp_path / "outcommit-dirstore"
    files = {m["path"]: m["body"] for m in BLOCK.finditer(DOC.read_text())}
    assert {"pyproject.toml", "src/outcommit_dirstore/store.py", "src/outcommit_dirstore/plugin.py",
            "tests/test_dirstore.py"} <= set(files), sorted(files)
    for relative, body in files.items():
        target = project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(project)],
                   check=True, capture_output=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k != "OUTCOMMIT_DISABLE_PLUGIN_AUTOLOAD"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-o", "addopts=", "--rootdir", str(project), str(project / "tests")],
                            cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", result.stdout)
    assert passed and int(passed.group(1)) >= 50, result.stdout[-2000:]
    assert " failed" not in result.stdout
