"""GradCache: the cached loss and gradients equal the uncached ones (tiny BERT, dropout on and off)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import typed_specs, yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.train import gradcache as gradcache_module
from cl_bench.train.gradcache import GradCache

SENTENCES = [
    "a man plays the guitar", "the dog runs in the park", "two children sit at a table",
    "a woman reads a book", "the red car is fast", "people walk on the street",
    "a cat eats food", "the old man rides a bike", "music in the house", "the sun in the blue sky",
]


def _simcse(tiny_bert: Path, dropout: float, pooler: str = "cls") -> SimCSE:
    torch.manual_seed(0)
    encoder = build_encoder(str(tiny_bert), pooler=pooler, dropout=dropout, max_length=16, mlp_only_train=True)
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec()))
    method = SimCSE(context, yaml_spec("method", "simcse"))
    method.train()
    return method


def _grads(method: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in method.named_parameters() if p.grad is not None}


def _uncached_same_masks(method: SimCSE, batch: list[str], chunk: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The big-batch loss with the whole graph in memory, encoding chunk by chunk (GradCache's draw order)."""
    pieces = [method.cache_embed(batch[i : i + chunk]) for i in range(0, len(batch), chunk)]
    z1 = torch.cat([p[0] for p in pieces])
    z2 = torch.cat([p[1] for p in pieces])
    loss = method.loss_fn(z1, z2)
    loss.backward()
    return loss.detach(), _grads(method)


def _cached(method: SimCSE, batch: list[str], chunk: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    cache = GradCache(method, chunk)
    terms = cache.forward(batch)
    cache.backward(terms["loss"])
    return terms["loss"].detach(), _grads(method)


def _assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys() and len(a) > 10
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-6, msg=name)


def test_cached_equals_uncached_with_dropout_on(tiny_bert: Path) -> None:
    method = _simcse(tiny_bert, dropout=0.1)
    torch.manual_seed(123)
    loss_ref, grads_ref = _uncached_same_masks(method, SENTENCES, chunk=3)
    rng_after_ref = torch.get_rng_state()
    method.zero_grad(set_to_none=True)
    torch.manual_seed(123)
    loss, grads = _cached(method, SENTENCES, chunk=3)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=1e-6)
    _assert_same(grads, grads_ref)
    # The RNG continues as if each chunk had been encoded once (pass 3 replays, then restores).
    assert torch.equal(torch.get_rng_state(), rng_after_ref)


def test_without_rng_replay_gradients_differ(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The test above is meaningful: with dropout on, a second pass with fresh masks gives other gradients.
    method = _simcse(tiny_bert, dropout=0.1)
    torch.manual_seed(123)
    _, grads_ref = _uncached_same_masks(method, SENTENCES, chunk=3)
    method.zero_grad(set_to_none=True)
    monkeypatch.setattr(gradcache_module.RandomState, "restore", lambda self, rng: None)
    torch.manual_seed(123)
    _, grads = _cached(method, SENTENCES, chunk=3)
    differs = [n for n in grads if not torch.allclose(grads[n], grads_ref[n], rtol=1e-4, atol=1e-6)]
    assert len(differs) > 5


def test_cached_equals_one_forward_training_step_without_dropout(tiny_bert: Path) -> None:
    # Dropout off: GradCache in chunks of 4 == SimCSE's own single forward pass over the whole batch.
    method = _simcse(tiny_bert, dropout=0.0, pooler="avg")
    terms = method.training_step(SENTENCES)
    terms["loss"].backward()
    loss_ref, grads_ref = terms["loss"].detach(), _grads(method)
    method.zero_grad(set_to_none=True)
    loss, grads = _cached(method, SENTENCES, chunk=4)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-6)
    _assert_same(grads, grads_ref)


def test_unsupported_settings_fail_with_the_key(tiny_bert: Path) -> None:
    method = _simcse(tiny_bert, dropout=0.1)
    with pytest.raises(ValueError, match="train.gradcache_chunk: must be >= 1"):
        GradCache(method, 0)
    method.mlm = torch.nn.Identity()  # what mlm_weight > 0 builds: an MLM term needs the whole graph
    with pytest.raises(ValueError, match=r"train.gradcache_chunk: not with method.mlm_weight > 0"):
        GradCache(method, 4)
    with pytest.raises(ValueError, match="has no cache_embed/cache_loss hooks"):
        GradCache(torch.nn.Linear(2, 2), 4)


def test_training_loop_with_gradcache_matches_plain_loop(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """Two optimizer steps through cl_bench.train.loop with train.gradcache_chunk=3 and =0 (dropout 0)."""
    from cl_bench.train.loop import train

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    states = []
    for chunk in (0, 3):
        overrides = [
            f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=20", "batch_size=10", "dropout=0.0",
            "pooler=avg", "train.max_steps=2", "train.eval_steps=0", "train.save_best=false", "train.device=cpu",
            "train.progress_bar=false", "train.checkpoint_steps=0", f"train.gradcache_chunk={chunk}",
        ]
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        run_dir = tmp_path / f"chunk{chunk}"
        run_dir.mkdir()
        method, state = train(typed_specs(cfg), run_dir, lambda metrics, step: None, lambda encoder: {"stsb_dev": 0.0})
        assert state.step == 2
        states.append({k: v.detach().clone() for k, v in method.state_dict().items()})
    plain, cached = states
    moved = 0
    for name, value in plain.items():
        torch.testing.assert_close(cached[name], value, rtol=1e-4, atol=1e-5, msg=name)
    # and training did move the weights (the comparison is not between two untouched models)
    fresh = build_encoder(str(tiny_bert), pooler="avg", dropout=0.0).state_dict()
    for name, value in fresh.items():
        moved += not torch.allclose(plain[f"encoder.{name}"], value)
    assert moved > 5
