"""The package's layout drawn from its imports (issue 36, item 5): no import circles, and no module imports an entry
point or the reporting code from below. Every ``import`` statement counts, at the top of a module or inside a function
(a function-level import is a dependency too, only a later one)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cl_bench"
#: the layers, top first: a module imports only modules of its own layer or of a layer below (the packages are the
#: layers: cl_bench/<package>/; ``specs`` and ``run_specs`` are the top-level modules: the options' and the run groups' specs, which every layer reads)
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"__main__", "commands"}),   # the entry points (cl-bench, -report, -export, the sweep callback) and the run
    frozenset({"reporting"}),              # cl-bench-report: reads runs
    frozenset({"config"}),                 # schema, specs' checks, catalog, the checks before Hydra's job, seeds
    frozenset({"train"}),                  # the trainer
    frozenset({"methods"}),                # views, encoders, heads, hooks
    frozenset({"losses", "augment", "models", "data", "eval", "tracking"}),
    frozenset({"utils", "specs", "run_specs", "resources"}),
)
#: the command-line entry points and Hydra's sweep callback: the top layer, imported by no other module but __main__
ENTRY = {"cl_bench.commands.cli", "cl_bench.commands.report_cli", "cl_bench.commands.export",
         "cl_bench.commands.sweep_callbacks", "cl_bench.__main__"}


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of a ``cl_bench`` module (its package, or its own name at the top level)."""
    part = module.split(".")[1]
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """``{module: the cl_bench modules it imports}`` (``from package import module`` names the module)."""
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                candidates = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            graph[name] |= {c for c in candidates if c in files and c != name and c != "cl_bench"}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_circles() -> None:
    assert import_cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_from_a_layer_above_or_an_entry_point() -> None:
    """Each import goes to the module's own layer or one below (:data:`LAYERS`), and only ``__main__`` imports an entry
    point (``tracking/`` used to reach into ``cli.preflight`` and ``report``, ``early_checks`` into ``cli``)."""
    graph = import_graph()
    assert all(any(module.split(".")[1] in layer for layer in LAYERS) for module in graph if module != "cl_bench")
    upward = sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets
                    if module != "cl_bench" and (layer_of(target) < layer_of(module)
                                                 or target in ENTRY and module != "cl_bench.__main__"))
    assert upward == []


def test_the_top_level_holds_packages_and_the_specs_only() -> None:
    """Entry points, configuration, reporting and leaf utilities each sit in a package of their own."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py", "run_specs.py", "specs.py"]


def test_the_test_folders_mirror_the_packages() -> None:
    """``tests/<package>/`` for each package of cl_bench that has tests; the cross-cutting ones (layout, benchmarks)
    and the shared helpers stay at the top."""
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("reference_data", "__pycache__")}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders and folders <= packages, folders - packages
    assert sorted(p.name for p in tests.glob("test_*.py")) == ["test_bench_flops.py", "test_benchmarks_gpu_script.py",
                                                               "test_layout.py"]
