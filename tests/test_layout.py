"""The package's layout drawn from its imports (issue 36, item 5): no import circles, and no module imports an entry
point or the reporting code from below. Every ``import`` statement counts, at the top of a module or inside a function
(a function-level import is a dependency too, only a later one)."""

from __future__ import annotations

import ast
import re
import textwrap
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
    frozenset({"run_specs"}),              # the run groups' specs (they read the pooler and prompt registries)
    frozenset({"losses", "augment", "models", "data", "eval", "tracking"}),
    frozenset({"utils", "specs", "resources"}),
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


# ------------------------------------------------------------------------------------------------
# Issue 49, item 4: function-level imports only where start-up needs them, each listed in docs/layout.md
# ------------------------------------------------------------------------------------------------
LAYOUT_PAGE = PACKAGE.parent / "docs" / "layout.md"
#: the most function-level imports of cl_bench modules the package may hold (issue 49: 133 counted by the issue,
#: 179 by :func:`function_level_imports` at main 7c09931)
MOST_FUNCTION_LEVEL_IMPORTS = 50


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def function_level_imports_in(source: str, module: str, is_package: bool, modules: set[str]) -> list[tuple[str, str]]:
    """``[(function's qualified name, the cl_bench modules it imports, ", "-joined)]``: every ``import``/``from``
    statement of ``source`` that stands in a function's body (a method's too; at any depth of ``if``/``try``/``with``)
    and names a module of ``modules`` (the package's). An import at module level, in a class body, or under
    ``if TYPE_CHECKING:`` is no function-level import."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, str]] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names if alias.name in modules]
        base = node.module or ""
        if node.level:
            anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{anchor}.{base}" if base else anchor
        submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
        return submodules or ([base] if base in modules else [])

    def visit(node: ast.AST, scope: list[str], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*scope, child.name], in_function or not isinstance(child, ast.ClassDef))
            elif isinstance(child, ast.If) and not in_function and _is_type_checking(child.test):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]), scope, in_function)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                names = targets(child)
                if in_function and names:
                    found.append((".".join(scope), ", ".join(names)))
            else:
                visit(child, scope, in_function)

    visit(ast.parse(source), [], False)
    return found


def function_level_imports() -> list[str]:
    """Every function-level import of a cl_bench module in the package, ``cl_bench/<file>:<function> -> <module>``."""
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    rows = []
    for name, path in sorted(files.items()):
        where = path.relative_to(PACKAGE.parent).as_posix()
        for function, module in function_level_imports_in(path.read_text(), name, path.name == "__init__.py", set(files)):
            rows.append(f"{where}:{function} -> {module}")
    return rows


def listed_imports() -> dict[str, str]:
    """docs/layout.md's table of function-level imports: ``{"<file>:<function> -> <module>": why}``, from its rows
    ``| `cl_bench/<file>:<function>` | `<module>` | why |``."""
    rows = re.findall(r"^\| `(cl_bench/[^`]+)` \| `([^`]+)` \| (.*?) \|$", LAYOUT_PAGE.read_text(), flags=re.MULTILINE)
    return {f"{where} -> {module}": why.strip() for where, module, why in rows}


def test_the_counter_finds_imports_in_functions_only() -> None:
    """Module level, a class body and ``if TYPE_CHECKING:`` are no function-level imports; a method's, a nested
    function's and one under ``try:`` in a function are, relative ones resolved; other packages' are not counted."""
    source = textwrap.dedent('''
        from typing import TYPE_CHECKING
        import cl_bench.a
        if TYPE_CHECKING:
            from cl_bench import b
        class C:
            from cl_bench import b
            def m(self):
                from cl_bench.a import x
        def f():
            import json
            try:
                from . import b
            except ImportError:
                pass
            def g():
                import cl_bench.a
    ''')
    found = function_level_imports_in(source, "cl_bench.c", False, {"cl_bench", "cl_bench.a", "cl_bench.b", "cl_bench.c"})
    assert found == [("C.m", "cl_bench.a"), ("f", "cl_bench.b"), ("f.g", "cl_bench.a")]


def test_function_level_imports_are_listed_with_why_they_are_late() -> None:
    """Each function-level import of a cl_bench module is a row of docs/layout.md's table, with the reason it must
    wait (torch, transformers, MLflow or pandas kept out of a rejection's start-up, an optional extra, a plugin), and
    each row is still an import of the package."""
    found = function_level_imports()
    listed = listed_imports()
    assert [row for row in found if row not in listed] == [], "not in docs/layout.md's table of function-level imports"
    assert sorted(row for row in listed if row not in found) == [], "listed in docs/layout.md, no longer in the code"
    assert all(listed[row] for row in found), "a row of the table without its reason"


def test_at_most_50_function_level_imports() -> None:
    found = function_level_imports()
    assert len(found) <= MOST_FUNCTION_LEVEL_IMPORTS, "\n".join(found)


def test_the_reporting_code_imports_neither_the_configuration_nor_the_trainer() -> None:
    """``reporting/`` reads runs: the grid points' files and the config folder through :mod:`cl_bench.utils.conf_dir`,
    the options' schemas registered by its entry point (``cl-bench-report``, the sweep's callback)."""
    graph = import_graph()
    reached = sorted(f"{module} -> {target}" for module, targets in graph.items() if module.startswith("cl_bench.reporting")
                     for target in targets if target.split(".")[1] in ("config", "train"))
    assert reached == []
