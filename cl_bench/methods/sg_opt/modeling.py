"""SG-BERT / SG-OPT: self-guided contrastive learning (Kim, Yoo & Lee, ACL 2021).

BERT is cloned into BERT_F, a frozen copy (eval mode, no gradients, never updated) that supplies
per-layer views h_{i,k} (each layer's token states pooled over real tokens), and BERT_T, the
trained encoder whose [CLS] vector c_i is the sentence embedding. BERT_T's embedding layer is
frozen. A shared projection head f — Linear(H, P) → GELU → Linear(P, P) → GELU, discarded after
training — maps both sides before the objective of :mod:`cl_bench.losses.sg_opt`, and the
regularizer λ·Σ‖θ_T − θ_F‖² keeps BERT_T close to BERT_F.

One class serves SG-BERT (``loss=sg``: the ``base`` NT-Xent with one uniformly sampled layer view per
sentence) and ``method=sg_opt`` (``opt3``: all layer views are positives); ``opt1``/``opt2`` are the
intermediate objectives of the paper's loss ablation.

Paper vs official code (galsang/SG-BERT): the per-layer pooling is max in the paper (the authors'
summary) but ``--pooling2 mean`` in ``training.py``; ``layer_pooling`` exposes both, max by default.
The objectives follow the paper's equations, not the code's indexing (see
:mod:`cl_bench.losses.sg_opt`).

Training data (SG-BERT and BERT-flow): every sentence1 and sentence2 of all STS-B splits, labels
unused; :meth:`SelfGuided.read_corpus` reads them when ``data.train_file`` is an STS-B split file.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_bench.data.senteval import read_stsb_split
from cl_bench.data.text import read_sentences
from cl_bench.losses.sg_opt import parameter_drift
from cl_bench.methods.base import Method, MethodContext, Prepared
from cl_bench.methods.sg_opt.configuration import STSB_FILE, LayerPooling, SelfGuidedSpec
from cl_bench.models.poolers import masked_mean


@dataclass
class SampledLayers(Prepared):
    """A prepared SG batch: the sentences as token ids and each one's sampled layer (σ), an index into ``layers``."""

    features: dict[str, torch.Tensor]
    sampled: torch.Tensor


def pool_layers(
    hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor, layers: Sequence[int], pooling: str
) -> torch.Tensor:
    """Pool each chosen layer's token states over the real tokens.

    Args:
        hidden_states: all layers' (B, T, H) states, embedding output first (``output_hidden_states``).
        attention_mask: (B, T), 1 for real tokens.
        layers: indices into ``hidden_states``.
        pooling: ``max`` (padding can never win) or ``mean``.

    Returns:
        (B, len(layers), H) views.
    """
    if pooling == "mean":
        return torch.stack([masked_mean(hidden_states[k], attention_mask) for k in layers], dim=1)
    if pooling == "max":
        stacked = torch.stack([hidden_states[k] for k in layers], dim=1)  # (B, K, T, H)
        padding = ~attention_mask.bool()[:, None, :, None]
        return stacked.masked_fill(padding, torch.finfo(stacked.dtype).min).amax(dim=2)
    raise ValueError(f"method.layer_pooling: unknown pooling '{pooling}'; valid: {', '.join(LayerPooling)}")


def projection_head(hidden_size: int, size: int, init_std: float) -> nn.Module:
    """SG-BERT's head f: Linear(H, P) → GELU → Linear(P, P) → GELU, N(0, init_std) weights, zero bias."""
    head = nn.Sequential(nn.Linear(hidden_size, size), nn.GELU(), nn.Linear(size, size), nn.GELU())
    for layer in (head[0], head[2]):
        nn.init.normal_(layer.weight, std=init_std)
        nn.init.zeros_(layer.bias)
    return head


class SelfGuided(Method):
    """SG-BERT (``loss=sg``) and SG-OPT (``loss=sg_opt``).

    Keys: declared on its spec (:class:`cl_bench.methods.sg_opt.configuration.SelfGuidedSpec`). The context's encoder
    is BERT_T (use ``pooler=cls_before_pooler`` for the paper's last-layer [CLS]); its loss is the SG objective:
    ``loss=sg_opt`` (``opt3``, SG-OPT) or ``loss=sg`` (SG-BERT's base), with ``loss.objective`` and ``loss.tau``
    (:mod:`cl_bench.losses.sg_opt`). ``base``/``opt1``/``opt2`` sample one of ``method.layers`` uniformly per
    sentence; ``opt3`` uses all. ``frozen_dropout``: the official code's ``Loss`` module holds BERT_F, and ``fit``
    puts the loss model in train mode every epoch and after every evaluation (modules.py lines 250 and 300).
    """

    def __init__(self, context: MethodContext, spec: SelfGuidedSpec) -> None:
        super().__init__(context, spec)
        backbone = self.encoder.backbone
        num_states = int(backbone.config.num_hidden_layers) + 1
        #: the hidden-state indices that give views (``method.layers``, null resolved to all of them)
        self.layers = list(range(num_states)) if spec.layers is None else [int(k) for k in spec.layers]
        if not self.layers or any(not 0 <= k < num_states for k in self.layers):
            raise ValueError(f"method.layers: indices must lie in 0..{num_states - 1} (0 = embeddings), got {spec.layers}")
        # BERT_F: copied before any training. It is kept out of the module tree (a list, like
        # MLMHead's model) so that train() cannot switch on its dropout, the optimizer never sees
        # it and checkpoints do not store a second copy of BERT (a resume rebuilds it from the
        # same pretrained weights); _apply below still moves it with the method.
        frozen = copy.deepcopy(backbone).eval()
        frozen.requires_grad_(False)
        self._frozen = [frozen]
        if spec.freeze_embeddings:
            embeddings = getattr(backbone, "embeddings", None)
            (embeddings if embeddings is not None else backbone.get_input_embeddings()).requires_grad_(False)
        init_std = float(getattr(backbone.config, "initializer_range", 0.02))
        hidden = self.encoder.hidden_size
        self.head = projection_head(hidden, spec.projection_size, init_std) if spec.projection_size > 0 else nn.Identity()

    @property
    def frozen(self) -> nn.Module:
        """BERT_F, the frozen copy of the initial encoder backbone."""
        return self._frozen[0]

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> SelfGuided:
        super()._apply(fn, *args, **kwargs)
        self._frozen[0]._apply(fn, *args, **kwargs)
        return self

    # ----- data -------------------------------------------------------------------------------
    def read_corpus(self, path: str) -> Sequence[str]:
        """STS-B sentences of ``stsb_splits`` (sentence1, sentence2 per pair), else one per line."""
        limit = self.context.data.get("limit")
        match = STSB_FILE.match(Path(path).name)
        if match is None:
            return read_sentences(path, limit=limit)
        sentences: list[str] = []
        for split in self.spec.stsb_splits or [match.group("split")]:
            pairs = read_stsb_split(Path(path).parent / f"sts-{split}.csv")
            for first, second in zip(pairs.sent1, pairs.sent2, strict=True):
                sentences += [first, second]
        return sentences[:limit] if limit is not None else sentences

    # ----- training ---------------------------------------------------------------------------
    @torch.no_grad()
    def layer_views(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """BERT_F's pooled views of ``layers``: (B, len(layers), H), no gradient (dropout with ``frozen_dropout``)."""
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        self.frozen.train(bool(self.spec.frozen_dropout) and self.training)  # frozen_dropout: the official train mode
        outputs = self.frozen(**inputs, output_hidden_states=True, return_dict=True)
        return pool_layers(outputs.hidden_states, features["attention_mask"], self.layers, self.spec.layer_pooling)

    def tuned_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """BERT_T's trainable backbone parameters (the regularizer's θ_T)."""
        return [(n, p) for n, p in self.encoder.backbone.named_parameters() if p.requires_grad]

    def prepare(self, items: list[str], rng: random.Random) -> SampledLayers:
        """Token ids and the paper's layer sampler σ: one uniformly drawn layer per sentence (opt3 uses all
        of them), in a DataLoader worker. BERT_F's views need the model: they stay in the step."""
        return SampledLayers(self.encoder.tokenize(items), torch.tensor([rng.randrange(len(self.layers)) for _ in items]))

    def training_step(self, batch: list[str] | SampledLayers) -> dict[str, torch.Tensor]:
        prepared = self.prepared(batch)
        features = self.to_device(prepared.features)
        cls = self.encoder(features)
        views = self.layer_views(features)
        sampled = prepared.sampled.to(views.device, non_blocking=True)
        contrastive = self.loss_fn(self.head(cls), self.head(views), sampled)
        terms = {"loss_contrastive": contrastive}
        loss = contrastive
        if self.spec.reg_weight > 0:
            drift = parameter_drift(self.tuned_parameters(), dict(self.frozen.named_parameters()))
            terms["loss_reg"] = drift
            loss = loss + self.spec.reg_weight * drift
        return {"loss": loss, **terms}
