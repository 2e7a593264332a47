"""Tampered and corrupt pending data: what job commit refuses and what abort still aborts."""

from __future__ import annotations

import json

import pytest
from s3_helpers import run_task, start

import outcommit
from outcommit import CorruptFileError
from outcommit.testing.conformance import leftovers, visible_files

pytestmark = pytest.mark.s3

NO_SWEEP = {"outcommit.s3.abort-pending-uploads": "false"}


def published(committer, job):
    root = committer.layout(job).pendingsets_dir(job)
    return [f.path for f in committer.meta.list_files(root) if f.path.endswith(".pendingset")]


@pytest.fixture
def config(s3_config):
    return {**s3_config, "outcommit.committer.unique-filenames": "false"}


@pytest.mark.parametrize("name", ["magic", "directory"])
@pytest.mark.parametrize("target", [
    "{dest}0/x.txt",                    # adjacent prefix: dataset10 for dataset1
    "/{dest}/x.txt",                    # absolute key
    "{dest}/a/../../x.txt",             # climbs out
    "{dest}",                           # the destination itself
    "{dest}/__staging_job-other/0/pendingsets/t/_claim.json",   # another job's state
    "{dest}/__magic_job-other/0/x.txt",
    "{dest}/sub/__magic/x/__base/y.txt",  # a magic path deeper down
    "{dest}/_temporary/0/x.txt",
    "{dest}/_SUCCESS",
])
def test_tampered_targets_are_refused_by_every_committer(name, target, config, s3_root):
    url = f"{s3_root}/d1"
    committer, job = start(url, config, name)
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    commit = message["commits"][0]
    dest_key = commit["destinationKey"].rsplit("/", 1)[0]
    tampered = {**message, "commits": [{**commit, "uri": "",
                                        "destinationKey": target.format(dest=dest_key)}]}
    with pytest.raises(CorruptFileError) as failure:
        committer.commit_job(job, [tampered])
    assert failure.value.field == "commits[0].destinationKey"
    committer.abort_job(job)
    store = outcommit.open_store(s3_root, config)
    assert visible_files(store, store.strip(s3_root)) == {}
    assert store.multipart().list_pending(store.strip(s3_root)) == []


@pytest.mark.parametrize("field,value", [
    ("uri", 5),                                   # not a string: a clear error, not a crash
    ("uri", "gs://{bucket}/{key}"),               # another store
    ("uri", "s3a://{bucket}/{key}.other"),        # another object
    ("created", "yesterday"),
    ("length", 10**30),                           # more than its parts can hold
    ("length", 5 * 1024**3 + 1),                  # one part holds at most 5 GiB
])
def test_bad_field_types_and_uri_fail_with_a_corrupt_file_error(field, value, config, s3_root):
    url = f"{s3_root}/fields"
    committer, job = start(url, config, "magic")
    message = run_task(committer, job, 0, {"a.txt": b"a"})
    commit = message["commits"][0]
    if isinstance(value, str):
        value = value.format(bucket=commit["bucket"], key=commit["destinationKey"])
    with pytest.raises(CorruptFileError) as failure:
        committer.commit_job(job, [{**message, "commits": [{**commit, field: value}]}])
    assert failure.value.field == f"commits[0].{field}"
    committer.abort_job(job)
    store = outcommit.open_store(url, config)
    assert leftovers(store, store.strip(url)) == []


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_abort_aborts_uploads_of_entries_with_broken_etags_without_the_sweep(name, config, s3_root):
    url = f"{s3_root}/etags"
    committer, job = start(url, config, name, **NO_SWEEP)
    run_task(committer, job, 0, {"a.txt": b"a", "b.txt": b"b"})
    victim = published(committer, job)[0]
    data = committer.meta.load_json(victim)
    data["commits"][0]["etags"] = []
    data["commits"][1]["length"] = "many"
    committer.meta.write_bytes(victim, json.dumps(data).encode())
    with pytest.raises(CorruptFileError):
        committer.commit_job(job)
    committer.abort_job(job)
    store = outcommit.open_store(url, config)
    assert leftovers(store, store.strip(url)) == []


def test_abort_scans_a_truncated_pendingset_for_its_uploads(config, s3_root):
    url = f"{s3_root}/trunc"
    committer, job = start(url, config, "magic", **NO_SWEEP)
    run_task(committer, job, 0, {"a.txt": b"a", "b.txt": b"b", "c.txt": b"c"})
    victim = published(committer, job)[0]
    raw = committer.meta.read_bytes(victim)
    committer.meta.write_bytes(victim, raw[:len(raw) - 40])  # cut inside the last entry
    with pytest.raises(CorruptFileError):
        committer.commit_job(job)
    committer.abort_job(job)
    store = outcommit.open_store(url, config)
    assert leftovers(store, store.strip(url)) == []


def test_abort_never_aborts_an_upload_a_tampered_file_names_outside(config, s3_root):
    url = f"{s3_root}/dataset1"
    committer, job = start(url, config, "magic", **NO_SWEEP)
    store = outcommit.open_store(s3_root, config)
    neighbour = f"{store.strip(url)}0/x.txt"             # .../dataset10/x.txt
    upload = store.multipart().initiate(neighbour)
    run_task(committer, job, 0, {"a.txt": b"a"})
    victim = published(committer, job)[0]
    data = committer.meta.load_json(victim)
    data["commits"].append({**data["commits"][0], "destinationKey": neighbour.partition("/")[2],
                            "uploadId": upload, "uri": ""})
    committer.meta.write_bytes(victim, json.dumps(data).encode())
    committer.meta.write_bytes(victim.replace(".pendingset", "-x.pendingset"), b"{" + json.dumps(
        data).encode())  # unparseable copy: the text scan must respect containment too
    with pytest.raises(CorruptFileError, match="outside"):
        committer.commit_job(job)
    committer.abort_job(job)
    assert [u.upload_id for u in store.multipart().list_pending(store.strip(s3_root))] == [upload]
    assert leftovers(store, store.strip(url)) == []
    store.multipart().abort(neighbour, upload)


@pytest.mark.parametrize("name", ["magic", "directory", "partitioned"])
@pytest.mark.parametrize("suffix", ["/a/../b", "//b", "/./b"])
def test_ambiguous_destinations_are_refused_before_anything_is_written(name, suffix, config, s3_root):
    with pytest.raises(outcommit.ConfigError, match="path component"):
        outcommit.create_committer(f"{s3_root}{suffix}", config, name)
    store = outcommit.open_store(s3_root, config)
    assert store.list_files(store.strip(s3_root)) == []
