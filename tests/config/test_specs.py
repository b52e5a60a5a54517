"""Each method, loss and augmentation declares its settings once, in a torch-free typed spec (cl_bench/specs.py,
cl_bench/*/specs.py), which the checks before any model loads read (issue 36)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

from cl_bench.augment.base import rewrites_text
from cl_bench.config import catalog
from cl_bench.specs import AugmentationSpec, LossSpec, MethodSpec, registered, spec_for

ROOT = Path(__file__).resolve().parents[2]
#: YAML keys that are Hydra's or a label, not an option's setting
NOT_SETTINGS = ("_target_", "_partial_", "defaults", "name")


def _options(group: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{option: (_target_, its YAML's settings)}`` of a group's built-in options."""
    found = {}
    for name, path in catalog.options(group).items():
        node = catalog.read_yaml(path)
        found[name] = (str(node["_target_"]), {k: v for k, v in node.items() if k not in NOT_SETTINGS})
    return found


def _imported(target: str) -> Any:
    module, _, attr = target.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def test_the_spec_modules_import_no_heavy_package() -> None:
    """cl-bench's specs (and the registry) load without torch, transformers, scikit-learn, numpy, pandas or MLflow."""
    probe = ("import json, sys\nfrom cl_bench.specs import registered\nregistered()\n"
             "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'sklearn', 'numpy', 'pandas', 'mlflow', "
             "'scipy') if m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_every_option_has_a_spec_whose_keys_are_its_yamls_and_its_targets() -> None:
    """Every ``method=``/``loss=``/``augmentation=`` option's ``_target_`` has a spec of its group; the spec's keys are
    the YAML's settings, typed as the YAML's values; the target takes exactly those keys (a method as its spec, after
    its context; an augmentation as constructor keywords; a loss as keyword-only arguments besides the inputs a
    method passes, :attr:`LossSpec.inputs`)."""
    bases = {"method": MethodSpec, "loss": LossSpec, "augmentation": AugmentationSpec}
    from cl_bench.config import _type_ok

    for group, base in bases.items():
        for name, (target, values) in _options(group).items():
            spec = spec_for(target, import_target=False)
            assert spec is not None and issubclass(spec, base), (group, name, target)
            keys = [k for k in spec.keys() if k != "name"]
            assert sorted(keys) == sorted(values), (group, name)
            types = spec.types()
            for key, value in values.items():
                if not (isinstance(value, str) and "${" in value):  # an interpolation: resolved in the full config
                    assert _type_ok(value, types[key]), (group, name, key, value, types[key])
            params = inspect.signature(_imported(target)).parameters.values()
            if group == "loss":
                taken = {p.name for p in params if p.kind is p.KEYWORD_ONLY}
                assert taken == set(keys) | spec.inputs, (name, taken ^ (set(keys) | spec.inputs))
            elif group == "method":  # built as Target(context, spec) by cl_bench.specs.build: the spec holds the keys
                assert [p.name for p in params] == ["context", "spec"], (name, [p.name for p in params])
                assert typing.get_type_hints(_imported(target).__init__)["spec"] is spec, name
            else:
                taken = {p.name for p in params if p.name not in ("self", "context")}
                assert taken == set(keys), (group, name, taken ^ set(keys))


def test_augmentation_specs_say_what_their_classes_do() -> None:
    """An augmentation's spec says what its class does: its name, whether it rewrites text, whether it edits
    embeddings."""
    for name, (target, _) in _options("augmentation").items():
        spec, cls = spec_for(target), _imported(target)
        assert (spec.name, spec.rewrites_text, spec.embedding_level) == \
            (cls.name, rewrites_text(cls), cls.embedding_level), name


def test_a_spec_is_registered_by_its_target_once() -> None:
    """Each built-in spec names a target that exists; no two specs claim the same target."""
    specs = registered()
    assert len(specs) == len(set(specs.values()))
    for target in specs:
        if target.startswith("cl_bench."):
            _imported(target)
