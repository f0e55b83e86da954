"""When a local ingest runs its tasks on a process pool: the uncompressed size decides (gzip ISIZE)."""

from __future__ import annotations

import gzip

from tracehouse.pipeline.ingest.driver import (
    POOL_STARTUP_S,
    TASK_FIXED_S,
    TASK_JSON_BYTES_PER_S,
    json_size,
    pool_workers,
    unwrapped_isize,
)

GB = 1 << 30


def test_json_size_is_the_uncompressed_size_of_a_gzip_file_and_the_size_of_a_plain_one(tmp_path):
    text = b'{"traceEvents": []}' * 5000
    (tmp_path / "t.json").write_bytes(text)
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text))
    assert json_size(tmp_path / "t.json") == len(text)
    assert json_size(tmp_path / "t.json.gz") == len(text)
    assert (tmp_path / "t.json.gz").stat().st_size < len(text) // 50


def test_an_isize_that_wrapped_past_4_gib_is_restored_from_the_gzip_size():
    assert unwrapped_isize(300 * (1 << 20), (5 * GB) % (4 * GB)) == 5 * GB
    assert unwrapped_isize(600 * (1 << 20), (9 * GB) % (4 * GB)) == 9 * GB
    assert unwrapped_isize(10 << 20, 150 << 20) == 150 << 20  # small files: the footer as it is
    assert unwrapped_isize(100 << 20, 1000) == 4 * GB + 1000  # never below the gzip size


def test_the_pool_runs_when_its_savings_outweigh_its_start_up():
    per_file = (POOL_STARTUP_S - 2 * TASK_FIXED_S) * TASK_JSON_BYTES_PER_S  # two files: work = startup
    assert pool_workers([int(per_file)] * 2, cores=2) == 0  # saves half the work: less than the start-up
    assert pool_workers([int(per_file * 2.2)] * 2, cores=2) == 2
    assert pool_workers([int(per_file * 2.2)] * 5, cores=4) == 4
    assert pool_workers([10 * GB], cores=16) == 0  # one file: nothing to share
    assert pool_workers([GB, GB], cores=1) == 0
