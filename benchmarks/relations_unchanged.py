"""Check that a change leaves every relation's contents as they were: dump, then compare two dumps.

    # with the old tracehouse on the path (another checkout), then with this one:
    .venv/bin/python benchmarks/relations_unchanged.py dump /tmp/before [TRACES ...]
    .venv/bin/python benchmarks/relations_unchanged.py dump /tmp/after [TRACES ...]
    .venv/bin/python benchmarks/relations_unchanged.py compare /tmp/before /tmp/after

`dump` ingests the traces (default: sample_traces/) into a fresh warehouse and writes every
relation (tables and views, raw and public) as one Parquet file, rows sorted over all columns.
`compare` checks every relation of the first dump against the second: same columns (the second
may add some: they are reported, not compared), same rows (warehouse_meta without the stamps
that hash the SQL text or ingest times; parquet_files without the rows of tables new in the
second). Columns that record when or where
the ingest ran (ingested_at, at, path, durations of the ingest itself) are left out.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

REPO = Path(__file__).resolve().parents[1]
# Columns that differ between two ingests of the same files by design (when, where).
VOLATILE = {"ingested_at", "at", "path", "created_at", "built_at", "refreshed_at", "warehouse_dir"}
# warehouse_meta rows that differ by design: hashes of the SQL text (any .sql change moves them)
# and the per-run stamps (they hash each manifest's ingested_at).
CODE_STAMPS = ("sql_digest", "inputs_stamp", "run_stamps")


def dump(out: Path, traces: list[str]) -> None:
    """Ingest `traces` into a fresh warehouse and write every relation to out/<name>.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        warehouse = Path(tmp) / "wh"
        cli = "from tracehouse.pipeline.cli.main import run; run()"
        cmd = [sys.executable, "-c", cli, "ingest", "--warehouse", str(warehouse), *traces]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        from tracehouse.pipeline.warehouse.database import connect

        with connect(warehouse, read_only=True) as c:
            names = [r[0] for r in c.sql("SELECT table_name FROM information_schema.tables").fetchall()]
            for name in sorted(names):
                frame = c.sql(f'SELECT * FROM "{name}"').pl()
                frame = frame.drop([col for col in frame.columns if col in VOLATILE])
                frame.sort(frame.columns, nulls_last=True).write_parquet(out / f"{name}.parquet")
    print(f"{len(names)} relations written to {out}")


def compare(before: Path, after: Path) -> int:
    """0 when every relation of `before` has the same rows in `after` (its columns only)."""
    failures, added = [], []
    files = sorted(before.glob("*.parquet"))
    for f in files:
        other = after / f.name
        if not other.exists():
            failures.append(f"{f.stem}: missing after")
            continue
        old, new = pl.read_parquet(f), pl.read_parquet(other)
        extra = [c for c in new.columns if c not in old.columns]
        if extra:
            added.append(f"{f.stem}: +{', '.join(extra)}")
        missing = [c for c in old.columns if c not in new.columns]
        if missing:
            failures.append(f"{f.stem}: columns gone: {missing}")
            continue
        new = new.select(old.columns)
        if f.stem == "warehouse_meta":
            old, new = (x.filter(~pl.col("key").is_in(CODE_STAMPS)) for x in (old, new))
        if f.stem == "parquet_files":
            new = new.filter(pl.col("table_name").is_in(old["table_name"].unique().to_list()))
        new = new.sort(old.columns, nulls_last=True)
        try:
            assert_frame_equal(old, new)
        except AssertionError as exc:
            failures.append(f"{f.stem}: {str(exc).splitlines()[0]}")
    new_relations = sorted({p.stem for p in after.glob("*.parquet")} - {p.stem for p in files})
    print(f"compared {len(files)} relations: {len(files) - len(failures)} unchanged, {len(failures)} changed")
    print(f"new relations: {', '.join(new_relations) or 'none'}")
    print(f"new columns: {'; '.join(added) or 'none'}")
    for line in failures:
        print(f"CHANGED {line}")
    return 1 if failures else 0


def main() -> int:
    """Command line: dump OUT [TRACES ...] | compare BEFORE AFTER."""
    if len(sys.argv) >= 3 and sys.argv[1] == "dump":
        dump(Path(sys.argv[2]), sys.argv[3:] or [str(REPO / "sample_traces")])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        return compare(Path(sys.argv[2]), Path(sys.argv[3]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
