"""A method's, loss's or augmentation's own checks, run before torch is imported ("light load").

``check_config``, ``check_setting``, ``inert_keys`` and ``supplied_inputs`` are classmethods (and a loss's
or augmentation's ``check_config`` a plain function) that read the config values and nothing else, but
they live in modules that import torch at the top (``nn.Module`` subclasses). :func:`load` runs such a
module's top-level code in a module object of its own (in ``sys.modules`` only under :data:`LIGHT_PREFIX`,
never under its real name), where:

* ``cl_bench`` modules and a user's own source files it imports are light-loaded the same way (cached),
  but for the torch-free ones that hold shared state (:data:`REAL_CL_BENCH`);
* the standard library, and omegaconf/hydra/yaml (already imported by ``cl-bench``), are the real ones;
* any other package (torch, transformers, numpy, ...) is an *unavailable name*: reading an attribute of
  it or calling it gives another unavailable name (so ``import torch.nn.functional as F``, decorators and
  annotations still load), and any other use (truth value, comparison, iteration, arithmetic,
  ``isinstance``) raises :class:`Unavailable`;
* a class whose base is unavailable (``nn.Module``) gets :class:`_Stub` in its place, whose missing
  attributes raise :class:`Unavailable`: the class's own and its available bases' classmethods and
  attributes resolve as along the real MRO (``Method``'s defaults from ``methods/base.py``);
* a top-level statement that cannot run so binds the names it defines to unavailable names.

A check that touches an unavailable name, at any depth, cannot be decided before torch: :class:`Unavailable`
is a ``BaseException``, so the check's own ``except Exception`` cannot swallow it, and every touch is also
counted on the session (:func:`session`), so a caller trusts an answer only when nothing was touched.
``cl-bench`` (:mod:`cl_bench.early_checks`) then leaves the check to the job, which imports the real class;
``tests/test_light_load.py`` compares every built-in check's light answers with the real ones.
"""

from __future__ import annotations

import abc
import ast
import builtins
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cl_bench.declarations import NotStatic

#: packages imported for real by light-loaded code (cheap, and already loaded when cl-bench composes a config)
REAL = frozenset({"omegaconf", "hydra", "yaml"})
#: cl-bench's own modules imported for real: torch-free, and holding what must be one (the config's classes, the
#: task registry a user's folder adds to)
REAL_CL_BENCH = frozenset({"cl_bench.config", "cl_bench.catalog", "cl_bench.declarations", "cl_bench.light_load",
                           "cl_bench.early_checks", "cl_bench.eval.registry"})
#: packages whose real import a light session refuses (each takes seconds): any code that asks for one,
#: light-loaded or not (``cl_bench.config`` reading a model's width), gets :class:`Unavailable`
HEAVY = frozenset({"torch", "transformers", "mlflow", "peft", "sklearn", "pandas", "scipy", "onnxruntime",
                   "sentence_transformers", "datasets", "accelerate", "tokenizers", "safetensors", "mteb"})


class Unavailable(BaseException):  # noqa: N818 (a BaseException: a check's `except Exception` cannot hide it)
    """A light-loaded check used a name that only the real import gives (the job decides)."""


class _State:
    active = 0  # open sessions
    loading = 0  # light loads under way (touches while loading a module are part of loading it)
    touched = 0  # touches of unavailable names by checks in the current session


_STATE = _State()


def _touch(name: str, refuse: bool = False) -> None:
    if not _STATE.loading:
        _STATE.touched += 1
    if refuse:
        raise Unavailable(name)


def active() -> bool:
    """True inside :func:`session` (``cl_bench.config`` then loads targets with :func:`load`)."""
    return _STATE.active > 0


class _Guard(importlib.abc.MetaPathFinder):
    """Refuses the real import of a :data:`HEAVY` package during a session."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] in HEAVY:
            _touch(fullname, refuse=True)
        return None


@contextlib.contextmanager
def session() -> Iterator[_State]:
    """Within it, ``cl_bench.config`` loads targets light (:func:`load`) and a heavy package's import raises
    :class:`Unavailable`; the yielded state's ``touched`` counts the unavailable names the checks used."""
    guard = _Guard()
    _STATE.active += 1
    _STATE.touched = 0
    sys.meta_path.insert(0, guard)
    try:
        yield _STATE
    finally:
        sys.meta_path.remove(guard)
        _STATE.active -= 1


class _Unavailable:
    """A name from a package that is not imported (see the module docstring)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):  # what Python's own machinery probes (inspect, typing)
            raise AttributeError(attr)
        _touch(self._name)
        return _Unavailable(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _touch(self._name)
        return _Unavailable(f"{self._name}()")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        """As a base class: :class:`_Stub` once (unless another base has it already)."""
        first = next(b for b in bases if isinstance(b, _Unavailable))
        if first is not self or any(isinstance(b, type) and issubclass(b, _Stub) for b in bases):
            return ()
        return (_Stub,)

    def __hash__(self) -> int:
        _touch(self._name)
        return id(self)

    def __repr__(self) -> str:
        _touch(self._name)
        return f"<unavailable {self._name}>"

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        _touch(self._name, refuse=True)

    __bool__ = __len__ = __iter__ = __contains__ = __getitem__ = __setitem__ = __delitem__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse  # type: ignore[assignment]
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __floordiv__ = __mod__ = __pow__ = __neg__ = __pos__ = __abs__ = __invert__ = __and__ = __or__ = _refuse
    __index__ = __int__ = __float__ = __enter__ = __exit__ = __setattr__ = __delattr__ = _refuse
    __instancecheck__ = __subclasscheck__ = _refuse


class _StubMeta(abc.ABCMeta):
    """The metaclass of :class:`_Stub`: an attribute the available bases do not define is unavailable."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        _touch(f"{cls.__name__}.{attr}", refuse=True)


class _Stub(metaclass=_StubMeta):
    """Stands for an unavailable base class (``nn.Module``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _touch(type(self).__name__, refuse=True)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        _touch(f"{type(self).__name__}.{attr}", refuse=True)


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
_CACHE: dict[tuple[str, str, int], types.ModuleType | NotStatic] = {}
_KINDS: dict[str, str] = {}


def _kind(top: str) -> str:
    """How light-loaded code imports the top-level package ``top``: real, light, unavailable or missing."""
    if top in _KINDS:
        return _KINDS[top]
    if top in sys.stdlib_module_names or top in REAL:
        kind = "real"
    elif top in HEAVY:
        kind = "unavailable"
    elif top == "cl_bench":
        kind = "light"
    else:  # a user's own source is loaded light; an installed package may be heavy: unavailable
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None) or ""
        if spec is None:
            kind = "missing"
        elif origin.endswith(".py") and not any(part in ("site-packages", "dist-packages") for part in Path(origin).parts):
            kind = "light"
        else:
            kind = "unavailable"
        if kind == "missing":
            return kind  # not remembered: a folder added to sys.path later may hold it
    _KINDS[top] = kind
    return kind


def _spec(fullname: str) -> importlib.machinery.ModuleSpec:
    parent, _, _ = fullname.rpartition(".")
    if parent:
        search = getattr(_module(parent), "__path__", None)
        if search is None:
            raise ModuleNotFoundError(f"No module named '{fullname}'; '{parent}' is not a package", name=fullname)
        spec = importlib.machinery.PathFinder.find_spec(fullname, list(search))
    else:
        spec = importlib.util.find_spec(fullname)  # a top-level name: found, not imported
    if spec is None:
        raise ModuleNotFoundError(f"No module named '{fullname}'", name=fullname)
    return spec


def _module(fullname: str) -> types.ModuleType:
    """The light module ``fullname`` (its parents light-loaded first, as an import would)."""
    spec = _spec(fullname)
    origin = spec.origin or ""
    if not origin.endswith(".py"):
        raise NotStatic(f"{fullname}: no Python source")
    key = (fullname, origin, Path(origin).stat().st_mtime_ns)
    cached = _CACHE.get(key)
    if isinstance(cached, NotStatic):
        raise cached
    if cached is not None:
        return cached
    module = _new_module(fullname, spec)
    _CACHE[key] = module  # before running it: an import cycle gets the partly run module, as in Python
    _STATE.loading += 1
    try:
        _run(module, spec)
    except NotStatic as err:
        _CACHE[key] = err
        raise
    finally:
        _STATE.loading -= 1
    parent, _, child = fullname.rpartition(".")
    if parent:
        setattr(_module(parent), child, module)
    return module


#: the prefix of a light module's ``__name__`` (its classes' ``__module__``): dataclasses look the module up in
#: ``sys.modules``, where it stands under this name, never under the real one
LIGHT_PREFIX = "_cl_bench_light."


def _new_module(fullname: str, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
    module = types.ModuleType(LIGHT_PREFIX + fullname)
    sys.modules[module.__name__] = module
    module.__file__ = spec.origin
    module.__loader__ = spec.loader
    module.__builtins__ = _BUILTINS  # type: ignore[attr-defined]  # its imports go through _import
    if spec.submodule_search_locations is not None:
        module.__path__ = list(spec.submodule_search_locations)
        module.__package__ = fullname
    else:
        module.__package__ = fullname.rpartition(".")[0]
    return module


def _run(module: types.ModuleType, spec: importlib.machinery.ModuleSpec) -> None:
    """Run the module's code; where it stops on an unavailable name, run it again statement by statement."""
    code = spec.loader.get_code(module.__name__[len(LIGHT_PREFIX):])  # type: ignore[union-attr]  # the cached bytecode
    namespace = dict(module.__dict__)
    try:
        exec(code, module.__dict__)  # noqa: S102 (cl-bench's and the user's own module, as the job imports it)
        return
    except ImportError as err:
        raise NotStatic(f"{module.__name__}: {err}") from err  # the real import fails too: the job says so
    except NotStatic:
        raise
    except (Exception, Unavailable):  # noqa: BLE001
        pass
    module.__dict__.clear()
    module.__dict__.update(namespace)
    source = Path(str(spec.origin)).read_text()
    tree = ast.parse(source, filename=str(spec.origin))
    flags = 0
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            for alias in stmt.names:
                flags |= getattr(__import__("__future__"), alias.name).compiler_flag
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            continue
        try:
            exec(compile(ast.Module([stmt], []), str(spec.origin), "exec", flags=flags, dont_inherit=True),  # noqa: S102
                 module.__dict__)
        except ImportError as err:
            raise NotStatic(f"{module.__name__}: {err}") from err
        except NotStatic:
            raise
        except (Exception, Unavailable):  # noqa: BLE001 (its names are unavailable: a check that reads one waits for the job)
            for name in _bound_names(stmt):
                module.__dict__[name] = _Unavailable(f"{module.__name__}.{name}")


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds (also inside if/try/with/for bodies; not the local
    names of a function, class body, lambda or comprehension)."""
    names: set[str] = set()
    pending: list[ast.AST] = [stmt]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
            pending += [*node.decorator_list, *getattr(node, "bases", [])]  # a walrus there binds a module name
            continue
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        pending += list(ast.iter_child_nodes(node))
    return names


def _import(name: str, globals: dict[str, Any] | None = None, locals: Any = None,  # noqa: A002
            fromlist: Any = (), level: int = 0) -> Any:
    """``__import__`` of light-loaded code."""
    if level:
        name = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__") or "")
    top = name.partition(".")[0]
    kind = _kind(top)
    if kind == "real" or name in REAL_CL_BENCH and fromlist:
        return importlib.__import__(name, globals, locals, fromlist, 0)
    if kind == "missing":
        raise ModuleNotFoundError(f"No module named '{top}'", name=top)
    if kind == "unavailable":
        return _Unavailable(name if fromlist else top)
    module = _module(name)
    if not fromlist:
        parts = name.split(".")
        for end in range(1, len(parts)):  # `import a.b.c` binds a, with a.b and a.b.c loaded
            _module(".".join(parts[: end + 1]))
        return _module(top)
    for item in fromlist:
        if f"{name}.{item}" in REAL_CL_BENCH:  # `from cl_bench import config`
            setattr(module, item, importlib.import_module(f"{name}.{item}"))
        if item == "*" or hasattr(module, item):
            continue
        try:  # `from package import submodule`
            _module(f"{name}.{item}")
        except ModuleNotFoundError:
            raise ImportError(f"cannot import name '{item}' from '{name}'", name=name) from None
    return module


_BUILTINS = dict(builtins.__dict__, __import__=_import)


def forget() -> None:
    """Drop every light module (and its ``sys.modules`` entry under :data:`LIGHT_PREFIX`): ``cl-bench`` calls it
    once its early checks are done, so the job that follows sees only the real modules."""
    _CACHE.clear()
    _KINDS.clear()
    for name in [n for n in sys.modules if n.startswith(LIGHT_PREFIX)]:
        del sys.modules[name]


def load(target: str) -> Any:
    """The object a dotted path names, from its light-loaded module.

    Raises:
        NotStatic: the module cannot be light-loaded, or the name is not there or only the real import tells it.
    """
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise NotStatic(f"not a dotted path: '{target}'")
    try:
        if _kind(module_name.partition(".")[0]) != "light":
            raise NotStatic(f"{target}: not a source module")
        module = _module(module_name)
    except (ImportError, SyntaxError, OSError, ValueError) as err:
        raise NotStatic(f"{target}: {err}") from err
    obj = module.__dict__.get(attr, _MISSING)
    if obj is _MISSING:
        try:
            obj = _module(target)  # a submodule
        except (ImportError, NotStatic) as err:
            raise NotStatic(f"{target}: not found in the light module") from err
    if isinstance(obj, _Unavailable):
        raise NotStatic(f"{target}: defined by code that needs the real import")
    return obj


_MISSING = object()
