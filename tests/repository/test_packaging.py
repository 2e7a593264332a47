"""The distributions as users install them: every import declared, wheels that build, and
an install from a local wheelhouse into a fresh virtual environment that runs a job."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = ["core", "plugins/s3", "plugins/azure", "plugins/gcs", "plugins/hdfs", "devtools"]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.\-]+", requirement)
    assert match, requirement
    return _normalise(match.group(0))


def _imports(source: Path) -> set[str]:
    """Dotted names imported anywhere in a source tree (absolute imports only)."""
    names: set[str] = set()
    for path in source.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return names


def _distributions_of(module: str, owners: dict[str, list[str]]) -> set[str]:
    top = module.split(".")[0]
    found = set(owners.get(top, []))
    if len(found) > 1:  # a namespace package (azure.*): the distribution holding the module
        parts = module.split(".")
        for depth in range(len(parts), 1, -1):
            prefix = "/".join(parts[:depth])
            holders = {d for d in found if any(str(f).startswith(prefix + "/") or
                                               str(f) == prefix + ".py"
                                               for f in md.distribution(d).files or ())}
            if holders:
                return {_normalise(d) for d in holders}
    return {_normalise(d) for d in found}


@pytest.mark.parametrize("directory", DISTRIBUTIONS)
def test_every_directly_imported_distribution_is_declared(directory: str) -> None:
    project = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())["project"]
    declared = {_requirement_name(r) for r in project.get("dependencies", [])}
    for extra in project.get("optional-dependencies", {}).values():
        declared |= {_requirement_name(r) for r in extra}
    owners = md.packages_distributions()
    own = {p.name for p in (ROOT / directory / "src").iterdir() if p.is_dir() and not p.name.startswith("_")}
    undeclared: dict[str, set[str]] = {}
    for module in sorted(_imports(ROOT / directory / "src")):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in own:
            continue
        distributions = _distributions_of(module, owners)
        assert distributions, f"{directory}: nothing installed provides {module}"
        if not distributions & declared:
            undeclared[module] = distributions
    assert not undeclared, f"{directory}/pyproject.toml does not declare what it imports: {undeclared}"


def _build_wheels(wheelhouse: Path) -> list[Path]:
    for directory in DISTRIBUTIONS:
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                        str(wheelhouse), str(ROOT / directory)],
                       check=True, capture_output=True, text=True, timeout=300)
        shutil.rmtree(ROOT / directory / "build", ignore_errors=True)  # setuptools' scratch copy
    return sorted(wheelhouse.glob("*.whl"))


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build")
    house = tmp_path_factory.mktemp("wheelhouse")
    _build_wheels(house)
    return house


def test_every_distribution_builds_a_wheel_with_its_entry_points(wheelhouse: Path) -> None:
    wheels = {w.name.split("-")[0]: w for w in wheelhouse.glob("*.whl")}
    assert set(wheels) == {"outcommit", "outcommit_s3", "outcommit_azure", "outcommit_gcs",
                           "outcommit_hdfs", "outcommit_devtools"}
    sources = {"outcommit": "core", "outcommit_devtools": "devtools"}
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            files = archive.namelist()
            entry_points = next((archive.read(f).decode() for f in files
                                 if f.endswith(".dist-info/entry_points.txt")), "")
        src = ROOT / sources.get(name, f"plugins/{name.removeprefix('outcommit_')}") / "src"
        shipped = {str(f.relative_to(src)) for f in src.rglob("*") if f.is_file()
                   and "__pycache__" not in f.parts and ".egg-info" not in str(f)}
        assert shipped <= set(files), f"{wheel.name} lacks {sorted(shipped - set(files))[:5]}"
        assert any(f.endswith("/py.typed") for f in files), f"{name}: no py.typed"
        if name == "outcommit":
            assert "outcommit = outcommit.cli:main" in entry_points
        else:
            assert "[outcommit]" in entry_points, f"{name} registers no plugin"


def test_a_fresh_virtualenv_installs_from_the_wheelhouse_and_runs_a_job(wheelhouse: Path,
                                                                       tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # As docs/install.md says: our wheels from the wheelhouse, their dependencies from the index.
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    upgrade = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                             capture_output=True, text=True, timeout=300, env=env)
    assert upgrade.returncode == 0, upgrade.stderr[-3000:]
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--find-links", str(wheelhouse),
         "outcommit[engine]", "outcommit-s3"], capture_output=True, text=True, timeout=900, env=env)
    assert install.returncode == 0, install.stderr[-3000:]
    plugins = subprocess.run([str(venv / "bin" / "outcommit"), "plugins", "--json"],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert plugins.returncode == 0, plugins.stderr
    found = {p["name"]: p for p in json.loads(plugins.stdout)}
    assert "s3" in found["s3"]["schemes"] and found["s3"]["error"] is None
    assert "azure" not in found                      # only what was installed
    job = ("import pyarrow as pa, outcommit\n"
           "from outcommit.engine.local import LocalDriver\n"
           "import sys\n"
           "r = LocalDriver(sys.argv[1], partition_by=['d']).run("
           "[pa.table({'id': [1, 2], 'd': ['x', 'y']})])\n"
           "print(outcommit.__file__, r.committer, r.files)\n")
    destination = f"file://{tmp_path}/out dir"
    ran = subprocess.run([str(python), "-c", job, destination], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    where, committer, files = ran.stdout.split()
    assert str(venv) in where and (committer, files) == ("v1", "2")   # the wheel, not the checkout
    shown = subprocess.run([str(venv / "bin" / "outcommit"), "success", destination, "--json"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["metrics"]["files.committed"] == 2


#: "pip install" and then a distribution by its bare name: what PyPI would resolve.
FROM_PYPI = re.compile(r"pip install (?:-\S+ )*['\"]?(outcommit(?:-[a-z0-9]+)?)\b(?![/\w])")
OURS = {"outcommit", "outcommit-s3", "outcommit-azure", "outcommit-gcs", "outcommit-hdfs",
        "outcommit-devtools"}


def test_no_hint_installs_our_distributions_from_pypi_by_name() -> None:
    """They are not on PyPI, and anyone could register the names: every hint in the code and
    the docs installs from a wheelhouse (--find-links) or a checkout's directory."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for directory in DISTRIBUTIONS:
        texts += sorted((ROOT / directory / "src").rglob("*.py"))
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in texts for number, line in enumerate(path.read_text().splitlines(), 1)
             if any(m.group(1) in OURS for m in FROM_PYPI.finditer(line))]
    assert found == [], "\n".join(found)
