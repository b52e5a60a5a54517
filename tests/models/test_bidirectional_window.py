"""``model.bidirectional=true`` on a sliding-window decoder attends fully, as LLM2Vec: checked against the
states of LLM2Vec 0.2.3's own ``MistralBiModel`` (tests/reference_data/llm2vec_bidirectional_mistral.json,
computed in a scratch environment with transformers 4.44.2, which llm2vec pins) on a tiny Mistral whose
window (2 tokens) is far shorter than its inputs, and, for Qwen2's sliding layers, against the same weights
without a window."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from tiny_decoders import build_tiny_decoder

from cl_bench.models.decoders import BackboneOptions, window_rejection
from cl_bench.models.encoder import build_encoder

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "reference_data" / "llm2vec_bidirectional_mistral.json").read_text())


def _states(model_dir: Path, attn: str, bidirectional: bool = True) -> torch.Tensor:
    options = BackboneOptions(bidirectional=bidirectional, attn_implementation=attn)
    encoder = build_encoder(str(model_dir), pooler="avg", options=options).eval().double()
    with torch.no_grad():
        return encoder.backbone(input_ids=torch.tensor(REFERENCE["input_ids"]),
                                attention_mask=torch.tensor(REFERENCE["attention_mask"])).last_hidden_state


@pytest.fixture(scope="module")
def windowed_mistral(tmp_path_factory) -> Path:
    from safetensors.torch import load_file

    path = build_tiny_decoder("mistral", tmp_path_factory.mktemp("mistral"), sliding_window=REFERENCE["sliding_window"])
    state = load_file(path / "model.safetensors")
    sha = hashlib.sha256(b"".join(state[k].double().numpy().tobytes() for k in sorted(state))).hexdigest()
    assert sha == REFERENCE["weights_sha256"], "the tiny Mistral is not the one the reference states were computed on"
    return path


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_bidirectional_mistral_equals_llm2vec(windowed_mistral: Path, attn: str) -> None:
    expected = torch.tensor(REFERENCE[f"last_hidden_state_{attn}"], dtype=torch.float64)
    got = _states(windowed_mistral, attn)
    assert (got - expected).abs().max().item() <= 1e-10


def test_the_window_is_off_in_the_saved_config(windowed_mistral: Path, tmp_path: Path) -> None:
    """A saved bidirectional model reloads with full attention (config.json: no window, is_causal false)."""
    encoder = build_encoder(str(windowed_mistral), pooler="avg", options=BackboneOptions(bidirectional=True))
    encoder.save(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config["sliding_window"] is None and config["is_causal"] is False
    reloaded = _states(tmp_path / "saved", "eager", bidirectional=False)  # as saved, no option given
    assert (reloaded - torch.tensor(REFERENCE["last_hidden_state_eager"], dtype=torch.float64)).abs().max() <= 1e-10


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_qwen2_sliding_layers_attend_fully(tmp_path: Path, attn: str) -> None:
    """Qwen2 with every layer a sliding-window layer: bidirectional equals the same weights without a window."""
    windowed = build_tiny_decoder("qwen2", tmp_path / "windowed", sliding_window=2)
    full = build_tiny_decoder("qwen2", tmp_path / "full")
    assert json.loads((windowed / "config.json").read_text())["layer_types"] == ["sliding_attention"] * 2
    assert (_states(windowed, attn) - _states(full, attn)).abs().max().item() <= 1e-12
    causal_windowed, causal_full = _states(windowed, attn, False), _states(full, attn, False)
    assert (causal_windowed[0, -1] - causal_full[0, -1]).abs().max().item() > 1e-3  # the window did act before


def test_a_family_with_local_rotary_layers_is_refused() -> None:
    from transformers import AutoConfig

    config = AutoConfig.for_model("gemma3_text", num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"])
    assert window_rejection(config) is not None
    assert window_rejection(AutoConfig.for_model("mistral", sliding_window=2)) is None
