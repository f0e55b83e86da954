"""A notebook executed in a real Jupyter kernel (nbclient, the venv's own Python), as a user would.

It ingests the sample traces, opens the warehouse, shows tables, every chart and the views,
and opens a folder that fails, then one that works, in the same kernel. ipywidgets is blocked
in the kernel (DuckDB asks for it in Jupyter), so the test passes only without it.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from support.testdata import SAMPLE_TRACES

pytestmark = pytest.mark.slow  # about 45 s: a kernel, an ingest of 22 traces, every chart drawn

KERNEL = "tracehouse-test-venv"
ONE_RUN = SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws1"


def chart_names() -> list[str]:
    """Every chart `wh.charts` offers."""
    from tracehouse.pipeline.warehouse.reading import Charts

    return [name for name, _ in inspect.getmembers(Charts, inspect.isfunction) if not name.startswith("_")]


def setup_cell() -> str:
    return "\n".join(
        [
            "import sys",
            "sys.modules['ipywidgets'] = None  # blocked: any import of it fails, as where it is absent",
            "import os, duckdb, tracehouse",
            "print(sys.executable)",
        ]
    )


def notebook(tmp: Path) -> nbformat.NotebookNode:
    """The cells, each tagged with what the test checks in its outputs."""
    cells = [
        ("setup", setup_cell()),
        ("ingest", f"summary = tracehouse.ingest([{str(SAMPLE_TRACES)!r}], 'wh')\nsummary"),
        ("open", "wh = tracehouse.open('wh')\nwh"),
        ("view", "wh.scale_points().pl().sort('run_id')"),
        *[(f"chart:{name}", f"wh.charts.{name}()") for name in chart_names()],
        ("views", "wh.views()"),
        ("diff", "wh.diff('ddp-ws2', 'ddp-ws4')"),
        ("report", "print(wh.report('report.html').charts > 0, os.path.getsize('report.html') > 0)"),
        ("version", "print(tracehouse.__version__)"),
        (
            "ingest-while-open",
            f"try:\n    tracehouse.ingest([{str(ONE_RUN)!r}], 'wh')\n"
            "except tracehouse.WarehouseError as exc:\n    print(exc)",
        ),
        (
            "ingest-after-close",
            f"wh.close()\nprint(tracehouse.ingest([{str(ONE_RUN)!r}], 'wh', progress='off').skipped)",
        ),
        (
            "project",
            "tracehouse.project('wh', study='tiny-cpu-gloo', run='ddp-ws1', layout='dp=1,pp=2', "
            "interference=False)",
        ),
        (
            "open-while-written",
            "writer = duckdb.connect('wh/tracehouse.duckdb')\n"
            "try:\n    tracehouse.open('wh')\nexcept tracehouse.WarehouseError as exc:\n    print(exc)\n"
            "writer.close()\nprint(tracehouse.open('wh').studies())",
        ),
        (
            "failed-open-then-good",
            "import os\nos.makedirs('other')\n"
            "duckdb.connect('other/tracehouse.duckdb').close()  # a DuckDB file, no warehouse\n"
            "try:\n    tracehouse.open('other')\nexcept tracehouse.WarehouseError as exc:\n    print(exc)\n"
            f"print(tracehouse.ingest([{str(ONE_RUN)!r}], 'other', progress='off').loaded)\n"
            "print(tracehouse.open('other').runs().pl()['run_id'].to_list())",
        ),
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"check": tag}) for tag, source in cells]
    return nb


def venv_kernel(tmp: Path) -> KernelManager:
    """A kernel manager whose only kernel runs this test's own Python (the venv's)."""
    spec_dir = tmp / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "tracehouse test venv",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(tmp / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """Each cell's outputs by its tag, after the whole notebook ran in a real kernel."""
    tmp = tmp_path_factory.mktemp("notebook")
    work = tmp / "work"
    work.mkdir()
    nb = notebook(tmp)
    client = NotebookClient(nb, km=venv_kernel(tmp), timeout=300, resources={"metadata": {"path": str(work)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if any cell fails
    nbformat.write(nb, tmp / "executed.ipynb")
    outputs = {cell.metadata["check"]: cell.outputs for cell in nb.cells}
    for cell_outputs in outputs.values():  # messages name the folders absolute: name them as the cells do
        for o in cell_outputs:
            if o["output_type"] == "stream":
                o["text"] = o["text"].replace(f"{work}/", "")
    return outputs


def text(outputs: list[dict]) -> str:
    """What the cell printed (paths under the notebook's folder as the cells wrote them)."""
    return "".join(o["text"] for o in outputs if o["output_type"] == "stream")


def bundles(outputs: list[dict]) -> list[dict]:
    """The mime bundles the cell displayed (its result included)."""
    return [o["data"] for o in outputs if o["output_type"] in ("display_data", "execute_result")]


def test_the_kernel_is_this_venv_and_ipywidgets_is_blocked(executed):
    assert text(executed["setup"]).strip() == sys.executable  # the README's .venv under its test command


def test_ingest_shows_one_updating_progress_line_and_a_summary_table(executed):
    shown = bundles(executed["ingest"])
    progress = [b["text/plain"] for b in shown if "text/html" not in b]
    assert len(progress) == 1, progress  # one display, updated in place
    assert progress[0].startswith("tracehouse ingest [##############################] 22/22 ")
    summary = [b for b in shown if "text/html" in b]
    assert len(summary) == 1
    assert summary[0]["text/plain"].startswith("IngestSummary(22 loaded, 0 skipped, 0 failed, ")
    assert (
        "<table>" in summary[0]["text/html"]
        and "<td style='text-align:right'>22</td>" in (summary[0]["text/html"])
    )


def test_the_warehouse_and_a_view_show_as_tables(executed):
    (wh,) = bundles(executed["open"])
    assert wh["text/plain"].endswith(": 1 study, 9 runs, 22 rank traces")
    assert wh["text/html"].count("<tr>") == 1 + 9  # header and one row per run
    (view,) = bundles(executed["view"])
    assert "<table" in view["text/html"] and "ddp-ws1" in view["text/html"]


def test_every_chart_renders_offline(executed):
    drawn = []
    for name in chart_names():
        shown = bundles(executed[f"chart:{name}"])
        for bundle in shown:
            assert "http" not in json.dumps(bundle), name  # no Vega from a CDN, no URL at all
            assert bundle["text/html"].startswith("<div><svg "), name
            drawn.append(name)
    # every chart draws, also where the study has no data for it (power, projections): it says why
    assert set(drawn) == set(chart_names())


def test_the_report_is_written_from_the_kernel(executed):
    assert text(executed["report"]).split() == ["True", "True"]


def test_views_version_and_diff_render(executed):
    (views,) = bundles(executed["views"])
    assert "text/html" in views and "step_breakdown" in views["text/html"]
    (diff,) = bundles(executed["diff"])
    assert diff["text/plain"].startswith("RunDiff(tiny-cpu-gloo/ddp-ws2 -> tiny-cpu-gloo/ddp-ws4: step ")
    assert "<caption style='text-align:left'>components</caption>" in diff["text/html"]
    from importlib.metadata import version

    assert text(executed["version"]).strip() == version("tracehouse")


def test_a_folder_held_in_the_kernel_is_one_sentence_in_both_orders(executed):
    assert text(executed["ingest-while-open"]) == (
        "wh: this Python process has the warehouse open read-only (a tracehouse.open handle, or a "
        "read-only duckdb.connect); call its close() (wh.close()) first, then ingest\n"
    )
    assert text(executed["ingest-after-close"]) == "1\n"
    assert text(executed["open-while-written"]) == (
        "wh: this Python process has the warehouse open for writing (an ingest under way, or a read-write "
        "duckdb.connect); wait for the ingest or close that connection, then open it\n['tiny-cpu-gloo']\n"
    )


def test_a_projection_shows_its_layout_in_the_kernel(executed):
    (shown,) = bundles(executed["project"])
    assert shown["text/plain"] == "<Projections of 1 run(s): ddp-ws1 as ddp,pp=2>"
    assert "dp=1,pp=2,microbatches=4" in shown["text/html"]  # each point's layout is a column


def test_a_failed_open_leaves_nothing_behind(executed):
    assert text(executed["failed-open-then-good"]) == (
        "other: tracehouse.duckdb is no tracehouse warehouse (no warehouse_meta table); create one with "
        "tracehouse ingest (tracehouse.ingest in Python)\n1\n['ddp-ws1']\n"
    )
