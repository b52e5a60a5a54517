"""DeCLUTR mechanics: document readers, span sampling bounds and relations, hard negatives, skipping."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import math
import os
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import minilm_path, run_cl_bench
from hydra import compose, initialize_config_dir

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate, yaml_spec
from cl_bench.data.documents import Document, read_documents
from cl_bench.data.text import DataFileError
from cl_bench.losses.infonce import info_nce
from cl_bench.losses.ntxent import ntxent
from cl_bench.methods.base import MethodContext
from cl_bench.methods.declutr.modeling import (
    DeCLUTR,
    Span,
    min_document_tokens,
    same_document_mask,
    sample_spans,
)
from cl_bench.models.encoder import build_encoder

WIKI = """<doc id="1" url="?curid=1" title="Red Page">
Red Page

the red dog runs in the park .
the red cat sits on the table .
</doc>
<doc id="2" url="?curid=2" title="Empty">
Empty

</doc>
<doc id="3" url="?curid=3" title="Blue &amp; Green">
Blue &amp; Green

the blue car rides in the &quot;street&quot; .
</doc>
"""


def words_doc(word: str, n: int, doc_id: str) -> Document:
    """A document of ``n`` whitespace tokens, all starting with ``word`` (so its spans are recognisable)."""
    return Document(doc_id, "", " ".join(f"{word}{i % 7}" for i in range(n)), 1)


def sentence_doc(sentence: str, n: int, doc_id: str) -> Document:
    """A document of ``n`` in-vocabulary whitespace tokens (repeating ``sentence``)."""
    words = sentence.split()
    return Document(doc_id, "", " ".join(words[i % len(words)] for i in range(n)), 1)


def make_declutr(tiny_bert, unchecked: dict | None = None, **kwargs) -> DeCLUTR:
    """DeCLUTR on ``tiny_bert`` with ``conf/method/declutr.yaml`` changed by ``kwargs`` (checked) and ``unchecked``
    (values the checks reject, to test the code's edge cases)."""
    torch.manual_seed(0)
    encoder = build_encoder(str(tiny_bert), pooler="avg", max_length=64)
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec()),
                            model_name_or_path=str(tiny_bert), max_length=64, seed=3)
    return DeCLUTR(context, dataclasses.replace(yaml_spec("method", "declutr", **kwargs), **(unchecked or {})))


# ----- readers ------------------------------------------------------------------------------------
def test_wikiextractor_reader_drops_titles_and_empty_documents(tmp_path: Path) -> None:
    path = tmp_path / "wiki.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write(WIKI)
    docs = read_documents(path)
    assert [d.doc_id for d in docs] == ["1", "3"]
    assert docs[0].text == "the red dog runs in the park . the red cat sits on the table ."
    # WikiExtractor leaves entities in titles and text: unescaped, so the title line is recognised.
    assert docs[1].title == "Blue & Green" and docs[1].text == 'the blue car rides in the "street" .'
    assert read_documents(path, limit=1) == docs[:1]


def test_plain_reader_splits_at_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "docs.txt"
    path.write_text("first line of a\nsecond line of a\n\n\nonly line of b\n\nc\n")
    docs = read_documents(path)
    assert [d.text for d in docs] == ["first line of a second line of a", "only line of b", "c"]
    assert [d.line for d in docs] == [1, 5, 7]
    assert read_documents(path, doc_format="plain") == docs
    with pytest.raises(DataFileError, match="text outside <doc>"):
        read_documents(path, doc_format="wikiextractor")


def test_malformed_wikiextractor_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text('<doc id="1" title="x">\nx\n\nsome text\n<doc id="2" title="y">\n')
    with pytest.raises(DataFileError, match=r"bad.txt:5: <doc> opened before"):
        read_documents(path)
    path.write_text('<doc id="1" title="x">\nx\n\nsome text\n')
    with pytest.raises(DataFileError, match=r"bad.txt:1: <doc> is never closed"):
        read_documents(path)


def test_real_wikiextractor_corpus_reads(data_dir: Path) -> None:
    docs = read_documents(data_dir / "corpus" / "enwiki_wikiextractor_AA.txt.gz", limit=50)
    assert len(docs) == 50 and all(d.text and "<doc" not in d.text for d in docs)
    assert docs[0].title == "Jarred Shaw" and not docs[0].text.startswith("Jarred Shaw\n")


@pytest.mark.slow
def test_real_wikiextractor_corpus_has_the_documented_count(data_dir: Path) -> None:
    """SOURCES.md: 36,183 of the 96,339 documents have body text."""
    assert len(read_documents(data_dir / "corpus" / "enwiki_wikiextractor_AA.txt.gz")) == 36183


# ----- span sampling --------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy,allowed", [
    ("any", {"subsumed", "adjacent", "overlapping"}),
    ("adjacent", {"adjacent"}),
    ("subsuming", {"subsumed"}),
])
def test_spans_respect_bounds_and_relations(strategy: str, allowed: set[str]) -> None:
    rng = random.Random(0)
    seen: set[str] = set()
    anchor_lengths, positive_lengths = [], []
    for trial in range(400):
        n = 4 * 20 + trial % 50  # always >= num_anchors × max_span_len × 2
        sample = sample_spans(n, rng, num_anchors=2, num_positives=3, min_span_len=5, max_span_len=20,
                              sampling_strategy=strategy)
        assert len(sample.anchors) == 2 and all(len(p) == 3 for p in sample.positives)
        a, b = sample.anchors
        assert a.end <= b.start or b.end <= a.start, "anchors overlap"
        for anchor, positives in zip(sample.anchors, sample.positives, strict=True):
            assert 0 <= anchor.start and anchor.end <= n and 5 <= len(anchor) <= 20
            anchor_lengths.append(len(anchor))
            for positive in positives:
                assert 0 <= positive.start and positive.end <= n and 5 <= len(positive) <= 20
                if strategy == "subsuming":
                    assert len(positive) <= len(anchor)
                relation = positive.relation_to(anchor)
                assert relation in allowed
                seen.add(relation)
                positive_lengths.append(len(positive))
    assert seen == allowed  # every allowed relation actually occurs
    if strategy == "any":  # Beta(4,2) anchors are longer on average than Beta(2,4) positives
        assert sum(anchor_lengths) / len(anchor_lengths) > sum(positive_lengths) / len(positive_lengths) + 3


def test_span_relations() -> None:
    anchor = Span(10, 20)
    assert Span(12, 15).relation_to(anchor) == "subsumed"
    assert Span(5, 10).relation_to(anchor) == "adjacent" and Span(20, 25).relation_to(anchor) == "adjacent"
    assert Span(15, 25).relation_to(anchor) == "overlapping" and Span(5, 25).relation_to(anchor) == "overlapping"
    assert Span(21, 25).relation_to(anchor) == "disjoint"


def test_short_document_is_rejected_by_the_sampler() -> None:
    assert min_document_tokens(2, 20) == 80
    with pytest.raises(ValueError, match="needs at least 80"):
        sample_spans(79, random.Random(0), num_anchors=2, num_positives=2, min_span_len=5, max_span_len=20,
                     sampling_strategy="any")


# ----- method ----------------------------------------------------------------------------------------
def test_short_documents_are_skipped_and_counted(tiny_bert, tmp_path: Path) -> None:
    method = make_declutr(tiny_bert, num_anchors=2, num_positives=2, min_span_len=3, max_span_len=10, mlm_weight=0.0)
    lengths = [40, 39, 100, 5, 40]  # 40 = 2 × 10 × 2 is just long enough
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join(" ".join(["dog"] * n) for n in lengths))
    docs = method.read_corpus(str(path))
    assert [d.num_words for d in docs] == [40, 100, 40]
    assert method.docs_skipped == 2 and method.docs_read == 5
    terms = method.training_step(docs[:2])
    assert terms["docs_skipped"].item() == 2.0
    # Fewer than two usable documents: a clear error, not a crash later.
    path.write_text("dog " * 40 + "\n\n" + "dog " * 10)
    with pytest.raises(DataFileError, match="1 of 2 documents have >= 40 whitespace tokens"):
        method.read_corpus(str(path))


def test_hard_negatives_come_from_the_same_document(tiny_bert) -> None:
    method = make_declutr(tiny_bert, num_anchors=2, num_positives=2, min_span_len=3, max_span_len=8, mlm_weight=0.0)
    docs = [words_doc("red", 40, "a"), words_doc("blue", 50, "b"), words_doc("green", 32, "c")]
    anchors, positives, doc_index = method.sample_batch(docs)
    assert doc_index.tolist() == [0, 0, 1, 1, 2, 2]
    words = ["red", "blue", "green"]
    for i, text in enumerate(anchors):
        assert all(w.startswith(words[doc_index[i]]) for w in text.split())
        for positive in positives[2 * i : 2 * i + 2]:  # positives grouped by anchor
            assert all(w.startswith(words[doc_index[i]]) for w in positive.split())
    hard = same_document_mask(doc_index)
    expected = torch.zeros(6, 6, dtype=torch.bool)
    for i, j in [(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4)]:
        expected[i, j] = True
    assert torch.equal(hard, expected)


def nt_xent_by_hand(anchors: torch.Tensor, positives: torch.Tensor, tau: float) -> torch.Tensor:
    """pytorch-metric-learning's NT-Xent on [anchors; positives] with pair labels, written out."""
    z = F.normalize(torch.cat([anchors, positives]), dim=1)
    n = anchors.shape[0]
    labels = list(range(n)) * 2
    total, count = 0.0, 0
    for i in range(2 * n):
        for j in range(2 * n):
            if i == j or labels[i] != labels[j]:
                continue
            pos = z[i] @ z[j] / tau
            negs = torch.stack([z[i] @ z[k] / tau for k in range(2 * n) if labels[k] != labels[i]])
            total += -(pos - torch.logsumexp(torch.cat([pos.view(1), negs]), 0))
            count += 1
    return total / count


def test_configured_loss_ntxent_is_the_official_nt_xent(tiny_bert) -> None:
    """loss=ntxent reproduces DeCLUTR's objective; loss=infonce is the one-sided form."""
    torch.manual_seed(0)
    anchors, positives = torch.randn(4, 8), torch.randn(4, 8)
    method = make_declutr(tiny_bert, mlm_weight=0.0, max_span_len=8, min_span_len=2)
    method.loss_fn = functools.partial(ntxent, tau=0.05)
    assert method.loss_fn(anchors, positives).item() == pytest.approx(
        nt_xent_by_hand(anchors, positives, 0.05).item(), rel=1e-4
    )
    method.train()
    docs = [sentence_doc("the dog runs in the park", 40, "a"), sentence_doc("a cat sits on the table", 40, "b")]
    assert math.isfinite(method.training_step(docs)["loss_contrastive"].item())


def test_training_step_with_mlm_on_the_anchors(tiny_bert) -> None:
    method = make_declutr(tiny_bert, num_anchors=2, num_positives=2, min_span_len=4, max_span_len=12, mlm_weight=1.0)
    assert method.mlm is not None  # the tiny BertModel has no MLM head: one is initialised
    method.train()
    docs = [sentence_doc("the dog runs in the park", 60, "a"), sentence_doc("a cat sits on the table", 60, "b")]
    terms = method.training_step(docs)
    for key in ("loss", "loss_contrastive", "loss_mlm", "sim_positive", "sim_hard_negative", "sim_easy_negative"):
        assert math.isfinite(terms[key].item()), key
    assert terms["loss"].item() == pytest.approx(terms["loss_contrastive"].item() + terms["loss_mlm"].item(), rel=1e-5)
    terms["loss"].backward()
    assert method.mlm.lm_head.predictions.transform.dense.weight.grad is not None
    assert method.encoder.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_bad_options_fail_with_the_key() -> None:
    """Checked before any model loads (DeCLUTRSpec.check, called by cl_bench.config.validate)."""
    with pytest.raises(ValueError, match="method.sampling_strategy"):
        yaml_spec("method", "declutr", sampling_strategy="nearby")
    with pytest.raises(ValueError, match="method.min_span_len"):
        yaml_spec("method", "declutr", min_span_len=30, max_span_len=20)
    with pytest.raises(ValueError, match="method.num_anchors"):
        yaml_spec("method", "declutr", num_anchors=0)
    with pytest.raises(ValueError, match="method.doc_format"):
        yaml_spec("method", "declutr", doc_format="jsonl")
    yaml_spec("method", "declutr", min_span_len=8, max_span_len=64, sampling_strategy="adjacent")


def test_mlm_loss_is_zero_not_nan_when_nothing_is_masked(tiny_bert) -> None:
    method = make_declutr(tiny_bert, min_span_len=2, max_span_len=4, mlm_weight=1.0, unchecked={"mlm_probability": 0.0})
    method.train()
    _, mlm_loss = method.embed_anchors(method.tokenize(["the dog runs", "a cat sits"]))
    assert mlm_loss.item() == 0.0 and mlm_loss.requires_grad


# ----- preset and end-to-end run ----------------------------------------------------------------------
def test_declutr_small_preset_is_the_paper_recipe(tiny_bert, data_dir) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=declutr_small", f"model.name_or_path={tiny_bert}"])
    assert cfg.method._target_ == "cl_bench.methods.declutr.modeling.DeCLUTR" and cfg.pooler.name == "avg"
    assert cfg.loss._target_ == "cl_bench.losses.ntxent.ntxent" and cfg.loss.tau == 0.05
    assert (cfg.method.num_anchors, cfg.method.num_positives, cfg.method.min_span_len, cfg.method.max_span_len) == (2, 2, 32, 512)
    assert (cfg.train.batch_size, cfg.train.lr, cfg.train.weight_decay, cfg.method.mlm_weight) == (4, 5e-5, 0.1, 1.0)
    assert cfg.data.name == "enwiki_documents" and cfg.train.eval_steps == 0
    assert cfg.train.adam_bias_correction is False and cfg.train.adam_eps == 1e-6
    validate(cfg)


@pytest.mark.slow
def test_real_short_declutr_run_from_minilm(data_dir: Path, tmp_path: Path) -> None:
    """`cl-bench method=declutr` from all-MiniLM-L6-v2 on the real WikiExtractor documents."""
    _, metrics = run_cl_bench([
        "method=declutr", "data=enwiki_documents", "data.limit=400", "pooler=avg", f"model.name_or_path={minilm_path()}",
        "model.max_length=128", "method.min_span_len=8", "method.max_span_len=64",
        "train.batch_size=4", "train.max_steps=6", "train.eval_steps=3", "train.log_steps=1",
    ], data_dir, tmp_path)
    rows = [m for m in metrics if "train/loss" in m]
    assert all(math.isfinite(m["train/loss"]) and math.isfinite(m["train/loss_mlm"]) for m in rows)
    assert rows[0]["train/docs_skipped"] > 0  # most of the first 400 articles are shorter than 256 words
