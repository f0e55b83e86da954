"""A new warehouse's catalog is a copy of an empty one kept in the cache folder: made once per SQL tree and
DuckDB version, it leaves every relation as creating them in place would."""

from __future__ import annotations

from support.testdata import sample_runs
from support.wh_helpers import relation_contents, same_row
from tracehouse import ingest
from tracehouse.pipeline.warehouse.database import CACHE_VARIABLE, create_warehouse
from tracehouse.pipeline.warehouse.sql_runner import load_sql_files


def test_the_template_is_made_once_and_gives_what_creating_in_place_gives(tmp_path, monkeypatch):
    runs = sample_runs()[:2]
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_VARIABLE, str(cache))
    create_warehouse(tmp_path / "first")
    (template,) = cache.iterdir()  # one catalog, named by DuckDB's version and the SQL digest
    made = template.stat().st_mtime_ns
    for run in runs:
        assert not ingest([run], tmp_path / "copied").failed
    assert [p.stat().st_mtime_ns for p in cache.iterdir()] == [made]  # reused, not made again
    unwritable = tmp_path / "a-file"
    unwritable.write_text("not a folder")
    monkeypatch.setenv(CACHE_VARIABLE, str(unwritable / "cache"))  # no template can be kept there
    for run in runs:
        assert not ingest([run], tmp_path / "in-place").failed
    copied, in_place = relation_contents(tmp_path / "copied"), relation_contents(tmp_path / "in-place")
    materialized = {f.name for f in load_sql_files() if f.materialized}
    assert copied.keys() == in_place.keys() and any(copied["step_breakdown"])
    for name, rows in in_place.items():
        assert len(copied[name]) == len(rows), name
        for a, b in zip(copied[name], rows, strict=True):
            assert same_row(a, b, exact=name in materialized), (name, a, b)
