"""Ingest through a real Dask cluster (scheduler + two workers) equals the local ingest exactly."""

from __future__ import annotations

import pytest
from support.dask_cluster import dask_cluster, study_inputs
from support.wh_helpers import checksums, count
from tracehouse.pipeline.ingest.driver import ingest


@pytest.fixture
def cluster():
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1; yields the address."""
    with dask_cluster(2) as address:
        yield address


@pytest.mark.slow
def test_distributed_ingest_equals_local(tmp_path, cluster):
    paths = study_inputs(tmp_path / "in")
    local = ingest(paths, tmp_path / "local", study="s")
    remote = ingest(paths, tmp_path / "remote", study="s", scheduler=cluster)
    assert (remote.loaded, remote.power_files, remote.events) == (
        local.loaded,
        local.power_files,
        local.events,
    )
    assert (local.loaded, local.power_files, len(local.failed)) == (4, 1, 3)
    assert sorted(remote.failed) == sorted(local.failed)
    assert checksums(tmp_path / "remote") == checksums(tmp_path / "local")
    assert count(tmp_path / "remote", "power_samples") == 43
    again = ingest(paths, tmp_path / "remote", study="s", scheduler=cluster)
    assert again.loaded == 0 and again.skipped == 5


@pytest.mark.slow
@pytest.mark.parametrize("engine", [("threads", 2), ("processes", 2)])
def test_every_local_engine_equals_in_process(tmp_path, monkeypatch, engine):
    import tracehouse.pipeline.ingest.driver as ingest_module

    paths = study_inputs(tmp_path / "in")
    monkeypatch.setattr(ingest_module, "local_engine", lambda sizes: ("in-process", 1))
    local = ingest(paths, tmp_path / "inproc", study="s")
    monkeypatch.setattr(ingest_module, "local_engine", lambda sizes: engine)
    other = ingest(paths, tmp_path / "other", study="s")
    assert (other.loaded, other.power_files, sorted(other.failed)) == (
        local.loaded,
        local.power_files,
        sorted(local.failed),
    )
    assert (local.loaded, local.power_files, len(local.failed)) == (4, 1, 3)
    assert checksums(tmp_path / "other") == checksums(tmp_path / "inproc")
