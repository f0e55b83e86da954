"""The layout shows the architecture: every module folder is packaged, imports point one way, no cycles.

Imports are read with `ast` from the source files (every `import` statement, also those inside
functions and `if TYPE_CHECKING:` blocks: a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from support.testdata import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE_DIRS: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]  # package -> folder
HEAVY = ("polars", "duckdb", "pyarrow", "dask", "distributed", "altair")


def module_files() -> dict[str, Path]:
    """Every tracehouse module name -> its source file (a folder mapped to its own package counts once)."""
    found: dict[str, Path] = {}
    roots = {REPO / folder for folder in PACKAGE_DIRS.values()}
    for package, folder in PACKAGE_DIRS.items():
        base = REPO / folder
        nested = [root for root in roots if base in root.parents]
        for path in sorted(base.rglob("*.py")):
            if any(root in path.parents for root in nested):
                continue  # under a folder mapped to a package of its own: named by that mapping
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = module_files()


def imports_of(path: Path) -> set[str]:
    """The tracehouse modules a source file imports (the module itself, or the package a name is from)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name in MODULES}


GRAPH = {name: imports_of(path) - {name} for name, path in MODULES.items()}


def test_every_folder_holding_python_modules_is_packaged():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    folders = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    with_modules = {name.rsplit(".", 1)[0] for name, path in MODULES.items() if path.name != "__init__.py"}
    assert with_modules <= folders, (
        f"folders of modules without __init__.py: {sorted(with_modules - folders)}"
    )
    assert folders == listed, (
        f"not packaged: {sorted(folders - listed)}; listed, absent: {sorted(listed - folders)}"
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_planted_cycle():
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(GRAPH[node])
    return seen


def test_common_imports_only_the_standard_library_and_itself():
    for name, path in MODULES.items():
        if name.startswith("tracehouse.pipeline.common"):
            outside = {m for m in reachable(name) if not m.startswith("tracehouse.pipeline.common")}
            assert outside <= {"tracehouse.pipeline"}, f"{name} imports {sorted(outside)}"
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    top = (node.names[0].name if isinstance(node, ast.Import) else node.module or "").split(
                        "."
                    )[0]
                    assert top in sys.stdlib_module_names or top in ("tracehouse", "__future__"), (name, top)


def test_collectors_and_reports_never_import_the_ingest_machinery():
    machinery = ("tracehouse.pipeline.ingest", "tracehouse.pipeline.discovery", "tracehouse.pipeline.parsers")
    for name in MODULES:
        if name.startswith(("tracehouse.collectors", "tracehouse.reports")):
            bad = sorted(m for m in reachable(name) if m.startswith(machinery))
            assert not bad, f"{name} reaches {bad}"


def test_nothing_outside_collectors_imports_torch():
    for name, path in MODULES.items():
        if name.startswith("tracehouse.collectors") or name == "tracehouse.pipeline.cli.collect":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "torch" for a in node.names), name
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] != "torch", name


def test_importing_the_collectors_loads_no_warehouse_library():
    """What runs inside every training rank: all of collectors/, imported in a fresh interpreter."""
    names = sorted(name for name in MODULES if name.startswith("tracehouse.collectors"))
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "", f"importing the collectors loaded {loaded.stdout.strip()}"
    assert "tracehouse.collectors.train" in names  # the torch side is really among them


def test_the_ingest_entry_loads_no_heavy_library_before_the_pool_server_starts():
    """driver and engine import nothing heavy: the local pool's server starts importing the tasks
    on another core while the driver imports DuckDB, Polars and Dask itself (`ingest.driver`)."""
    code = (
        "import sys\n"
        "import tracehouse.pipeline.ingest.driver, tracehouse.pipeline.ingest.engine\n"
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "", f"importing the ingest entry loaded {loaded.stdout.strip()}"


def test_the_pool_workers_preload_no_duckdb():
    """A pool worker parses and writes Parquet, and never opens the catalog: what its server
    preloads (engine.WORKER_PRELOAD) leaves DuckDB out (0.06 s of every pool's start)."""
    from tracehouse.pipeline.ingest.engine import WORKER_PRELOAD

    code = (
        "import importlib, sys\n"
        f"for name in {WORKER_PRELOAD!r}: importlib.import_module(name)\n"
        "print(','.join(sorted(m for m in ('duckdb', 'polars') if m in sys.modules)))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "polars", f"the workers' preload loaded {loaded.stdout.strip()}"
