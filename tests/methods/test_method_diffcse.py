"""DiffCSE: with a tiny random generator the discriminator's labels are (generated id != original id) on attended
positions (checked by hand on a batch), the discriminator sees the sentence embedding at position 0, λ = 0 gives
SimCSE's loss exactly, the contrastive term is SimCSE's under the same seed with λ > 0, and the BatchNorm projector
is the official ProjectionMLP."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.diffcse.modeling import BatchNormProjector, DiffCSE, replaced_token_loss
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder

SENTENCES = ["a man plays the guitar in the park", "the dog runs in the street", "two children read a book",
             "a woman eats food at the table"]


@pytest.fixture(scope="module")
def tiny_generator(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random masked LM with the tiny encoder's vocabulary (no download)."""
    out = tmp_path_factory.mktemp("tiny_generator")
    config = BertConfig.from_pretrained(tiny_bert)
    config.num_hidden_layers = 1
    torch.manual_seed(1)
    BertForMaskedLM(config).save_pretrained(out)
    return out


def _context(tiny_bert: Path, pooler: str = "cls") -> MethodContext:
    encoder = build_encoder(str(tiny_bert), pooler=pooler, dropout=0.1, mlp_only_train=True, max_length=16)
    return MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), model_name_or_path=str(tiny_bert),
                         seed=1)


def test_discriminator_labels_are_the_generator_replacements(tiny_bert, tiny_generator) -> None:
    torch.manual_seed(0)
    method = DiffCSE(_context(tiny_bert), yaml_spec("method", "diffcse", generator=str(tiny_generator),
                                                        lambda_weight=0.005, mask_ratio=0.3))
    method.train()
    features = method.encoder.tokenize(SENTENCES)
    ids, attention = features["input_ids"], features["attention_mask"]
    torch.manual_seed(5)
    masked = method.mask(ids)
    torch.manual_seed(5)
    method.generator.eval()  # deterministic arg-max for the hand check
    edited, replaced = method.edit(ids, attention)
    with torch.no_grad():
        predicted = method.generator(input_ids=masked, attention_mask=attention).logits.argmax(-1)
    cls_id = method.encoder.tokenizer.cls_token_id
    for b in range(ids.shape[0]):  # by hand, position by position
        for t in range(ids.shape[1]):
            generated = cls_id if t == 0 else int(predicted[b, t])
            want_label = bool(attention[b, t]) and generated != int(ids[b, t])
            assert bool(replaced[b, t]) == want_label, (b, t)
            assert int(edited[b, t]) == (generated if attention[b, t] else 0), (b, t)
    assert replaced[:, 0].sum() == 0  # [CLS] is put back
    assert 0 < replaced.sum() < attention.sum()  # a random generator replaces some but not all tokens
    # the loss term is the mean cross-entropy over every position of the padded batch (padding: label 0)
    logits = torch.randn(*ids.shape, 2)
    manual = sum(-torch.log_softmax(logits[b, t], -1)[int(replaced[b, t])]
                 for b in range(ids.shape[0]) for t in range(ids.shape[1])) / ids.numel()
    torch.testing.assert_close(replaced_token_loss(logits, replaced), manual)


def test_discriminator_is_conditioned_on_the_sentence_embedding(tiny_bert, tiny_generator) -> None:
    method = DiffCSE(_context(tiny_bert), yaml_spec("method", "diffcse", generator=str(tiny_generator)))
    method.eval()
    features = method.encoder.tokenize(SENTENCES)
    condition = torch.randn(len(SENTENCES), method.encoder.hidden_size, requires_grad=True)
    seen = []
    hook = method.discriminator.encoder.register_forward_pre_hook(lambda m, args, kwargs: seen.append(
        (args[0] if args else kwargs["hidden_states"]).detach().clone()), with_kwargs=True)
    try:
        terms = method.electra_loss(features, condition)
    finally:
        hook.remove()
    torch.testing.assert_close(seen[0][:, 0], condition.detach())  # position 0 = the sentence embedding
    terms["loss_electra"].backward()
    assert condition.grad is not None and condition.grad.abs().sum() > 0  # the ELECTRA loss reaches the embedding
    assert all(p.grad is None for p in method.generator.parameters())  # frozen generator


def test_lambda_zero_is_simcse_and_the_contrastive_term_is_simcses(tiny_bert, tiny_generator) -> None:
    torch.manual_seed(3)
    simcse = SimCSE(_context(tiny_bert), yaml_spec("method", "simcse"))
    diffcse = DiffCSE(_context(tiny_bert), yaml_spec("method", "diffcse", generator=str(tiny_generator),
                                                         lambda_weight=0.0, projector="mlp"))
    diffcse.load_state_dict(simcse.state_dict(), strict=False)
    assert diffcse.generator is None
    simcse.train()
    diffcse.train()
    torch.manual_seed(7)
    want = simcse.training_step(SENTENCES)["loss"]
    torch.manual_seed(7)
    got = diffcse.training_step(SENTENCES)["loss"]
    assert torch.equal(got, want)
    # with λ > 0 the contrastive term is unchanged and the total adds λ · the ELECTRA loss
    full = DiffCSE(_context(tiny_bert), yaml_spec("method", "diffcse", generator=str(tiny_generator),
                                                      lambda_weight=0.5, projector="mlp"))
    full.load_state_dict(simcse.state_dict(), strict=False)
    full.train()
    torch.manual_seed(7)
    terms = full.training_step(SENTENCES)
    assert torch.equal(terms["loss_contrastive"], want)
    torch.testing.assert_close(terms["loss"], want + 0.5 * terms["loss_electra"])


def test_batchnorm_projector_is_the_official_projection_mlp(tiny_bert) -> None:
    projector = BatchNormProjector(8)
    kinds = [type(m).__name__ for m in projector.net]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d"]
    assert projector.net[0].bias is None and projector.net[3].bias is None
    assert projector.net[0].out_features == 16 and projector.net[4].affine is False
    method = DiffCSE(_context(tiny_bert), yaml_spec("method", "diffcse", lambda_weight=0.0))
    assert isinstance(method.projector, BatchNormProjector)
    on_avg = DiffCSE(_context(tiny_bert, pooler="avg"), yaml_spec("method", "diffcse", lambda_weight=0.0))
    assert on_avg.projector is None  # official: cls only


def test_generator_is_checked_before_loading(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"^method.generator: cannot load '.*nowhere'") as offline:
        yaml_spec("method", "diffcse", generator=str(tmp_path / "nowhere"), lambda_weight=0.005)
    # the null choice it offers carries compare.md's warning: on a checkpoint without an MLM head it is not DiffCSE
    assert "or null for model.name_or_path (a variant, not the paper's DiffCSE" in str(offline.value)
    assert "all-MiniLM-L6-v2" in str(offline.value) and "not DiffCSE's objective" in str(offline.value)
    with pytest.raises(ValueError, match=r"^method.projector: Invalid value 'linear', expected one of \[batchnorm, mlp\]"):
        yaml_spec("method", "diffcse", projector="linear", lambda_weight=0.0)
    yaml_spec("method", "diffcse", generator=str(tmp_path / "nowhere"), lambda_weight=0.0)  # inert without λ
