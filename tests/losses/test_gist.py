"""GISTEmbed's guided negatives: the guide masks exactly the false negatives of a hand-made batch, the loss then
equals the pair loss with those columns removed (guided supervised SimCSE, loss=infonce), loss=gist gets the guide's
embeddings, GradCache gives the uncached loss and gradients, and the keys act or are rejected before any model loads.
GISTEmbed's loss against sentence-transformers' GISTEmbedLoss: tests/losses/test_losses_sentence_transformers.py."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from conftest import as_built, params_of
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, typed_specs, validate
from cl_bench.losses.gist import guided_ignore_mask
from cl_bench.losses.infonce import info_nce
from cl_bench.train.gradcache import GradCache

MINILM = Path(os.environ.get("CL_BENCH_DATA", "../shared/data")).parent / "models" / "all-MiniLM-L6-v2"


def naive_info_nce_without(a: torch.Tensor, p: torch.Tensor, h: torch.Tensor, removed: set[tuple[int, int]],
                           tau: float) -> torch.Tensor:
    """Explicit loop: anchor i against positives and hard negatives, minus the (row, column) pairs removed."""
    columns = [*p, *h]
    total = torch.zeros((), dtype=torch.float64)
    for i in range(a.shape[0]):
        def logit(c: torch.Tensor, i: int = i) -> torch.Tensor:
            return torch.dot(a[i], c) / (a[i].norm() * c.norm()) / tau
        denominator = sum(torch.exp(logit(c)) for j, c in enumerate(columns) if (i, j) not in removed)
        total = total - torch.log(torch.exp(logit(p[i])) / denominator)
    return total / a.shape[0]


def test_the_guide_masks_exactly_the_duplicate_and_the_loss_drops_its_column() -> None:
    # guide space: 4 orthogonal topics; row 1's contradiction duplicates its entailment (same guide vector)
    e = torch.eye(4, dtype=torch.float64)
    guide_a = torch.stack([e[0], e[1], e[2]])
    guide_p = torch.stack([e[0] + 0.1 * e[3], e[1] + 0.1 * e[3], e[2] + 0.1 * e[3]])
    guide_h = torch.stack([e[3], guide_p[1], -e[2]])
    ignore = guided_ignore_mask(guide_a, guide_p, guide_h)
    expected = torch.zeros(3, 6, dtype=torch.bool)
    expected[1, 3 + 1] = True
    assert torch.equal(ignore, expected)

    g = torch.Generator().manual_seed(0)
    a, p, h = (torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    loss = as_built(info_nce)(a, p, h, tau=0.1, ignore=ignore)
    reference = naive_info_nce_without(a, p, h, {(1, 4)}, 0.1)
    torch.testing.assert_close(loss, reference, rtol=1e-9, atol=1e-10)
    for got, want in zip(torch.autograd.grad(loss, [a, p, h]), torch.autograd.grad(reference, [a, p, h]), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9)
    assert not math.isclose(loss.item(), as_built(info_nce)(a, p, h, tau=0.1).item())  # the mask acted
    # the positive itself is never ignored, even when every candidate ties with it
    assert not torch.diagonal(guided_ignore_mask(guide_a, guide_a)).any()
    with pytest.raises(ValueError, match="loss: ignore must be"):
        as_built(info_nce)(a, p, h, ignore=torch.zeros(3, 3, dtype=torch.bool))


def _compose(data_dir: Path, overrides: list[str]):
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*overrides, "paths.output_dir=out"])


BATCH = [
    ("a man plays the guitar", "someone plays music", "the dog sleeps on the sofa"),
    ("two children read a book", "kids are reading", "kids are reading"),  # contradiction duplicates the entailment
    ("a woman eats at the table", "a person is eating", "nobody is eating food"),
    ("the cat sits on the chair", "an animal is sitting", "the stock market fell today"),
]


def test_a_real_guide_masks_the_duplicate_and_gradcache_agrees(tiny_bert: Path, data_dir: Path) -> None:
    from cl_bench.train import loop

    cfg = _compose(data_dir, ["method=simcse_sup", "data=nli_snli_devtest", f"model.name_or_path={tiny_bert}",
                              f"method.guide={MINILM}", "model.max_length=16", "dropout=0"])  # same masks chunked or not
    torch.manual_seed(0)
    method = loop.build_method(typed_specs(cfg), torch.device("cpu"))
    method.train()
    assert not method.guide.training and not any(p.requires_grad for p in method.guide.parameters())
    views = method.prepare(BATCH, method.rng)
    mask = guided_ignore_mask(*method.guide_embeddings(views))
    expected = torch.zeros(4, 8, dtype=torch.bool)
    expected[1, 4 + 1] = True  # exactly row 1's contradiction column
    assert torch.equal(mask, expected)

    seen: list[torch.Tensor | None] = []
    inner = method.loss_fn
    method.loss_fn = lambda *a, **k: (seen.append(k.get("ignore")), inner(*a, **k))[1]
    state = torch.get_rng_state()
    terms = method.training_step(BATCH)
    terms["loss"].backward()
    uncached = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    assert torch.equal(seen[0], expected)
    method.zero_grad(set_to_none=True)
    torch.set_rng_state(state)
    cache = GradCache(method, 2)
    cached_terms = cache.forward(BATCH)
    cache.backward(cached_terms["loss"])
    torch.testing.assert_close(cached_terms["loss"], terms["loss"], rtol=1e-5, atol=1e-6)
    assert torch.equal(seen[-1], expected)
    for name, grad in uncached.items():
        torch.testing.assert_close(dict(method.named_parameters())[name].grad, grad, rtol=1e-4, atol=1e-6)


def test_loss_gist_gets_the_guides_embeddings_and_gradcache_agrees(tiny_bert: Path, data_dir: Path) -> None:
    """``loss=gist``: the method hands GISTEmbed's loss the guide's embeddings of the same columns; chunked with
    GradCache the loss and gradients are the uncached ones."""
    from cl_bench.losses.gist import gist_embed
    from cl_bench.train import loop

    cfg = _compose(data_dir, ["method=simcse_sup", "loss=gist", "data=nli_snli_devtest", f"model.name_or_path={tiny_bert}",
                              f"method.guide={MINILM}", "model.max_length=16", "dropout=0"])
    torch.manual_seed(0)
    method = loop.build_method(typed_specs(cfg), torch.device("cpu")).to(torch.float64)  # at tau 0.01 float32's noise is 100x
    method.train()
    views = method.prepare(BATCH, method.rng)
    with torch.no_grad():
        embeddings = method.encoder(method.to_device(views.features)).split(views.size)
        expected = as_built(gist_embed)(*embeddings, guide=method.guide_embeddings(views), tau=0.01)
    terms = method.training_step(BATCH)
    assert terms["loss"].dtype == torch.float64
    torch.testing.assert_close(terms["loss"].detach(), expected, rtol=0, atol=1e-10)
    terms["loss"].backward()
    uncached = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    method.zero_grad(set_to_none=True)
    cache = GradCache(method, 2)
    cached_terms = cache.forward(BATCH)
    cache.backward(cached_terms["loss"])
    torch.testing.assert_close(cached_terms["loss"], terms["loss"], rtol=0, atol=1e-10)
    for name, grad in uncached.items():
        torch.testing.assert_close(dict(method.named_parameters())[name].grad, grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ([f"method.guide={MINILM}"], None),
        ([f"method.guide={MINILM}", "method.guide_pooler=cls_before_pooler"], None),
        ([f"method.guide={MINILM}", "loss=gist"], None),
        ([f"method.guide={MINILM}", "loss=gist", "loss.contrast_anchors=false", "loss.drop_ties=true"], None),
        (["loss=gist"], "^loss: GISTEmbed's loss \\(loss=gist, a guided_pair loss\\) needs a guide encoder; set method.guide="),
        (["method=simcse", "loss=gist"], "^loss=gist: method=simcse calls pair losses and this one is a guided_pair loss"),
        ([f"method.guide={MINILM}", "loss=ntxent"], "^method.guide: has no effect on this run: the configured loss takes no guide"),
        (["method.guide_pooler=cls"], "^method.guide_pooler: has no effect on this run: method.guide is null"),
        (["method.guide=/nonexistent/guide"], "^method.guide: no Hugging Face model at '/nonexistent/guide'"),
        ([f"method.guide={MINILM}", "method.guide_pooler=max"], "^method.guide_pooler: unknown pooler 'max'"),
    ],
)
def test_guide_keys_act_or_are_rejected_before_model_load(
    overrides: list[str], error: str | None, tiny_bert: Path, data_dir: Path
) -> None:
    overrides = overrides if any(o.startswith("method=") for o in overrides) else ["method=simcse_sup", *overrides]
    cfg = _compose(data_dir, [*overrides, "data=nli_snli_devtest", f"model.name_or_path={tiny_bert}"])
    if error is None:
        validate(cfg, overrides)
        assert params_of(cfg)["method.guide"] == str(MINILM)
    else:
        with pytest.raises(ConfigError, match=error) as err:
            validate(cfg, overrides)
        assert "\n" not in str(err.value)
