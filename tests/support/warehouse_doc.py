"""Generate docs/warehouse.md from pipeline/warehouse/schema.py and sql/raw/*.sql (run it to rewrite it).

Notes come from the comments in those files: in schema.py the `#` lines just above a column and
its trailing comment, in SQL the trailing `--` comment. A schema constant named in a note
(EVENT_KINDS) is expanded into its values.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "warehouse.md"

# Relation -> (parquet folder or None for a DuckDB table, grain).
RELATIONS = {
    "events": ("events", "one row per complete (`ph: X`) event of a registered rank trace"),
    "steps": (
        "steps",
        "one row per step number of a registered rank trace: the earliest host `ProfilerStep#N`"
        " event with that N on the rank's loop thread, the (pid, tid) holding the most of them"
        " (ties: the one whose first step starts first); other threads and the"
        " `gpu_user_annotation` copies on GPU streams are not kept",
    ),
    "collectives_raw": ("collectives", "one row per collective call per rank, as the trace shows it"),
    "threads": (
        "threads",
        "one row per (pid, tid) named by a `thread_name` event of a registered rank trace, plus one"
        " per pid named only by `process_name`",
    ),
    "process_groups": (
        "process_groups",
        "one row per process group in a trace's `distributedInfo.pg_config`",
    ),
    "ops": (
        "ops",
        "one row per host op-tree event (kinds cpu_op, python_function, user_annotation) of a registered"
        " rank trace; `op_id` is the event's index among the trace's complete events (as parsed, the same"
        " with and without the C scanner); the tree is per (pid, tid)",
    ),
    "op_launches": (
        "op_launches",
        "one row per GPU event (kind kernel, memcpy, memset) of a registered rank trace, with the op"
        " that launched it; `event_id`, `op_id` and `fwd_op_id` are indices among the trace's complete"
        " events, so `op_id` joins `ops.op_id` within one (study, run_id, rank)",
    ),
    "op_calls_raw": (
        "op_calls",
        "one row per host cpu_op call of a registered rank trace, with what `op_breakdown` and"
        " `module_breakdown` sum, computed by the ingest task from the trace's own ops, op_launches and"
        " steps (`pipeline/ops/calls.py`; the rules are in `sql/raw/op_calls_raw.sql`); the view also"
        " shows `op_calls_healed`'s rows, which win over a trace's partition; the materialized table"
        " `op_calls` holds a copy in the DuckDB file",
    ),
    "memory_events": (
        "memory_events",
        "one row per `[memory]` instant event (`ph: i`, written by profile_memory=True) of a registered"
        " rank trace, in file order",
    ),
    "power_samples_raw": ("power_samples", "one row per sample of a registered power log"),
    "traces": (None, "one row per ingested rank trace (content hash)"),
    "power_files": (None, "one row per ingested power log (content hash)"),
    "run_manifests": (None, "one row per run (study, run_id)"),
    "ingest_errors": (
        None,
        "one row per path whose latest attempt failed: its hash when readable, a one-line reason; "
        "a path that later loads, or is skipped as already present, is removed; `internal` marks a "
        "failure caused by a tracehouse bug (its reason starts `internal error (a tracehouse bug, ...)` "
        "and names the exception and where it was raised): the file is not blamed, the rest of the "
        "batch loaded. A file that loaded with a problem (power samples or nccl-tests result rows "
        "dropped as out of range or repeated, a test that failed) has one row per problem of "
        "`severity` 'warning', which stays while the file stays loaded",
    ),
    "network_files": (None, "one row per ingested nccl-tests output file (content hash)"),
    "network_curve_points": (
        None,
        "one row per measured point of an ingested nccl-tests file: one message size, out of place or"
        " in place, of one test of the file; the public view is `network_curves`",
    ),
    "projections": (
        None,
        "one row per projected point: a run replayed under a scenario at a world size, written by"
        " `tracehouse project` (a new projection of the same run and scenario replaces its rows)",
    ),
    "projection_checks": (
        None,
        "one row per check of a projection: a run replayed, without the scenario's what-ifs, at a world"
        " size where the study measured another run of the same workload, written by `tracehouse"
        " project`; the study's checks set every projected point's error band (docs/projection.md,"
        ' "How far to trust a projection")',
    ),
    "parquet_files": (None, "one row per registered Parquet partition file"),
    "op_calls_healed": (
        None,
        "the `op_calls` rows (same columns, with `content_hash` and `formulas_version`) of the"
        " registered traces that have no op_calls partition of the current formulas (ingested by an"
        " older tracehouse, or costed by other formulas), computed from their stored `ops`,"
        " `op_launches` and `steps` after every ingest (`pipeline/ops/store.py`); `op_calls_raw` shows"
        " these instead of a stale partition's rows; empty when every trace was ingested by this version",
    ),
    "critical_path_segments": (
        None,
        "one row per segment of a replayed step's critical path across ranks, written by `tracehouse"
        " project` (which replaces the run's rows); a run that cannot be replayed has one row with its"
        " `reason`; the public view is `critical_path`",
    ),
    "interference_fits": (
        None,
        "one row per study and device type: how much collective transfers and compute stretch while"
        " they overlap, fitted by `tracehouse project` on the study's measured multi-rank runs and"
        " reused while the study's traces are the same (docs/projection.md, \"Communication that"
        ' competes")',
    ),
    "op_slack_rows": (
        None,
        "one row per run, step, rank and op of a replayed step: how much one call of the op could grow"
        " before the step grows, written by `tracehouse project`; the public view is `op_slack`",
    ),
    "warehouse_meta": (None, "one row per fact about the warehouse itself"),
    "comm_kernel_patterns": (None, "one row per user-added communication kernel pattern; empty by default"),
    "comm_vocabulary": (
        None,
        "one row per built-in communication pattern (kind, pattern), the one definition in "
        "`pipeline/common/comm_vocabulary.py` that the parser uses too; tracehouse rewrites the rows "
        "whenever it builds the views, so add custom kernels to `comm_kernel_patterns` instead",
    ),
    "device_peaks": (
        None,
        "one row per device key and dtype of the peak table in `pipeline/common/hardware.py` (the "
        "denominator of MFU where a run's manifest states no peak); tracehouse rewrites the rows "
        "whenever it builds the views",
    ),
}
# Tables outside sql/raw documented here because their rows come from the user or from
# tracehouse's own definitions (sql/seeds), not from views.
INPUT_TABLES = {"comm_kernel_patterns", "comm_vocabulary", "device_peaks"}
KEY_NOTES = {
    "study": "study name",
    "run_id": "run id",
    "rank": "rank of the trace",
    "content_hash": "sha256 of the source file; the row is visible only while that file is registered",
}
# Units that the column name's suffix does not tell.
UNIT_BY_COLUMN = {
    "base_time_ns": "ns since the Unix epoch",
    "flops_per_token": "FLOP",
    "peak_flops": "FLOP/s",
    "global_batch": "sequences",
    "seq_len": "tokens",
    "tokens_per_step": "tokens",
    "group_size": "ranks",
    "world_size": "ranks",
    "nodes": "hosts",
    "count": "elements",
}
# Notes for DuckDB table columns whose SQL has no trailing comment (the SQL comment wins).
TABLE_NOTES = {
    ("traces", "base_time_ns"): "Kineto `baseTimeNanoseconds`: the trace's `ts` is µs after it;"
    " NULL when the trace has none (its `ts` is then µs since the epoch)",
    ("comm_kernel_patterns", "pattern"): "ILIKE pattern matched against GPU event names",
    ("comm_kernel_patterns", "note"): "free text",
    ("comm_vocabulary", "kind"): "kernel_prefix, kernel_substring (on the lowercased GPU event name), "
    "host_op_prefix, host_op_name (host ops that are communication, not compute), comm_span_prefix "
    "(communication spans of a CPU-only rank)",
    ("comm_vocabulary", "pattern"): "a literal string (no wildcards): prefix, substring or whole name",
    ("device_peaks", "match_order"): "a device name matches the first key it contains (lowest match_order)",
    ("device_peaks", "device_key"): "matched case-insensitively as a substring of the device name",
    ("device_peaks", "dtype"): "bf16, fp16, tf32 or fp32",
    ("device_peaks", "peak_flops"): "dense, per device (vendor datasheets)",
}
UNITS = [
    ("_bytes_per_s", "bytes/s"),
    ("_unix_ns", "ns since the Unix epoch"),
    ("_ns", "ns"),
    ("_w", "W"),
    ("_j", "J"),
    ("_c", "°C"),
    ("_pct", "%"),
    ("_mib", "MiB"),
    ("_us", "µs"),
    ("_gbps", "GB/s"),
    ("bytes", "bytes"),
]

HEADER = """# Warehouse: raw tables

Generated by `tests/support/warehouse_doc.py` from `pipeline/warehouse/schema.py`, `sql/raw/*.sql`,
`sql/seeds/comm_vocabulary.sql` and `sql/views/staging/comm_kernel_patterns.sql`; a test fails
when this file and those sources drift apart. Rewrite it with
`.venv/bin/python tests/support/warehouse_doc.py`.

## Layout

A warehouse is a directory:

```
DIR/tracehouse.duckdb                                    catalog, small tables, views
DIR/parquet/<table>/_empty.parquet                       schema only (see below)
DIR/parquet/<table>/study=S/run_id=R/rank=N/<hash>.parquet   one file per rank trace and table
DIR/parquet/power_samples/study=S/run_id=R/<hash>.parquet    one file per power log
DIR/.ingest.lock                                         held by a running ingest (one at a time)
DIR/.ingest.clean                                        the last ingest ended cleanly (see below)
```

* Parquet is the source of truth. Every Parquet row carries `study`, `run_id`, `rank` (not for
  power samples) and `content_hash` in the file itself; folder names are URL-quoted copies for
  people and tools, and the views read with `hive_partitioning = false`.
* The views read `parquet/<table>/**/*.parquet` relative to the warehouse directory (DuckDB's
  `file_search_path` is set to it; the `duckdb` shell started in the directory works as is).
  That setting takes a comma for a separator, so a warehouse path with a comma is refused.
  DuckDB fails on a glob that matches no file, so each table folder holds `_empty.parquet`, a
  zero-row file with the full schema, written when the warehouse is created.
* A file's Parquet is written to a temporary name and renamed into place by the worker; the
  driver checks it sees them (a worker's disk that the driver does not share fails the file),
  then registers its partitions (`parquet_files`) and its `traces` / `power_files` row in one
  transaction. The driver holds the DuckDB file for writing only in these short catalog
  phases, so queries answer while an ingest runs. The views show only rows whose
  `content_hash` is registered, so an interrupted ingest leaves nothing visible; the next
  ingest deletes unregistered and temporary files. An ingest that ends cleanly leaves
  `.ingest.clean` (removed as the next one starts), and then the next one need not list the
  Parquet folders.
* A file whose content hash is registered is skipped: ingesting twice changes no rows.
* Partitions are LZ4-compressed: faster to write and for DuckDB to read back than zstd, for
  about 1.7x the bytes (an events partition: ~9 bytes per event). Text columns are written as
  dictionaries (from Polars Categorical columns, cheaper to write): DuckDB reads them as VARCHAR,
  pyarrow as dictionary arrays and Polars as Categorical.
* Without a `manifest.json`, a directory's traces form run `--run` (default: the directory
  name) of study `--study` (default: `default`); a manifest's study and run_id win.

Times are absolute epoch nanoseconds (`*_unix_ns`), durations integer nanoseconds (`*_ns`).

The public views built on these tables are in `docs/views.md`. The warehouse also holds
tables computed from the raw ones (`sql/materialized/*.sql`; after an ingest only the runs whose
registered files or manifest changed are recomputed, each table's rows being per run, and a
change of the SQL, `comm_vocabulary` or `comm_kernel_patterns` recomputes everything; see
`pipeline/warehouse/refresh.py`) and staging views
(`sql/views/staging/*.sql`); those are internal and not listed here. Each `.sql` file's first
comment lines hold `-- depends on: ...`, the relations it reads; the warehouse creates them in
that order (`pipeline/warehouse/sql_runner.py`).

Only the public views carry DuckDB comments: each view's (and `power_samples`' table) is the first
sentence of its contract's description, each column's its meaning and unit, written right after the
relation is created (also when a read-only open rebuilds outdated views in memory). Any client lists
them: `SELECT view_name, comment FROM duckdb_views() WHERE comment IS NOT NULL`, or
`duckdb_columns()` for the columns; from Python, `wh.views()` gives the same text as a Polars frame.

## nccl-tests input

`tracehouse ingest` also reads the output of NVIDIA nccl-tests (`all_reduce_perf`,
`all_gather_perf`, `reduce_scatter_perf`, `alltoall_perf`, `sendrecv_perf`, `broadcast_perf`, ...)
as network calibration points (`pipeline/parsers/nccl_tests/`):

* What is read: a `.txt`, `.log` or `.out` file, found in a searched folder or named, whose first
  4 KiB show the nccl-tests run header (`# nThread N nGpus N minBytes ...`), its version or
  `# Collective test starting:` line, or the column header (`size count type ... time algbw
  busbw`); other text files (training logs) are not read. Each result row gives two rows of
  `network_curve_points` (out of place, in place) with the test's program, op, ranks, nodes,
  devices and NCCL version; the file is registered in `network_files` with them, in one
  transaction, and is skipped when ingested again. It belongs to a study (the `manifest.json`
  beside it, else `--study`, else `default`), not to a run. Both layouts are read: old (`error`
  columns, `redop`, `root` or neither, `redop` left blank for alltoall) and newer (`redop root`,
  `#wrong`); CRLF line endings, launcher prefixes (`[1,0]<stdout>:` of `mpirun --tag-output`,
  ` 0: ` of `srun -l`) and `NCCL INFO` lines anywhere, also inside the table, are taken in
  stride; a file may hold several tests.
* The program: the `# Collective test starting:` line, else the file name (`nccl_allreduce.log`),
  else the bandwidths (only all_reduce has busbw > algbw); op is its collective in the
  project's vocabulary (`alltoall_perf` is `all_to_all`, `sendrecv_perf` `send_recv`).
* Ranks are the `# Rank N` lines, nodes the distinct hosts they name. A file without rank lines
  (a table pasted alone) gets n derived from busbw / algbw, which nccl-tests computes with the
  op's factor: 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter, alltoall
  (gather, scatter): n is the one integer whose factor fits the ratio of the row with the
  largest algbw, both values within half a unit of their last printed place (`ranks_from`
  says which rule gave n). When several integers fit (very large n) or the factor is 1
  (broadcast, reduce, sendrecv) ranks is NULL, and nodes is NULL without rank lines.
* What is rejected, with one line in `ingest_errors` (the other files still load, exit status
  1): a file with no result table, e.g. a test that failed (`no result table (the test failed:
  'remote process exited or there was a network error')`); a result row that does not parse
  (`line N: a result row of 11 fields where the header has 13`, `line N: time 'x' is not a
  number`); an unknown column header; a table whose program nothing names and whose
  bandwidths fit several collectives. A test that failed in a file whose other tests have
  results is a warning; the results load.
* Values are held to `pipeline/common/limits.py` (`NCCL_RANGES`): a result row whose size or count
  lies outside 0 to 2^48, whose time lies outside 0 to 2^53 µs, whose bandwidth is negative or over
  10^9 GB/s, or any of them NaN or infinite, and a row inside a table whose size is not a byte
  count (`-8`, `1e3`, text), is dropped; the count of dropped rows, by reason, is a warning (the
  summary, and an `ingest_errors` row of `severity` 'warning'), e.g. `1 result rows dropped: time_us
  outside [0, 9.0072e+15] (1); its other results are loaded`.
"""


def schema_comments() -> dict[str, dict[str, str]]:
    """Per schema dict name in schema.py: column -> the `#` lines just above it, then its own comment."""
    text = (REPO / "pipeline" / "warehouse" / "schema.py").read_text()
    out: dict[str, dict[str, str]] = {}
    for block in re.finditer(r"^([A-Z_]+): dict\[str, pl\.DataType\] = \{\n(.*?)^\}", text, re.S | re.M):
        notes: dict[str, str] = {}
        above: list[str] = []
        for line in block.group(2).splitlines():
            comment = re.fullmatch(r"\s*#(.*)", line)
            column = re.fullmatch(r'\s*"(\w+)": [^#]*?(?:#(.*))?', line)
            if comment:
                above.append(comment.group(1).strip())
            elif column:
                notes[column.group(1)] = " ".join([*above, (column.group(2) or "").strip()]).strip()
                above = []
            else:
                above = []
        out[block.group(1)] = notes
    return out


def expand_constants(note: str, module: object) -> str:
    """Replace the name of a schema constant holding a list of strings by the strings themselves."""

    def values(match: re.Match[str]) -> str:
        value = getattr(module, match.group(0), None)
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return ", ".join(f"`{v}`" for v in value)
        return match.group(0)

    return re.sub(r"\b[A-Z][A-Z0-9_]+\b", values, note)


def sql_comments(text: str) -> dict[str, str]:
    """Column -> trailing `--` comment in a CREATE TABLE statement."""
    return {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r'^\s+"?(\w+)"? [A-Z][^\n]*?--([^\n]*)', text, re.M)
    }


def unit(column: str) -> str:
    """The unit of a column, from its name."""
    if column in UNIT_BY_COLUMN:
        return UNIT_BY_COLUMN[column]
    for suffix, name in UNITS:
        if column.endswith(suffix):
            return name
    return ""


def render() -> str:
    """The full text of docs/warehouse.md."""
    from tracehouse.pipeline.warehouse import schema
    from tracehouse.pipeline.warehouse.database import create_warehouse, open_for_query
    from tracehouse.pipeline.warehouse.partitions import PARQUET_TABLES
    from tracehouse.pipeline.warehouse.sql_runner import RAW_LAYER, load_sql_files

    sql_files = {f.name: f for f in load_sql_files()}
    documented = {name for name, f in sql_files.items() if f.layer == RAW_LAYER} | INPUT_TABLES
    assert set(RELATIONS) == documented, f"RELATIONS must list exactly {sorted(documented)}"

    comments = schema_comments()
    by_columns = {name: comments.get(name, {}) for name in dir(schema) if name.isupper()}
    sources = {
        "events": "EVENTS",
        "steps": "STEPS",
        "collectives": "COLLECTIVES",
        "threads": "THREADS",
        "process_groups": "PROCESS_GROUPS",
        "ops": "OPS",
        "op_launches": "OP_LAUNCHES",
        "op_calls": "OP_CALLS",
        "memory_events": "MEMORY_EVENTS",
        "power_samples": "POWER_SAMPLES",
    }
    parts = [HEADER]
    with tempfile.TemporaryDirectory() as tmp:
        create_warehouse(Path(tmp))
        with open_for_query(Path(tmp)) as c:
            for relation, (folder, grain) in RELATIONS.items():
                types = [(r[0], r[1]) for r in c.sql(f"DESCRIBE {relation}").fetchall()]
                if folder:
                    notes = by_columns[sources[folder]]
                else:
                    defaults = {col: note for (rel, col), note in TABLE_NOTES.items() if rel == relation}
                    notes = defaults | sql_comments(sql_files[relation].text)
                kind = f"view over `parquet/{folder}/`" if folder else "DuckDB table"
                parts.append(
                    f"\n## `{relation}` ({kind})\n\nGrain: {grain}.\n\n| column | type | unit | notes |\n"
                    "| --- | --- | --- | --- |\n"
                )
                if folder:
                    assert [n for n, _ in types] == list(PARQUET_TABLES[folder]), relation
                for name, sql_type in types:
                    note = notes.get(name) or (KEY_NOTES.get(name, "") if folder else "")
                    note = expand_constants(note, schema)
                    parts.append(f"| `{name}` | {sql_type} | {unit(name)} | {note.replace('|', '/')} |\n")
    return "".join(parts)


if __name__ == "__main__":
    DOC.write_text(render())
    sys.exit(0)
