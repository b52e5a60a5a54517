"""CERT / MoCo mechanics on a tiny random BERT: momentum update, frozen key encoder, FIFO queue, loss."""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F
from conftest import minilm_path, run_cl_bench
from hydra import compose, initialize_config_dir

from cl_bench.augment.back_translation import BackTranslation, BackTranslationUnavailable
from cl_bench.augment.base import Augmentation, Dropout
from cl_bench.augment.cutoff import TokenCutoff
from cl_bench.augment.eda import RandomDeletion
from cl_bench.augment.specs import DropoutSpec
from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import typed_specs, validate, yaml_spec
from cl_bench.data.text import DataFileError
from cl_bench.losses.moco import queue_info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.cert.modeling import CERT
from cl_bench.models.encoder import build_encoder
from cl_bench.specs import AugmentationSpec
from cl_bench.train.loop import build_method

SENTENCES = [
    "a man plays the guitar", "the dog runs in the park", "two children read a book",
    "a woman eats food", "the cat sits on the table", "people walk in the street",
]


@dataclass(kw_only=True)
class SuffixSpec(AugmentationSpec):
    name: ClassVar[str] = "suffix"


class SuffixAugmentation(Augmentation):
    """A deterministic text augmentation: appends a word (so views are recognisable)."""

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        return [f"{s} again" for s in sentences]


@dataclass(kw_only=True)
class ZeroEmbeddingsSpec(AugmentationSpec):
    name: ClassVar[str] = "zero"
    rewrites_text: ClassVar[bool] = False
    embedding_level: ClassVar[bool] = True


class ZeroEmbeddings(Augmentation):
    """An embedding-level augmentation that zeroes every token embedding."""

    def augment_embeddings(self, embeddings, attention_mask, special_tokens_mask, generator):
        return torch.zeros_like(embeddings)


def make_cert(tiny_bert, augmentation: Augmentation | None = None, tau: float = 0.07, **kwargs) -> CERT:
    torch.manual_seed(0)
    encoder = build_encoder(str(tiny_bert), pooler="cls_before_pooler", max_length=16)
    loss = functools.partial(queue_info_nce, tau=tau)
    context = MethodContext(encoder=encoder, loss=loss, augmentation=augmentation or Dropout(DropoutSpec()),
                            model_name_or_path=str(tiny_bert), max_length=16, seed=1)
    return CERT(context, yaml_spec("method", "cert", **kwargs))


def test_queue_info_nce_is_one_positive_against_the_queue() -> None:
    torch.manual_seed(0)
    queries, keys, queue = torch.randn(3, 8), torch.randn(3, 8), torch.randn(5, 8)
    loss = queue_info_nce(queries, keys, queue, tau=0.1)
    by_hand = 0.0
    for i in range(3):
        pos = F.cosine_similarity(queries[i], keys[i], dim=0) / 0.1
        neg = F.cosine_similarity(queries[i].unsqueeze(0), queue) / 0.1
        by_hand += -(pos - torch.logsumexp(torch.cat([pos.view(1), neg]), 0))
    assert loss.item() == pytest.approx(by_hand.item() / 3, rel=1e-5)
    # The other queries' keys are not negatives: changing key 2 leaves query 0's term unchanged.
    changed = keys.clone()
    changed[2] = torch.randn(8)
    assert queue_info_nce(queries[:1], changed[:1], queue, tau=0.1).item() == pytest.approx(
        queue_info_nce(queries[:1], keys[:1], queue, tau=0.1).item(), rel=1e-6
    )


def test_key_encoder_follows_the_momentum_formula_and_gets_no_gradient(tiny_bert) -> None:
    method = make_cert(tiny_bert, queue_size=8, momentum=0.9, projection_dim=4)
    method.train()
    key_params = [*method.key_encoder.parameters(), *method.key_head.parameters()]
    query_params = [*method.encoder.parameters(), *method.head.parameters()]
    assert all(not p.requires_grad for p in key_params)
    # Starts as an exact copy.
    assert all(torch.equal(k, q) for k, q in zip(key_params, query_params, strict=True))
    key_before = [p.detach().clone() for p in key_params]
    optimizer = torch.optim.SGD([p for p in method.parameters() if p.requires_grad], lr=0.5)
    terms = method.training_step(SENTENCES[:4])
    terms["loss"].backward()
    assert all(p.grad is None for p in key_params), "a gradient reached the key encoder"
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in query_params)
    optimizer.step()
    query_after = [p.detach().clone() for p in query_params]
    assert any(not torch.equal(a, b) for a, b in zip(query_after, key_before, strict=True))
    method.on_after_step()
    for key, before, query in zip(key_params, key_before, query_after, strict=True):
        torch.testing.assert_close(key, 0.9 * before + 0.1 * query)
    # The evaluated encoder is the query encoder, not the (now different) key encoder.
    assert method.eval_encoder() is method.encoder


def test_queue_is_fifo_with_exactly_k_entries(tiny_bert) -> None:
    method = make_cert(tiny_bert, queue_size=5, projection_dim=3)
    batches = [torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3), torch.randn(1, 3)]
    for keys in batches:
        method.enqueue(keys)
        assert method.queue.shape == (5, 3)
    expected = F.normalize(torch.cat(batches)[-5:], dim=1)  # the last 5 keys, oldest first
    torch.testing.assert_close(method.queue_in_order(), expected)
    # A batch larger than the queue keeps only its last K keys.
    big = torch.randn(7, 3)
    method.enqueue(big)
    torch.testing.assert_close(method.queue_in_order(), F.normalize(big[-5:], dim=1))


def test_keys_are_enqueued_after_the_loss(tiny_bert) -> None:
    method = make_cert(tiny_bert, queue_size=6, projection_dim=4)
    method.train()
    queue_before = method.queue.clone()
    terms = method.training_step(SENTENCES[:4])
    assert torch.equal(method.queue, queue_before), "keys must not enter the queue before the loss is used"
    assert math.isfinite(terms["loss"].item()) and 0.0 <= terms["moco_top1"].item() <= 1.0
    pending = method.pending_keys.clone()
    terms["loss"].backward()
    method.on_after_step()
    torch.testing.assert_close(method.queue_in_order()[-4:], F.normalize(pending, dim=1))
    torch.testing.assert_close(method.queue_in_order()[:2], queue_before[4:])


def test_views_key_is_the_augmentation_and_query_optionally(tiny_bert) -> None:
    method = make_cert(tiny_bert, augmentation=SuffixAugmentation(SuffixSpec()), queue_size=4)
    query, key = method.make_views(SENTENCES[:2])
    assert query == SENTENCES[:2] and key == [f"{s} again" for s in SENTENCES[:2]]
    both = make_cert(tiny_bert, augmentation=SuffixAugmentation(SuffixSpec()), queue_size=4, augment_query=True)
    query, key = both.make_views(SENTENCES[:2])
    assert query == key == [f"{s} again" for s in SENTENCES[:2]]


def test_embedding_level_augmentation_changes_only_the_key(tiny_bert) -> None:
    method = make_cert(tiny_bert, augmentation=ZeroEmbeddings(ZeroEmbeddingsSpec()), queue_size=4)
    method.eval()  # no dropout: any difference comes from the augmentation
    with torch.no_grad():
        plain = method.key_encoder(method.tokenize(SENTENCES[:2]))
        augmented = method._embed(method.key_encoder, method.tokenize(SENTENCES[:2]), augment_embeddings=True)
        query = method._embed(method.encoder, method.tokenize(SENTENCES[:2]), augment_embeddings=False)
    assert not torch.allclose(plain, augmented)
    torch.testing.assert_close(query, plain)  # same weights at start, query not augmented


def test_temperature_comes_from_the_loss(tiny_bert) -> None:
    """The queue InfoNCE is the configured loss: its tau is the only temperature."""
    losses = {}
    for tau in (0.07, 0.5):
        method = make_cert(tiny_bert, tau=tau, queue_size=4)
        method.eval()
        with torch.no_grad():
            losses[tau] = method.training_step(SENTENCES[:4])["loss"].item()
    assert losses[0.07] != pytest.approx(losses[0.5], rel=1e-3)
    with pytest.raises(ValueError, match="method.queue_size"):
        yaml_spec("method", "cert", queue_size=0)


@pytest.mark.parametrize("mlp", [True, False])
def test_projection_head_shapes(tiny_bert, mlp: bool) -> None:
    method = make_cert(tiny_bert, queue_size=4, projection_dim=6, mlp=mlp)
    layers = [m for m in method.head.modules() if isinstance(m, torch.nn.Linear)]
    assert len(layers) == (2 if mlp else 1) and layers[-1].out_features == 6
    assert method.queue.shape == (4, 6)


def test_back_translation_paraphrase_file_gives_the_keys(tiny_bert, tmp_path) -> None:
    """CERT's positives through the shared back-translation module (precomputed-file path)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES[:4]) + "\n")
    paraphrases = tmp_path / "paraphrases.txt"
    paraphrases.write_text("\n".join(f"{s} , retold" for s in SENTENCES[:4]) + "\n")
    augmentation = BackTranslation(yaml_spec("augmentation", "back_translation", source="file", limit=None,
                                            paraphrase_file=str(paraphrases), corpus_file=str(corpus)))
    method = make_cert(tiny_bert, augmentation=augmentation, queue_size=8)
    augmentation.setup(method.encoder, str(tiny_bert))
    query, key = method.make_views(SENTENCES[:3])
    assert query == SENTENCES[:3] and key == [f"{s} , retold" for s in SENTENCES[:3]]
    method.train()
    assert math.isfinite(method.training_step(SENTENCES[:4])["loss"].item())
    missing = BackTranslation(yaml_spec("augmentation", "back_translation", source="file", limit=None,
                                         paraphrase_file=str(tmp_path / "absent.txt"), corpus_file=str(corpus)))
    with pytest.raises(DataFileError, match="augmentation.paraphrase_file: file not found"):
        missing.setup(method.encoder, str(tiny_bert))


@pytest.mark.parametrize("augmentation", [TokenCutoff(yaml_spec("augmentation", "token_cutoff", rate=0.3)),
                                          RandomDeletion(yaml_spec("augmentation", "eda_delete", alpha=0.3))])
def test_cutoff_and_eda_keys_train(tiny_bert, augmentation: Augmentation) -> None:
    method = make_cert(tiny_bert, augmentation=augmentation, queue_size=8)
    method.train()
    terms = method.training_step(SENTENCES[:4])
    assert math.isfinite(terms["loss"].item())
    terms["loss"].backward()
    method.on_after_step()
    assert method.queue_ptr.item() == 4


# ----- preset and end-to-end run ----------------------------------------------------------------------
def test_cert_bert_preset_is_the_paper_recipe(tiny_bert, data_dir) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[
            "experiment=cert_bert", f"model.name_or_path={tiny_bert}",
            f"data.train_file={data_dir}/corpus/wiki1m_for_simcse.head.txt",
        ])
    assert cfg.method._target_ == "cl_bench.methods.cert.modeling.CERT" and cfg.pooler.name == "cls_before_pooler"
    assert (cfg.method.queue_size, cfg.method.momentum, cfg.method.projection_dim, cfg.method.mlp) == (6720, 0.999, 128, True)
    assert (cfg.loss.tau, cfg.train.batch_size, cfg.model.max_length, cfg.train.lr) == (0.07, 32, 64, 4e-5)
    assert cfg.augmentation._target_ == "cl_bench.augment.back_translation.BackTranslation"
    validate(cfg)
    # Offline, without a paraphrase file, the back-translation positives fail with a clear message.
    with pytest.raises(BackTranslationUnavailable, match="augmentation.paraphrase_file"):
        build_method(typed_specs(cfg), torch.device("cpu"))


@pytest.mark.slow
def test_real_short_cert_run_from_minilm(data_dir: Path, tmp_path: Path) -> None:
    """`cl-bench method=cert` from all-MiniLM-L6-v2 on real data: finishes, finite STS, MLflow run."""
    results, metrics = run_cl_bench([
        "method=cert", "augmentation=eda_delete", "data=wiki1m_head", "data.limit=2000", "pooler=avg",
        f"model.name_or_path={minilm_path()}", "loss.tau=0.07", "method.queue_size=64",
        "train.batch_size=16", "train.max_steps=6", "train.eval_steps=3", "train.log_steps=1",
    ], data_dir, tmp_path)
    assert all(math.isfinite(m["train_loss"]) and 0 <= m["train_moco_top1"] <= 1 for m in metrics if "train_loss" in m)
