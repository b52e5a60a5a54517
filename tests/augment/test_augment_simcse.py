"""Every augmentation= and loss= option composed from conf/ and trained one SimCSE step; the Table 1 preset."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import build_spec, catalog, validate, yaml_spec
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.configuration import SimCSESpec
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.specs import build
from cl_bench.train.loop import build_loss

AUGMENTATIONS = sorted(p.stem for p in (CONF_DIR / "augmentation").glob("*.yaml"))
#: the losses SimCSE calls (pair losses); the others are rejected for it (tests/config/test_options_act.py)
LOSSES = sorted(catalog.losses_of_kinds(SimCSESpec.loss_kinds))
BATCH = [
    "a man plays the guitar in the street",
    "the dog runs in the park",
    "two children ride bikes",
    "she reads a book",
]
TABLE1_ROWS = [
    "none",
    "crop_10",
    "crop_20",
    "crop_30",
    "word_deletion_10",
    "word_deletion_20",
    "word_deletion_30",
    "delete_one_word",
    "delete_one_word_no_dropout",
    "synonym",
    "mlm_15",
]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A data root with a tiny corpus and the real STS files (validation checks every file a run reads)."""
    root = tmp_path_factory.mktemp("data")
    (root / "corpus").mkdir()
    (root / "sts").symlink_to(data_dir / "sts", target_is_directory=True)
    (root / "corpus" / "tiny.txt").write_text("\n".join(BATCH) + "\n")
    (root / "corpus" / "tiny.bt.txt").write_text("\n".join(f"{s} indeed" for s in BATCH) + "\n")
    return root


@pytest.fixture(scope="module")
def tiny_mlm(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny_mlm_simcse")
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig.from_pretrained(tiny_bert)).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(out)
    return out


def compose_config(data_root: Path, overrides: list[str]):
    os.environ["CL_BENCH_DATA"] = str(data_root)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def base_overrides(model: Path, data_root: Path) -> list[str]:
    return [f"model.name_or_path={model}", f"data.train_file={data_root}/corpus/tiny.txt", "batch_size=4"]


def option_overrides(option: str, tiny_mlm: Path, data_root: Path) -> list[str]:
    if option == "mlm_replace":
        return [f"augmentation.mlm_model={tiny_mlm}", "augmentation.top_k=5"]
    if option == "back_translation":  # offline: the OPUS-MT models cannot load, the file is used
        return [f"augmentation.paraphrase_file={data_root}/corpus/tiny.bt.txt"]
    return []


def one_step(cfg) -> tuple[SimCSE, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    encoder = build_encoder(
        cfg.model.name_or_path, pooler=cfg.pooler.name, dropout=cfg.model.dropout, max_length=32
    )
    augmentation = build(OmegaConf.to_container(cfg.augmentation, resolve=True))
    augmentation.setup(encoder, cfg.model.name_or_path)
    context = MethodContext(
        encoder=encoder, loss=build_loss(build_spec(cfg.loss, "loss")), augmentation=augmentation, seed=cfg.seed
    )
    method = SimCSE(context, yaml_spec("method", "simcse", augment_both_views=cfg.method.augment_both_views))
    out = method.training_step(BATCH)
    out["loss"].backward()
    return method, out


@pytest.mark.parametrize("both_views", [True, False], ids=["both", "second"])
@pytest.mark.parametrize("option", AUGMENTATIONS)
def test_every_augmentation_trains_a_simcse_step(option, both_views, tiny_bert, tiny_mlm, data_root) -> None:
    cfg = compose_config(
        data_root,
        [
            *base_overrides(tiny_bert, data_root),
            f"augmentation={option}",
            f"method.augment_both_views={both_views}",
            *option_overrides(option, tiny_mlm, data_root),
        ],
    )
    validate(cfg)
    method, out = one_step(cfg)
    assert torch.isfinite(out["loss"])
    grads = [p.grad for p in method.encoder.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    # Several draws: some rules (ESimCSE's word repetition) may legitimately leave one sentence set unchanged once.
    draws = [method.make_views(BATCH) for _ in range(5)]
    if method.augmentation.embedding_level or option in ("none", "dropout"):
        assert all(first == second == BATCH for first, second in draws)  # text untouched; cutoff acts in the encoder
    else:
        assert any(second != BATCH for _, second in draws)
        assert any(first != BATCH for first, _ in draws) == both_views


@pytest.mark.parametrize("option", LOSSES)
def test_every_loss_trains_a_simcse_step(option, tiny_bert, data_root) -> None:
    cfg = compose_config(
        data_root, [*base_overrides(tiny_bert, data_root), f"loss={option}", "augmentation=token_cutoff"]
    )
    validate(cfg)
    method, out = one_step(cfg)
    assert torch.isfinite(out["loss"]) and out["loss_contrastive"].dim() == 0


def test_table1_preset_is_one_sweep_over_the_paper_rows(tiny_bert, data_root) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_root)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=augmentation_comparison"], return_hydra_config=True)
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    rows = [r.strip() for r in str(cfg.hydra.sweeper.params.augmentation).split(",")]
    assert rows == [f"simcse_table1/{row}" for row in TABLE1_ROWS]
    expected = {
        "none": ("cl_bench.augment.base.Dropout", {}),
        "crop_20": ("cl_bench.augment.words.Crop", {"rate": 0.2}),
        "word_deletion_30": ("cl_bench.augment.words.WordDeletion", {"rate": 0.3}),
        "delete_one_word": ("cl_bench.augment.words.DeleteOneWord", {}),
        "synonym": ("cl_bench.augment.synonym.SynonymSubstitution", {"aug_p": 0.3, "aug_min": 1, "aug_max": 1}),
        "mlm_15": (
            "cl_bench.augment.mlm_replace.MLMReplace",
            {"probability": 0.15, "mlm_model": "bert-base-uncased"},
        ),
    }
    for row in TABLE1_ROWS:
        row_cfg = compose_config(
            data_root, ["experiment=augmentation_comparison", f"augmentation=simcse_table1/{row}"]
        )
        assert row_cfg.method._target_ == "cl_bench.methods.simcse.modeling.SimCSE" and row_cfg.loss.tau == 0.05
        assert row_cfg.method.augment_both_views is False  # x vs augmented x
        assert row_cfg.model.name_or_path == "bert-base-uncased" and row_cfg.train.batch_size == 64
        assert row_cfg.model.dropout == (0.0 if row == "delete_one_word_no_dropout" else 0.1)
        assert row_cfg.dropout == row_cfg.model.dropout  # the logged shortcut says what was trained
        if row in expected:
            target, values = expected[row]
            assert row_cfg.augmentation._target_ == target
            assert {k: row_cfg.augmentation[k] for k in values} == values
        header = (CONF_DIR / "augmentation" / "simcse_table1" / f"{row}.yaml").read_text().splitlines()[1]
        assert "STS-B dev" in header  # the paper figure sits beside each row


@pytest.mark.parametrize("row", TABLE1_ROWS)
def test_table1_rows_train_with_tiny_models(row, tiny_bert, tiny_mlm, data_root) -> None:
    extra = [f"augmentation.mlm_model={tiny_mlm}", "augmentation.top_k=5"] if row == "mlm_15" else []
    cfg = compose_config(
        data_root,
        [
            "experiment=augmentation_comparison",
            f"augmentation=simcse_table1/{row}",
            *base_overrides(tiny_bert, data_root),
            *extra,
        ],
    )
    validate(cfg)
    method, out = one_step(cfg)
    assert torch.isfinite(out["loss"])
    first, second = method.make_views(BATCH)
    assert first == BATCH
    assert (second == BATCH) == (row == "none")


@pytest.mark.slow
def test_table1_sweep_runs_end_to_end(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """`cl-bench experiment=augmentation_comparison` as a real multirun (three rows, tiny model)."""
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    rows = "simcse_table1/none,simcse_table1/crop_10,simcse_table1/delete_one_word_no_dropout"
    args = [
        exe,
        "experiment=augmentation_comparison",
        f"augmentation={rows}",  # the command line narrows the sweep
        f"model.name_or_path={tiny_bert}",
        "data=wiki1m_head",
        "data.limit=32",
        "batch_size=8",
        "train.max_steps=2",
        "train.eval_steps=2",
        "train.progress_bar=false",
        "logger.enabled=false",
        "eval.tasks=[stsb]",
        "eval.align_uniform=false",
        "hydra.sweep.dir=sweep",
    ]
    env = dict(os.environ, CL_BENCH_DATA=str(data_dir))
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    targets = []
    for job in range(3):
        job_dir = tmp_path / "sweep" / str(job)
        assert -100 <= json.loads((job_dir / "results.json").read_text())["sts/stsb"] <= 100
        config = OmegaConf.load(job_dir / ".hydra" / "config.yaml")
        targets.append((config.augmentation._target_, config.model.dropout, config.method.augment_both_views))
    assert targets == [
        ("cl_bench.augment.base.Dropout", 0.1, False),
        ("cl_bench.augment.words.Crop", 0.1, False),
        ("cl_bench.augment.words.DeleteOneWord", 0.0, False),
    ]


def test_the_issue_study_composes(tiny_bert, data_root) -> None:
    """`cl-bench -m loss=infonce,triplet,debiased augmentation=dropout,eda_delete,token_cutoff` is valid."""
    for loss in ("infonce", "triplet", "debiased"):
        for augmentation in ("dropout", "eda_delete", "token_cutoff"):
            cfg = compose_config(
                data_root,
                [*base_overrides(tiny_bert, data_root), f"loss={loss}", f"augmentation={augmentation}"],
            )
            validate(cfg)
            assert cfg.loss._target_.endswith(loss.replace("infonce", "info_nce"))
    preset = compose_config(data_root, ["experiment=augmentation_comparison", "model=minilm_l6"])
    assert preset.model.name_or_path == "sentence-transformers/all-MiniLM-L6-v2"  # the command line wins
