"""Unsupervised SimCSE mechanics: dropout views, InfoNCE, the λ-weighted MLM auxiliary loss."""

from __future__ import annotations

import functools

import torch

from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder

BATCH = ["a man plays the guitar", "the dog runs in the park", "two children eat food", "a cat sits on a chair"]


def _method(tiny_bert, dropout: float = 0.1, **kwargs) -> SimCSE:
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=dropout, mlp_only_train=True)
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0),
                            model_name_or_path=str(tiny_bert), seed=1)
    return SimCSE(context, yaml_spec("method", "simcse", **kwargs))


def test_two_dropout_views_differ_and_loss_is_infonce(tiny_bert) -> None:
    method = _method(tiny_bert)
    method.train()
    torch.manual_seed(0)
    z1, z2, _ = method.embed_views(BATCH, BATCH)
    assert not torch.allclose(z1, z2)  # independent dropout masks
    torch.manual_seed(0)
    terms = method.training_step(BATCH)
    assert set(terms) == {"loss", "loss_contrastive"} and method.mlm is None
    assert torch.allclose(terms["loss"], info_nce(z1, z2, tau=0.05, hard_negative_alpha=1.0))
    method_no_dropout = _method(tiny_bert, dropout=0.0)
    method_no_dropout.train()
    a, b, _ = method_no_dropout.embed_views(BATCH, BATCH)
    assert torch.allclose(a, b, atol=1e-6)  # no dropout: identical views


def test_mlm_term_is_weighted_and_shares_the_backbone(tiny_bert) -> None:
    method = _method(tiny_bert, mlm_weight=0.1)
    method.train()
    torch.manual_seed(3)
    terms = method.training_step(BATCH)
    assert set(terms) == {"loss", "loss_contrastive", "loss_mlm"}
    assert torch.allclose(terms["loss"], terms["loss_contrastive"] + 0.1 * terms["loss_mlm"])
    mlm_model = method.mlm._mlm_model[0]
    assert mlm_model.base_model is method.encoder.backbone
    assert mlm_model.get_output_embeddings().weight is method.encoder.backbone.get_input_embeddings().weight
    terms["loss"].backward()
    assert method.encoder.backbone.embeddings.word_embeddings.weight.grad is not None


def test_select_with_mlp_scores_dev_with_the_mlp_and_tests_without(tiny_bert) -> None:
    """method.select_with_mlp (MixCSE's official script): the checkpoint-selecting dev embedding is tanh(MLP([CLS])),
    the final test's the raw [CLS] state (pooler.mlp_only_train); both share the trained modules."""
    method = _method(tiny_bert, select_with_mlp=True)
    method.eval()
    selection, test = method.selection_encoder(), method.eval_encoder()
    assert selection.backbone is test.backbone and selection.mlp is test.mlp
    with torch.no_grad():
        raw = test.encode(BATCH, batch_size=4)
        with_mlp = selection.encode(BATCH, batch_size=4)
        torch.testing.assert_close(torch.as_tensor(with_mlp), torch.tanh(test.mlp.dense(torch.as_tensor(raw))))
    plain = _method(tiny_bert)
    assert plain.selection_encoder() is plain.eval_encoder()
