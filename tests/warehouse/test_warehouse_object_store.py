"""Ingest from an object store: a real S3 API server (moto's server mode) on 127.0.0.1, read locally and by
the workers of a real Dask cluster; the warehouse equals a local ingest of the same files, row for row."""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import pytest
from support.dask_cluster import dask_cluster, study_inputs
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.discovery.jobs import TraceJob
from tracehouse.pipeline.discovery.locations import location
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.ingest.tasks import load_trace

BUCKET = "traces"
# The columns that name where a file was read from: the only ones a store and a folder differ in.
PATH_COLUMNS = ("path", "manifest_path")


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 server on 127.0.0.1 with one bucket; the standard AWS variables point at it."""
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
    }.items():
        monkeypatch.setenv(key, value)
    # moto keeps its buckets in the process, across servers: start from none
    urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST"))
    s3fs.S3FileSystem.clear_instance_cache()  # an earlier test's server had another port
    fs = s3fs.S3FileSystem()
    fs.mkdir(BUCKET)
    try:
        yield fs
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()


def upload(fs, folders: list[Path], root: Path) -> list[str]:
    """Each folder's files under s3://BUCKET/<its path below root>/; the URLs of the folders."""
    urls = []
    for folder in folders:
        key = f"{BUCKET}/{folder.relative_to(root).as_posix()}"
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                fs.put_file(str(f), f"{key}/{f.relative_to(folder).as_posix()}")
        urls.append(f"s3://{key}/")
    return urls


def paths_by_table(warehouse: Path) -> dict[str, list[str]]:
    """The path columns of the catalog, sorted, for comparing where files were read from."""
    import duckdb

    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as c:
        return {
            "traces": sorted(r[0] for r in c.sql("SELECT path FROM traces").fetchall()),
            "run_manifests": sorted(
                r[0] for r in c.sql("SELECT manifest_path FROM run_manifests").fetchall() if r[0]
            ),
        }


def errors(warehouse: Path) -> list[tuple]:
    import duckdb

    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as c:
        return c.sql("SELECT path, content_hash, reason FROM ingest_errors ORDER BY path").fetchall()


def as_urls(local: Path, paths: list[str]) -> list[str]:
    return sorted(f"s3://{BUCKET}/" + Path(p).relative_to(local).as_posix() for p in paths)


def check_equal_to_local(tmp_path: Path, stored, local, local_root: Path) -> None:
    assert (stored.loaded, stored.power_files, stored.events) == (
        local.loaded,
        local.power_files,
        local.events,
    )
    assert (local.loaded, local.power_files, len(local.failed)) == (4, 1, 3)
    in_store = str(local_root), f"s3://{BUCKET}"  # the same failures, naming the objects
    assert sorted(stored.failed) == sorted(
        (p.replace(*in_store), r.replace(*in_store)) for p, r in local.failed
    )
    stored_sums = checksums(tmp_path / "stored", without=PATH_COLUMNS)
    local_sums = checksums(tmp_path / "local", without=PATH_COLUMNS)
    assert (
        stored_sums.pop("ingest_errors")[0] == local_sums.pop("ingest_errors")[0] == 3
    )  # reasons name paths
    assert stored_sums == local_sums
    assert errors(tmp_path / "stored") == [
        (p.replace(*in_store), h, r.replace(*in_store)) for p, h, r in errors(tmp_path / "local")
    ]
    stored_paths, local_paths = paths_by_table(tmp_path / "stored"), paths_by_table(tmp_path / "local")
    for table, paths in local_paths.items():
        assert stored_paths[table] == as_urls(local_root, paths), table
    assert count(tmp_path / "stored", "power_samples") == 43


def test_a_store_prefix_ingests_like_the_folder_it_was_copied_from(tmp_path, s3):
    """Runs with a manifest and a power log, runs grouped by their traces, a bad file and a rank clash:
    read from s3:// on this machine, the warehouse holds what a local ingest of the folders holds."""
    root = tmp_path / "in"
    folders = study_inputs(root)
    urls = upload(s3, folders, root)
    local = ingest(folders, tmp_path / "local", study="s")
    stored = ingest(urls, tmp_path / "stored", study="s")
    check_equal_to_local(tmp_path, stored, local, root)
    again = ingest(urls, tmp_path / "stored", study="s")
    assert again.loaded == 0 and again.skipped == 5


@pytest.mark.slow
def test_cluster_workers_read_the_store_and_the_driver_never_downloads(tmp_path, s3, monkeypatch):
    """On a Dask scheduler with two workers (their credentials and endpoint from their own
    environment), each worker reads its files from the store: the driver never copies an object."""
    import os

    import tracehouse.pipeline.ingest.tasks as tasks

    root = tmp_path / "in"
    folders = study_inputs(root)
    urls = upload(s3, folders, root)
    local = ingest(folders, tmp_path / "local", study="s")

    def no_download(path):
        raise AssertionError(f"the driver read {path}")

    monkeypatch.setattr(tasks, "local_copy", no_download)
    with dask_cluster(2, env=os.environ) as address:
        stored = ingest(urls, tmp_path / "stored", study="s", scheduler=address)
    check_equal_to_local(tmp_path, stored, local, root)


def test_a_missing_object_or_bucket_fails_that_path_with_the_store_reason(tmp_path, s3):
    """A path that names nothing fails alone; an object gone by the time its task runs fails its file
    with the store's own reason, and the other files load."""
    write_trace(tmp_path / "ok" / "r0.json", rank=0)
    s3.put_file(str(tmp_path / "ok" / "r0.json"), f"{BUCKET}/ok/r0.json")
    summary = ingest(
        [f"s3://{BUCKET}/ok/r0.json", f"s3://{BUCKET}/nothing-here.json", "s3://no-such-bucket/x/"],
        tmp_path / "wh",
    )
    assert summary.loaded == 1
    assert dict(summary.failed) == {
        f"s3://{BUCKET}/nothing-here.json": "no such file or directory",
        "s3://no-such-bucket/x/": "no such file or directory",
    }
    gone = TraceJob(
        path=location(f"s3://{BUCKET}/gone.json"), study="s", run_id="r", rank=0, rank_source="option"
    )
    outcome = load_trace(gone, str(tmp_path / "wh"), frozenset())
    assert (outcome.status, outcome.path) == ("failed", f"s3://{BUCKET}/gone.json")
    assert (outcome.reason, outcome.internal) == (f"cannot read: not found ({BUCKET}/gone.json)", False)


def test_a_store_without_its_package_is_one_line(tmp_path):
    """A URL of a store whose fsspec package is not installed, or of no known store, fails that path
    with the install that fixes it; nothing is written for it."""
    summary = ingest(["zz://bucket/traces/"], tmp_path / "wh")
    assert summary.failed == [
        ("zz://bucket/traces/", "no filesystem for zz:// is installed (Unsupported filesystem: 'zz')")
    ]


def test_a_denied_read_fails_that_file_with_the_store_reason(tmp_path, s3, monkeypatch):
    """With credentials whose IAM policy (enforced by the server) denies reading one prefix, the
    readable trace loads and the other fails with the store's own words."""
    import boto3
    from moto import settings

    for name, rank in (("open/r0.json", 0), ("secret/r1.json", 1)):
        write_trace(tmp_path / name, rank=rank, world_size=2)
        s3.put_file(str(tmp_path / name), f"{BUCKET}/{name}")
    iam = boto3.client("iam")
    iam.create_user(UserName="reader")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
            {"Effect": "Deny", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/secret/*"},
        ],
    }
    iam.put_user_policy(UserName="reader", PolicyName="read-open", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks every request now
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    summary = ingest(
        [f"s3://{BUCKET}/open/r0.json", f"s3://{BUCKET}/secret/r1.json"], tmp_path / "wh", study="s", run="r"
    )
    assert summary.failed == [(f"s3://{BUCKET}/secret/r1.json", "cannot read: Access Denied")], summary.failed
    assert summary.loaded == 1
