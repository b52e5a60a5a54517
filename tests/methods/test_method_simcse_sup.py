"""Supervised SimCSE: Eq. 5 against a naive loop, the hard-negative weight, the NLI CSV reader."""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate, yaml_spec
from cl_bench.data.nli import read_nli_triples
from cl_bench.data.text import DataFileError
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse_sup.modeling import SupervisedSimCSE
from cl_bench.models.encoder import build_encoder

TRIPLES = [
    ("a man plays the guitar", "a man plays music", "a woman sleeps"),
    ("the dog runs in the park", "a dog is running", "the cat sits"),
    ("two children sit at a table", "children are sitting", "the children run"),
    ("a red car on the street", "a car is red", "a blue bike"),
]


def _method(tiny_bert: Path, alpha: float = 1.0, mlm_weight: float = 0.0, **kwargs) -> SupervisedSimCSE:
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=0.0, max_length=16)
    context = MethodContext(
        encoder=encoder,
        loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=alpha),
        augmentation=Dropout(DropoutSpec()),
        model_name_or_path=str(tiny_bert),
    )
    return SupervisedSimCSE(context, yaml_spec("method", "simcse_sup", mlm_weight=mlm_weight, **kwargs))


def naive_eq5(z1: torch.Tensor, z2: torch.Tensor, z3: torch.Tensor | None, tau: float, alpha: float) -> float:
    """-1/N Σ_i log e^{s(i,i+)} / (Σ_j e^{s(i,j+)} + Σ_j α^{[i=j]} e^{s(i,j-)}), s = cos / τ."""

    def s(a: torch.Tensor, b: torch.Tensor) -> float:
        return math.exp(float(torch.nn.functional.cosine_similarity(a, b, dim=0)) / tau)

    n = len(z1)
    total = 0.0
    for i in range(n):
        denominator = sum(s(z1[i], z2[j]) for j in range(n))
        if z3 is not None:
            denominator += sum((alpha if i == j else 1.0) * s(z1[i], z3[j]) for j in range(n))
        total += -math.log(s(z1[i], z2[i]) / denominator)
    return total / n


@pytest.mark.parametrize("alpha", [1.0, 2.0, 0.5])
def test_loss_with_hard_negatives_equals_eq5(tiny_bert: Path, alpha: float) -> None:
    method = _method(tiny_bert, alpha=alpha)
    method.train()
    loss = float(method.training_step(TRIPLES)["loss"].detach())
    with torch.no_grad():
        z = method.encoder(method.tokenize([row[c] for c in range(3) for row in TRIPLES]))
    z1, z2, z3 = z.split(len(TRIPLES))
    assert loss == pytest.approx(naive_eq5(z1, z2, z3, 0.05, alpha), rel=1e-5)


def test_hard_negative_alpha_changes_the_loss(tiny_bert: Path) -> None:
    method = _method(tiny_bert)  # dropout 0: the same embeddings under each α
    losses = {}
    for alpha in (0.5, 1.0, 2.0):
        method.loss_fn = functools.partial(info_nce, tau=0.05, hard_negative_alpha=alpha)
        losses[alpha] = float(method.training_step(TRIPLES)["loss"].detach())
    assert losses[0.5] < losses[1.0] < losses[2.0]  # more weight on the own contradiction, larger denominator


def test_without_hard_negatives_uses_pairs_only(tiny_bert: Path) -> None:
    method = _method(tiny_bert, use_hard_negatives=False)
    loss = float(method.training_step(TRIPLES)["loss"].detach())
    with torch.no_grad():
        z = method.encoder(method.tokenize([row[c] for c in range(2) for row in TRIPLES]))
    z1, z2 = z.split(len(TRIPLES))
    assert loss == pytest.approx(naive_eq5(z1, z2, None, 0.05, 1.0), rel=1e-5)


def test_mlm_auxiliary_loss(tiny_bert: Path) -> None:
    terms = _method(tiny_bert, mlm_weight=0.1).training_step(TRIPLES)
    assert torch.isfinite(terms["loss_mlm"])
    assert float(terms["loss"].detach()) == pytest.approx(float((terms["loss_contrastive"] + 0.1 * terms["loss_mlm"]).detach()))


# ------------------------------------------------------------------------------------------------
# The NLI CSV reader
# ------------------------------------------------------------------------------------------------
def test_reads_the_real_snli_triples(data_dir: Path, tiny_bert: Path) -> None:
    path = data_dir / "nli" / "snli_devtest_triples_for_simcse.csv.gz"
    rows = read_nli_triples(path)
    assert len(rows) == 5883 and all(len(r) == 3 for r in rows)
    assert rows[0] == (
        "Two women are embracing while holding to go packages .",
        "Two woman are holding packages .",
        "The men are fighting outside a deli .",
    )
    assert rows[1][0].startswith("Two young children in blue jerseys , one with the number 9")  # quoted cell with commas
    assert len(_method(tiny_bert).read_corpus(str(path))) == 5883


def test_reader_formats_and_limit(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text('sent0,sent1\n"a, b",c\nd,"e\nf"\n\ng,h\n')
    assert read_nli_triples(pairs) == [("a, b", "c"), ("d", "e\nf"), ("g", "h")]
    headerless = tmp_path / "plain.csv.gz"
    with gzip.open(headerless, "wt", encoding="utf-8") as handle:
        handle.write("p1,e1,c1\np2,e2,c2\np3,e3,c3\n")
    assert read_nli_triples(headerless, limit=2) == [("p1", "e1", "c1"), ("p2", "e2", "c2")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('sent0,sent1,hard_neg\na,b,c\nd,"e\nf",g\nh,i\n', r"bad\.csv:5: expected 3 columns like the first row, got 2"),
        ("sent0,sent1,hard_neg\na,b,c\nd,,f\n", r"bad\.csv:3: empty cell in column 2 \(sent1\)"),
        ("a,b,c,d\n", r"bad\.csv:1: expected 2 or 3 columns"),
        ("sent0,sent1,hard_neg\n", r"bad\.csv: no sentence pair"),
    ],
)
def test_reader_errors_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DataFileError, match=message):
        read_nli_triples(path)


def test_reader_rejects_bad_bytes_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes(b"sent0,sent1\ncaf\xe9,b\n")
    with pytest.raises(DataFileError, match=r"latin\.csv:\d+: not valid UTF-8"):
        read_nli_triples(path)
    with pytest.raises(DataFileError, match="data.train_file: NLI file not found"):
        read_nli_triples(tmp_path / "missing.csv")


def test_pairs_file_needs_use_hard_negatives_false(tiny_bert: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent0,sent1\na man sleeps,a man is asleep\nthe dog runs,a dog is running\n")
    with pytest.raises(ValueError, match="method.use_hard_negatives=true"):
        _method(tiny_bert).read_corpus(str(pairs))
    assert len(_method(tiny_bert, use_hard_negatives=False).read_corpus(str(pairs))) == 2


# ------------------------------------------------------------------------------------------------
# Presets
# ------------------------------------------------------------------------------------------------
def _compose(data_dir: Path, overrides: list[str]):
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def test_presets(tiny_bert: Path, data_dir: Path) -> None:
    cfg = _compose(data_dir, ["experiment=simcse_sup_bert", f"model.name_or_path={tiny_bert}", "data=nli_snli_devtest"])
    validate(cfg)
    assert cfg.pooler.name == "cls" and cfg.pooler.mlp_only_train is False
    assert cfg.train.batch_size == 512 and cfg.train.lr == 5e-5 and cfg.train.epochs == 3
    assert cfg.loss.tau == 0.05 and cfg.loss.hard_negative_alpha == 1.0 and cfg.model.max_length == 32
    assert _compose(data_dir, ["experiment=simcse_sup_bert"]).data.train_file.endswith("nli/nli_for_simcse.csv")
    sweep = _compose(data_dir, ["experiment=ablation_hard_negative"])
    assert str(sweep.hydra.mode) == "RunMode.MULTIRUN"
    assert sweep.hydra.sweeper.params["loss.hard_negative_alpha"] == "0.5,1.0,2.0"


@pytest.mark.slow
def test_short_real_run_from_minilm(data_dir: Path, tmp_path: Path) -> None:
    from conftest import cl_bench_process as _cl_bench
    from conftest import minilm_path

    _cl_bench(
        [
            "experiment=simcse_sup_bert", f"model.name_or_path={minilm_path()}", "data=nli_snli_devtest",
            "data.limit=64", "train.batch_size=16", "train.max_steps=3", "train.eval_steps=0",
            "train.progress_bar=false", "train.num_threads=2", "eval.tasks=[stsb]", "eval.align_uniform=false",
            "eval.anisotropy=false", "hydra.run.dir=run",
        ],
        tmp_path, data_dir,
    )
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert -100 <= results["sts/stsb"] <= 100 and math.isfinite(results["select/best_stsb_dev"])
    losses = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(math.isfinite(v) for m in losses for k, v in m.items() if k.startswith("train/loss"))
