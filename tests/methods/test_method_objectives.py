"""The methods of issue 17 on a tiny random BERT — Barlow Twins, BYOL, SwAV, the memory bank and
Sentence-BERT — built from their YAMLs as `cl-bench` builds them; and (slow) short real runs of
each from all-MiniLM-L6-v2 through the `cl-bench` command, reporting STS against the start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, build_objective_method, minilm_path, run_cl_bench
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate
from cl_bench.losses.barlow_twins import barlow_twins
from cl_bench.losses.byol import byol


def step(method, batch) -> dict[str, torch.Tensor]:
    """One optimizer step of the method, as the training loop makes it."""
    optimizer = torch.optim.SGD([p for p in method.parameters() if p.requires_grad], lr=0.1)
    method.train()
    terms = method.training_step(batch)
    assert torch.isfinite(terms["loss"])
    optimizer.zero_grad()
    terms["loss"].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in method.encoder.parameters())
    optimizer.step()
    method.on_after_step()
    return terms


def test_barlow_twins_method(tiny_bert: Path, data_dir: Path) -> None:
    method, _ = build_objective_method(tiny_bert, data_dir, ["method=barlow_twins", "loss=barlow_twins", "method.projector=[16,8]"])
    assert [m.out_features for m in method.projector if isinstance(m, torch.nn.Linear)] == [16, 8]
    method.eval()  # no dropout: the two views coincide, the loss is the loss of identical projections
    with torch.no_grad():
        z = method.projector.eval()(method.encoder(method.tokenize(SENTENCES)))
        assert method.training_step(SENTENCES)["loss"].item() == pytest.approx(barlow_twins(z, z, lambd=0.0051).item(), rel=1e-5)
    method.projector.train()
    step(method, SENTENCES)


def test_byol_method_target_follows_by_momentum(tiny_bert: Path, data_dir: Path) -> None:
    method, _ = build_objective_method(tiny_bert, data_dir, ["method=byol", "loss=byol", "method.projection=[16,8]", "method.momentum=0.9"])
    assert all(not p.requires_grad for p in method.target_encoder.parameters())
    def online_parameters():
        return [*method.encoder.parameters(), *method.projector.parameters()]

    def target_parameters():
        return [*method.target_encoder.parameters(), *method.target_projector.parameters()]

    online_before = [p.detach().clone() for p in online_parameters()]
    target_before = [p.detach().clone() for p in target_parameters()]
    step(method, SENTENCES)
    for target, old_target, online in zip(target_parameters(), target_before, online_parameters(), strict=True):
        # the target got no gradient step: only ξ ← 0.9 ξ + 0.1 θ(after the step)
        torch.testing.assert_close(target, 0.9 * old_target + 0.1 * online.detach())
    assert any(not torch.equal(a, b) for a, b in zip(online_before, online_parameters(), strict=True))
    # the loss the method computes is BYOL's symmetric loss of its heads' outputs
    method.eval()
    with torch.no_grad():
        z = method.encoder(method.tokenize(SENTENCES))
        p, t = method.predictor(method.projector(z)), method.target_projector(method.target_encoder(method.tokenize(SENTENCES)))
        assert method.training_step(SENTENCES)["loss"].item() == pytest.approx(byol(p, p, t, t).item(), rel=1e-5)


def test_swav_method_prototypes(tiny_bert: Path, data_dir: Path) -> None:
    method, _ = build_objective_method(tiny_bert, data_dir, [
        "method=swav", "loss=swav", "method.projection=[16,8]", "method.num_prototypes=5",
        "method.freeze_prototypes_steps=1",
    ])
    torch.testing.assert_close(method.prototypes.weight.norm(dim=1), torch.ones(5))
    frozen = method.prototypes.weight.detach().clone()
    step(method, SENTENCES)
    # frozen during the first step (re-normalising unit rows moves them by rounding only)
    torch.testing.assert_close(method.prototypes.weight.detach(), frozen, rtol=0, atol=1e-6)
    step(method, SENTENCES)
    assert (method.prototypes.weight.detach() - frozen).abs().max() > 1e-4
    method.training_step(SENTENCES)  # re-normalised before every step
    torch.testing.assert_close(method.prototypes.weight.norm(dim=1), torch.ones(5))


def test_memory_bank_method(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    method, _ = build_objective_method(tiny_bert, data_dir, [
        "method=memory_bank", "loss=memory_bank", "method.feature_dim=8", "method.num_noise=5",
        f"data.train_file={corpus}",
    ])
    items = method.read_corpus(str(corpus))
    assert items[2] == (2, SENTENCES[2]) and method.bank.shape == (6, 8)
    batch = [items[1], items[4], items[5]]
    before = method.bank.clone()
    step(method, batch)
    z = float(method.partition)
    assert z > 0
    # the batch's rows moved towards their features (a unit vector, 0.5 / 0.5 mix), the others did not
    assert torch.equal(method.bank[[0, 2, 3]], before[[0, 2, 3]])
    assert not torch.equal(method.bank[[1, 4, 5]], before[[1, 4, 5]])
    torch.testing.assert_close(method.bank.norm(dim=1), torch.ones(6))
    step(method, batch)
    assert float(method.partition) == z  # Z is estimated once


@pytest.mark.parametrize(
    "loss,data,width",
    [("sbert_softmax", "snli_labeled", 2), ("sbert_regression", "stsb_train", 2), ("sbert_triplet", "nli_snli_devtest", 3)],
)
def test_sbert_objectives_read_their_data(tiny_bert: Path, data_dir: Path, loss: str, data: str, width: int) -> None:
    method, cfg = build_objective_method(tiny_bert, data_dir, ["method=sbert", f"loss={loss}", f"data={data}", "data.limit=8"])
    rows = method.read_corpus(cfg.data.train_file)
    assert len(rows) == 8 and all(isinstance(text, str) for row in rows for text in row[:width])
    if loss == "sbert_softmax":
        assert {row[2] for row in rows} <= {0, 1, 2} and method.classifier.in_features == 3 * method.encoder.hidden_size
        assert "nli_accuracy" in step(method, rows)
    else:
        assert method.classifier is None
        if loss == "sbert_regression":
            assert all(0.0 <= row[2] <= 1.0 for row in rows)  # STS-B's 0-5 score scaled to [0, 1]
        step(method, rows)
    assert method.eval_encoder() is method.encoder


def test_sbert_rejects_a_loss_it_cannot_call(tiny_bert: Path, data_dir: Path) -> None:
    with pytest.raises(Exception, match="loss"):
        build_objective_method(tiny_bert, data_dir, ["method=sbert", "loss=infonce", "data=snli_labeled"])


def test_cert_with_mochi_mixes_hard_negatives(tiny_bert: Path, data_dir: Path) -> None:
    method, _ = build_objective_method(tiny_bert, data_dir, [
        "method=cert", "loss.tau=0.07", "augmentation=dropout", "method.queue_size=8", "method.projection_dim=8",
        "method.mochi_hardest=4", "method.mochi_synthetic=3", "method.mochi_query_mixed=2",
    ])
    assert (method.mochi, method.mochi_hardest) == (True, 4)
    step(method, SENTENCES)
    with pytest.raises(Exception, match="method.mochi_hardest: has no effect on this run: MoCHi is off"):
        build_objective_method(tiny_bert, data_dir, ["method=cert", "loss.tau=0.07", "method.mochi_hardest=4"])
    with pytest.raises(Exception, match=r"method.mochi_hardest: the default N = 1024 exceeds method.queue_size \(8\)"):
        build_objective_method(tiny_bert, data_dir, ["method=cert", "loss.tau=0.07", "method.queue_size=8", "method.mochi_synthetic=2"])
    with pytest.raises(Exception, match="method.mochi_hardest: must be between 1 and method.queue_size"):
        build_objective_method(tiny_bert, data_dir, ["method=cert", "method.queue_size=8", "method.mochi_synthetic=2", "method.mochi_hardest=9"])


@pytest.mark.parametrize(
    "preset,method,loss",
    [
        ("sbert_nli", "sbert", "sbert_softmax"), ("sbert_stsb", "sbert", "sbert_regression"),
        ("sbert_triplet_nli", "sbert", "sbert_triplet"), ("barlow_twins_wiki", "barlow_twins", "barlow_twins"),
        ("byol_wiki", "byol", "byol"), ("swav_wiki", "swav", "swav"), ("memory_bank_wiki", "memory_bank", "memory_bank"),
        ("cert_mochi", "cert", "infonce"),
    ],
)
def test_presets_compose_and_validate(preset: str, method: str, loss: str, tiny_bert: Path, data_dir: Path) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    train_file = {"sbert_nli": "nli/snli_senteval/s1.dev.gz", "sbert_stsb": "sts/STSBenchmark/sts-train.csv",
                  "sbert_triplet_nli": "nli/snli_devtest_triples_for_simcse.csv.gz"}.get(preset, "corpus/wiki1m_for_simcse.head.txt")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={preset}", f"model.name_or_path={tiny_bert}",
                                           f"data.train_file={data_dir}/{train_file}"])
    validate(cfg)
    assert cfg.method._target_.split(".")[2] == method  # cl_bench.methods.<name>.modeling.<Class>
    assert cfg.loss._target_.split(".")[-2] in (loss, loss.split("_")[0], "moco", "infonce")
    if preset == "cert_mochi":
        assert (cfg.method.mochi_hardest, cfg.method.mochi_synthetic, cfg.method.mochi_query_mixed) == (1024, 128, 64)
        assert cfg.loss.tau == 0.07 and cfg.method.queue_size == 6720  # the rest is cert_bert
    if preset.startswith("sbert"):
        assert (cfg.train.batch_size, cfg.train.lr, cfg.train.warmup_ratio, cfg.pooler.name) == (16, 2e-5, 0.1, "avg")
    # the cited values of each header (docs/methods/recipes.md "Presets for Barlow Twins, BYOL, SwAV and the memory bank")
    if preset == "barlow_twins_wiki":  # SCD's command and projector
        assert (list(cfg.method.projector), cfg.loss.lambd, cfg.train.batch_size, cfg.train.lr, cfg.model.max_length,
                cfg.train.eval_steps) == ([4096, 4096, 4096], 0.012, 192, 3e-5, 32, 250)
    if preset == "byol_wiki":  # BSL's unsupervised_tuning.py
        assert (cfg.method.momentum, cfg.train.lr, cfg.train.batch_size, cfg.model.max_length, cfg.train.warmup_ratio,
                cfg.train.weight_decay, cfg.pooler.name) == (0.999, 1e-4, 64, 64, 0.1, 0.0, "avg")
    if preset == "swav_wiki":  # SwAV's official objective values, K from the CPU sweep
        assert (cfg.method.num_prototypes, cfg.loss.tau, cfg.loss.epsilon, cfg.loss.sinkhorn_iterations,
                list(cfg.method.projection)) == (300, 0.1, 0.05, 3, [2048, 128])
    if preset == "memory_bank_wiki":  # lemniscate.pytorch's values; 4 passes so that bank rows are revisited
        assert (cfg.method.feature_dim, cfg.method.num_noise, cfg.loss.tau, cfg.method.bank_momentum,
                cfg.loss.proximal_lambda, cfg.train.epochs, cfg.data.limit) == (128, 4096, 0.07, 0.5, 0.0, 4, 250000)


# ----- real short runs from all-MiniLM-L6-v2 -----------------------------------------------------
SHORT = ["pooler=avg", "train.batch_size=16", "train.max_steps=8", "train.eval_steps=8", "train.log_steps=1",
         "eval.align_uniform=false", "eval.anisotropy=false"]
RUNS = {
    "barlow_twins": ["method=barlow_twins", "loss=barlow_twins", "data=wiki1m_head", "data.limit=512",
                     "method.projector=[1024,1024]"],
    "byol": ["method=byol", "loss=byol", "data=wiki1m_head", "data.limit=512", "method.projection=[1024,256]"],
    "swav": ["method=swav", "loss=swav", "data=wiki1m_head", "data.limit=512", "method.projection=[1024,128]",
             "method.num_prototypes=32", "method.freeze_prototypes_steps=2"],
    "memory_bank": ["method=memory_bank", "loss=memory_bank", "data=wiki1m_head", "data.limit=512",
                    "method.num_noise=256"],
    "sbert_softmax": ["method=sbert", "loss=sbert_softmax", "data=snli_labeled", "data.limit=512"],
    "sbert_regression": ["method=sbert", "loss=sbert_regression", "data=stsb_train", "data.limit=512"],
    "sbert_triplet": ["method=sbert", "loss=sbert_triplet", "data=nli_snli_devtest", "data.limit=512"],
    "cert_mochi": ["method=cert", "loss.tau=0.07", "augmentation=eda_delete", "data=wiki1m_head", "data.limit=512",
                   "method.queue_size=64", "method.mochi_hardest=16", "method.mochi_synthetic=8",
                   "method.mochi_query_mixed=4"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_real_short_run_from_minilm(name: str, data_dir: Path, tmp_path: Path) -> None:
    """Each new objective trains 8 steps from all-MiniLM-L6-v2 through `cl-bench` and reports STS."""
    results, metrics = run_cl_bench([*RUNS[name], f"model.name_or_path={minilm_path()}", *SHORT], data_dir, tmp_path)
    losses = [m["train/loss"] for m in metrics if "train/loss" in m]
    assert len(losses) == 8
    keys = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "sts_avg")
    line = json.dumps({"objective": name, **{k: round(results[f"sts/{k}"], 2) for k in keys}})
    print(line)
    with open(Path(os.environ.get("CL_BENCH_OBJECTIVES_LOG", os.devnull)), "a") as log:
        log.write(line + "\n")
    assert 20 < results["sts/sts_avg"] <= 100
