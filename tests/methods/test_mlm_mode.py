"""method.mlm_mode: masked (SimCSE's code before PR #121) vs clean, for simcse and simcse_sup."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.methods.simcse_sup.modeling import SupervisedSimCSE
from cl_bench.models.encoder import build_encoder, special_tokens_mask

BATCH = ["a man plays the guitar", "the dog runs in the park", "two children eat food", "a cat sits on a chair"] * 16


def _context(tiny_bert) -> MethodContext:
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=0.1, mlp_only_train=True)
    return MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0),
                         model_name_or_path=str(tiny_bert), seed=1)


def _backbone_inputs(method, step) -> list[torch.Tensor]:
    """input_ids of every backbone call during ``step()``: the contrastive pass first, then the MLM pass."""
    seen: list[torch.Tensor] = []
    hook = method.encoder.backbone.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((args[0] if args else kwargs["input_ids"]).clone()), with_kwargs=True
    )
    try:
        terms = step()
    finally:
        hook.remove()
    assert torch.isfinite(terms["loss_mlm"]) and torch.isfinite(terms["loss_contrastive"])
    return seen


def _lm_decoder(method) -> torch.Tensor:
    return method.mlm._mlm_model[0].get_output_embeddings().weight


def test_masked_mode_encodes_the_mlm_inputs_and_unties_the_head(tiny_bert) -> None:
    method = SimCSE(_context(tiny_bert), yaml_spec("method", "simcse", mlm_weight=0.1, mlm_mode="masked"))
    method.train()
    torch.manual_seed(0)
    contrastive, mlm = _backbone_inputs(method, lambda: method.training_step(BATCH))
    clean = method.tokenize(BATCH + BATCH)["input_ids"]
    assert torch.equal(contrastive, mlm)  # the contrastive views ARE the MLM inputs
    real = ~special_tokens_mask(method.encoder.tokenizer, clean).bool() & (clean != method.encoder.tokenizer.pad_token_id)
    changed = (contrastive != clean)[real].float().mean().item()
    assert 0.08 < changed < 0.2  # 15% selected, of which 80% [MASK] + 10% random
    # the two copies of a sentence are masked independently, as the per-row bernoulli of the official collator
    assert not torch.equal(contrastive[: len(BATCH)], contrastive[len(BATCH):])
    word_embeddings = method.encoder.backbone.get_input_embeddings().weight
    assert _lm_decoder(method).data_ptr() != word_embeddings.data_ptr()
    params = {id(p) for p in method.parameters()}
    assert id(_lm_decoder(method)) in params  # the untied decoder is trained


def test_clean_mode_encodes_clean_inputs_with_a_tied_head(tiny_bert) -> None:
    method = SimCSE(_context(tiny_bert), yaml_spec("method", "simcse", mlm_weight=0.1, mlm_mode="clean"))
    method.train()
    torch.manual_seed(0)
    contrastive, mlm = _backbone_inputs(method, lambda: method.training_step(BATCH))
    assert torch.equal(contrastive, method.tokenize(BATCH + BATCH)["input_ids"])
    assert not torch.equal(contrastive, mlm)
    assert _lm_decoder(method).data_ptr() == method.encoder.backbone.get_input_embeddings().weight.data_ptr()


def test_supervised_masked_mode(tiny_bert) -> None:
    triples = [(a, b, c) for a, b, c in zip(BATCH[:8], BATCH[1:9], BATCH[2:10], strict=True)]
    method = SupervisedSimCSE(_context(tiny_bert), yaml_spec("method", "simcse_sup", mlm_weight=0.1, mlm_mode="masked"))
    method.train()
    contrastive, mlm = _backbone_inputs(method, lambda: method.training_step(triples))
    assert torch.equal(contrastive, mlm)
    assert _lm_decoder(method).data_ptr() != method.encoder.backbone.get_input_embeddings().weight.data_ptr()


def test_masked_mode_needs_an_mlm_weight(tiny_bert) -> None:
    with pytest.raises(ValueError, match=r"method.mlm_mode: 'masked' needs method.mlm_weight > 0"):
        SimCSE(_context(tiny_bert), yaml_spec("method", "simcse", mlm_weight=0.0, mlm_mode="masked"))
    with pytest.raises(ValueError, match=r"method.mlm_mode: unknown 'dirty'"):
        SimCSE(_context(tiny_bert), dataclasses.replace(yaml_spec("method", "simcse", mlm_weight=0.1), mlm_mode="dirty"))


def test_the_lambda_ablation_uses_the_official_masking(data_dir, tiny_bert) -> None:
    from conftest import job_config, sweep_jobs

    seen = [(cfg.method.mlm_weight, cfg.method.mlm_mode)
            for cfg in (job_config(job, data_dir, tiny_bert) for job in sweep_jobs("ablation_mlm_weight"))]
    assert seen == [(0.0, "clean"), (0.01, "masked"), (0.1, "masked"), (1.0, "masked")]


def _word_embedding_grad_of_mlm_loss(method) -> tuple[torch.Tensor, torch.Tensor]:
    """The MLM term's gradient on the word embeddings, and the token ids of the MLM pass's inputs."""

    def mlm_backward() -> dict[str, torch.Tensor]:
        terms = method.training_step(BATCH)
        terms["loss_mlm"].backward()
        return terms

    torch.manual_seed(0)
    method.zero_grad()
    _, inputs = _backbone_inputs(method, mlm_backward)
    return method.encoder.backbone.get_input_embeddings().weight.grad, inputs


def test_untied_mode_is_the_latest_official_recipe(tiny_bert) -> None:
    """mlm_mode=untied (SimCSE's BertForCL at 49fa580): clean contrastive inputs, a separately masked MLM pass,
    and an untied decoder copied from the checkpoint's LM head: the word embeddings' gradient from the MLM
    term then has no LM-decoder part (rows of tokens absent from the MLM inputs get exactly zero), whereas
    the tied head of mlm_mode=clean sends a gradient to every vocabulary row."""
    method = SimCSE(_context(tiny_bert), yaml_spec("method", "simcse", mlm_weight=0.1, mlm_mode="untied"))
    method.train()
    torch.manual_seed(0)
    contrastive, mlm = _backbone_inputs(method, lambda: method.training_step(BATCH))
    assert torch.equal(contrastive, method.tokenize(BATCH + BATCH)["input_ids"])  # clean views
    assert not torch.equal(contrastive, mlm)  # the MLM pass sees a masked copy
    word_embeddings = method.encoder.backbone.get_input_embeddings().weight
    decoder = _lm_decoder(method)
    assert decoder.data_ptr() != word_embeddings.data_ptr() and id(decoder) in {id(p) for p in method.parameters()}
    torch.testing.assert_close(decoder.detach(), word_embeddings.detach())  # a copy of the checkpoint's head

    for mode, expect_decoder_part in (("untied", False), ("clean", True)):
        method = SimCSE(_context(tiny_bert), yaml_spec("method", "simcse", mlm_weight=0.1, mlm_mode=mode))
        method.train()
        grad, inputs = _word_embedding_grad_of_mlm_loss(method)
        absent = torch.ones(grad.shape[0], dtype=torch.bool)
        absent[inputs.unique()] = False
        assert absent.any()
        if expect_decoder_part:
            assert grad[absent].abs().sum() > 0, mode
        else:
            assert torch.count_nonzero(grad[absent]) == 0, mode
            assert _lm_decoder(method).grad is not None and _lm_decoder(method).grad.abs().sum() > 0
