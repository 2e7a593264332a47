"""Destinations that would quietly name another place than the one meant are refused before
anything is written; Hadoop's and RFC 8089's spellings of a local path name that path."""

from __future__ import annotations

import pytest

import outcommit
from outcommit import JobContext
from outcommit.errors import ConfigError
from outcommit.factory import normalise_url
from outcommit.read import committed_files


def replace_job(url: str) -> None:
    """One task writing part-0.csv, committed with conflict mode 'replace'."""
    committer = outcommit.create_committer(url, {"outcommit.committer.conflict-mode": "replace"})
    job = JobContext(url)
    committer.setup_job(job)
    task = job.task_attempt(0)
    committer.setup_task(task)
    with committer.filesystem(task).open(f"{committer.work_path(task)}/part-0.csv", "wb") as f:
        f.write(b"new\n")
    committer.commit_job(job, [committer.commit_task(task)])


@pytest.mark.parametrize("url", ["", "   ", "file://", "file:"])
def test_an_empty_destination_never_means_the_current_directory(url, tmp_path, monkeypatch):
    """An unset variable in f"file://{path}" made a 'replace' job delete the current
    directory's files (they were outside any destination the user named)."""
    (tmp_path / "important.txt").write_text("keep")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"empty|names no path|relative file URL"):
        replace_job(url)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important.txt"]


@pytest.mark.parametrize(("url", "message"), [
    ("file:///", "root of its filesystem"),
    ("file://localhost", "root of its filesystem"),
    ("file:///tmp/..", "'..' path component"),
    ("file:///tmp/./x", "'..' path component"),
    ("file://tmp/x", "names no host"),
    ("file:tmp/x", "relative file URL"),
    ("s3:/bucket/x", "without '//'"),
    ("hdfs:/user/x", r"without '//': write hdfs://authority/path .*hdfs:///path"),
    ("hdfs://namenode:8020/", "root of its filesystem"),
])
def test_a_destination_that_names_another_place_is_refused(url, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message):
        outcommit.create_committer(url, {"outcommit.committer.conflict-mode": "replace"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spelling", ["file:{path}", "file://localhost{path}", "file://{path}", "{path}"])
def test_hadoops_and_rfc_8089s_spellings_name_the_local_path(spelling, tmp_path, monkeypatch):
    """Spark and Hadoop print local paths as file:/path (Path.toString()): it was written
    to <cwd>/file:/path, where the CLI, reading file:/path as /path, found nothing."""
    workdir, target = tmp_path / "cwd", tmp_path / "out"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    url = spelling.format(path=target)
    replace_job(url)
    assert sorted(p.name for p in target.iterdir()) == ["_SUCCESS", "part-0.csv"]
    assert list(workdir.iterdir()) == []
    assert committed_files(url) == [f"file://{target}/part-0.csv"]


@pytest.mark.parametrize("name", ["data:2024", "run-2026-01-01T10:00", "./data:2024"])
def test_a_relative_path_with_a_colon_is_a_path(name, tmp_path, monkeypatch):
    """A timestamped directory is not a URL: only a store's scheme is (found in review)."""
    monkeypatch.chdir(tmp_path)
    assert normalise_url(name) == f"file://{tmp_path}/{name.removeprefix('./')}"


def test_a_committer_made_directly_never_takes_an_empty_url_for_the_current_directory():
    """Through the factory an empty file URL is refused; a store used directly refuses it too."""
    store = outcommit.open_store("file:///tmp")
    for url in ("file://", ""):
        with pytest.raises(ConfigError, match="names no path"):
            store.strip(url)


@pytest.mark.parametrize("committer_name", ["v1", "v2", "manifest"])
@pytest.mark.parametrize("below", ["", "/sub dir/ü"])
def test_a_destination_on_a_file_is_refused_naming_the_file(committer_name, below, tmp_path):
    """A destination that is a regular file (or lies below one) failed with the OS's
    "Not a directory: .../_temporary": the message now names the file, and the file and
    its directory are left as they were."""
    (tmp_path / "events").write_text("a file, not a table")
    url = f"file://{tmp_path}/events{below}"
    committer = outcommit.create_committer(url, committer=committer_name)
    with pytest.raises(NotADirectoryError, match=rf"file://{tmp_path}/events is a file, not a directory"):
        committer.setup_job(JobContext(url))
    assert [p.name for p in tmp_path.iterdir()] == ["events"]
    assert (tmp_path / "events").read_text() == "a file, not a table"


def test_a_home_directory_path_is_expanded_as_a_shell_would(tmp_path, monkeypatch):
    """``~/out`` created a directory named ``~`` in the current one (issue 29, item 5). The
    Python tools users pass the same path to expand it (fsspec, pyarrow's from_uri, pandas),
    as a shell does: so does outcommit, and a job writes to $HOME/out."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    assert normalise_url("~/out") == f"file://{home}/out"
    assert normalise_url("~") == f"file://{home}"
    replace_job("~/out")
    assert list(cwd.iterdir()) == []  # no directory named '~'
    assert committed_files("~/out") == [f"file://{home}/out/part-0.csv"]


def test_a_home_directory_that_cannot_be_expanded_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"'~no-such-user-x/out': no home directory for "
                                          r"'~no-such-user-x'.*write the full path"):
        replace_job("~no-such-user-x/out")
    with pytest.raises(ConfigError, match=r"'file://~/out': a file URL names no host \('~' here\): "
                                          r"write the path ~/out itself, or file:///"):
        replace_job("file://~/out")
    assert list(tmp_path.iterdir()) == []
