"""tracehouse: where each training step's time goes as you add GPUs, and where more GPUs stop paying.

The Python API, over the same library the `tracehouse` command uses:

    import tracehouse
    summary = tracehouse.ingest(["runs/"], "warehouse")      # what `tracehouse ingest` does
    wh = tracehouse.open("warehouse")                        # read-only
    wh.scale_points(study="llama2").pl()                     # one method per public view
    wh.sql("select * from step_breakdown where rank = 0").df()
    wh.charts.breakdown(study="llama2")                      # the report's Altair charts
    wh.views()                                               # the public views and what they mean
    wh.diff("fsdp-ws4", "fsdp_tp-ws4-tp2")                   # what changed between two runs
    wh.report("report.html")
    tracehouse.project("warehouse", study="llama2", world_sizes=[64, 2048])  # `tracehouse project`

This file is the top-level `tracehouse` package (pyproject.toml maps it to `pipeline/api/`).
Every training rank imports it with the collectors, so it loads duckdb and polars only when a
warehouse is opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.pipeline.common.errors import TracehouseError, WarehouseError
from tracehouse.pipeline.ingest.summary import IngestSummary

if TYPE_CHECKING:
    from tracehouse.pipeline.projection.project import RunProjection
    from tracehouse.pipeline.warehouse.reading import Charts, Warehouse


__all__ = [
    "Charts",
    "IngestSummary",
    "TracehouseError",
    "Warehouse",
    "WarehouseError",
    "__version__",
    "ingest",
    "open",
    "project",
]


def __getattr__(name: str) -> Any:
    """`tracehouse.Warehouse` and `tracehouse.Charts`, imported on first use; `__version__`, read on use."""
    if name == "__version__":  # reading package metadata costs every training rank's import otherwise
        from tracehouse.pipeline.common.version import version

        return version()
    if name in ("Warehouse", "Charts"):
        from tracehouse.pipeline.warehouse import reading

        return getattr(reading, name)
    raise AttributeError(f"module 'tracehouse' has no attribute {name!r}")


def open(directory: str | Path, *, allow_files: Iterable[str | Path] = ()) -> Warehouse:
    """Open a warehouse directory read-only (it is never written); WarehouseError when it cannot be read.

    Its SQL reads the warehouse and nothing else; `allow_files` names directories whose files it
    may read too (DuckDB then lets it write there as well).
    """
    from tracehouse.pipeline.warehouse.reading import Warehouse

    return Warehouse(directory, allow_files=allow_files)


def ingest(
    paths: Iterable[str | Path],
    warehouse: str | Path,
    *,
    study: str | None = None,
    run: str | None = None,
    ranks: Mapping[str, int] | None = None,
    scheduler: str | None = None,
    progress: str | None = None,
    facts: Mapping[str, Any] | None = None,
) -> IngestSummary:
    """Ingest trace files or folders (and their runs' power logs) into a warehouse, as `tracehouse ingest`.

    `ranks` maps a file to its rank (`--rank FILE=N`), `scheduler` is a Dask scheduler address,
    `progress` is "off", "auto", "bar" or "lines" (None: one updating line in a notebook, else
    nothing), `facts` states manifest fields for the runs found without a manifest.json (e.g.
    `{"tokens_per_step": 4096, "dtype": "bf16"}`). The summary lists what loaded, failed and was
    skipped, and the runs the files went into.
    """
    from tracehouse.pipeline.ingest.driver import ingest as run_ingest  # Dask loads only when ingesting
    from tracehouse.pipeline.progress import in_notebook

    if progress is None:
        progress = "auto" if in_notebook() else "off"

    return run_ingest(
        paths,
        warehouse,
        study=study,
        run=run,
        ranks=ranks,
        scheduler=scheduler,
        progress=progress,
        facts=facts,
    )


def project(
    warehouse: str | Path,
    *,
    study: str,
    world_sizes: Iterable[int] = (),
    run: str | None = None,
    layout: str | Iterable[str] | None = None,
    network: str | Path | None = None,
    devices_per_node: int | None = None,
    compute_speedup: float = 1.0,
    matmul_speedup: float = 1.0,
    memory_speedup: float = 1.0,
    ideal_network: bool = False,
    weak_scaling: bool = False,
    interference: bool = True,
    grad_compression: float = 1.0,
    comm_dtype: str | None = None,
    device_memory_gb: float | None = None,
    bucket_mb: float | None = None,
    scenario: str | None = None,
    other_kinds: bool = False,
) -> list[RunProjection]:
    """Replay the study's runs (or one) and project them to each world size, as `tracehouse project`:
    the points are stored in the warehouse's `projections` table and returned with each run's
    identity check (docs/projection.md). `layout` ("fsdp=64", or several of one family) stands for
    the world sizes, as `--layout` does. `scenario` names the points (default: from what changes).
    `other_kinds`: every run also projected as the other data-parallel kind (DDP as FSDP, FSDP as
    DDP) and, without tensor or pipeline parallelism, split over the tp degrees its model allows
    and as a pipeline of the pp degrees its layers allow, as `--search` does; `.ranking(N)` of the
    result then ranks them all.
    Across a study, a run that cannot be projected is left out and named with its reason in the
    result's `failed`; the result shows as tables in a notebook and `.pl()` gives its points."""
    from tracehouse.pipeline.projection.layouts import layout_family, parse_layout
    from tracehouse.pipeline.projection.network import network_path
    from tracehouse.pipeline.projection.project import project_study, with_other_kinds
    from tracehouse.pipeline.projection.scenario import Scenario
    from tracehouse.pipeline.projection.timeline import LoadedRuns

    if other_kinds and (run is not None or layout is not None):
        raise TracehouseError("other_kinds projects every run as both kinds: leave out run and layout")
    sizes, family = list(world_sizes), None
    if layout is not None:
        if sizes:
            raise TracehouseError(
                "give world_sizes or layout, not both (a layout's world size is dp x tp x pp)"
            )
        family = layout_family(
            [parse_layout(text) for text in ([layout] if isinstance(layout, str) else layout)]
        )
        sizes = family.world_sizes
    elif not sizes:
        raise TracehouseError("give the world sizes to project to (world_sizes=) or a layout (layout=)")
    changes = Scenario(
        **(family.changes() if family else {}),
        compute_speedup=compute_speedup,
        matmul_speedup=matmul_speedup,
        memory_speedup=memory_speedup,
        ideal_network=ideal_network,
        weak_scaling=weak_scaling,
        interference=interference,
        grad_compression=grad_compression,
        comm_dtype=comm_dtype,
        device_memory=None if device_memory_gb is None else device_memory_gb * 1e9,
        bucket_bytes=None if bucket_mb is None else bucket_mb * 1e6,
    )
    network_file = network_path(network) if network is not None else None
    where = {
        "study": study,
        "world_sizes": sizes,
        "network_file": network_file,
        "devices_per_node": devices_per_node,
        "loaded": LoadedRuns(),  # with other_kinds, each run is projected again in every layout
    }
    results = project_study(
        Path(warehouse),
        run_id=run,
        scenario=changes,
        model_parallel=family.model_parallel if family else None,
        scenario_name=scenario or changes.short_name(network_file),
        **where,
    )
    if not other_kinds:
        return results
    return with_other_kinds(results, Path(warehouse), scenario=changes, scenario_name=scenario, **where)
