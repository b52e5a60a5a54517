"""Every option cl-bench accepts acts on the run it labels; one that cannot act is rejected before any
model loads (one line naming the key), sweeps are checked job by job before the first job starts,
and a run records only what acted."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import mlflow
import pytest
import torch
from conftest import CORPUS, cli_env, compose_config, method_config, params_of
from omegaconf import OmegaConf, open_dict
from transformers import BertConfig, BertForMaskedLM

from cl_bench.config import (
    ConfigError,
    catalog,
    check_choices,
    inert_keys,
    typed_specs,
    validate,
)

METHODS = sorted(catalog.options("method"))
LOSSES = sorted(catalog.options("loss"))
AUGMENTATIONS = sorted(catalog.options("augmentation"))
POOLERS = sorted(catalog.options("pooler"))

#: losses that read another data set than their method's default one
LOSS_DATA = {"sbert_regression": "stsb_train", "sbert_triplet": "nli_snli_devtest", "cosent": "stsb_train",
             "angle": "stsb_train", "angle_nli": "nli_snli_devtest"}


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("corpus")
    corpus, paraphrases = folder / "corpus.txt", folder / "paraphrases.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    paraphrases.write_text("\n".join(f"{s} , retold" for s in CORPUS) + "\n")  # back-translation's file source
    return corpus, paraphrases


@pytest.fixture(scope="module")
def tiny_mlm(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny_mlm")
    BertForMaskedLM(BertConfig.from_pretrained(tiny_bert)).save_pretrained(out)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (tiny_bert / name).is_file():
            (out / name).write_bytes((tiny_bert / name).read_bytes())
    return out


def _with_option(cfg: Any, group: str, option: str) -> Any:
    """``cfg`` with ``group`` switched to ``option`` (its YAML's values; its defaults list names its schema)."""
    cfg = cfg.copy()
    _set_option(cfg, group, option, cfg)
    return cfg


def _set_option(cfg: Any, group: str, option: str, base: Any) -> None:
    """Switch ``cfg``'s ``group`` to ``option`` in place; a pooler starts again from ``base``'s pooler values (so one
    working copy serves every combination: copying the whole config costs more than checking it)."""
    values = catalog.read_yaml(catalog.options(group)[option])
    node = OmegaConf.create({key: value for key, value in values.items() if key != "defaults"})
    with open_dict(cfg):
        if group == "pooler":  # a structured node (PoolerConfig): set its fields
            if cfg is not base:
                for key, value in base.pooler.items():
                    cfg.pooler[key] = value
            for key, value in node.items():
                cfg.pooler[key] = value
        else:  # loss and augmentation are free-form: the option replaces the node
            cfg[group] = node


def _verdict(cfg: Any, overrides: list[str]) -> str | None:
    """None when accepted, else the one-line error (validation's config part: it reads no file)."""
    try:
        check_choices(cfg, overrides)
    except ConfigError as err:
        return str(err)
    return None


# ------------------------------------------------------------------------------------------------
# Every method x loss x augmentation x pooler: rejected with one line, or accepted and acting
# ------------------------------------------------------------------------------------------------
def _check_combinations(tiny_bert: Path, data_dir: Path, corpus: Path, per_method: int | None) -> None:
    """Each method x loss x augmentation x pooler combination (or ``per_method`` of them drawn at random,
    seeded) is rejected with one of its options' one-line errors, or accepted when all three are."""
    import random

    draw = random.Random(0)
    checked = 0
    accepted = rejected = 0
    for method in METHODS:
        base = method_config(method, data_dir, tiny_bert, corpus)
        verdicts = {}
        for group, names in (("loss", LOSSES), ("augmentation", AUGMENTATIONS), ("pooler", POOLERS)):
            for name in names:
                cfg = _with_option(base, group, name)
                verdicts[group, name] = _verdict(cfg, [f"{group}={name}"])
        combinations = list(itertools.product(LOSSES, AUGMENTATIONS, POOLERS))
        if per_method is not None:
            combinations = draw.sample(combinations, per_method)
        checked += len(combinations)
        cfg = base.copy()
        for loss, aug, pooler in combinations:
            for group, name in (("loss", loss), ("augmentation", aug), ("pooler", pooler)):
                _set_option(cfg, group, name, base)
            error = _verdict(cfg, [f"loss={loss}", f"augmentation={aug}", f"pooler={pooler}"])
            expected = [verdicts["loss", loss], verdicts["augmentation", aug], verdicts["pooler", pooler]]
            if error is None:
                accepted += 1
                assert expected == [None, None, None], (method, loss, aug, pooler)
            else:
                rejected += 1
                assert "\n" not in error and error in [e for e in expected if e], (method, loss, aug, pooler, error)
                assert error.split(":")[0].split("=")[0] in ("loss", "augmentation", "pooler")
    assert accepted and rejected and accepted + rejected == checked


def test_combinations_are_rejected_with_one_line_or_accepted(tiny_bert: Path, data_dir: Path, corpus_files) -> None:
    """Default suite: every option of every group per method, and 60 random full combinations per method."""
    _check_combinations(tiny_bert, data_dir, corpus_files[0], per_method=60)


@pytest.mark.slow
def test_every_combination_is_rejected_with_one_line_or_accepted(tiny_bert: Path, data_dir: Path, corpus_files) -> None:
    """All method x loss x augmentation x pooler combinations (17 x 4,176 = 70,992 today)."""
    _check_combinations(tiny_bert, data_dir, corpus_files[0], per_method=None)


#: the backbone keys of issue 26 (model.*), each with the values the combination tests try
MODEL_KEYS = {
    "model.bidirectional": [False, True],
    "model.lora.r": [0, 4],
    "model.attn_implementation": [None, "eager", "sdpa", "flash_attention_2"],
    "model.gradient_checkpointing": [False, True],
}


def _check_model_combinations(models: dict[str, Path], data_dir: Path, corpus: Path, per_method: int | None,
                              methods: list[str] = METHODS) -> None:
    """Each method x backbone (encoder, decoder) x pooler x model-key combination (or ``per_method`` drawn at
    random, seeded) is rejected with one of its single options' one-line errors, or accepted when all are."""
    import random

    from cl_bench.config import check_backbone

    def verdict(cfg: Any, settings: dict[str, Any], in_place: bool = False) -> str | None:
        """``in_place``: ``settings`` names every axis, so a working copy can serve all combinations."""
        cfg = cfg if in_place else cfg.copy()
        with open_dict(cfg):
            for key, value in settings.items():
                OmegaConf.update(cfg, key, value)
        overrides = [f"{k}={'null' if v is None else v}" for k, v in settings.items() if k != "pooler.name"]
        try:
            check_choices(cfg, overrides)
            check_backbone(cfg)
        except ConfigError as err:
            return str(err)
        return None

    draw = random.Random(0)
    accepted = rejected = 0
    for method in methods:
        for model in models.values():
            base = method_config(method, data_dir, model, corpus)
            axes = {"pooler.name": POOLERS, **MODEL_KEYS}
            # each option alone, beside pooler=avg (accepted on both backbones) where it is not the pooler
            single = {(k, v): verdict(base, {"pooler.name": "avg", k: v}) for k, values in axes.items() for v in values}
            combinations = list(itertools.product(*axes.values()))
            if per_method is not None:
                combinations = draw.sample(combinations, per_method)
            work = base.copy()
            for values in combinations:
                settings = dict(zip(axes, values, strict=True))
                error = verdict(work, settings, in_place=True)
                expected = [single[k, v] for k, v in settings.items() if single[k, v]]
                if error is None:
                    accepted += 1
                    assert not expected, (method, model.name, settings)
                else:
                    rejected += 1
                    assert "\n" not in error and error in expected, (method, model.name, settings, error)
                    # the key to change: a model key, the pooler, or the method (DiffCSE has no decoder form)
                    assert error.split(":")[0].split("=")[0] in ("pooler", "method", *(k for k in MODEL_KEYS)), error
    assert accepted and rejected


@pytest.fixture(scope="module")
def encoder_and_decoder(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tiny_decoders import build_tiny_decoder

    return {"bert": tiny_bert, "llama": build_tiny_decoder("llama", tmp_path_factory.mktemp("tiny_llama") / "llama")}


def test_model_key_combinations_are_rejected_with_one_line_or_accepted(encoder_and_decoder, data_dir: Path,
                                                                       corpus_files) -> None:
    """Default suite (seconds): SimCSE and supervised SimCSE, each model.* key and pooler alone and 8 random
    combinations per method and backbone; the slow test below takes every method and combination."""
    _check_model_combinations(encoder_and_decoder, data_dir, corpus_files[0], per_method=8, methods=["simcse", "simcse_sup"])


@pytest.mark.slow
def test_every_model_key_combination_is_rejected_with_one_line_or_accepted(encoder_and_decoder, data_dir: Path,
                                                                           corpus_files) -> None:
    """All method x backbone x pooler x model.* combinations (17 x 2 x 7 x 32 = 7,616 today)."""
    _check_model_combinations(encoder_and_decoder, data_dir, corpus_files[0], per_method=None)


def _accepted_options(method: str, cfg: Any) -> list[tuple[str, str]]:
    pairs = []
    for group, names in (("loss", LOSSES), ("augmentation", AUGMENTATIONS), ("pooler", POOLERS)):
        for name in names:
            if _verdict(_with_option(cfg, group, name), [f"{group}={name}"]) is None:
                pairs.append((group, name))
    return pairs


def _spy(calls: list[str], label: str, fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(label)
        return fn(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("method", METHODS)
def test_each_accepted_option_acts_in_a_training_step(
    method: str, tiny_bert: Path, tiny_mlm: Path, data_dir: Path, corpus_files, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spies: the configured loss function, augmentation hook and pooler are called by one training
    step of a tiny model, for every option the method accepts."""
    from cl_bench.models import encoder as encoder_module
    from cl_bench.train import loop

    corpus, paraphrases = corpus_files
    base = method_config(method, data_dir, tiny_bert, corpus)
    options = _accepted_options(method, base)
    assert ("loss", catalog.default_loss(method)) in options
    for group, name in options:
        data = LOSS_DATA.get(name) if group == "loss" else None
        cfg = _with_option(method_config(method, data_dir, tiny_bert, corpus, data) if data else base, group, name)
        with open_dict(cfg):
            if cfg.augmentation.get("_target_", "").endswith("BackTranslation"):
                cfg.augmentation.source, cfg.augmentation.paraphrase_file = "file", str(paraphrases)
            if cfg.augmentation.get("_target_", "").endswith("MLMReplace"):
                cfg.augmentation.mlm_model = str(tiny_mlm)
        calls: list[str] = []
        pool = encoder_module.pool
        monkeypatch.setattr(encoder_module, "pool", lambda name_, *a, calls=calls, pool=pool, **k: (
            calls.append(f"pooler={name_}"), pool(name_, *a, **k))[1])
        torch.manual_seed(0)
        built = loop.build_method(typed_specs(cfg), torch.device("cpu"))
        if built.loss_fn is not None:
            built.loss_fn = _spy(calls, f"loss={cfg.loss.name}", built.loss_fn)
        if built.augmentation is not None:
            for hook in ("augment_text", "augment_inputs", "repeat_token_ids"):  # the last: word repetition's ids
                if not hasattr(built.augmentation, hook):
                    continue
                setattr(built.augmentation, hook, _spy(calls, f"augmentation={name}", getattr(built.augmentation, hook)))
        items = built.read_corpus(cfg.data.train_file)
        batch = next(iter(built.batches(items, 4, torch.Generator().manual_seed(0))))
        built.train()
        terms = built.training_step(batch)
        assert torch.isfinite(terms["loss"]), (method, group, name)
        monkeypatch.undo()
        label = f"loss={cfg.loss.name}" if group == "loss" else f"{group}={name}"
        assert label in calls, (method, group, name, sorted(set(calls)))


# ------------------------------------------------------------------------------------------------
# Keys, sweeps, params and tags
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["method=simcse", "loss.hard_negative_alpha=2"], "loss.hard_negative_alpha"),
        (["method=simcse_sup", "method.use_hard_negatives=false", "loss.hard_negative_alpha=2"], "loss.hard_negative_alpha"),
        (["method=quickthoughts", "loss.tau=0.1"], "loss.tau"),
        (["method=simcse", "method.mlm_probability=0.2"], "method.mlm_probability"),
        (["method=simcse", "pooler=avg", "pooler.mlp_only_train=true"], "pooler.mlp_only_train"),
        (["mode=eval", "loss.tau=0.1"], "loss.tau"),
        (["mode=eval", "dropout=0.2"], "dropout"),
        (["method=simcse", "eval.transfer_config=fast"], "eval.transfer_config"),
        (["method=is_bert", "augmentation=eda_delete"], "augmentation"),
        # keys that need a text (or embedding-level) augmentation, data of a given format, or dropout
        (["method=simcse", "method.augment_both_views=false"], "method.augment_both_views"),
        (["method=simcse", "augmentation=token_cutoff", "method.augment_both_views=false"], "method.augment_both_views"),
        (["method=cert", "method.augment_query=true"], "method.augment_query"),
        (["method=simcse", "augmentation=token_cutoff", "method.fixed_dropout_mask=true"], "method.fixed_dropout_mask"),
        (["method=simcse", "dropout=0", "method.fixed_dropout_mask=true"], "method.fixed_dropout_mask"),
        (["method=sg_opt", "dropout=0", "method.frozen_dropout=true"], "method.frozen_dropout"),
        (["method=sg_opt", "method.stsb_splits=[train]"], "method.stsb_splits"),
        (["method=is_bert", "method.snli_splits=[dev]"], "method.snli_splits"),
        (["method=sbert", "loss=sbert_regression", "method.nli_splits=[dev]"], "method.nli_splits"),
        (["method=sbert", "loss=sbert_triplet", "method.train_classifier=false"], "method.train_classifier"),
        # prompts (cl_bench/models/prompts.py)
        (["method=simcse", "model.include_prompt=false"], "model.include_prompt"),
        (["method=simcse", "model.prompt=query: ", "model.include_prompt=false"], "model.include_prompt"),  # pooler=cls
        (["method=simcse", "model.prompt_period=sncse"], "model.prompt_period"),
        (["method=cert", "model.view_prompts=[a: ,b: ]"], "model.view_prompts"),
        (["mode=eval", "model.view_prompts=[a: ]"], "model.view_prompts"),
        (["method=promptbert", "model.prompt=query: "], "model.prompt"),
        (["method=sncse", "augmentation=negation", "model.view_prompts=[a: ]"], "model.view_prompts"),
        (["method=promptbert", "pooler=mask"], "pooler"),
        (["method=is_bert", "model.prompt=query: "], "model.prompt"),
        (["method=esimcse", "method.neg_size=0", "method.momentum=0.9"], "method.momentum"),
        (["method=diffcse", "method.lambda_weight=0", "method.mask_ratio=0.2"], "method.mask_ratio"),
        (["method=diffcse", "method.generator=null", "pooler=avg", "method.projector=mlp"], "method.projector"),
    ],
)
def test_inert_key_overrides_are_rejected_naming_the_key(
    overrides: list[str], key: str, tiny_bert: Path, data_dir: Path
) -> None:
    cfg = compose_config(data_dir, [*overrides, f"model.name_or_path={tiny_bert}"])
    with pytest.raises(ConfigError, match=rf"^{key}: has no effect on this run: .+") as err:
        validate(cfg, overrides)
    assert "\n" not in str(err.value)


def test_the_same_keys_act_where_they_can(tiny_bert: Path, data_dir: Path) -> None:
    for overrides in (
        ["method=simcse_sup", "loss.hard_negative_alpha=2"],
        ["method=quickthoughts", "loss.similarity=cosine", "loss.tau=0.1"],
        ["method=sg_opt", "loss.tau=0.05"],
        ["method=cert", "loss.tau=0.2"],
        ["method=simcse", "method.mlm_weight=0.1", "method.mlm_probability=0.2"],
        ["method=sg_opt", "loss=sg"],
    ):
        validate(compose_config(data_dir, [*overrides, f"model.name_or_path={tiny_bert}", "data=wiki1m_head"]), overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        ["data=wiki1m_head", "method=simcse", "augmentation=eda_delete", "method.augment_both_views=false"],
        ["data=wiki1m_head", "method=cert", "augmentation=eda_delete", "method.augment_query=true"],
        ["data=wiki1m_head", "method=cert", "augmentation=token_cutoff", "method.augment_query=true"],
        ["data=wiki1m_head", "method=simcse", "method.fixed_dropout_mask=true"],
        ["data=wiki1m_head", "method=sg_opt", "method.frozen_dropout=true"],
        ["method=sg_opt", "data=stsb_sentences", "method.stsb_splits=[train]"],
        ["method=is_bert", "data=nli_sentences", "method.snli_splits=[dev]"],
        ["method=sbert", "data=snli_labeled", "method.nli_splits=[dev]"],
        ["method=sbert", "data=snli_labeled", "method.train_classifier=false"],
        ["data=wiki1m_head", "method=simcse", "pooler=avg", "model.prompt=query: ", "model.include_prompt=false"],
        ["data=wiki1m_head", "method=simcse", "model.view_prompts=[a: ,b: ]"],
        ["data=wiki1m_head", "method=simcse", "pooler=mask", "model.prompt_period=promptbert"],
        ["mode=eval", "pooler=prompt_last", "model.prompt='Say \"[X]\" in one word:\"'"],
        ["data=wiki1m_head", "method=promptbert", "method.second_template='It \"[X]\" is [MASK].'"],
        ["data=wiki1m_head", "method=sncse", "augmentation=negation", "loss.bml_weight=0.01"],
        ["data=wiki1m_head", "method=esimcse", "augmentation=word_repetition", "method.momentum=0.9"],
        ["data=wiki1m_head", "method=diffcse", "method.generator=null", "method.mask_ratio=0.2"],
        ["data=wiki1m_head", "method=simcse", "method.mlm_weight=0.1", "method.mlm_mode=untied"],
    ],
)
def test_setting_dependent_keys_act_where_their_setting_allows(
    overrides: list[str], tiny_bert: Path, data_dir: Path
) -> None:
    cfg = compose_config(data_dir, [*overrides, f"model.name_or_path={tiny_bert}"])
    validate(cfg, overrides)
    key = overrides[-1].split("=")[0]
    assert key in params_of(cfg)


def test_augment_flags_are_left_out_of_params_under_dropout(tiny_bert: Path, data_dir: Path) -> None:
    simcse = params_of(compose_config(data_dir, ["method=simcse", f"model.name_or_path={tiny_bert}"]))
    assert "method.augment_both_views" not in simcse and simcse["method.fixed_dropout_mask"] is False
    cert = params_of(compose_config(data_dir, ["method=cert", f"model.name_or_path={tiny_bert}"]))
    assert "method.augment_query" not in cert and cert["method.queue_size"] == 6720
    rewritten = params_of(compose_config(data_dir, ["method=cert", "augmentation=eda_delete", f"model.name_or_path={tiny_bert}"]))
    assert rewritten["method.augment_query"] is False


def test_params_name_only_what_acted(tiny_bert: Path, data_dir: Path) -> None:
    is_bert = compose_config(data_dir, ["method=is_bert", f"model.name_or_path={tiny_bert}"])
    params = params_of(is_bert)
    assert not [k for k in params if k.startswith(("augmentation.", "pooler."))]
    assert params["loss.name"] == "jsd" and params["dropout"] == 0.1 and "model.dropout" not in params
    simcse = params_of(compose_config(data_dir, ["method=simcse", f"model.name_or_path={tiny_bert}"]))
    assert simcse["loss.tau"] == 0.05 and "loss.hard_negative_alpha" not in simcse and simcse["augmentation._target_"]
    assert "pooler.first_layer" not in simcse and simcse["pooler.mlp_only_train"] is True
    evaluation = compose_config(data_dir, ["mode=eval", f"model.name_or_path={tiny_bert}"])
    assert not [k for k in params_of(evaluation) if k.split(".")[0] in ("method", "loss", "augmentation", "data")]
    assert "train.lr" in inert_keys(evaluation) and "train.device" not in inert_keys(evaluation)


def _cl_bench(args: list[str], cwd: Path, data_dir: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-c", "from cl_bench.commands.cli import main; main()", *args],
        cwd=cwd, env=cli_env(data_dir), capture_output=True, text=True, timeout=600,
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_sweep_with_a_job_that_would_ignore_a_key_fails_before_any_job(
    tiny_bert: Path, data_dir: Path, tmp_path: Path
) -> None:
    proc = _cl_bench(
        ["-m", "method=simcse,is_bert", "augmentation=eda_delete", f"model.name_or_path={tiny_bert}",
         "data=wiki1m_head", "train.max_steps=1", "hydra.sweep.dir=sweep"],
        tmp_path, data_dir, check=False,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cl-bench: error:")]
    assert len(errors) == 1 and "job 1 (method=is_bert" in errors[0] and "augmentation: has no effect" in errors[0]
    assert not list((tmp_path / "sweep").glob("*/results.json")) and not (tmp_path / "sweep" / "0").exists()
    assert not (tmp_path / "mlflow.db").exists()  # no parent run was created either


def test_sweep_children_are_named_by_what_they_vary_and_record_what_acted(
    tiny_bert: Path, data_dir: Path, tmp_path: Path
) -> None:
    _cl_bench(
        ["-m", "method=is_bert", "dropout=0,0.1", "loss=jsd", f"model.name_or_path={tiny_bert}", "data=nli_sentences",
         "data.limit=16", "method.channels=4", "batch_size=4", "train.max_steps=1", "train.eval_steps=0",
         "train.progress_bar=false", "eval.tasks=[stsb]", "eval.anisotropy=false", "eval.align_uniform=false",
         "hydra.sweep.dir=sweep"],
        tmp_path, data_dir,
    )
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if r not in parents]
    assert [p.data.tags["mlflow.runName"] for p in parents] == ["sweep: dropout"]
    assert sorted(c.data.tags["mlflow.runName"] for c in children) == ["dropout=0", "dropout=0.1"]
    for child in children:
        params, tags = child.data.params, child.data.tags
        assert not [k for k in params if k.startswith(("augmentation.", "pooler."))], params
        assert "augmentation" not in tags and "pooler" not in tags and tags["loss"] == "jsd"
        assert "None" not in tags.values()
    assert json.loads((tmp_path / "sweep" / "varied_keys.json").read_text()) == ["dropout"]


# ------------------------------------------------------------------------------------------------
# A user's own method, from their own folder, with no change to cl-bench
# ------------------------------------------------------------------------------------------------
TOY_METHOD = '''
"""A toy method: one view and its neighbour in the batch. Its spec (settings and rules) and its nn.Module."""
from dataclasses import dataclass
from typing import ClassVar

import torch

from cl_bench.methods.base import Method
from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class ToySpec(MethodSpec):
    target: ClassVar[str] = "toy_method.ToyMethod"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = "toy: each sentence against the next one"

    shift: int

    def check(self):
        if self.shift < 1:
            raise ValueError(f"method.shift: must be >= 1, got {self.shift}")


class ToyMethod(Method):
    """Keys: toy.yaml (spec: ToySpec); built as ToyMethod(context, spec), it reads self.spec.shift."""

    def training_step(self, batch):
        z = self.encoder(self.tokenize(batch))
        loss = self.loss_fn(z, z.roll(self.spec.shift, dims=0))
        return {"loss": loss}
'''


def test_a_user_method_from_their_own_folder(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "my_methods"
    (folder / "method").mkdir(parents=True)
    (folder / "toy_method.py").write_text(TOY_METHOD)  # a new method is two files: its module and its YAML
    (folder / "method" / "toy.yaml").write_text(textwrap.dedent("""\
        # Toy method for the test.
        defaults:
          - override /loss@_group_: ntxent
          - _self_
        _target_: toy_method.ToyMethod
        name: toy
        shift: 1
    """))
    search = f"hydra.searchpath=[file://{folder}]"
    listing = _cl_bench(["list", search], tmp_path, data_dir).stdout
    assert "toy: toy: each sentence against the next one" in listing and "default loss: ntxent" in listing
    _cl_bench(
        [search, "method=toy", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=32", "batch_size=4",
         "train.max_steps=2", "train.eval_steps=0", "train.progress_bar=false", "eval.tasks=[stsb]",
         "eval.anisotropy=false", "eval.align_uniform=false", "logger=none", "hydra.run.dir=run"],
        tmp_path, data_dir,
    )
    assert "sts/stsb" in json.loads((tmp_path / "run" / "results.json").read_text())
    bad = _cl_bench([search, "method=toy", "method.shift=0", f"model.name_or_path={tiny_bert}", "data=wiki1m_head"],
                    tmp_path, data_dir, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == "cl-bench: error: method.shift: must be >= 1, got 0"


# ------------------------------------------------------------------------------------------------
# The docs' option tables (README's former "Methods, losses and augmentations") say what `cl-bench list` says
# ------------------------------------------------------------------------------------------------
def test_readme_option_tables_match_cl_bench_list() -> None:
    import re

    section = (Path(__file__).resolve().parents[2] / "docs" / "losses-augmentations.md").read_text()
    cell = r"(?:[^|\\]|\\\|)+"  # a table cell; `\|` is an escaped pipe inside it
    rows = {m.group(1): m for m in re.finditer(rf"^\| `(\w+)` \| {cell} \| ({cell}) \| `(\w+)` \|", section, re.M)}
    assert sorted(rows) == METHODS
    for row in catalog.method_rows():
        assert rows[row["method"]].group(2).strip() == row["uses"], row["method"]
        assert rows[row["method"]].group(3) == row["default_loss"], row["method"]
    listed_losses = {}
    kinds_text = section[section.index("`loss=` — each loss"):section.index("The temperature is `loss.tau`")]
    for m in re.finditer(r"`(\w+)`(?: \([^)]*\))?: (.+?)(?= — |;\n|\.\n)", kinds_text, re.S):
        for item in m.group(2).replace("\n", " ").split("·"):
            listed_losses[re.sub(r"\(.*?\)", "", item).strip()] = m.group(1)
    assert listed_losses == {name: catalog.loss_kind_of(path) for name, path in catalog.options("loss").items()}
    augmentations = re.search(r"`augmentation=` (.+?) \(for", section, re.S).group(1)
    assert sorted(a.strip() for a in augmentations.replace("\n", " ").split("·")) == AUGMENTATIONS


# ------------------------------------------------------------------------------------------------
# Issue 23's keys: Matryoshka, truncated evaluation (and GIST's guide, below), for every method and loss
# ------------------------------------------------------------------------------------------------
def test_matryoshka_and_truncation_for_every_method_and_loss(tiny_bert: Path, data_dir: Path, corpus_files) -> None:
    """``train.matryoshka_dims`` with every method x accepted loss: accepted exactly where the loss takes
    embeddings, else one line naming the key; ``eval.truncate_dim`` acts on every method (rejected above the width)."""
    from cl_bench.config import spec_class
    from cl_bench.losses.specs import EMBEDDING_KINDS

    accepted = rejected = 0
    kinds = {loss: catalog.loss_kind_of(path) for loss, path in catalog.options("loss").items()}
    for method in METHODS:
        base = method_config(method, data_dir, tiny_bert, corpus_files[0])
        calls = spec_class(base, "method").loss_kinds
        one_per_kind = {kinds[loss]: loss for loss in reversed(LOSSES) if kinds[loss] in calls}  # every kind it calls
        for loss in one_per_kind.values():
            cfg = _with_option(base, "loss", loss)
            if kinds[loss] == "guided_pair":  # GISTEmbed's loss needs its guide encoder
                with open_dict(cfg):
                    cfg.method.guide = str(data_dir.parent / "models" / "all-MiniLM-L6-v2")
            assert _verdict(cfg, [f"loss={loss}"]) is None, (method, loss)
            with open_dict(cfg):
                cfg.train.matryoshka_dims = [16, 8]
                cfg.train.matryoshka_weights = [1.0, 0.5]
            error = _verdict(cfg, ["train.matryoshka_dims=[16,8]", "train.matryoshka_weights=[1,0.5]"])
            if kinds[loss] in EMBEDDING_KINDS:
                assert error is None, (method, loss, error)
                accepted += 1
            else:
                assert error and error.startswith("train.matryoshka_dims: ") and "\n" not in error, (method, loss, error)
                rejected += 1
        for dim, ok in ((16, True), (33, False)):
            cfg = base.copy()
            with open_dict(cfg):
                cfg.eval.truncate_dim = dim
            error = _verdict(cfg, [f"eval.truncate_dim={dim}"])
            assert (error is None) == ok and (ok or error.startswith("eval.truncate_dim: ")), (method, dim, error)
    assert accepted and rejected


def test_guide_for_every_method_and_pair_loss(tiny_bert: Path, data_dir: Path, corpus_files) -> None:
    """``method.guide``: accepted for supervised SimCSE with a loss that takes the guide (gist: GISTEmbed) or the
    mask of ignored columns (infonce: guided supervised SimCSE), rejected with one line naming the key for every
    other loss and every other method; loss=gist without a guide is rejected naming the loss."""
    from cl_bench.config import spec_class

    guide = data_dir.parent / "models" / "all-MiniLM-L6-v2"
    guided = 0
    for method in METHODS:
        base = method_config(method, data_dir, tiny_bert, corpus_files[0])
        losses = LOSSES if method == "simcse_sup" else [catalog.default_loss(method)]
        for loss in losses:
            cfg = _with_option(base, "loss", loss)
            takes_guide = catalog.loss_kind_of(catalog.options("loss")[loss]) == "guided_pair"
            error = _verdict(cfg, [f"loss={loss}"])
            if takes_guide and method == "simcse_sup":
                assert error and error.startswith("loss: ") and "\n" not in error, (method, loss, error)
            elif error is not None:
                continue
            with open_dict(cfg.method):  # the method's node is typed by its spec: as Hydra's +method.guide adds it
                cfg.method.guide = str(guide)
            error = _verdict(cfg, [f"loss={loss}", f"method.guide={guide}"])
            takes_mask = "ignore" in spec_class(cfg, "loss").inputs
            if method == "simcse_sup" and (takes_mask or takes_guide):
                assert error is None, (method, loss, error)
                guided += takes_guide
            else:
                assert error and error.startswith("method.guide: ") and "\n" not in error, (method, loss, error)
    assert guided == 1  # loss=gist


def test_diffcse_projector_pooler_combinations(tiny_bert: Path, data_dir: Path, corpus_files) -> None:
    """DiffCSE: every pooler x ``method.projector`` x ``pooler.mlp_only_train``, both keys given: rejected before
    any model loads with one line (the projector with a pooler other than cls, where it cannot act; the
    BatchNorm projector kept at test, which a saved encoder cannot hold), or accepted and acting (one step
    of a tiny model; the BatchNorm projector exactly where it was asked for)."""
    from cl_bench.methods.diffcse.configuration import Projector
    from cl_bench.methods.diffcse.modeling import BatchNormProjector
    from cl_bench.train import loop

    base = method_config("diffcse", data_dir, tiny_bert, corpus_files[0])
    accepted = 0
    for pooler, projector, mlp_only_train in itertools.product(POOLERS, Projector, (True, False)):
        cfg = _with_option(base, "pooler", pooler)
        with open_dict(cfg):
            cfg.method.projector, cfg.pooler.mlp_only_train = projector, mlp_only_train
        pooler_alone = _verdict(_with_option(base, "pooler", pooler), [f"pooler={pooler}"])
        overrides = [f"pooler={pooler}", f"method.projector={projector}", f"pooler.mlp_only_train={mlp_only_train}"]
        error = _verdict(cfg, overrides)
        if pooler_alone is not None:
            expected = pooler_alone
        elif pooler != "cls":
            expected = f"method.projector: has no effect on this run: only pooler=cls has DiffCSE's projector (pooler={pooler})"
        elif projector == "batchnorm" and not mlp_only_train:
            expected = ("pooler.mlp_only_train: method=diffcse's BatchNorm projector is used in training only "
                        "(official --mlp_only_train); set pooler.mlp_only_train=true or method.projector=mlp")
        else:
            expected = None
        assert error == expected, (pooler, projector, mlp_only_train, error)
        if expected is None:
            accepted += 1
            torch.manual_seed(0)
            built = loop.build_method(typed_specs(cfg), torch.device("cpu"))
            assert isinstance(built.projector, BatchNormProjector) == (projector == "batchnorm"), (projector, mlp_only_train)
            built.train()
            items = built.read_corpus(cfg.data.train_file)
            assert torch.isfinite(built.training_step(next(iter(built.batches(items, 4, torch.Generator()))))["loss"])
    assert accepted == 3  # pooler=cls: batchnorm + mlp_only_train, mlp either way


def test_a_shortcut_copy_set_directly_is_logged_with_the_value_that_acted(tiny_bert: Path, data_dir: Path) -> None:
    """``train.batch_size=8`` (not the ``batch_size`` shortcut) trains with 8: the params say 8, not the shortcut's 64."""
    params = params_of(compose_config(data_dir, ["method=simcse", f"model.name_or_path={tiny_bert}", "train.batch_size=8",
                                               "model.dropout=0.2"]))
    assert params["batch_size"] == 8 and params["dropout"] == 0.2
    assert "train.batch_size" not in params and "model.dropout" not in params
