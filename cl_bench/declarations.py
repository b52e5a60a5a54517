"""What a method, loss or augmentation declares, read from its source file without importing it.

A method declares the groups it uses, the loss kinds it calls and its one-line summary as class
attributes (:class:`cl_bench.methods.base.Method`); a loss declares its kind with the
:func:`cl_bench.losses.loss_kind` mark. Those declarations stay where they are, in the class or on
the function: this module reads them from the module's syntax tree (literal values, following the
base classes through the module's own imports), so that ``cl-bench list`` and the rejections that
depend on them answer before torch is imported. A module already imported is asked directly, and a
declaration that is not a literal (computed, set after the definition) is read by importing the
module, so the answer is always the one the imported object gives; ``tests/test_fast_rejection.py``
checks that every built-in declaration is read without that fallback and agrees with the import.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the mark :func:`cl_bench.losses.loss_kind` puts on a loss function (its name and attributes)
LOSS_MARK = "loss_kind"
LOSS_NEEDS = "loss_needs"
#: what a method class declares for the checks before a model loads, with the defaults of ``Method``
METHOD_ATTRS = ("uses", "loss_kinds", "summary", "encodes_views", "own_prompts", "takes_prompts")


class NotStatic(Exception):
    """The declaration cannot be read without running the module (the caller imports it)."""


@dataclass(frozen=True)
class MethodDeclaration:
    """A method class's declarations (``Method`` class attributes), read without importing torch.

    Attributes:
        target: the ``_target_`` path; class_name: the class's ``__name__``.
        uses, loss_kinds, summary, encodes_views, own_prompts, takes_prompts: as on :class:`cl_bench.methods.base.Method`.
    """

    target: str
    class_name: str = ""
    uses: frozenset[str] = frozenset()
    loss_kinds: tuple[str, ...] = ()
    summary: str = ""
    encodes_views: bool = False
    own_prompts: bool = False
    takes_prompts: bool = True


@dataclass(frozen=True)
class LossDeclaration:
    """A loss function's mark (:func:`cl_bench.losses.loss_kind`): its kind (None: unmarked) and needs."""

    kind: str | None = None
    needs: dict[str, str] = field(default_factory=dict)


def _split(target: str) -> tuple[str, str]:
    module, _, attr = target.rpartition(".")
    if not module or not attr:
        raise ValueError(f"not a dotted path: '{target}'")
    return module, attr


def _tree(module: str) -> ast.Module:
    """The parsed source of ``module`` (found as an import would find it; its parent packages are
    imported, which for cl-bench's ``methods``/``losses``/``augment`` packages loads nothing)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as err:
        raise NotStatic(str(err)) from err
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise NotStatic(f"no source for {module}")
    return _parsed(spec.origin, Path(spec.origin).stat().st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _parsed(path: str, mtime_ns: int) -> ast.Module:
    """A source file's syntax tree (cached per file and modification time: another folder's module of the
    same name, or an edited file, is parsed anew)."""
    return ast.parse(Path(path).read_text(), filename=path)


def _literal(node: ast.expr) -> Any:
    """A literal value, also ``frozenset({...})``, ``frozenset()``, ``tuple(...)``, ``set(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "tuple", "set") \
            and not node.keywords and len(node.args) <= 1:
        build = {"frozenset": frozenset, "tuple": tuple, "set": set}[node.func.id]
        return build(_literal(node.args[0])) if node.args else build()
    try:
        return ast.literal_eval(node)
    except ValueError as err:
        raise NotStatic(f"not a literal: {ast.unparse(node)}") from err


def _top_level(tree: ast.Module, name: str) -> ast.AST | None:
    """The last top-level statement that defines ``name`` (class, function, assignment or import)."""
    found = None
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
            found = stmt
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = stmt
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            found = stmt
        elif isinstance(stmt, ast.ImportFrom) and any((a.asname or a.name) == name for a in stmt.names):
            found = stmt
    return found


def _imported_from(stmt: ast.ImportFrom, module: str) -> str:
    """The absolute module an ``from X import name`` statement of ``module`` reads."""
    if not stmt.level:
        return str(stmt.module)
    package = module.rsplit(".", stmt.level)[0]
    return f"{package}.{stmt.module}" if stmt.module else package


def _class_attr(module: str, cls: str, attr: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Any:
    """The value of ``attr`` on class ``cls`` of ``module``, looked up as Python would along the bases
    (in order; a base that cannot be followed stops the search). Raises AttributeError when no class
    in the chain declares it, NotStatic when it cannot be read without running code."""
    if (module, cls) in seen:
        raise NotStatic(f"cycle at {module}.{cls}")
    tree = _tree(module)
    stmt = _top_level(tree, cls)
    if isinstance(stmt, ast.ImportFrom):
        source = _imported_from(stmt, module)
        real = next(a.name for a in stmt.names if (a.asname or a.name) == cls)
        return _class_attr(source, real, attr, seen | {(module, cls)})
    if not isinstance(stmt, ast.ClassDef):
        raise NotStatic(f"{module}.{cls} is not a class statement")
    if attr == "__name__":
        return stmt.name
    if stmt.decorator_list or stmt.keywords:
        raise NotStatic(f"{module}.{cls}: a decorator or metaclass may change its attributes")
    value: Any = _MISSING
    for item in stmt.body:
        if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in item.targets):
            value = item.value
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == attr:
            value = item.value if item.value is not None else _MISSING
        elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and item.name == attr:
            raise NotStatic(f"{module}.{cls}.{attr} is defined by code")
    if value is not _MISSING:
        return _literal(value)
    for base in stmt.bases:
        if isinstance(base, ast.Name) and base.id in ("object", "ABC"):
            continue
        if not isinstance(base, ast.Name):  # e.g. nn.Module: outside what can be read here
            raise NotStatic(f"{module}.{cls}: base {ast.unparse(base)} cannot be followed")
        try:
            return _class_attr(module, base.id, attr, seen | {(module, cls)})
        except AttributeError:
            continue
    raise AttributeError(attr)


_MISSING = object()


def _imported(target: str) -> Any:
    module, attr = _split(target)
    return getattr(importlib.import_module(module), attr)


def _already_imported(target: str) -> Any:
    """The object itself when its module is imported already (then asking it costs nothing)."""
    module, attr = _split(target)
    loaded = sys.modules.get(module)
    return getattr(loaded, attr, _MISSING) if loaded is not None else _MISSING


def class_attrs(target: str, defaults: Mapping[str, Any], static: bool = False) -> dict[str, Any]:
    """``{attribute: value}`` of the class ``target`` names (``defaults`` for one no class declares).

    Args:
        target: a dotted path (``cl_bench.methods.simcse.SimCSE``).
        defaults: the attributes to read, with the value an undeclared one takes.
        static: read the source only (no import, no fallback): raises :class:`NotStatic` where it cannot.

    Raises:
        ImportError, AttributeError, ValueError: the class cannot be imported (as ``importlib`` says).
    """
    obj = _MISSING if static else _already_imported(target)
    if obj is not _MISSING:
        return {name: getattr(obj, name, default) for name, default in defaults.items()}
    module, cls = _split(target)
    try:
        values = {}
        for name, default in defaults.items():
            try:
                values[name] = _class_attr(module, cls, name)
            except AttributeError:
                values[name] = default
        return values
    except NotStatic:
        if static:
            raise
        obj = _imported(target)
        return {name: getattr(obj, name, default) for name, default in defaults.items()}


def method_declaration(target: str, static: bool = False) -> MethodDeclaration:
    """A method class's declarations (:data:`METHOD_ATTRS`), read without importing torch."""
    values = class_attrs(target, {"__name__": "", "uses": frozenset(), "loss_kinds": (), "summary": "",
                                  "encodes_views": False, "own_prompts": False, "takes_prompts": True}, static=static)
    return MethodDeclaration(target, str(values["__name__"]), frozenset(values["uses"]), tuple(values["loss_kinds"]), str(values["summary"] or ""),
                             bool(values["encodes_views"]), bool(values["own_prompts"]), bool(values["takes_prompts"]))


def _loss_mark(module: str, name: str) -> LossDeclaration:
    return _loss_mark_in(_tree(module), module, name)


@functools.lru_cache(maxsize=256)
def _loss_mark_in(tree: ast.Module, module: str, name: str) -> LossDeclaration:
    """:func:`_loss_mark` on a parsed module (cached with the tree)."""
    stmt = _top_level(tree, name)
    if isinstance(stmt, ast.ImportFrom):
        source = _imported_from(stmt, module)
        return _loss_mark(source, next(a.name for a in stmt.names if (a.asname or a.name) == name))
    if not isinstance(stmt, ast.FunctionDef):
        raise NotStatic(f"{module}.{name} is not a function statement")
    for node in ast.walk(tree):  # `fn.loss_kind = ...` after the definition: only running it tells
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr in (LOSS_MARK, LOSS_NEEDS):
            raise NotStatic(f"{module} sets {node.attr} in code")
    marks = [d for d in stmt.decorator_list if isinstance(d, ast.Call)
             and (isinstance(d.func, ast.Name) and d.func.id == LOSS_MARK
                  or isinstance(d.func, ast.Attribute) and d.func.attr == LOSS_MARK)]
    if len(marks) != len(stmt.decorator_list) or len(marks) > 1:
        raise NotStatic(f"{module}.{name}: a decorator other than {LOSS_MARK}")
    if not marks:
        return LossDeclaration()
    mark = marks[0]
    kind = _literal(mark.args[0]) if mark.args else None
    needs = {k.arg: _literal(k.value) for k in mark.keywords if k.arg == "needs"}.get("needs") or {}
    if kind is None or any(k.arg not in ("needs", None) for k in mark.keywords):
        raise NotStatic(f"{module}.{name}: unexpected {LOSS_MARK} arguments")
    return LossDeclaration(str(kind), dict(needs))


def loss_declaration(target: str, static: bool = False) -> LossDeclaration:
    """A loss function's kind and needs (its :func:`cl_bench.losses.loss_kind` mark), without importing torch.

    Raises:
        ImportError, AttributeError, ValueError: the function cannot be imported (as ``importlib`` says).
    """
    obj = _MISSING if static else _already_imported(target)
    if obj is _MISSING:
        try:
            mark = _loss_mark(*_split(target))
            return LossDeclaration(mark.kind, dict(mark.needs))  # a copy: the cached one stays as read
        except NotStatic:
            if static:
                raise
            obj = _imported(target)
    return LossDeclaration(getattr(obj, LOSS_MARK, None), dict(getattr(obj, LOSS_NEEDS, {}) or {}))



@dataclass(frozen=True)
class Signature:
    """The keyword parameters a ``_target_`` accepts, as :func:`cl_bench.config.check_target_node` reads them.

    Attributes:
        params: the parameter names, in ``inspect.signature`` order (a class: its ``__init__``'s, without ``self``).
        accepts_kwargs: True when it takes ``**kwargs``.
        hints: the annotations that name only builtins, ``typing`` and ``collections.abc`` (evaluated);
            another annotation (``torch.Tensor``, a module's own alias) is left out: the type check accepts
            any value for it here and leaves it to the job.
    """

    params: tuple[str, ...]
    accepts_kwargs: bool
    hints: dict[str, Any]


def _annotation_namespace(tree: ast.Module) -> dict[str, Any]:
    """Builtins, and what the module imports from ``typing`` and ``collections.abc``."""
    import builtins
    import collections.abc
    import typing

    namespace: dict[str, Any] = {name: getattr(builtins, name) for name in
                                 ("int", "float", "str", "bool", "list", "tuple", "dict", "set", "frozenset",
                                  "type", "object", "bytes")}
    sources = {"typing": typing, "collections.abc": collections.abc}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module in sources and not stmt.level:
            for alias in stmt.names:
                if hasattr(sources[stmt.module], alias.name):
                    namespace[alias.asname or alias.name] = getattr(sources[stmt.module], alias.name)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name in sources and alias.asname is None or alias.name == "typing":
                    namespace[alias.asname or alias.name] = sources.get(alias.name, typing)
    defined = {t.id for stmt in tree.body if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)}
    defined |= {stmt.name for stmt in tree.body if isinstance(stmt, ast.ClassDef | ast.FunctionDef)}
    return {name: value for name, value in namespace.items() if name not in defined}  # the module's own names win


def _hint(annotation: ast.expr | None, namespace: dict[str, Any]) -> Any:
    """An annotation evaluated in ``namespace`` (a string annotation parsed first); :data:`_MISSING` when
    it names anything else."""
    if annotation is None:
        return _MISSING
    text = annotation.value if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) \
        else ast.unparse(annotation)
    try:
        return eval(compile(text, "<annotation>", "eval"), {"__builtins__": {}}, dict(namespace))  # noqa: S307 (names
    except Exception:  # noqa: BLE001                         only builtins/typing/collections.abc: no code runs)
        return _MISSING


def _function_signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module, drop_first: bool) -> Signature:
    if fn.decorator_list:
        raise NotStatic(f"{fn.name}: decorated")
    args = fn.args
    positional = [*args.posonlyargs, *args.args][1 if drop_first else 0:]
    ordered = [*positional, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
               *([args.kwarg] if args.kwarg else [])]
    namespace = _annotation_namespace(tree)
    annotated = [a for a in [*positional, *args.kwonlyargs, *([args.vararg] if args.vararg else []),
                             *([args.kwarg] if args.kwarg else [])] if a.annotation is not None]
    if fn.returns is not None:
        annotated.append(ast.arg(arg="return", annotation=fn.returns))
    if any(name not in _module_names(tree) for a in annotated for name in _annotation_names(a.annotation)):
        return Signature(tuple(a.arg for a in ordered), args.kwarg is not None, {})  # the job's get_type_hints fails
    hints = {a.arg: hint for a in [*positional, *args.kwonlyargs]
             if (hint := _hint(a.annotation, namespace)) is not _MISSING}
    return Signature(tuple(a.arg for a in ordered), args.kwarg is not None, hints)


def _annotation_names(annotation: ast.expr) -> set[str]:
    """The free names an annotation reads (a string annotation parsed first; ``torch.Tensor`` reads ``torch``)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return {"<unparsable>"}
    return {node.id for node in ast.walk(annotation) if isinstance(node, ast.Name)}


def _module_names(tree: ast.Module) -> set[str]:
    """The names a module's globals hold after it runs (top-level definitions and imports) and the builtins."""
    import builtins

    names = set(dir(builtins))
    pending = list(tree.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            names |= {alias.asname or alias.name.split(".")[0] for alias in stmt.names}
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.Try):
            pending += [*stmt.body, *stmt.orelse, *stmt.finalbody, *(s for h in stmt.handlers for s in h.body)]
        elif isinstance(stmt, ast.If) and "TYPE_CHECKING" not in ast.unparse(stmt.test):  # those names are absent at run time
            pending += [*stmt.body, *stmt.orelse]
    return names


def _init_signature(module: str, cls: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Signature:
    """A class's ``__init__`` signature, found along its bases as Python would (no ``__new__``, no metaclass)."""
    if (module, cls) in seen:
        raise NotStatic(f"cycle at {module}.{cls}")
    tree = _tree(module)
    stmt = _top_level(tree, cls)
    if isinstance(stmt, ast.ImportFrom):
        real = next(a.name for a in stmt.names if (a.asname or a.name) == cls)
        return _init_signature(_imported_from(stmt, module), real, seen | {(module, cls)})
    if not isinstance(stmt, ast.ClassDef) or stmt.decorator_list or stmt.keywords:
        raise NotStatic(f"{module}.{cls}: not a plain class statement")
    for item in stmt.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign) and (
                getattr(item, "name", None) in ("__new__", "__signature__", "__call__")
                or isinstance(item, ast.Assign) and any(getattr(t, "id", "") in ("__init__", "__new__", "__signature__")
                                                        for t in item.targets)):
            raise NotStatic(f"{module}.{cls}: its signature is made by code")
    init = next((item for item in stmt.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"), None)
    if init is not None:
        return _function_signature(init, tree, drop_first=True)
    bases = [b for b in stmt.bases if not (isinstance(b, ast.Name) and b.id in ("object", "ABC"))
             and not (isinstance(b, ast.Attribute) and ast.unparse(b) == "abc.ABC")]
    if not bases:
        return Signature((), False, {})  # object's: no keyword parameters
    base = bases[0]  # the first base that defines __init__ wins; the others must not define one either
    if not isinstance(base, ast.Name):
        raise NotStatic(f"{module}.{cls}: base {ast.unparse(base)} cannot be followed")
    if len(bases) > 1:
        raise NotStatic(f"{module}.{cls}: several bases")
    return _init_signature(module, base.id, seen | {(module, cls)})


def signature(target: str) -> Signature:
    """The keyword parameters of the class or function ``target`` names, read from its source (no import).

    Raises:
        NotStatic: only importing it would tell (a decorator, a generated ``__init__``, a base outside the source).
    """
    module, name = _split(target)
    tree = _tree(module)
    stmt = _top_level(tree, name)
    if isinstance(stmt, ast.ImportFrom):
        real = next(a.name for a in stmt.names if (a.asname or a.name) == name)
        return signature(f"{_imported_from(stmt, module)}.{real}")
    if isinstance(stmt, ast.ClassDef):
        return _init_signature(module, name)
    if isinstance(stmt, ast.FunctionDef):
        if len(stmt.decorator_list) == 1 and isinstance(stmt.decorator_list[0], ast.Call) \
                and ast.unparse(stmt.decorator_list[0].func).rpartition(".")[2] == LOSS_MARK:
            stmt = ast.FunctionDef(**{**{f: getattr(stmt, f) for f in stmt._fields}, "decorator_list": []})
        return _function_signature(stmt, tree, drop_first=False)  # the loss mark returns the function itself
    raise NotStatic(f"{target}: not a class or function statement")


def defined_in(target: str, attr: str) -> str:
    """``module.Class`` of the class along ``target``'s bases that defines ``attr`` (an assignment or a ``def``),
    read from the source.

    Raises:
        NotStatic: a base cannot be followed before it is found.
        AttributeError: no class in the chain defines it.
    """
    module, cls = _split(target)
    tree = _tree(module)
    stmt = _top_level(tree, cls)
    if isinstance(stmt, ast.ImportFrom):
        real = next(a.name for a in stmt.names if (a.asname or a.name) == cls)
        return defined_in(f"{_imported_from(stmt, module)}.{real}", attr)
    if not isinstance(stmt, ast.ClassDef) or stmt.decorator_list or stmt.keywords:
        raise NotStatic(f"{target}: not a plain class statement")
    for item in stmt.body:
        names = [t.id for t in item.targets if isinstance(t, ast.Name)] if isinstance(item, ast.Assign) else \
            [item.target.id] if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) else \
            [item.name] if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else []
        if attr in names:
            return target
    for base in stmt.bases:
        if isinstance(base, ast.Name) and base.id in ("object", "ABC"):
            continue
        if not isinstance(base, ast.Name):
            raise NotStatic(f"{target}: base {ast.unparse(base)} cannot be followed")
        try:
            return defined_in(f"{module}.{base.id}", attr)
        except AttributeError:
            continue
    raise AttributeError(attr)


def supplied_inputs(target: str) -> frozenset[str]:
    """The loss inputs a method supplies (``Method.supplied_inputs``) when that is its ``supplies``
    declaration as the base class returns it (no subclass computes it from its values).

    Raises:
        NotStatic: the method computes them (overrides ``supplied_inputs``), or they cannot be read.
    """
    where = defined_in(target, "supplied_inputs")
    if where != "cl_bench.methods.base.Method":
        raise NotStatic(f"{target}: supplied_inputs is computed by {where}")
    return frozenset(class_attrs(target, {"supplies": frozenset()}, static=True)["supplies"])
