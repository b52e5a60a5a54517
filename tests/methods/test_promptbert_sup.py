"""Supervised PromptBERT (kongds/Prompt-BERT run.sh "sup-bert"): the preset composes with the script's values; the
three NLI columns in the template; the masked-LM transform head applied to the [MASK] state and to the template's
own state before the subtraction (training) and kept, with denoising, at evaluation and after a reload."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import params_of
from hydra import compose, initialize_config_dir
from omegaconf import open_dict
from transformers import BertConfig, BertForMaskedLM

from cl_bench.commands.cli import CONF_DIR  # importing the CLI registers the config schema
from cl_bench.config import check_choices, typed_specs
from cl_bench.models.encoder import build_encoder
from cl_bench.models.prompts import template_mask_states

ROWS = [("a man plays the guitar", "a man plays music", "a woman eats food"),
        ("the dog runs in the park", "a dog runs", "the cat sits on the chair"),
        ("two children read a book", "children read", "people walk in the street"),
        ("a woman rides a bike", "a woman is riding", "the dog sits")]


def _compose(overrides: list[str], data_dir: Path) -> object:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*overrides, "paths.output_dir=out"])


def test_preset_composes_with_the_official_sup_bert_values(data_dir: Path) -> None:
    cfg = _compose(["experiment=promptbert_sup_bert"], data_dir)
    assert cfg.method.name == "promptbert" and cfg.data.train_file.endswith("nli_for_simcse.csv")
    assert cfg.method.template == 'This sentence of "[X]" means [MASK].' and cfg.method.second_template is None
    assert (cfg.method.supervised, cfg.method.denoise, cfg.method.head, cfg.method.denoise_eval) == (
        True, True, "mlm_transform", True)
    assert (cfg.batch_size, cfg.train.batch_size, cfg.train.lr, cfg.train.epochs, cfg.model.max_length) == (512, 512, 5e-5, 3, 32)
    assert (cfg.loss.name, cfg.loss.tau, cfg.loss.hard_negative_alpha) == ("infonce", 0.05, 1.0)
    assert (cfg.train.eval_steps, cfg.train.select_metric, cfg.model.name_or_path) == (125, "stsb_dev", "bert-base-uncased")


@pytest.fixture
def tiny_mlm_bert(tiny_bert: Path, tmp_path: Path) -> Path:
    """The tiny BERT as a masked LM, its head transform set to non-trivial values."""
    torch.manual_seed(1)
    model = BertForMaskedLM(BertConfig.from_pretrained(tiny_bert))
    torch.nn.init.normal_(model.cls.predictions.transform.dense.weight, std=0.3)
    model.save_pretrained(tmp_path / "mlm")
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (tiny_bert / name).is_file():
            (tmp_path / "mlm" / name).write_bytes((tiny_bert / name).read_bytes())
    return tmp_path / "mlm"


def test_supervised_training_and_evaluation_as_sup_bert(tiny_mlm_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    from cl_bench.methods.promptbert.modeling import PromptBERTEncoder
    from cl_bench.train import loop

    nli = tmp_path / "nli.csv"
    nli.write_text("sent0,sent1,hard_neg\n" + "".join(f"{a},{b},{c}\n" for a, b, c in ROWS))
    overrides = ["experiment=promptbert_sup_bert", f"model.name_or_path={tiny_mlm_bert}", f"data.train_file={nli}",
                 "model.max_length=16", "batch_size=4", "logger=none"]
    cfg = _compose(overrides, data_dir)
    check_choices(cfg, overrides)
    assert params_of(cfg)["loss.hard_negative_alpha"] == 1.0  # the contradictions are supplied to the loss
    torch.manual_seed(0)
    method = loop.build_method(typed_specs(cfg), torch.device("cpu"))
    # the head is the checkpoint's masked-LM transform, and the evaluation encoder keeps it
    official = BertForMaskedLM.from_pretrained(tiny_mlm_bert).cls.predictions.transform
    assert torch.equal(method.head.dense.weight, official.dense.weight)
    assert isinstance(method.encoder, PromptBERTEncoder) and method.encoder.prompt_head is method.head
    assert method.encoder.view_prompts == ['This sentence of "[X]" means [MASK].'] * 3

    rows = method.read_corpus(str(nli))
    views = method.prepare(rows, method.rng)
    assert views.size == 4 and views.features["input_ids"].shape[0] == 12
    # training: head(state) - head(template state at the row's sentence length), by hand, one row per column
    method.eval()  # no dropout: the same forward twice
    with torch.no_grad():
        z = method.denoised(method.mask_states(views.features), views.features["prompt_layout"], 3, 4, method.head)
        layout = method.encoder.prompt_layout(method.encoder.prompt)
        for row in (0, 5, 11):
            single = {k: v[row:row + 1] for k, v in views.features.items()}
            state = method.mask_states(single)
            n = views.features["prompt_layout"][row, 1:2]
            expected = method.head(state) - method.head(template_mask_states(method.encoder.backbone, layout, n))
            assert torch.allclose(z[row], expected[0], atol=5e-4)  # padded batch vs one row: float rounding
    method.train()
    step = method.training_step(rows)
    step["loss"].backward()
    assert torch.isfinite(step["loss"]) and method.head.dense.weight.grad is not None

    # evaluation: the same head and denoising (in eval mode), and a reload scores the same
    encoder = method.eval_encoder()
    sentences = ["a man plays the guitar", "the dog runs"]
    vectors = encoder.encode(sentences)
    assert vectors.shape == (2, encoder.hidden_size)
    encoder.save(tmp_path / "best_model", {"step": 1})
    reloaded = build_encoder(str(tmp_path / "best_model"), pooler="mask", fresh_mlp=False)
    assert isinstance(reloaded, PromptBERTEncoder) and reloaded.denoise and reloaded.prompt_head is not None
    assert np.abs(reloaded.encode(sentences) - vectors).max() < 1e-5
    # without the head and the denoising the evaluation would be another embedding
    plain = build_encoder(str(tmp_path / "best_model"), pooler="mask", fresh_mlp=False)
    plain.prompt_head, plain.denoise = None, False
    assert np.abs(plain.encode(sentences) - vectors).max() > 1e-3


def test_unsupervised_promptbert_is_unchanged_by_the_new_keys(tiny_bert: Path, data_dir: Path) -> None:
    from cl_bench.methods.promptbert.modeling import PromptBERTEncoder
    from cl_bench.train import loop

    cfg = _compose(["method=promptbert", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "batch_size=4",
                    "model.max_length=16"], data_dir)
    method = loop.build_method(typed_specs(cfg), torch.device("cpu"))
    assert not isinstance(method.encoder, PromptBERTEncoder) and method.encoder.view_prompts == [
        'This sentence of "[X]" means [MASK].', 'This sentence : "[X]" means [MASK].']
    with open_dict(cfg):
        cfg.method.denoise = False
        cfg.method.denoise_eval = True
    from cl_bench.config import ConfigError

    with pytest.raises(ConfigError, match=r"^method.denoise_eval: has no effect on this run"):
        check_choices(cfg, ["method.denoise=false", "method.denoise_eval=true"])


def test_the_published_figure_and_its_row_in_the_report() -> None:
    from cl_bench.reporting.reference_results import load_ablations

    spec = load_ablations()["prompt_methods"]
    assert {p.label: p.paper for p in spec.points} == {
        "PromptBERT (unsup.)": 78.54, "PromptBERT (sup., NLI)": 81.97, "SNCSE": 78.97}
    assert "kongds/Prompt-BERT README.md" in spec.source and "promptbert_sup_bert" in spec.experiments
    sup = {"tags.method": "promptbert", "params.method.supervised": "True"}
    unsup = {"tags.method": "promptbert", "params.method.supervised": "False"}
    older = {"tags.method": "promptbert"}  # a run recorded before the key existed
    assert [spec.point_of(run).label for run in (sup, unsup, older)] == [
        "PromptBERT (sup., NLI)", "PromptBERT (unsup.)", "PromptBERT (unsup.)"]


def test_mlm_transform_head_on_a_non_bert_model_is_rejected_before_it_loads(data_dir: Path, tmp_path: Path) -> None:
    """The head is BERT's cls.predictions.transform: a local RoBERTa folder (config.json only, no weights to
    load) is rejected by the configuration check, naming the key and the model type."""
    from cl_bench.config import ConfigError

    (tmp_path / "roberta").mkdir()
    (tmp_path / "roberta" / "config.json").write_text('{"model_type": "roberta"}')
    overrides = ["method=promptbert", "method.head=mlm_transform", f"model.name_or_path={tmp_path / 'roberta'}"]
    with pytest.raises(ConfigError, match=r"^method\.head: mlm_transform .* the model is a roberta"):
        check_choices(_compose(overrides, data_dir), overrides)
    (tmp_path / "roberta" / "config.json").write_text('{"model_type": "bert"}')
    check_choices(_compose(overrides, data_dir), overrides)  # a BERT folder passes
