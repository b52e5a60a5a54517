"""A bad override is answered in one line before torch, transformers or MLflow are imported (issue 25, item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _PROBE, job_first_error, minilm_path
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import app_help
from cl_bench.config import ConfigError, check_choices
from cl_bench.config.catalog import CONF_DIR
from cl_bench.config.early_checks import check_group_choices

ROOT = Path(__file__).resolve().parents[2]

#: (command-line overrides, the one line expected on stderr); each is rejected with exit status 2
REJECTED = [
    (["loss.tau=-1"], "cl-bench: error: loss.tau: must be > 0, got -1"),
    (["batch_size=abc"], "cl-bench: error: batch_size: Value 'abc' of type 'str' could not be converted to Integer"),
    (["++batch_size=abc"], "cl-bench: error: batch_size: Value 'abc' of type 'str' could not be converted to Integer"),
    (["+batch_size=8"], "cl-bench: error: +batch_size: batch_size is already in the config; set it without '+': batch_size=8"),
    (["train.eval_steps=-5"], "cl-bench: error: train.eval_steps: must be >= 0 (0 = evaluate at the end only), got -5"),
    (["augmentation=eda_delete", "augmentation.p=2"],
     "cl-bench: error: augmentation.p: unknown key for augmentation=eda_delete; valid keys: augmentation.alpha"),
    (["train.max_steps=0"], "cl-bench: error: train.max_steps: must be > 0 (stop after that many optimizer steps) "
                            "or -1 (train.epochs decides), got 0"),
    (["-m", "train.log_steps=10,0"], "cl-bench: error: train.log_steps: must be >= 1, got 0"),
    (["method=simcsee"], "cl-bench: error: method: unknown method 'simcsee'; valid: "),
    (["eval.tasks=sts"], "cl-bench: error: eval.tasks: must be a list, e.g. eval.tasks=[sts]; got 'sts'"),
    (["train.precision=fp16", "train.device=cpu"], "cl-bench: error: train.precision: fp16 needs a CUDA device (loss "
                                                   "scaling), got train.device=cpu; use bf16 or fp32"),
    (["train.device=cpu:0x"], "cl-bench: error: train.device: must name a device, e.g. auto, cpu, cuda, cuda:1, mps, "
                              "got 'cpu:0x'"),
    # an option's key of the wrong type: its YAML extends its spec's schema, so composition types it
    (["method.mlm_weight=abc"], "cl-bench: error: method.mlm_weight: Value 'abc' of type 'str' could not be converted "
                                "to Float"),
    (["augmentation=crop", "augmentation.rate=x"], "cl-bench: error: augmentation.rate: Value 'x' of type 'str' could "
                                                   "not be converted to Float"),
    # a key with a fixed set of values is a StrEnum (the run's schema or the option's spec): composition rejects others
    (["model.prompt_period=keep"], "cl-bench: error: model.prompt_period: Invalid value 'keep', expected one of "
                                   "[none, promptbert, sncse, prompteol]"),
    (["method=esimcse", "method.momentum_start=warm"], "cl-bench: error: method.momentum_start: Invalid value 'warm', "
                                                       "expected one of [pretrained, random]"),
    (["method=promptbert", "method.head=foo"], "cl-bench: error: method.head: Invalid value 'foo', expected one of "
                                               "[mlp, mlm_transform]"),
    (["augmentation=word_repetition", "augmentation.dup_type=x"],
     "cl-bench: error: augmentation.dup_type: Invalid value 'x', expected one of [bpe, word]"),
    (["augmentation=negation", "augmentation.source=x"], "cl-bench: error: augmentation.source: Invalid value 'x', "
                                                         "expected one of [rules, file]"),
    (["-m", "loss=supcon", "loss.contrast_mode=one,both"], "cl-bench: error: loss.contrast_mode: Invalid value 'both', "
                                                           "expected one of [all, one]"),
    (["train.matryoshka_dims=64"],  # a list key whose default is null
     "cl-bench: error: train.matryoshka_dims: must be a list, e.g. train.matryoshka_dims=[64]; got 64"),
]


def test_rejections_and_help_import_neither_torch_nor_transformers_nor_mlflow(tmp_path: Path) -> None:
    """Every rejection of REJECTED and ``--help`` (after an override), in one fresh interpreter: one line each, exit 2 (help: 0),
    and afterwards ``sys.modules`` holds none of torch, transformers, mlflow (nor scikit-learn)."""
    argvs = [argv for argv, _ in REJECTED] + [["method=sg_opt", "--help"]]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for (argv, expected), (code, stderr, _) in zip(REJECTED, result["answers"], strict=False):
        assert code == 2, (argv, stderr)
        assert stderr.strip().splitlines() == [stderr.strip()] and stderr.startswith(expected), (argv, stderr)
    help_code, _, help_text = result["answers"][-1]
    assert help_code == 0 and "cl-bench list" in help_text and "_target_: cl_bench.methods.sg_opt.modeling." in help_text
    assert result["heavy"] == [], f"imported before the answer: {result['heavy']}"
    assert not (tmp_path / "outputs").exists()  # no run directory for a rejected command


def test_a_presets_unknown_or_wrongly_typed_option_key_is_one_line_before_torch(tmp_path: Path) -> None:
    """A preset in a user's folder that sets a key its option's spec lacks, or a value of the wrong type, is rejected by
    composition (the option's schema); ``cl-bench`` says it in one line naming the key and the file, exit 2, single
    run or sweep, before torch."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "typo.yaml").write_text("# @package _global_\nmethod:\n  mlm_wieght: 0.1\n")
    (tmp_path / "conf" / "experiment" / "wrong.yaml").write_text("# @package _global_\nloss:\n  tau: warm\n")
    search = f"hydra.searchpath=[file://{tmp_path / 'conf'}]"
    cases = [([search, "experiment=typo"], "cl-bench: error: method.mlm_wieght: unknown key (set in experiment/typo); "
                                           "closest valid key: method.mlm_weight"),
             (["-m", search, "experiment=typo", "seed=1,2"], "cl-bench: error: method.mlm_wieght: unknown key"),
             ([search, "experiment=wrong"], "cl-bench: error: loss.tau: Value 'warm' of type 'str' could not be "
                                            "converted to Float (set in experiment/wrong)")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([argv for argv, _ in cases])], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for (_argv, expected), (code, stderr, _) in zip(cases, result["answers"], strict=True):
        assert code == 2 and stderr.strip().splitlines() == [stderr.strip()] and stderr.startswith(expected), stderr
    assert result["heavy"] == []


@pytest.mark.parametrize("argv", [["train.max_steps=-1"], ["train.max_steps=5", "train.epochs=0"],
                                  ["train.eval_steps=0"], ["augmentation=eda_delete", "augmentation.alpha=0.2"],
                                  ["-m", "train.eval_steps=0,125", "method=simcse,sg_opt"], ["++train.lr=1e-4"],
                                  ["train.matryoshka_dims=null"], ["-m", "eval.tasks=[sts],[transfer]"]])
def test_valid_overrides_pass(argv: list[str]) -> None:
    check_group_choices(argv)


def test_max_steps_zero_is_rejected_by_the_job_validation_too() -> None:
    """The job's pass (:func:`cl_bench.config.preflight`; here without its files): a config built in code gets the
    same answer."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["train.max_steps=0"])
        check_choices(compose("config", overrides=["train.max_steps=3"]), before_torch=True)
        eval_cfg = compose("config", overrides=["mode=eval", "train.max_steps=0"])
    with pytest.raises(ConfigError, match=r"^train\.max_steps: must be > 0 .* got 0$"):
        check_choices(cfg, before_torch=True)
    check_choices(eval_cfg, before_torch=True)  # mode=eval: train.* do not act (the job's check names them as inert)


def test_help_lists_the_groups_hydra_lists() -> None:
    """``cl-bench --help`` lists the groups from the config folders; Hydra's own listing gives the same options."""
    from hydra.core.global_hydra import GlobalHydra

    text = app_help([])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for group in ("method", "augmentation/simcse_table1", "experiment/points"):
            assert f"{group}: {', '.join(sorted(loader.get_group_options(group)))}\n" in text
    assert "hydra/" not in text.split("== Config ==")[0] and "_target_: cl_bench.methods.simcse.modeling.SimCSE" in text


# ------------------------------------------------------------------------------------------------
# `cl-bench list` and the specs it reads, without torch
# ------------------------------------------------------------------------------------------------
_LIST_PROBE = """
import contextlib, io, json, sys
from cl_bench.commands import cli
sys.argv = ["cl-bench", "list", *json.loads(sys.argv[1])]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    cli.main()
heavy = sorted(m for m in ("torch", "transformers", "mlflow", "sklearn", "pandas") if m in sys.modules)
print(json.dumps({"listing": out.getvalue(), "heavy": heavy}))
"""


def _list_in_fresh_interpreter(cwd: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _LIST_PROBE, json.dumps(list(args))], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _targets(group: str) -> dict[str, str]:
    from cl_bench.config import catalog

    return {name: str(catalog.read_yaml(path).get("_target_")) for name, path in catalog.options(group).items()}


def test_list_imports_no_heavy_module_and_says_what_the_specs_say(tmp_path: Path) -> None:
    """``cl-bench list`` in a fresh interpreter imports none of torch, transformers, mlflow, scikit-learn, pandas,
    and prints the same text as the listing made here after importing every method, loss and augmentation module
    (the listing is the specs', whatever else is loaded)."""
    import importlib

    from cl_bench.config import catalog

    result = _list_in_fresh_interpreter(tmp_path)
    assert result["heavy"] == [], f"imported by cl-bench list: {result['heavy']}"
    for group in ("method", "loss", "augmentation"):
        for name, target in _targets(group).items():
            module, _, attr = target.rpartition(".")
            getattr(importlib.import_module(module), attr)  # imported: the listing below asks the objects
            assert f"\n  {name}" in result["listing"], (group, name)
    assert result["listing"] == catalog.listing() + "\n"


USER_METHOD = '''
"""A user's method in their own folder: its spec and its nn.Module in one module (it imports torch), so a new
method is two files, this and its YAML."""
from dataclasses import dataclass
from typing import ClassVar

import torch

from cl_bench.methods.base import Method
from cl_bench.specs import MethodSpec


class Neighbours(Method):
    """Keys: neighbours.yaml (spec: NeighboursSpec)."""


@dataclass(kw_only=True)
class NeighboursSpec(MethodSpec):
    target: ClassVar[str] = "neighbours_method.Neighbours"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = "neighbours: each sentence against the next one"

    shift: int
'''


def test_list_shows_a_users_own_method(tmp_path: Path) -> None:
    """A method from a ``hydra.searchpath`` folder is listed with what its spec declares (its module, which imports
    torch, is imported for it: cl-bench's own specs import no torch)."""
    folder = tmp_path / "mine"
    (folder / "method").mkdir(parents=True)
    (folder / "neighbours_method.py").write_text(USER_METHOD)
    (folder / "method" / "neighbours.yaml").write_text("# Neighbours.\n_target_: neighbours_method.Neighbours\n"
                                                       "name: neighbours\nshift: 1\n")
    result = _list_in_fresh_interpreter(tmp_path, f"hydra.searchpath=[file://{folder}]")
    listing = result["listing"]
    row = listing[listing.index("\n  neighbours: "):].split("\n  ")[1:3]
    assert row[0] == "neighbours: neighbours: each sentence against the next one"
    assert "uses: loss, pooler" in listing[listing.index("\n  neighbours: "):] and "method.shift" in listing


# ------------------------------------------------------------------------------------------------
# Rejections that depend on a method's or loss's spec: before torch, with the job's own words
# ------------------------------------------------------------------------------------------------
#: (overrides, the line expected); each is also what the job's validation (check_choices) says
DECLARED_REJECTED = [
    (["loss=sg_opt"], "cl-bench: error: loss=sg_opt: method=simcse calls pair losses and this one is a self_guided "
                      "loss; use one of: contrastive, debiased, hard_negative, infonce, lifted, mixcse, nce, npair, "
                      "ntxent, snn, supcon, triplet"),
    (["method=sbert", "loss=infonce"], "cl-bench: error: loss=infonce: method=sbert calls classifier/scored_pair/triplet "
                                       "losses and this one is a pair loss; use one of: angle, angle_nli, cosent, "
                                       "sbert_regression, sbert_softmax, sbert_triplet"),
    (["method=sbert", "augmentation=eda_delete"], "cl-bench: error: augmentation: has no effect on this run: "
                                                  "method=sbert does not use the augmentation group (it uses: loss, pooler)"),
    (["method=is_bert", "pooler=avg"], "cl-bench: error: pooler: has no effect on this run: method=is_bert does not use "
                                       "the pooler group (it uses: loss)"),
    (["method=is_bert", "pooler.first_layer=0"], "cl-bench: error: pooler.first_layer: has no effect on this run: only "
                                                 "pooler=avg_first_last averages a first layer (pooler=cls)"),
    (["+method.foo=1"], "cl-bench: error: method.foo: unknown key for cl_bench.methods.simcse.modeling.SimCSE; valid keys: "
                        "mlm_weight, mlm_probability, mlm_mode, augment_both_views, fixed_dropout_mask, select_with_mlp"),
    (["method=sbert", "+loss.margin=2"], "cl-bench: error: loss.margin: unknown key for cl_bench.losses.sbert.sbert_softmax; "
                                         "valid keys: none"),
    (["pooler=mask", "model.prompt=foo"], "cl-bench: error: model.prompt: pooler=mask reads the state at [MASK], "
                                          "and 'foo' has none"),
    (["method=esimcse", "pooler=mask"], "cl-bench: error: pooler=mask: method=esimcse builds its views from token ids, "
                                        "without a prompt to pool"),
    (["loss.hard_negative_alpha=0.5"], "cl-bench: error: loss.hard_negative_alpha: has no effect on this run: "
                                       "method=simcse gives its loss no hard negatives"),
    (["method=quickthoughts", "loss.similarity=dot", "loss.tau=0.1"],
     "cl-bench: error: loss.tau: has no effect on this run: loss=neighbour uses tau only with loss.similarity=cosine"),
    (["method=promptbert", "model.prompt_period=promptbert"], "cl-bench: error: model.prompt_period: has no effect on this run: "
                                                        "method=promptbert sets its own templates (method.* keys) and [MASK] pooler"),
    # the method's, loss's and augmentation's own checks (their specs: cl_bench/*/specs.py)
    (["method=cert", "method.queue_size=0"], "cl-bench: error: method.queue_size: must be >= 1, got 0"),
    (["method=diffcse", "method.mask_ratio=2"], "cl-bench: error: method.mask_ratio: must be in (0, 1), got 2.0"),  # typed by the spec: 2 is a float
    (["method=diffcse", "method.generator=null", "pooler.mlp_only_train=false"],
     "cl-bench: error: pooler.mlp_only_train: method=diffcse's BatchNorm projector is used in training only (official "
     "--mlp_only_train); set pooler.mlp_only_train=true or method.projector=mlp"),
    (["method=sncse", "augmentation=dropout"], "cl-bench: error: augmentation=dropout: method=sncse makes its soft negatives "
                                               "with a text augmentation; use augmentation=negation (SNCSE's)"),
    (["method=cert", "method.mochi_hardest=5"], "cl-bench: error: method.mochi_hardest: has no effect on this run: MoCHi is "
                                                "off (method.mochi_synthetic = method.mochi_query_mixed = 0)"),
    (["loss=mixcse", "loss.lambd=2"], "cl-bench: error: loss.lambd: must be in [0, 1], got 2.0"),
    (["train.num_workers=2", "augmentation=mlm_replace", "train.device=cuda"],
     "cl-bench: error: train.num_workers: augmentation=mlm_replace runs its model on the training device (cuda) at every "
     "step, which forked DataLoader workers cannot use; set train.num_workers=0"),
    (["train.matryoshka_dims=[0]"], "cl-bench: error: train.matryoshka_dims: must be a list of values >= 1, got [0]"),
    (["eval.seed=3"], "cl-bench: error: eval.seed: has no effect on this run: no transfer task is evaluated (eval.tasks)"),
]
#: the real MiniLM (its config.json gives the width before transformers loads); missing, collection fails naming it
MINILM = minilm_path()
DECLARED_REJECTED += [
    ([f"model.name_or_path={MINILM}", "train.matryoshka_dims=[64,512]"],
     "cl-bench: error: train.matryoshka_dims: 512 exceeds the model's embedding width 384"),
    ([f"model.name_or_path={MINILM}", "eval.truncate_dim=400"],
     "cl-bench: error: eval.truncate_dim: 400 exceeds the model's embedding width 384"),
    # the eval.* values, which the job checks before it looks for the model and the data
    (["eval.tasks=[sts,foo]"], "cl-bench: error: eval.tasks: unknown task 'foo'; valid: sts, transfer, sts12, sts13, "
                               "sts14, sts15, sts16, stsb, sickr, mr, cr, subj, mpqa, sst2, trec, mrpc"),
    (["eval.batch_size=0"], "cl-bench: error: eval.batch_size: must be >= 1, got 0"),
    (["eval.tasks=[transfer]", "eval.transfer_config=slow"],
     "cl-bench: error: eval.transfer_config: must be one of full, fast, got 'slow'"),
    (["train.select_metric=stsb_test"], "cl-bench: error: train.select_metric: unknown 'stsb_test'; valid: stsb_dev, "
                                        "sts_dev_avg, transfer_dev_avg, stsb_dev_max_similarity, "
                                        "stsb_dev_max_similarity_no_dot"),
    (["eval.backend=tensorrt"], "cl-bench: error: eval.backend: unknown 'tensorrt'; valid: auto, torch, onnx"),
    (["eval.postprocess=flow", "eval.flow.fit_mode=x"], "cl-bench: error: eval.flow.fit_mode: must be one of train, eval, got 'x'"),
    (["eval.pooler=nope"], "cl-bench: error: eval.pooler: unknown pooler 'nope'; valid: cls, cls_before_pooler, avg, "
                           "avg_top2, avg_first_last, cls_avg, mask, prompt_last, last_token (or null: pooler.name)"),
    (["eval.pooler=cls"], "cl-bench: error: eval.pooler: 'cls' needs an MLP head, which the trained encoder was not "
                          "built with; train with pooler=cls instead"),
    (["eval.tasks=[mteb:Banking77Classification]", "eval.cache_size_gb=0"],
     "cl-bench: error: eval.cache_size_gb: must be > 0, got 0.0"),
    # mode=eval: judged on the config the job gets, after the pooling recorded with the encoder (none in MiniLM)
    (["mode=eval", f"model.name_or_path={MINILM}", "eval.tasks=[foo]"],
     "cl-bench: error: eval.tasks: unknown task 'foo'; valid: sts, transfer, sts12, sts13, sts14, sts15, sts16, stsb, "
     "sickr, mr, cr, subj, mpqa, sst2, trec, mrpc"),
    (["mode=eval", f"model.name_or_path={MINILM}", "eval.align_uniform_split=val"],
     "cl-bench: error: eval.align_uniform_split: must be one of all, train, dev, test, got 'val'"),
    (["mode=eval", f"model.name_or_path={MINILM}", "pooler.first_layer=0"],
     "cl-bench: error: pooler.first_layer: has no effect on this run: only pooler=avg_first_last averages a first layer "
     "(pooler=cls)"),
    # the model and the data, where the job asks no network: a local folder without config.json, the data all there
    (["model.name_or_path=./no_such_model", "data=wiki1m_head"],
     "cl-bench: error: model.name_or_path: no Hugging Face model at 'no_such_model' (config.json missing)"),
    (["mode=eval", "model.name_or_path=./no_such_model"],
     "cl-bench: error: model.name_or_path: no Hugging Face model at 'no_such_model' (config.json missing)"),
]


def test_declared_rejections_import_no_heavy_module_and_say_what_the_job_says(tmp_path: Path) -> None:
    """Each rejection that a method's or loss's declaration or the eval.* values decide answers in one line, exit 2,
    with torch, transformers, mlflow, scikit-learn not imported; and the job's validation (which imports the classes)
    rejects the same config with the same line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([argv for argv, _ in DECLARED_REJECTED])],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [], f"imported before the answer: {result['heavy']}"
    for (argv, expected), (code, stderr, _) in zip(DECLARED_REJECTED, result["answers"], strict=True):
        assert code == 2 and stderr.strip() == expected, (argv, stderr)
        assert job_first_error(argv) == expected, argv
    assert not (tmp_path / "outputs").exists()


def test_offline_missing_model_and_data_answer_before_torch_as_the_job(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``cl-bench`` on a fresh machine in offline mode (no cached model, no data): the job's one line naming both
    missing pieces, before torch; the job's own validation says the same."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # nothing cached
    monkeypatch.setenv("CL_BENCH_DATA", str(tmp_path / "no_data"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([[], ["loss.tau=0.1"]])], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [], f"imported before the answer: {result['heavy']}"
    monkeypatch.chdir(tmp_path)  # the hint's example model folder is looked for from the working directory
    for argv, (code, stderr, _) in zip([[], ["loss.tau=0.1"]], result["answers"], strict=True):
        assert code == 2 and stderr.startswith("cl-bench: error: model.name_or_path: cannot load 'bert-base-uncased'")
        assert " -- and data.train_file: data root " in stderr and "downloads are off (HF_HUB_OFFLINE=1)" in stderr
        assert stderr.strip() == job_first_error(argv)


@pytest.mark.parametrize("argv", [["method=sbert", "loss=cosent"], ["method=sg_opt"], ["method=promptbert", "loss=infonce"],
                                  ["method=simcse", "augmentation=eda_delete", "pooler=avg"],
                                  ["-m", "method=sbert", "augmentation=eda_delete"],  # a sweep: each job judges itself
                                  ["experiment=ablation_tau", "pooler=avg"]])        # a multirun preset: the same
def test_declared_checks_pass_what_the_job_decides(argv: list[str]) -> None:
    """A command whose first fault is none of the early checks' gets no early answer (a local model that loads and a
    corpus that is there: its backbone options and the rest are the job's)."""
    from cl_bench.config.early_checks import check_command

    check_command([*argv, f"model.name_or_path={MINILM}", "data=wiki1m_head"])


def test_a_preset_key_the_chosen_option_lacks_is_rejected_before_the_sweep() -> None:
    """A multirun preset that sets a key of its own loss (``loss.hard_negative_alpha`` of InfoNCE), with another loss
    chosen on the command line: the option's schema rejects it at composition, one line naming the key and the preset,
    before any job runs (every job would have rejected it)."""
    from cl_bench.config.early_checks import check_command

    with pytest.raises(ConfigError, match=r"^loss\.hard_negative_alpha: unknown key \(set in experiment/simcse_sup_bert\)"):
        check_command(["experiment=ablation_tau", "loss=sg_opt"])


USER_CHECKED = USER_METHOD + '''
    def check(self):
        if self.shift < 1:
            raise ValueError(f"method.shift: must be >= 1, got {self.shift}")

    def inert_keys(self, setting):
        return {"shift": "the pooler averages the shift away"} if setting.pooler == "avg" else {}
'''


@pytest.mark.parametrize(("argv", "expected"), [
    (["method.shift=0"], "cl-bench: error: method.shift: must be >= 1, got 0"),
    (["pooler=avg", "method.shift=2"], "cl-bench: error: method.shift: has no effect on this run: the pooler averages the shift away"),
])
def test_a_users_own_method_checks_answer_before_hydras_job(tmp_path: Path, argv: list[str], expected: str) -> None:
    """A method from a ``hydra.searchpath`` folder, its spec beside its nn.Module: the spec's ``check`` and
    ``inert_keys`` answer in one line before Hydra's job starts (no model, MLflow or transformers loaded; torch is,
    with the user's module)."""
    folder = tmp_path / "mine"
    (folder / "method").mkdir(parents=True)
    (folder / "neighbours_method.py").write_text(USER_CHECKED)
    (folder / "method" / "neighbours.yaml").write_text("# Neighbours.\n_target_: neighbours_method.Neighbours\n"
                                                       "name: neighbours\nshift: 1\n")
    full = [f"hydra.searchpath=[file://{folder}]", "method=neighbours", "loss=infonce", *argv]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([full])], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    code, stderr, _ = result["answers"][0]
    assert (code, stderr.strip()) == (2, expected)
    assert "transformers" not in result["heavy"] and "mlflow" not in result["heavy"]


def test_report_help_and_a_wrong_argument_import_neither_pandas_nor_mlflow() -> None:
    """``cl-bench-report --help`` and an unknown argument answer from the argument parser alone
    (:mod:`cl_bench.commands.report_cli`): pandas, matplotlib, MLflow and torch stay unimported."""
    probe = """
import contextlib, io, json, sys
from cl_bench.commands import report_cli
codes = []
for argv in (["--help"], ["--experiments", "x"]):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            report_cli.main(argv)
        except SystemExit as exit_:
            codes.append([exit_.code, out.getvalue(), err.getvalue()])
heavy = sorted(m for m in ("torch", "transformers", "mlflow", "pandas", "matplotlib") if m in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy}))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    (help_code, help_text, _), (error_code, _, error_text) = result["codes"]
    assert help_code == 0 and "--parent-run" in help_text and "best_stsb_dev" in help_text
    assert error_code == 2 and "unrecognized arguments: --experiments" in error_text
    assert result["heavy"] == [], f"imported before the answer: {result['heavy']}"
