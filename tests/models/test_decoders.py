"""Decoder LLMs (issue 26): last-token pooling, each family's tokenizer handling, bidirectional attention,
LoRA adapters (only they train; the merged export equals the adapter model), the attention kernel and
gradient checkpointing options, and the real command training, evaluating and exporting per family."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import cli_env, params_of
from tiny_decoders import FAMILIES, build_tiny_decoder

from cl_bench.config import typed_specs
from cl_bench.models.decoders import BackboneOptions, is_decoder, is_peft
from cl_bench.models.encoder import build_encoder
from cl_bench.models.poolers import last_token_index, pool

SENTENCES = ["a man plays the guitar", "the dog runs", "two children are playing with a red ball in the park"]


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny random model with its tokenizer per family, saved to a temporary folder."""
    root = tmp_path_factory.mktemp("tiny_decoders")
    return {family: build_tiny_decoder(family, root / family) for family in FAMILIES}


# ------------------------------------------------------------------------------------------------
# last_token: the pooled index, by hand
# ------------------------------------------------------------------------------------------------
def test_last_token_index_on_right_and_left_padding_by_hand() -> None:
    right = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    left = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert last_token_index(right).tolist() == [2, 4, 0]
    assert last_token_index(left).tolist() == [4, 4, 4]
    hidden = torch.arange(3 * 5 * 2, dtype=torch.float).view(3, 5, 2)
    assert torch.equal(pool("last_token", hidden, right), hidden[[0, 1, 2], [2, 4, 0]])
    assert torch.equal(pool("last_token", hidden, left), hidden[[0, 1, 2], [4, 4, 4]])


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_pads_right_and_pools_the_appended_eos(family: str, tiny: dict[str, Path]) -> None:
    encoder = build_encoder(str(tiny[family]), pooler="last_token").eval()
    tokenizer = encoder.tokenizer
    assert is_decoder(encoder.backbone.config)
    assert tokenizer.pad_token is not None and tokenizer.padding_side == "right"
    features = encoder.tokenize(SENTENCES)
    ids, mask = features["input_ids"], features["attention_mask"]
    ends = last_token_index(mask)
    assert ends.tolist() == (mask.sum(1) - 1).tolist()  # right padding: the real tokens come first
    assert all(ids[row, end] == tokenizer.eos_token_id for row, end in enumerate(ends.tolist()))  # EOS appended
    if family in ("llama", "mistral"):
        assert (ids[:, 0] == tokenizer.bos_token_id).all()  # the family's BOS kept in front
    with torch.no_grad():
        states = encoder.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        assert torch.equal(encoder(features), states[torch.arange(len(SENTENCES)), ends])
        # a sentence's vector does not depend on the padding its batch-mates add (causal, right-padded)
        alone = encoder(encoder.tokenize(SENTENCES[:1]))
    assert torch.allclose(alone[0], encoder(features)[0], atol=1e-5)


def test_first_token_poolers_and_bert_only_options_are_rejected_on_decoders(tiny: dict[str, Path], data_dir: Path) -> None:
    from conftest import compose_config as _compose

    from cl_bench.config import ConfigError, check_backbone, check_choices

    def validate(cfg: Any, overrides: list[str] = ()) -> None:  # validate()'s parts that read no data files
        check_choices(cfg, overrides)
        check_backbone(cfg)

    llama = f"model.name_or_path={tiny['llama']}"
    for overrides, key in (
        ([llama, "pooler=cls"], "pooler=cls"),
        ([llama, "pooler=cls_before_pooler"], "pooler=cls_before_pooler"),
        ([llama, "pooler=cls_avg"], "pooler=cls_avg"),  # half of it is the first token
        ([llama, "pooler=avg", "method.mlm_weight=0.1"], "method.mlm_weight"),
        ([llama, "pooler=avg", "augmentation=token_cutoff"], "augmentation=token_cutoff"),
        ([llama, "pooler=avg", "eval.backend=onnx"], "eval.backend"),
        ([llama, "pooler=avg", "model.attn_implementation=flash_attention_2"], "model.attn_implementation"),
        ([llama, "pooler=avg", "model.attn_implementation=paged"], "model.attn_implementation"),
        ([llama, "pooler=avg", "model.lora.r=-1"], "model.lora.r"),
        ([llama, "pooler=avg", "model.lora.r=4", "model.lora.dropout=1.5"], "model.lora.dropout"),
        ([llama, "pooler=avg", "model.lora.alpha=16"], "model.lora.alpha"),  # inert: r=0
        (["mode=eval", llama, "pooler=avg", "model.lora.r=4"], "model.lora"),  # inert in mode=eval
        (["mode=eval", llama, "pooler=avg", "model.gradient_checkpointing=true"], "model.gradient_checkpointing"),
    ):
        cfg = _compose(data_dir, [*overrides, "data=wiki1m_head"])
        with pytest.raises(ConfigError, match=rf"^{key}\b") as err:
            validate(cfg, overrides)
        assert "\n" not in str(err.value), err.value
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="flash_attention_2 cannot run here"):
            validate(_compose(data_dir, [llama, "pooler=avg", "model.attn_implementation=flash_attention_2",
                                         "data=wiki1m_head"]))


def test_bidirectional_is_rejected_on_an_encoder(tiny_bert: Path, data_dir: Path) -> None:
    from conftest import compose_config as _compose

    from cl_bench.config import ConfigError, validate

    overrides = [f"model.name_or_path={tiny_bert}", "model.bidirectional=true", "data=wiki1m_head"]
    with pytest.raises(ConfigError, match=r"^model.bidirectional: .* is not a decoder: it attends both ways already$"):
        validate(_compose(data_dir, overrides), overrides)


def test_decoder_options_are_accepted_and_recorded(tiny: dict[str, Path], data_dir: Path) -> None:
    from conftest import compose_config as _compose

    from cl_bench.config import validate

    overrides = [f"model.name_or_path={tiny['qwen2']}", "pooler=last_token", "model.bidirectional=true",
                 "model.attn_implementation=sdpa", "model.gradient_checkpointing=true", "model.lora.r=4",
                 "model.lora.alpha=8", "model.lora.target_modules=[q_proj,k_proj]", "data=wiki1m_head"]
    cfg = _compose(data_dir, overrides)
    validate(cfg, overrides)
    params = params_of(cfg)
    assert params["model.lora.r"] == 4 and params["model.lora.target_modules"] == ["q_proj", "k_proj"]
    assert params["model.bidirectional"] is True and params["model.attn_implementation"] == "sdpa"
    assert "model.lora.alpha" not in params_of(_compose(data_dir, [f"model.name_or_path={tiny['qwen2']}",
                                                                       "pooler=last_token"]))


# ------------------------------------------------------------------------------------------------
# model.bidirectional
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_bidirectional_lets_an_earlier_token_see_a_later_one(family: str, attn: str, tiny: dict[str, Path]) -> None:
    """Token 1's state changes when token 3 changes with model.bidirectional=true, and does not without it."""
    changed = {}
    for bidirectional in (False, True):
        options = BackboneOptions(bidirectional=bidirectional, attn_implementation=attn)
        encoder = build_encoder(str(tiny[family]), pooler="avg", options=options).eval()
        assert encoder.backbone.config._attn_implementation == attn  # model.attn_implementation reaches the backbone
        ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 9]])
        for mask in (None, torch.ones_like(ids)):  # with and without a materialised padding mask
            with torch.no_grad():
                states = encoder.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
            changed[bidirectional, mask is None] = not torch.allclose(states[0, 1], states[1, 1], atol=1e-6)
    assert changed == {(False, True): False, (False, False): False, (True, True): True, (True, False): True}


def test_a_saved_bidirectional_model_reloads_bidirectional(tiny: dict[str, Path], tmp_path: Path) -> None:
    encoder = build_encoder(str(tiny["llama"]), pooler="last_token", options=BackboneOptions(bidirectional=True)).eval()
    encoder.save(tmp_path / "saved")
    reloaded = build_encoder(str(tmp_path / "saved"), pooler="last_token", fresh_mlp=False).eval()
    assert reloaded.backbone.config.is_causal is False
    with torch.no_grad():
        features = encoder.tokenize(SENTENCES)
        assert torch.allclose(encoder(features), reloaded(features), atol=1e-6)


# ------------------------------------------------------------------------------------------------
# LoRA
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["llama", "gpt2", "bert"])
def test_lora_gives_gradients_to_the_adapters_only(model: str, tiny: dict[str, Path], tiny_bert: Path) -> None:
    path = tiny_bert if model == "bert" else tiny[model]
    pooler = "avg" if model == "bert" else "last_token"
    options = BackboneOptions(lora_r=4, lora_alpha=8, lora_dropout=0.0, gradient_checkpointing=True)
    encoder = build_encoder(str(path), pooler=pooler, options=options).train()
    assert is_peft(encoder.backbone)
    base = encoder.backbone.get_base_model()
    assert getattr(base, "is_activation_checkpointing", getattr(base, "is_gradient_checkpointing", False))
    for name, param in encoder.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.1)  # B starts at zero; a non-zero B lets gradients reach A too
    encoder(encoder.tokenize(SENTENCES)).square().sum().backward()
    grads = {name: p.grad for name, p in encoder.named_parameters()}
    adapters = [n for n in grads if "lora_" in n]
    assert adapters, "no LoRA parameters"
    assert all(grads[n] is not None and grads[n].abs().sum() > 0 for n in adapters)
    assert all(g is None for n, g in grads.items() if "lora_" not in n)  # the base model receives none
    assert all(not p.requires_grad for n, p in encoder.named_parameters() if "lora_" not in n)


@pytest.mark.parametrize("model", ["qwen2", "bert"])
def test_merged_lora_export_equals_the_adapter_model(model: str, tiny: dict[str, Path], tiny_bert: Path,
                                                     tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from cl_bench.commands import export as ex

    path = tiny_bert if model == "bert" else tiny[model]
    pooler = "avg" if model == "bert" else "last_token"
    options = BackboneOptions(lora_r=4, lora_alpha=8, lora_dropout=0.0, bidirectional=model != "bert")
    encoder = build_encoder(str(path), pooler=pooler, options=options).eval()
    torch.manual_seed(3)
    for name, param in encoder.named_parameters():
        if "lora_" in name:
            torch.nn.init.normal_(param, std=0.2)  # "trained" adapters: the merge must change the weights
    run = tmp_path / "run"
    encoder.save(run / "best_model", {"step": 2})
    assert (run / "best_model" / "adapter_config.json").is_file()
    assert not list((run / "best_model").glob("model*.safetensors"))  # adapters only, not a second copy of the model
    adapter_vectors = encoder.encode(SENTENCES)
    base_vectors = build_encoder(str(path), pooler=pooler, options=BackboneOptions(bidirectional=model != "bert")
                                 ).eval().encode(SENTENCES)
    assert np.abs(adapter_vectors - base_vectors).max() > 1e-3  # the adapters act
    out = ex.export(run, tmp_path / "exported", check=True)
    assert not (out / "adapter_config.json").exists()
    exported = SentenceTransformer(str(out), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert np.abs(exported - adapter_vectors).max() < 1e-5
    assert AutoModel.from_pretrained(str(out)).config.model_type == encoder.backbone.config.model_type
    # the adapter folder itself evaluates as the trained model (mode=eval path)
    reloaded = build_encoder(str(run / "best_model"), pooler=pooler, fresh_mlp=False)
    assert np.abs(reloaded.encode(SENTENCES) - adapter_vectors).max() < 1e-5


# ------------------------------------------------------------------------------------------------
# eval.backend=auto on decoders and LoRA
# ------------------------------------------------------------------------------------------------
def test_auto_backend_is_torch_for_decoders(tiny: dict[str, Path]) -> None:
    from cl_bench.models.inference import encoding, encoding_settings

    encoder = build_encoder(str(tiny["gpt2"]), pooler="last_token")
    assert not encoder.onnx_capable
    with encoding(encoding_settings("auto", cache=False)) as settings:
        encoder.encode(SENTENCES)
    assert settings.backends_used == {"torch"}
    with encoding(encoding_settings("onnx", cache=False)), pytest.raises(ValueError, match="^eval.backend: onnx"):
        encoder.encode(SENTENCES)


# ------------------------------------------------------------------------------------------------
# Every method that makes sense on a decoder trains a step; the others are rejected before load
# ------------------------------------------------------------------------------------------------
def test_every_method_trains_a_step_on_a_decoder_or_is_rejected(tiny: dict[str, Path], data_dir: Path,
                                                                tmp_path: Path) -> None:
    from conftest import CORPUS, method_config

    from cl_bench.config import ConfigError, catalog, check_backbone
    from cl_bench.train import loop

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    trained, rejected = [], []
    methods = sorted(catalog.options("method"))
    for method in methods:
        cfg = method_config(method, data_dir, tiny["llama"], corpus)
        cfg.pooler.name = "last_token"
        try:
            check_backbone(cfg)
        except Exception as err:  # noqa: BLE001 - the message is what is checked
            assert isinstance(err, (ConfigError, ValueError)) and "\n" not in str(err), (method, err)
            rejected.append(method)
            continue
        torch.manual_seed(0)
        built = loop.build_method(typed_specs(cfg), torch.device("cpu"))
        items = built.read_corpus(cfg.data.train_file)
        batch = next(iter(built.batches(items, 4, torch.Generator().manual_seed(0))))
        built.train()
        assert torch.isfinite(built.training_step(batch)["loss"]), method
        trained.append(method)
    assert "simcse" in trained and "simcse_sup" in trained and sorted(trained + rejected) == methods


# ------------------------------------------------------------------------------------------------
# The real command, per family: 2 steps of simcse and simcse_sup, evaluation, export
# ------------------------------------------------------------------------------------------------
def _run(args: list[str], cwd: Path, data_dir: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("cl-bench")
    command = [exe] if exe else [sys.executable, "-m", "cl_bench"]
    proc = subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, env=cli_env(data_dir), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", ["simcse", "simcse_sup"])
def test_real_command_trains_evaluates_and_exports_each_family(
    family: str, method: str, tiny: dict[str, Path], data_dir: Path, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    from cl_bench.commands import export as ex

    data = "data=wiki1m_head" if method == "simcse" else "data=nli_snli_devtest"
    lora = ["model.lora.r=4", "model.bidirectional=true"] if family in ("qwen2", "gpt2") else []
    args = [f"method={method}", f"model.name_or_path={tiny[family]}", "pooler=last_token", data, "data.limit=16",
            "batch_size=4", "model.max_length=16", "train.max_steps=2", "train.eval_steps=2", "train.progress_bar=false",
            "logger=none", "eval.tasks=[stsb]", "eval.align_uniform=false", "eval.anisotropy=false", *lora,
            "hydra.run.dir=run"]
    _run(args, tmp_path, data_dir)
    run = tmp_path / "run"
    results = json.loads((run / "results.json").read_text())
    assert np.isfinite(results["sts/stsb"]) and results["select/best_step"] == 2
    assert (run / "best_model" / ("adapter_config.json" if lora else "model.safetensors")).is_file()
    out = ex.export(run, tmp_path / "exported", check=True)
    vectors = SentenceTransformer(str(out), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    reference = build_encoder(str(run / "best_model"), pooler="last_token", fresh_mlp=False).encode(SENTENCES)
    assert np.abs(vectors - reference).max() < 1e-5
    if not (lora and method == "simcse"):
        return
    # mode=eval on the LoRA checkpoint (adapters + base) through the real command: the run's own figure
    _run(["mode=eval", f"model.name_or_path={run / 'best_model'}", "pooler=last_token", "logger=none",
          "eval.tasks=[stsb]", "eval.align_uniform=false", "eval.anisotropy=false", "hydra.run.dir=eval"], tmp_path, data_dir)
    assert np.isclose(json.loads((tmp_path / "eval" / "results.json").read_text())["sts/stsb"], results["sts/stsb"],
                      atol=1e-6)
