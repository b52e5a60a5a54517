"""cl-bench-export: exported tiny models give cl-bench's own embeddings in sentence-transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cl_bench.commands import export as ex
from cl_bench.models.encoder import SentenceEncoder, build_encoder

SENTENCES = [
    "a man plays the guitar",
    "two children are playing with a red ball in the park",
    "the dog runs",
    "people sit at a big old table and read a book in the sun",
]
HYDRA_CONFIG = """\
mode: train
seed: 42
dropout: 0.1
batch_size: 64
model:
  name_or_path: bert-base-uncased
  max_length: 32
  dropout: ${dropout}
pooler:
  name: {pooler}
  mlp_only_train: {mlp_only_train}
  first_layer: {first_layer}
method:
  _target_: cl_bench.methods.simcse.modeling.SimCSE
  name: simcse
  mlm_weight: 0.0
loss:
  _target_: cl_bench.losses.infonce.InfoNCE
  _partial_: true
  tau: 0.05
data:
  name: wiki1m
  train_file: ${paths.data_dir}/corpus/wiki1m_for_simcse.txt
train:
  batch_size: ${batch_size}
  lr: 3.0e-05
  epochs: 1
  select_metric: stsb_dev
paths:
  data_dir: /data
  output_dir: ${hydra:runtime.output_dir}
"""
RESULTS = {"sts/sts12": 68.4, "sts/stsb": 76.85, "sts/sickr": 72.2, "sts/sts_avg": 76.25, "transfer/mr": 81.2,
           "transfer/trec": 84.0, "geometry/align": 0.21, "select/best_step": 250.0}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three layers, so that avg_top2 (layers 2+3), avg_first_last (1+3 or 0+3) all differ."""
    from conftest import build_tiny_bert

    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert3"), layers=3)


def _trained_run(tiny_bert: Path, run_dir: Path, pooler: str, mlp_only_train: bool, first_layer: int) -> SentenceEncoder:
    """A run directory as cl-bench writes it: best_model/, results.json, .hydra/config.yaml."""
    encoder = build_encoder(str(tiny_bert), pooler=pooler, mlp_only_train=mlp_only_train, first_layer=first_layer)
    if encoder.mlp is not None:
        torch.manual_seed(1)
        torch.nn.init.normal_(encoder.mlp.dense.weight, std=0.5)  # a "trained" head far from identity-like
        torch.nn.init.normal_(encoder.mlp.dense.bias, std=0.5)
    encoder.save(run_dir / "best_model", {"step": 250, "stsb_dev": 0.7731})
    (run_dir / "results.json").write_text(json.dumps(RESULTS))
    (run_dir / ".hydra").mkdir()
    config = HYDRA_CONFIG.replace("{pooler}", pooler).replace("{mlp_only_train}", str(mlp_only_train).lower())
    (run_dir / ".hydra" / "config.yaml").write_text(config.replace("{first_layer}", str(first_layer)))
    return encoder.eval()


CASES = [
    ("cls_before_pooler", False, 1, ["Transformer", "Pooling(cls)"]),
    ("cls", False, 1, ["Transformer", "Pooling(cls)", "Dense(tanh)"]),
    ("cls", True, 1, ["Transformer", "Pooling(cls)"]),
    ("avg", False, 1, ["Transformer", "Pooling(mean)"]),
    ("cls_avg", False, 1, ["Transformer", "Pooling(cls+mean)", "Dense(identity)"]),
    ("avg_top2", False, 1, ["Transformer", "WeightedLayerPooling", "Pooling(mean)"]),
    ("avg_first_last", False, 1, ["Transformer", "WeightedLayerPooling", "Pooling(mean)"]),
    ("avg_first_last", False, 0, ["Transformer", "WeightedLayerPooling", "Pooling(mean)"]),
]


@pytest.mark.parametrize(("pooler", "mlp_only_train", "first_layer", "modules"), CASES)
def test_export_loads_in_sentence_transformers_with_the_same_embeddings(
    tiny_bert: Path, tmp_path: Path, pooler: str, mlp_only_train: bool, first_layer: int, modules: list[str]
) -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    encoder = _trained_run(tiny_bert, tmp_path / "run", pooler, mlp_only_train, first_layer)
    expected = encoder.encode(SENTENCES, batch_size=2)
    out = tmp_path / "exported"
    assert ex.main([str(tmp_path / "run"), str(out)]) == 0

    model = SentenceTransformer(str(out), device="cpu")
    assert [ex._describe(m) for m in model] == modules
    got = model.encode(SENTENCES, batch_size=3, convert_to_numpy=True)
    assert got.shape == expected.shape == (4, 32)
    assert np.abs(expected).max() > 1e-2  # not a degenerate all-zero embedding
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)

    # transformers.AutoModel loads the same folder; its [CLS] state is what cls_before_pooler returns.
    backbone = AutoModel.from_pretrained(str(out)).eval()
    features = encoder.tokenize(SENTENCES[:1], None)
    with torch.inference_mode():
        cls_state = backbone(**features).last_hidden_state[:, 0].numpy()
    raw_cls = build_encoder(str(tiny_bert), pooler="cls_before_pooler").encode(SENTENCES[:1])
    np.testing.assert_allclose(cls_state, raw_cls, atol=1e-5, rtol=0)

    card = (out / "README.md").read_text()
    assert "library_name: sentence-transformers" in card and "method **simcse**" in card
    assert "| train.lr | 3e-05 |" in card and "| loss.tau | 0.05 |" in card and "| batch_size | 64 |" in card
    assert "| sts/stsb | 76.85 |" in card and "| transfer/mr | 81.2 |" in card and "| checkpoint.step | 250 |" in card
    meta = json.loads((out / "cl_bench_encoder.json").read_text())
    assert (meta["pooler"], meta["mlp_only_train"], meta["first_layer"]) == (pooler, mlp_only_train, first_layer)


def test_mlp_head_is_really_exported(tiny_bert: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    _trained_run(tiny_bert, tmp_path / "run", "cls", False, 1)
    ex.export(tmp_path / "run", tmp_path / "with_mlp")
    ex.export(tmp_path / "run", tmp_path / "no_mlp", pooler="cls_before_pooler")
    model = SentenceTransformer(str(tmp_path / "with_mlp"), device="cpu")
    with_mlp = model.encode(SENTENCES)
    no_mlp = SentenceTransformer(str(tmp_path / "no_mlp"), device="cpu").encode(SENTENCES)
    dense = model[2].linear
    head = np.tanh(no_mlp @ dense.weight.detach().numpy().T + dense.bias.detach().numpy())
    np.testing.assert_allclose(with_mlp, head, atol=1e-5, rtol=0)
    assert np.abs(with_mlp - no_mlp).max() > 0.1


def test_bare_model_directory_and_errors(tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    encoder = _trained_run(tiny_bert, tmp_path / "run", "avg", False, 1)
    # The best_model folder alone exports too (its run's config/results are found beside it).
    out = ex.export(tmp_path / "run" / "best_model", tmp_path / "bare")
    from sentence_transformers import SentenceTransformer

    np.testing.assert_allclose(
        SentenceTransformer(str(out), device="cpu").encode(SENTENCES), encoder.encode(SENTENCES), atol=1e-5, rtol=0
    )
    assert "| sts/sts_avg | 76.25 |" in (out / "README.md").read_text()

    assert ex.main([str(tmp_path / "run"), str(out)]) == 2
    assert "exists and is not empty; pass --overwrite" in capsys.readouterr().err
    assert ex.main([str(tmp_path / "run"), str(out), "--overwrite"]) == 0

    eval_run = tmp_path / "eval_run"
    eval_run.mkdir()
    (eval_run / "results.json").write_text("{}")
    assert ex.main([str(eval_run), str(tmp_path / "x")]) == 2
    assert "run directory without best_model/" in capsys.readouterr().err

    # A plain Hugging Face model without cl-bench metadata needs --pooler.
    assert ex.main([str(tiny_bert), str(tmp_path / "plain")]) == 2
    assert "no pooler recorded" in capsys.readouterr().err
    assert ex.main([str(tiny_bert), str(tmp_path / "plain"), "--pooler", "avg"]) == 0
    assert "No run configuration was found" in (tmp_path / "plain" / "README.md").read_text()


def test_export_prints_its_one_line(tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """No transformers bars ("Loading weights", "Writing model shards") around the line that says where it went."""
    from transformers.utils import logging as transformers_logging

    _trained_run(tiny_bert, tmp_path / "run", "avg", False, 1)
    capsys.readouterr()
    previous = transformers_logging.set_tqdm_hook(None)  # as in a fresh process: no earlier load quietened them
    try:
        assert ex.main([str(tmp_path / "run"), str(tmp_path / "out")]) == 0
    finally:
        transformers_logging.set_tqdm_hook(previous)
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.splitlines() == [f"exported {tmp_path / 'out'} (SentenceTransformer('{tmp_path / 'out'}'), "
                                         f"AutoModel.from_pretrained('{tmp_path / 'out'}'))"]


def test_model_card_records_the_base_model_as_an_absolute_path_or_hub_id(tmp_path: Path) -> None:
    """A relative model.name_or_path is relative to where the run was launched (Hydra's runtime.cwd)."""
    launch = tmp_path / "project"
    (launch / "models" / "minilm").mkdir(parents=True)
    run = launch / "outputs" / "runs" / "r1"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(HYDRA_CONFIG.replace("bert-base-uncased", "models/minilm")
                                                .replace("{pooler}", "avg").replace("{mlp_only_train}", "false")
                                                .replace("{first_layer}", "1"))
    (run / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  runtime:\n    cwd: {launch}\n")
    (run / "best_model").mkdir()
    (run / "best_model" / "config.json").write_text("{}")
    info = ex.locate_run(run)
    settings = {"pooler": "avg", "mlp_only_train": False, "first_layer": 1}
    card = ex.model_card(info, settings, ["Transformer", "Pooling(mean)"], tmp_path / "out")
    assert f"from `{launch / 'models' / 'minilm'}`" in card and "base_model:" not in card  # not a hub id
    assert ex.base_model("bert-base-uncased", launch) == "bert-base-uncased"
    assert ex.base_model("princeton-nlp/sup-simcse-bert-base-uncased", launch) == "princeton-nlp/sup-simcse-bert-base-uncased"
    assert ex.base_model("../shared/m", launch) == str(tmp_path / "shared" / "m")
    assert ex.base_model("/abs/m", None) == "/abs/m"
