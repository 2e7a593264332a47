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
from dataclasses import dataclass
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
    """As ``make wheels``: ``pip wheel --no-deps`` in build isolation, nothing of this environment."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
                    str(wheelhouse), *(str(ROOT / d) for d in DISTRIBUTIONS)],
                   check=True, capture_output=True, text=True, timeout=900)
    for directory in DISTRIBUTIONS:
        shutil.rmtree(ROOT / directory / "build", ignore_errors=True)  # setuptools' scratch copy
    return sorted(wheelhouse.glob("*.whl"))


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
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


#: What a user installs (docs/install.md): the core with the local engine and every plugin.
REQUIREMENTS = ["outcommit[engine]", "outcommit-s3", "outcommit-azure", "outcommit-gcs", "outcommit-hdfs"]
#: pip's own words when it rejects candidates of a project (its resolver's reporter).
BACKTRACKING = re.compile(r"pip is (still )?looking at multiple versions|This is taking longer than usual")
FETCHED = re.compile(r"^\s*(?:Downloading|Using cached|Processing|File was already downloaded)\s+(\S+)",
                     re.MULTILINE)


def candidates_fetched(output: str) -> dict[str, set[str]]:
    """Project -> the versions pip fetched (a wheel, an sdist or a wheel's metadata) to resolve."""
    found: dict[str, set[str]] = {}
    for match in FETCHED.finditer(output):
        name = match.group(1).rsplit("/", 1)[-1].removesuffix(".metadata")
        if name.endswith(".whl"):
            project, version = name.split("-")[:2]
        elif name.endswith((".tar.gz", ".zip")):
            project, _, version = name.removesuffix(".tar.gz").removesuffix(".zip").rpartition("-")
        else:
            continue
        found.setdefault(_normalise(project), set()).add(version)
    return found


@dataclass
class Installed:
    venv: Path
    pip: str        # pip's version
    output: str     # what pip install printed


def _fresh_install(root: Path, newest_pip: bool, wheelhouse: Path) -> Installed:
    """A fresh virtual environment (``python -m venv``: the pip the interpreter bundles, 23.2
    here) or one with the newest pip, and ``pip install --find-links <wheelhouse>`` of
    REQUIREMENTS: our wheels from the wheelhouse, their dependencies from the index."""
    venv = root / ("newest-pip" if newest_pip else "bundled-pip")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    if newest_pip:
        upgrade = subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                                 capture_output=True, text=True, timeout=300, env=_env())
        assert upgrade.returncode == 0, upgrade.stderr[-3000:]
    install = subprocess.run([python, "-m", "pip", "install", "--find-links", str(wheelhouse),
                              *REQUIREMENTS], capture_output=True, text=True, timeout=1800, env=_env())
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    version = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True,
                             check=True, env=_env()).stdout.split()[1]
    return Installed(venv, version, install.stdout + install.stderr)


def _env() -> dict[str, str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module", params=["bundled-pip", "newest-pip"])
def installed(request: pytest.FixtureRequest, wheelhouse: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return _fresh_install(tmp_path_factory.mktemp("venvs"), request.param == "newest-pip", wheelhouse)


@pytest.mark.install
def test_installing_from_the_wheelhouse_resolves_without_backtracking(installed: Installed) -> None:
    """Each project is settled at its first or second candidate (a second: pip looked at the
    newest before a narrower pin was known, as botocore's before aiobotocore's), and pip never
    says it is looking at multiple versions. Declaring boto3 beside s3fs made the newest pip
    walk down 20 boto3 releases, and a fresh venv's pip 23.2 give up (ResolutionImpossible)."""
    tried = {project: sorted(versions) for project, versions in candidates_fetched(installed.output).items()
             if len(versions) > 2}
    said = BACKTRACKING.search(installed.output)
    assert tried == {} and not said, (f"pip {installed.pip} backtracked ({said and said.group(0)}); "
                                      f"it tried these versions: {tried}")
    assert "outcommit-s3" in installed.output and "Successfully installed" in installed.output


@pytest.mark.install
def test_the_installed_wheels_run_a_job_and_their_hints_name_the_wheelhouse(installed: Installed,
                                                                         tmp_path: Path) -> None:
    venv, env = installed.venv, _env()
    python = str(venv / "bin" / "python")
    plugins = subprocess.run([str(venv / "bin" / "outcommit"), "plugins", "--json"],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert plugins.returncode == 0, plugins.stderr
    found = {p["name"]: p for p in json.loads(plugins.stdout)}
    for name, scheme in [("s3", "s3"), ("azure", "abfs"), ("gcs", "gs"), ("hdfs", "hdfs")]:
        assert scheme in found[name]["schemes"] and found[name]["error"] is None, found[name]
    assert "devtools" not in found                      # only what was installed
    job = ("import pyarrow as pa, outcommit, sys\n"
           "r = outcommit.write_dataset(pa.table({'id': [1, 2], 'd': ['x', 'y']}), sys.argv[1], "
           "partitioning=['d'])\n"
           "from outcommit.install import install_command\n"
           "print(outcommit.__file__, r.committer, r.files, install_command('outcommit-gcs'), sep='|')\n")
    destination = f"file://{tmp_path}/out dir"
    ran = subprocess.run([python, "-c", job, destination], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    where, committer, files, hint = ran.stdout.strip().split("|")
    assert str(venv) in where and (committer, files) == ("v1", "2")   # the wheel, not the checkout
    # Installed from a wheelhouse, pip records no origin: the hint names a wheelhouse.
    assert hint.startswith("pip install --find-links WHEELHOUSE 'outcommit-gcs'"), hint
    shown = subprocess.run([str(venv / "bin" / "outcommit"), "success", destination, "--json"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["metrics"]["files.committed"] == 2


def test_make_wheels_needs_no_development_environment() -> None:
    """The Makefile's wheels target: no setup prerequisite (the .venv with Ray, Spark, Dask),
    and builds in isolation (no --no-isolation, which would need setuptools in .venv)."""
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^wheels:(.*)\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert target, "no wheels target"
    assert target.group(1).strip() == "" and "$(BIN)" not in target.group(2), target.group(0)
    assert "pip wheel" in target.group(2) and "--no-isolation" not in target.group(2)


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
