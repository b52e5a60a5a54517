"""Each method, loss and augmentation declares its settings once, in a torch-free typed spec (cl_bench/specs.py,
cl_bench/*/specs.py), which the checks before any model loads read (issue 36)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

from cl_bench.augment.base import Augmentation
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


def test_a_method_folder_imports_no_torch_for_its_spec() -> None:
    """A built-in method is one folder (``cl_bench/methods/<name>/``): importing its ``configuration`` (the spec) loads
    no torch (its ``__init__.py`` imports nothing), the registry finds every folder, and each YAML's ``_target_`` is
    the folder's ``modeling`` class, whose spec is the folder's."""
    folders = sorted(p.parent.name for p in (ROOT / "cl_bench" / "methods").glob("*/configuration.py"))
    assert len(folders) >= 16
    for name in folders:
        init = ast.parse((ROOT / "cl_bench" / "methods" / name / "__init__.py").read_text())
        assert not any(isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(init)), f"{name}/__init__.py imports"
    probe = ("import json, sys\n" + "".join(f"import cl_bench.methods.{name}.configuration\n" for name in folders)
             + "print(json.dumps(sorted(m for m in ('torch', 'transformers') if m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    for name, (target, _) in _options("method").items():
        package, _, _ = target.rpartition(".modeling.")
        spec = spec_for(target, import_target=False)
        assert package.startswith("cl_bench.methods.") and spec is not None, name
        assert spec.__module__ == f"{package}.configuration", name


def test_every_option_has_a_spec_whose_keys_are_its_yamls_and_its_targets() -> None:
    """Every ``method=``/``loss=``/``augmentation=`` option's ``_target_`` has a spec of its group; the YAML sets only
    keys of its spec (issue 49: the spec declares every key and its default, a YAML changes some; their types are
    checked by composition:
    :func:`test_every_builtin_option_extends_its_specs_schema_so_composition_types_it`); the target takes its spec (a
    method after its context, an augmentation alone), or a loss exactly those keys as keyword-only arguments besides
    the inputs a method passes (:attr:`LossSpec.inputs`)."""
    bases = {"method": MethodSpec, "loss": LossSpec, "augmentation": AugmentationSpec}

    for group, base in bases.items():
        for name, (target, values) in _options(group).items():
            spec = spec_for(target, import_target=False)
            assert spec is not None and issubclass(spec, base), (group, name, target)
            keys = [k for k in spec.keys() if k != "name"]
            assert set(values) <= set(keys), (group, name, set(values) - set(keys))
            params = inspect.signature(_imported(target)).parameters.values()
            if group == "loss":
                taken = {p.name for p in params if p.kind is p.KEYWORD_ONLY}
                assert taken == set(keys) | spec.inputs, (name, taken ^ (set(keys) | spec.inputs))
            elif group == "augmentation":  # it receives its spec, typed with its spec class
                assert [p.name for p in params] == ["spec"], (name, params)
                assert typing.get_type_hints(_imported(target))["spec"] is spec, name
            else:  # a method, built as Target(context, spec) by cl_bench.specs.build: the spec holds the keys
                assert [p.name for p in params] == ["context", "spec"], (name, [p.name for p in params])
                assert typing.get_type_hints(_imported(target).__init__)["spec"] is spec, name


def test_augmentation_specs_say_what_their_classes_do() -> None:
    """An augmentation's spec says what its class does: its option's name, whether it rewrites text (its class
    overrides ``augment_text``), whether it edits embeddings (its class overrides ``augment_inputs``)."""
    for name, (target, _) in _options("augmentation").items():
        spec, cls = spec_for(target), _imported(target)
        assert (spec.name, spec.rewrites_text, spec.embedding_level) == (
            name, cls.augment_text is not Augmentation.augment_text, cls.augment_inputs is not Augmentation.augment_inputs
        ), name


def test_a_spec_is_registered_by_its_target_once() -> None:
    """Each built-in spec names a target that exists; no two specs claim the same target."""
    specs = registered()
    assert len(specs) == len(set(specs.values()))
    for target in specs:
        if target.startswith("cl_bench."):
            _imported(target)


def test_every_builtin_option_extends_its_specs_schema_so_composition_types_it() -> None:
    """Each built-in method, loss and augmentation YAML extends its spec's schema (registered in Hydra's ConfigStore by
    :func:`cl_bench.config.register_schemas`): the composed node is typed by the spec."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from cl_bench.config import register_schemas

    register_schemas()
    with initialize_config_dir(config_dir=str(catalog.CONF_DIR), version_base="1.3"):
        for group in ("method", "loss", "augmentation"):
            for name, (target, _) in _options(group).items():
                cfg = compose("config", overrides=[f"{group}={name}"])
                spec = spec_for(target)
                assert OmegaConf.get_type(cfg[group]).__name__ == spec.__name__, (group, name)
                assert issubclass(OmegaConf.get_type(cfg[group]), spec), (group, name)


def test_composition_rejects_a_key_the_spec_lacks_and_a_wrongly_typed_value(tmp_path: Path) -> None:
    """A preset that sets an option key its spec does not declare, or a value of the wrong type, fails at composition
    (Hydra, from the schema) naming the key; the same values with the right key and type compose."""
    import pytest
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException

    from cl_bench.config import register_schemas

    register_schemas()
    (tmp_path / "experiment").mkdir()
    presets = {"typo": "method:\n  mlm_wieght: 0.1\n", "wrong_type": "loss:\n  tau: warm\n",
               "right": "method:\n  mlm_weight: 0.1\nloss:\n  tau: 0.1\n"}
    for name, body in presets.items():
        (tmp_path / "experiment" / f"{name}.yaml").write_text(f"# @package _global_\n{body}")
    search_path = f"hydra.searchpath=[file://{tmp_path}]"
    with initialize_config_dir(config_dir=str(catalog.CONF_DIR), version_base="1.3"):
        for name, key in (("typo", "method.mlm_wieght"), ("wrong_type", "loss.tau")):
            with pytest.raises(ConfigCompositionException, match=f"full_key: {key}"):
                compose("config", overrides=[search_path, f"experiment={name}"])
        with pytest.raises(ConfigCompositionException):
            compose("config", overrides=["method=cert", "method.queue_size=1.5"])
        cfg = compose("config", overrides=[search_path, "experiment=right"])
    assert cfg.method.mlm_weight == 0.1 and cfg.loss.tau == 0.1


def test_every_choice_key_composes_its_values_and_rejects_any_other() -> None:
    """Every option key typed by a ``StrEnum`` in its spec (``method.mlm_mode``, ``loss.mining``, ...) composes with each
    of its values, which compare equal to their strings, and rejects any other value at composition, naming the
    key and the valid values."""
    import enum

    import pytest
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException

    from cl_bench.config import register_schemas

    register_schemas()
    checked = 0
    with initialize_config_dir(config_dir=str(catalog.CONF_DIR), version_base="1.3"):
        for group in ("method", "loss", "augmentation"):
            for name, (target, _) in _options(group).items():
                spec = spec_for(target)
                hints = typing.get_type_hints(spec)
                for key in (k for k in spec.keys() if k != "name"):
                    choices = hints[key]
                    if not (isinstance(choices, type) and issubclass(choices, enum.Enum)):
                        continue
                    for choice in choices:
                        cfg = compose("config", overrides=[f"{group}={name}", f"{group}.{key}={choice.value}"])
                        assert cfg[group][key] == choice.value, (group, name, key)
                    with pytest.raises(ConfigCompositionException) as err:
                        compose("config", overrides=[f"{group}={name}", f"{group}.{key}=not_a_choice"])
                    assert f"full_key: {group}.{key}" in str(err.value.__cause__), (group, name, key)
                    assert f"expected one of [{', '.join(choices)}]" in str(err.value.__cause__), (group, name, key)
                    checked += 1
    assert checked >= 20  # the spec fields typed by a choice, over the options that use them
