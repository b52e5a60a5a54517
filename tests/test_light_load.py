"""The checks of methods, losses and augmentations run light-loaded (cl_bench/light_load.py) before torch is
imported: each gives the answer of the imported class, or none (the job then decides), never another (issue 25, item 3)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from cl_bench import catalog, light_load
from cl_bench.catalog import CONF_DIR
from cl_bench.cli import use_recorded_pooling
from cl_bench.config import ConfigError, check_choices, register_schemas, validate
from cl_bench.declarations import NotStatic
from cl_bench.early_checks import check_composed, check_declared_choices
from cl_bench.rundir import ENCODER_META_FILE

register_schemas()  # as cl_bench.cli does on import: config.yaml extends the schema

#: values each of an option's keys is set to, one key at a time, beside its defaults
PROBES: tuple[Any, ...] = (0, -1, 2, 0.5, 10**6, "foo", "", None, True, [1])
FALLBACK = ("fallback",)
#: keys whose default names a model on the hub, which only the real check reaches: nulled in the defaults that
#: must be answered light-loaded (DiffCSE's generator: null = model.name_or_path)
REACHES_MODELS = {"cl_bench.methods.diffcse.DiffCSE": {"generator": None}}


def _targets(group: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{option: (_target_, its values)}`` of a group's built-in options (interpolated values left out)."""
    found = {}
    for name, path in catalog.options(group).items():
        node = catalog.read_yaml(path)
        values = {k: v for k, v in node.items() if not str(k).startswith("_") and k != "name"
                  and not (isinstance(v, str) and "${" in v)}
        found[name] = (str(node["_target_"]), values)
    return found


def _real(target: str) -> Any:
    module, _, attr = target.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _outcome(call: Any, *args: Any) -> tuple[Any, ...]:
    """What a check answers: ("ok", its result) or ("error", type, message)."""
    try:
        return ("ok", call(*args))
    except Exception as err:  # noqa: BLE001
        return ("error", type(err).__name__, str(err))


def _light_outcome(call: Any, *args: Any) -> tuple[Any, ...]:
    """:func:`_outcome` of a light-loaded check; :data:`FALLBACK` when it used a name only the real import gives."""
    with light_load.session() as state:
        try:
            answer = _outcome(call, *args)
        except light_load.Unavailable:
            return FALLBACK
    return FALLBACK if state.touched else answer


def _value_sets(defaults: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(defaults), {}] + [{**defaults, key: probe} for key in defaults for probe in PROBES]


def _settings(run_setting: Any, augmentation: Any) -> list[Any]:
    """A few run settings (augmentation, pooler, model type, loss inputs), built with the given classes."""
    return [run_setting(augmentation("cl_bench.augment.base.Dropout"), "data/wiki1m.txt", "pair", 0.1, frozenset(),
                        pooler="cls", mlp_only_train=True),
            run_setting(augmentation("cl_bench.augment.words.WordDeletion"), "data/nli.csv", "pair", 0.0,
                        frozenset({"ignore"}), pooler="avg", mlp_only_train=False, model_type="roberta"),
            run_setting(augmentation("cl_bench.augment.cutoff.TokenCutoff"), "", "queue", None, frozenset(),
                        pooler="cls", mlp_only_train=False, model_type="bert"),
            run_setting(None, "", None, 0.1, frozenset(), pooler="mask")]


def test_every_builtin_check_gives_the_imported_answer_light_loaded() -> None:
    """For every built-in method, loss and augmentation, on its defaults and on each key set to each of PROBES:
    check_config, check_setting, inert_keys and supplied_inputs (methods; under several run settings),
    check_config and runs_model_in_training (augmentations), check_config, the mark and the keyword inputs
    (losses) light-loaded answer as the imported ones, or leave it to the job; the defaults are always answered."""
    decided = total = 0

    def same(name: str, real: tuple[Any, ...], light: tuple[Any, ...], must_decide: bool = False) -> None:
        nonlocal decided, total
        total += 1
        if light == FALLBACK:
            assert not must_decide, (name, real)
            return
        decided += 1
        assert light == real, name

    real_setting, light_setting = _real("cl_bench.methods.base.RunSetting"), light_load.load("cl_bench.methods.base.RunSetting")
    real_settings = _settings(real_setting, _real)
    light_settings = _settings(light_setting, light_load.load)
    for name, (target, defaults) in _targets("method").items():
        real, light = _real(target), light_load.load(target)
        assert light is not real and light.__name__ == real.__name__
        decide = {**defaults, **REACHES_MODELS.get(target, {})}
        for values in [decide, *_value_sets(defaults)]:
            label = f"method={name} {values}"
            first = values is decide
            same(label, _outcome(real.check_config, values), _light_outcome(light.check_config, values), first)
            same(label, _outcome(real.supplied_inputs, values), _light_outcome(light.supplied_inputs, values), first)
            for real_s, light_s in zip(real_settings, light_settings, strict=True):
                same(f"{label} {real_s}", _outcome(real.check_setting, values, real_s),
                     _light_outcome(light.check_setting, values, light_s), first)
                same(f"{label} {real_s}", _outcome(real.inert_keys, values, real_s),
                     _light_outcome(light.inert_keys, values, light_s), first)
    for name, (target, defaults) in _targets("augmentation").items():
        real, light = _real(target), light_load.load(target)
        assert hasattr(real, "check_config") == hasattr(light, "check_config"), name
        for values in _value_sets(defaults):
            label = f"augmentation={name} {values}"
            if hasattr(real, "check_config"):
                same(label, _outcome(real.check_config, values), _light_outcome(light.check_config, values), values == defaults)
            same(label, _outcome(real.runs_model_in_training, values),
                 _light_outcome(light.runs_model_in_training, values), values == defaults)
    for name, (target, defaults) in _targets("loss").items():
        real, light = _real(target), light_load.load(target)
        assert (light.loss_kind, light.loss_needs) == (real.loss_kind, real.loss_needs), name
        assert [p.name for p in inspect.signature(light).parameters.values() if p.kind is p.KEYWORD_ONLY] == \
            [p.name for p in inspect.signature(real).parameters.values() if p.kind is p.KEYWORD_ONLY], name
        assert hasattr(real, "check_config") == hasattr(light, "check_config"), name
        if hasattr(real, "check_config"):
            for values in _value_sets(defaults):
                same(f"loss={name} {values}", _outcome(real.check_config, values),
                     _light_outcome(light.check_config, values), values == defaults)
    assert decided >= 0.95 * total, (decided, total)  # nearly all answered before torch


def _composed(argv: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=argv, return_hydra_config=True)


def _early(cfg: Any) -> str | None:
    try:
        check_composed(cfg)
    except ConfigError as err:
        return str(err)
    return None


def _choices(cfg: Any) -> str | None:
    """The job's method, loss and augmentation checks (:func:`cl_bench.config.check_choices`) alone."""
    try:
        check_choices(cfg, list(cfg.hydra.overrides.task))
    except ConfigError as err:
        return str(err)
    return None


def _job(cfg: Any) -> str | None:
    """The job's first rejection: for ``mode=eval`` the recorded pooling first, then :func:`cl_bench.config.validate`."""
    try:
        if cfg.mode == "eval":
            use_recorded_pooling(cfg, list(cfg.hydra.overrides.task))
        validate(cfg, list(cfg.hydra.overrides.task))
    except ConfigError as err:
        return str(err)
    return None


ARGVS = [[f"experiment={name}"] for name in sorted(catalog.options("experiment"))] + [
    ["method=diffcse", "method.generator=null", "pooler=avg", "method.projector=mlp"],  # inert off pooler=cls
    ["method=sncse", "augmentation=negation"], ["method=cert", "method.mochi_synthetic=4", "method.mochi_hardest=5"],
    ["method=promptbert", "method.supervised=true", "loss.hard_negative_alpha=0.5"],
    ["method=simcse_sup", "loss.hard_negative_alpha=0.5"], ["train.matryoshka_dims=[64,32]", "loss=infonce"],
    ["method=sbert", "train.matryoshka_dims=[64]"], ["eval.tasks=[transfer]", "eval.seed=3"],
    ["train.num_workers=2", "augmentation=mlm_replace", "train.device=cpu"],
    ["eval.tasks=[transfer]", "eval.transfer_classifier=svm"], ["eval.tasks=[sts,mteb:STS22]", "eval.backend=x"],
    ["eval.postprocess=whitening", "eval.whitening=0"], ["eval.precision=bf16", "train.device=cpu"],
    ["mode=eval", "eval.tasks=[transfer]", "eval.transfer_config=x"], ["mode=eval", "pooler=avg_first_last"],
    ["mode=eval", "loss.tau=0.1"], ["mode=eval", "eval.truncate_dim=0"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) for a in ARGVS])
def test_the_early_answer_is_the_jobs_or_none(argv: list[str]) -> None:
    """On every experiment preset and a few combinations, cl-bench's early check gives the job's first
    rejection: it never rejects what the job accepts, nor names another key, and leaves to the job only
    what needs a model's files (DiffCSE's generator on the hub)."""
    cfg = _composed(argv)
    if "MULTIRUN" in str(cfg.hydra.get("mode")):
        # a sweep preset: cl-bench leaves it to each job (no early answer on the command line)
        assert check_declared_choices(argv) is None, argv
        return
    early, job = _command_line_answer(argv), _job(cfg)
    # left to the job: what needs a model's files (DiffCSE's generator on the hub) or the hardware (bf16)
    assert early == job or (early is None and ("cannot load" in str(job) or "bf16" in str(job))), (argv, early, job)


def _command_line_answer(argv: list[str]) -> str | None:
    try:
        check_declared_choices(argv)
    except ConfigError as err:
        return str(err)
    return None


def test_mode_eval_is_judged_with_the_pooling_recorded_with_the_encoder(tmp_path: Path) -> None:
    """``mode=eval`` of a checkpoint trained with ``avg_first_last``: ``pooler.first_layer=0`` acts there (the config's
    default pooler, ``cls``, would make it inert) and ``pooler.first_layer=5`` gets the job's value error."""
    (tmp_path / "config.json").write_text('{"model_type": "bert", "hidden_size": 32}')
    (tmp_path / ENCODER_META_FILE).write_text('{"pooler": "avg_first_last", "mlp_only_train": false, "first_layer": 1}')
    model = f"model.name_or_path={tmp_path}"
    assert _command_line_answer(["mode=eval", model, "pooler.first_layer=0"]) is None
    assert _job(_composed(["mode=eval", model, "pooler.first_layer=0"])) is None
    argv = ["mode=eval", model, "pooler.first_layer=5"]
    assert _command_line_answer(argv) == _job(_composed(argv)) == "pooler.first_layer: must be 0 or 1, got 5"
    argv = ["mode=eval", model, "eval.truncate_dim=33"]
    assert _command_line_answer(argv) == _job(_composed(argv)) == \
        "eval.truncate_dim: 33 exceeds the model's embedding width 32"


USER_METHOD = '''
"""A user's method whose checks need torch itself."""
import torch

from cl_bench.methods.base import Method

if torch.cuda.device_count() >= 0:  # runs only with the real torch: LIMIT is unavailable light-loaded
    LIMIT = 4


class Torchy(Method):
    uses = frozenset({"loss", "pooler"})

    @classmethod
    def check_config(cls, values):
        if values.get("mode") == "tensor" and torch.zeros(1).sum() == 0:
            raise ValueError("method.mode: tensor is refused")
        if values.get("mode") == "limit" and values.get("width", 1) > LIMIT:
            raise ValueError(f"method.width: must be <= {LIMIT}")
        if values.get("mode") == "swallow":
            try:
                torch.ones(1)
                ok = bool(torch.ones(1))
            except BaseException:  # noqa: BLE001 (what a careless check may do: light-loaded, this is no answer)
                ok = False
            if not ok:
                raise ValueError("method.mode: swallow refused")

    def __init__(self, context, mode: str = "none", width: int = 1):
        super().__init__(context)

    def training_step(self, batch):
        return {}
'''


@pytest.mark.parametrize(("mode", "job"), [("tensor", "method.mode: tensor is refused"),
                                           ("limit", "method.width: must be <= 4"), ("swallow", None)])
def test_a_check_that_needs_the_real_import_is_left_to_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               mode: str, job: str | None) -> None:
    """A check that computes with torch, reads a name only the real import defines, or swallows the light
    loader's refusal: cl-bench's early check gives no answer (the job, with the real torch, gives its own)."""
    (tmp_path / "torchy_method.py").write_text(USER_METHOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = _composed(["method.mlm_weight=0.1"])
    with open_dict(cfg):
        cfg.method = OmegaConf.create({"_target_": "torchy_method.Torchy", "name": "torchy", "mode": mode, "width": 8})
    light = light_load.load("torchy_method.Torchy")
    with light_load.session() as state, pytest.raises((light_load.Unavailable, ValueError)):
        light.check_config({"mode": mode, "width": 8})
    assert state.touched
    assert _early(cfg) is None
    assert _choices(cfg) == job


def test_a_class_with_an_unavailable_base_keeps_its_available_bases() -> None:
    """``Method(nn.Module, abc.ABC)`` light-loaded: a stub for nn.Module, abc.ABC kept; the method's own and the
    base's classmethods resolve as along the real MRO, and what only nn.Module has is refused, never a default."""
    light = light_load.load("cl_bench.methods.cert.CERT")
    real = _real("cl_bench.methods.cert.CERT")
    names = [c.__name__ for c in light.__mro__]
    assert names[: names.index("Method") + 1] == [c.__name__ for c in real.__mro__][: names.index("Method") + 1]
    assert light.supplied_inputs({}) == real.supplied_inputs({}) == frozenset()
    with light_load.session() as state, pytest.raises(light_load.Unavailable):
        getattr(light, "register_buffer", None)  # nn.Module's: no silent default
    assert state.touched == 1


def test_a_light_session_refuses_heavy_imports_and_loads_nothing_under_real_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a session the real import of a heavy package not yet imported raises (also from code that is not
    light-loaded, e.g. cl_bench.config reading a hub model's width); light modules stand in ``sys.modules`` only
    under the light prefix, and :func:`light_load.forget` drops them."""
    import sys

    light_load.load("cl_bench.methods.simcse.SimCSE")
    light_names = [name for name, module in sys.modules.items() if name.startswith(light_load.LIGHT_PREFIX)]
    assert "_cl_bench_light.cl_bench.methods.simcse" in light_names
    assert all(getattr(module, "__name__", name) == name for name, module in sys.modules.items()
               if name.startswith("cl_bench."))  # the real names hold the real modules
    assert "tabnanny" not in sys.modules
    monkeypatch.setattr(light_load, "HEAVY", light_load.HEAVY | {"tabnanny"})  # a module surely not imported yet
    with light_load.session() as state, pytest.raises(light_load.Unavailable):
        importlib.import_module("tabnanny")
    assert state.touched == 1 and "tabnanny" not in sys.modules
    importlib.import_module("tabnanny")  # outside a session: imported as always
    with pytest.raises(NotStatic):
        light_load.load("cl_bench.methods.simcse.NoSuchClass")
    light_load.forget()
    assert not [name for name in sys.modules if name.startswith(light_load.LIGHT_PREFIX)]


def test_local_model_width_is_what_transformers_reads() -> None:
    """Each model type's width key is the one transformers maps ``hidden_size`` to; the MiniLM's width read from its
    config.json equals ``AutoConfig``'s."""
    from transformers import CONFIG_MAPPING, AutoConfig

    from cl_bench.config import WIDTH_KEYS, local_model_width

    for model_type, key in WIDTH_KEYS.items():
        assert CONFIG_MAPPING[model_type].attribute_map.get("hidden_size", "hidden_size") == key, model_type
    from conftest import minilm_path

    MINILM = minilm_path()  # noqa: N806
    assert local_model_width(str(MINILM)) == AutoConfig.from_pretrained(str(MINILM)).hidden_size == 384
    assert local_model_width("bert-base-uncased") is None


def test_a_module_the_light_loader_cannot_run_gets_what_its_declarations_decide(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A method the light loader leaves alone (an installed package's module) is judged by its declarations, read
    from the source: a loss of a kind it does not call is still rejected before torch, as the job rejects it."""
    from tests.test_fast_rejection import USER_METHOD

    (tmp_path / "installed_method.py").write_text(USER_METHOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(light_load._KINDS, "installed_method", "unavailable")  # as for a package in site-packages
    with pytest.raises(NotStatic):
        light_load.load("installed_method.Neighbours")
    cfg = _composed(["loss=sg_opt"])
    with open_dict(cfg):
        cfg.method = OmegaConf.create({"_target_": "installed_method.Neighbours", "name": "neighbours", "shift": 1})
    early = _early(cfg)
    assert early is not None and early.startswith("loss=sg_opt: method=neighbours calls pair losses") and early == _choices(cfg)
