"""DeCLUTR (Giorgi et al., ACL 2021): contrastive learning of spans sampled from documents.

Per document, ``num_anchors`` anchor spans are drawn from non-overlapping, non-adjacent slots
(lengths ~ Beta(4, 2) scaled to [min_span_len, max_span_len] whitespace tokens: skewed long), and
for each anchor ``num_positives`` positive spans nearby (lengths ~ Beta(2, 4): skewed short) that
overlap it, are adjacent to it, or are subsumed by it; ``sampling_strategy`` forces ``adjacent``
or ``subsuming`` positives. An anchor's positives are averaged into one embedding. In the batch,
the other anchors' spans are negatives: *hard* when they come from the same document, *easy* when
from another one. The contrastive term is the configured loss over anchors and averaged
positives: ``loss=ntxent`` is the official objective (pytorch-metric-learning's NT-Xent, τ 0.05:
every anchor and every averaged positive is a query, the other pairs' anchors *and* positives are
its negatives; ``experiment=declutr_small`` sets it), ``loss=infonce`` the one-sided form (anchors
against the other anchors' positives). The MLM loss (weight 1) is computed on the masked anchors,
in the same forward pass as the anchor embeddings, as the official model does.

Documents shorter than ``num_anchors × max_span_len × 2`` whitespace tokens (the official
minimum) are skipped and counted; the count is logged and reported as the ``docs_skipped`` term.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cl_bench.data.documents import Document, read_documents
from cl_bench.data.text import DataFileError
from cl_bench.losses.similarity import cosine_logits
from cl_bench.methods.base import Method, MethodContext, Prepared
from cl_bench.methods.declutr.configuration import DeCLUTRSpec
from cl_bench.models.mlm import MLMHead

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Span:
    """A half-open token interval ``[start, end)`` of a document's whitespace tokens."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def relation_to(self, anchor: Span) -> str:
        """``subsumed`` (inside the anchor), ``adjacent`` (touching it), ``overlapping`` or ``disjoint``."""
        if anchor.start <= self.start and self.end <= anchor.end:
            return "subsumed"
        if self.end == anchor.start or self.start == anchor.end:
            return "adjacent"
        if self.start < anchor.end and anchor.start < self.end:
            return "overlapping"
        return "disjoint"


@dataclass(frozen=True)
class SpanSample:
    """The spans sampled from one document: anchors, and ``num_positives`` positives per anchor."""

    anchors: list[Span]
    positives: list[list[Span]]


@dataclass
class SpanBatch(Prepared):
    """A prepared DeCLUTR batch: anchor and positive spans as token ids (positives grouped by anchor) and
    the batch position of each anchor's document."""

    anchors: dict[str, torch.Tensor]
    positives: dict[str, torch.Tensor]
    doc_index: torch.Tensor


def min_document_tokens(num_anchors: int, max_span_len: int) -> int:
    """The official lower bound on a document's length: ``num_anchors × max_span_len × 2`` tokens."""
    return num_anchors * max_span_len * 2


def _beta_length(rng: random.Random, alpha: float, beta: float, low: int, high: int) -> int:
    """``int(Beta(alpha, beta) × (high − low) + low)``: a length in [low, high], as DeCLUTR draws it."""
    return int(rng.betavariate(alpha, beta) * (high - low) + low)


def _anchor_slots(rng: random.Random, num_slots: int, num_anchors: int) -> list[int]:
    """``num_anchors`` distinct, pairwise non-adjacent slot indices in ``range(num_slots)``, uniformly.

    DeCLUTR removes a chosen slot and its two neighbours; choosing k gaps-respecting slots uniformly
    is the same as choosing k of ``num_slots − k + 1`` positions and spreading them by their rank.
    """
    chosen = sorted(rng.sample(range(num_slots - num_anchors + 1), num_anchors))
    slots = [position + rank for rank, position in enumerate(chosen)]
    rng.shuffle(slots)  # anchor order within the document carries no position information
    return slots


def sample_spans(
    num_tokens: int,
    rng: random.Random,
    *,
    num_anchors: int,
    num_positives: int,
    min_span_len: int,
    max_span_len: int,
    sampling_strategy: str,
) -> SpanSample:
    """Sample anchor and positive spans of a document of ``num_tokens`` whitespace tokens.

    The keys are :class:`~cl_bench.methods.declutr.configuration.DeCLUTRSpec`'s (their defaults and rules are
    declared there; :meth:`~cl_bench.specs.Spec.check` checks them).

    Args:
        num_tokens: document length; must be >= :func:`min_document_tokens`.
        rng: the random source (the method's seeded ``random.Random``).
        num_anchors: anchors per document.
        num_positives: positives per anchor.
        min_span_len: shortest span in tokens.
        max_span_len: longest span in tokens.
        sampling_strategy: ``any`` (overlapping, adjacent or subsumed), ``adjacent`` or ``subsuming``.

    Returns:
        The sampled spans; anchors lie in non-overlapping ``max_span_len`` slots.

    Raises:
        ValueError: a document shorter than the minimum.
    """
    needed = min_document_tokens(num_anchors, max_span_len)
    if num_tokens < needed:
        raise ValueError(f"document has {num_tokens} tokens, needs at least {needed} (num_anchors × max_span_len × 2)")
    num_slots = (num_tokens - max_span_len) // max_span_len + 1
    anchors: list[Span] = []
    positives: list[list[Span]] = []
    for slot in _anchor_slots(rng, num_slots, num_anchors):
        anchor_len = _beta_length(rng, 4, 2, min_span_len, max_span_len)
        slot_start = slot * max_span_len
        start = rng.randint(slot_start, slot_start + max_span_len - anchor_len)
        anchor = Span(start, start + anchor_len)
        anchors.append(anchor)
        positives.append([_sample_positive(anchor, num_tokens, rng, min_span_len, max_span_len, sampling_strategy)
                          for _ in range(num_positives)])
    return SpanSample(anchors, positives)


def _sample_positive(
    anchor: Span, num_tokens: int, rng: random.Random, min_len: int, max_len: int, strategy: str
) -> Span:
    if strategy == "subsuming":
        # Strictly inside the anchor, so never longer than it.
        length = _beta_length(rng, 2, 4, min_len, len(anchor))
        start = rng.randint(anchor.start, anchor.end - length)
    elif strategy == "adjacent":
        # Shorten the positive (as the official code does) when neither side has max_len tokens left.
        room = max(anchor.start, num_tokens - anchor.end)
        length = _beta_length(rng, 2, 4, min(min_len, room), min(max_len, room))
        starts = [s for s in (anchor.start - length, anchor.end) if 0 <= s and s + length <= num_tokens]
        start = rng.choice(starts)
    else:
        length = _beta_length(rng, 2, 4, min_len, max_len)
        # Any start from "ends where the anchor begins" to "begins where the anchor ends", kept
        # inside the document: the positive overlaps, touches, contains or is inside the anchor.
        start = rng.randint(max(0, anchor.start - length), min(anchor.end, num_tokens - length))
    return Span(start, start + length)


def same_document_mask(doc_index: torch.Tensor) -> torch.Tensor:
    """(A, A) bool: True where two *different* anchors come from the same document (hard negatives)."""
    same = doc_index.unsqueeze(0) == doc_index.unsqueeze(1)
    return same & ~torch.eye(len(doc_index), dtype=torch.bool, device=doc_index.device)


class DeCLUTR(Method):
    """Anchor/positive spans from documents, the configured contrastive loss over them, plus MLM.

    Keys: declared on its spec (:class:`cl_bench.methods.declutr.configuration.DeCLUTRSpec`; ``doc_format``: see
    :mod:`cl_bench.data.documents`).
    """

    def __init__(self, context: MethodContext, spec: DeCLUTRSpec) -> None:
        super().__init__(context, spec)
        self.docs_skipped = 0
        self.docs_read = 0
        mlm = spec.mlm_weight > 0
        self.mlm = MLMHead(self.encoder, context.model_name_or_path, spec.mlm_probability) if mlm else None

    # ----- data -------------------------------------------------------------------------------
    @property
    def min_tokens(self) -> int:
        """Documents with fewer whitespace tokens are skipped."""
        return min_document_tokens(self.spec.num_anchors, self.spec.max_span_len)

    def keep_long_enough(self, documents: Sequence[Document]) -> list[Document]:
        """Drop (and count in ``docs_skipped``) documents too short for the configured spans."""
        kept = [doc for doc in documents if doc.num_words >= self.min_tokens]
        self.docs_read = len(documents)
        self.docs_skipped = len(documents) - len(kept)
        if self.docs_skipped:
            log.info(
                "declutr: skipped %d of %d documents shorter than %d tokens (num_anchors %d × max_span_len %d × 2)",
                self.docs_skipped, len(documents), self.min_tokens, self.spec.num_anchors, self.spec.max_span_len,
            )
        return kept

    def read_corpus(self, path: str) -> list[Document]:
        """Read documents and keep those long enough for ``num_anchors`` anchors of ``max_span_len``.

        Raises:
            DataFileError: when fewer than two documents are long enough (no in-batch negatives).
        """
        kept = self.keep_long_enough(read_documents(path, self.context.data.get("limit"), self.spec.doc_format))
        if len(kept) < 2:
            raise DataFileError(
                f"{path}: {len(kept)} of {self.docs_read} documents have >= {self.min_tokens} whitespace tokens "
                f"(num_anchors × max_span_len × 2); lower method.max_span_len or method.num_anchors, or use a "
                "document corpus (data=enwiki_documents: WikiExtractor <doc> files or blank-line-separated text)"
            )
        return kept

    def sample_batch(
        self, documents: Sequence[Document], rng: random.Random | None = None
    ) -> tuple[list[str], list[str], torch.Tensor]:
        """Sample spans from each document, drawing from ``rng`` (default the method's).

        Returns:
            ``(anchor_texts, positive_texts, doc_index)``: A anchors, A × num_positives positives
            (grouped by anchor), and the batch position of each anchor's document.
        """
        rng = rng or self.rng
        anchor_texts, positive_texts, doc_index = [], [], []
        for position, document in enumerate(documents):
            tokens = document.text.split()
            spec = self.spec
            sample = sample_spans(
                len(tokens), rng, num_anchors=spec.num_anchors, num_positives=spec.num_positives,
                min_span_len=spec.min_span_len, max_span_len=spec.max_span_len, sampling_strategy=spec.sampling_strategy,
            )
            for anchor, positives in zip(sample.anchors, sample.positives, strict=True):
                anchor_texts.append(" ".join(tokens[anchor.start : anchor.end]))
                positive_texts.extend(" ".join(tokens[p.start : p.end]) for p in positives)
                doc_index.append(position)
        return anchor_texts, positive_texts, torch.tensor(doc_index)

    def prepare(self, items: list[Document], rng: random.Random) -> SpanBatch:
        """Span sampling and tokenisation of anchors and positives (in a DataLoader worker). The MLM
        masking of the anchors stays in the step: it draws from torch's RNG there, as dropout does."""
        anchor_texts, positive_texts, doc_index = self.sample_batch(items, rng)
        return SpanBatch(self.encoder.tokenize(anchor_texts), self.encoder.tokenize(positive_texts), doc_index)

    # ----- training ---------------------------------------------------------------------------
    def embed_anchors(self, features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Anchor embeddings of token ids on the encoder's device and, with MLM, the MLM loss of the same
        (masked) forward pass."""
        if self.mlm is None:
            return self.encoder(features), None
        masked_ids, labels = self.mlm.mask(features["input_ids"])
        outputs = self.encoder.token_states(dict(features, input_ids=masked_ids))
        embeddings = self.encoder.pool_outputs(outputs, features["attention_mask"],
                                               prompt_layout=features.get("prompt_layout"))
        logits = self.mlm.lm_head(outputs.last_hidden_state).float()
        if not bool((labels != -100).any()):  # nothing masked (tiny batch): 0, not the NaN of an empty mean
            return embeddings, logits.sum() * 0.0
        mlm_loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return embeddings, mlm_loss

    def training_step(self, batch: list[Document] | SpanBatch) -> dict[str, torch.Tensor]:
        spans = self.prepared(batch)
        anchors, mlm_loss = self.embed_anchors(self.to_device(spans.anchors))
        positives = self.encoder(self.to_device(spans.positives))
        num_anchors = len(anchors)
        # One embedding per anchor: the mean of its positives (official: reshape + mean).
        positives = positives.view(num_anchors, self.spec.num_positives, -1).mean(dim=1)
        contrastive = self.loss_fn(anchors, positives)
        terms: dict[str, torch.Tensor] = {"loss_contrastive": contrastive}
        loss = contrastive
        if mlm_loss is not None:
            terms["loss_mlm"] = mlm_loss
            loss = loss + self.spec.mlm_weight * mlm_loss
        with torch.no_grad():  # diagnostics: cosine to the positive, to hard and to easy negatives
            sims = cosine_logits(anchors, positives, 1.0)
            hard = same_document_mask(spans.doc_index.to(sims.device))
            easy = ~hard & ~torch.eye(num_anchors, dtype=torch.bool, device=sims.device)
            terms["sim_positive"] = sims.diagonal().mean()
            if hard.any():
                terms["sim_hard_negative"] = sims[hard].mean()
            if easy.any():
                terms["sim_easy_negative"] = sims[easy].mean()
        terms["docs_skipped"] = torch.tensor(float(self.docs_skipped))
        return {"loss": loss, **terms}
