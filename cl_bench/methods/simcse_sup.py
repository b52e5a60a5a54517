"""Supervised SimCSE (Gao, Yao & Chen, EMNLP 2021, §4 and Eq. 5).

Training items are NLI triples (premise, entailment hypothesis, contradiction hypothesis) read
from SimCSE's ``nli_for_simcse.csv`` format. The entailment hypothesis is the premise's
positive; the candidates for premise i are all N entailment hypotheses of the batch plus all N
contradiction hypotheses (the "hard negatives"). The loss is the configured one — InfoNCE
(:func:`cl_bench.losses.infonce.info_nce`) called as ``loss(z_premise, z_entail, z_contra)`` —
so ``loss.tau`` (0.05) and ``loss.hard_negative_alpha`` (Table 7's weight α on the anchor's own
hard negative) apply. All sentences of a batch go through the encoder in one forward pass, as in
SimCSE's ``cl_forward``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from cl_bench.data.nli import read_nli_triples
from cl_bench.methods.base import (
    Method,
    MethodContext,
    RunSetting,
    TextViews,
    check_mlm_config,
    mlm_inert_keys,
    tokenize_groups,
)
from cl_bench.models.mlm import mlm_head, with_mlm_term


class SupervisedSimCSE(Method):
    """Supervised SimCSE on (premise, entailment[, contradiction]) items.

    Args:
        context: shared build context (its ``loss`` is InfoNCE with ``hard_negative_alpha``).
        use_hard_negatives: use the contradiction column as hard negatives (Eq. 5). False trains
            on (premise, entailment) pairs only — Table 7's "w/o hard negative" row — and also
            accepts 2-column files.
        mlm_weight: λ of the auxiliary MLM loss on all sentences of the batch (0 = off).
        mlm_probability: fraction of tokens masked for the MLM loss.
        mlm_mode: ``clean``, ``untied`` (SimCSE's latest code: clean inputs, LM head untied) or
            ``masked`` (SimCSE's official code before PR #121: all three sentences' contrastive inputs
            are the MLM-masked ones, LM head untied); see :mod:`cl_bench.models.mlm`.
    """

    name = "simcse_sup"
    uses = frozenset({"loss", "pooler"})
    loss_kinds = ("pair",)
    supplies = frozenset({"hard_negatives"})
    summary = "supervised SimCSE: NLI (premise, entailment, contradiction); the contradiction is a hard negative"
    encodes_views = True  # its views/columns go through tokenize_groups: model.view_prompts acts

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        check_mlm_config(values)

    @classmethod
    def supplied_inputs(cls, values: dict[str, Any]) -> frozenset[str]:
        return cls.supplies if values.get("use_hard_negatives", True) else frozenset()

    @classmethod
    def inert_keys(cls, values: dict[str, Any], setting: RunSetting) -> dict[str, str]:
        return mlm_inert_keys(values)

    def __init__(
        self,
        context: MethodContext,
        use_hard_negatives: bool = True,
        mlm_weight: float = 0.0,
        mlm_probability: float = 0.15,
        mlm_mode: str = "clean",
    ) -> None:
        super().__init__(context)
        self.use_hard_negatives = use_hard_negatives
        self.mlm_weight = float(mlm_weight)
        self.mlm = mlm_head(self.encoder, context.model_name_or_path, mlm_weight, mlm_probability, mlm_mode)

    def read_corpus(self, path: str) -> Sequence[tuple[str, ...]]:
        """Read the NLI CSV; with hard negatives every row must have the ``hard_neg`` column."""
        rows = read_nli_triples(path, limit=self.context.data.get("limit"))
        if self.use_hard_negatives and len(rows[0]) != 3:
            raise ValueError(
                f"data.train_file: {path} has only sent0,sent1 columns but method.use_hard_negatives=true; "
                "use a sent0,sent1,hard_neg file or set method.use_hard_negatives=false"
            )
        return rows

    def prepare(self, items: list[tuple[str, ...]], rng: random.Random) -> TextViews:
        """Premises, entailments (and contradictions) tokenized together, column after column (in a worker)."""
        columns = 3 if self.use_hard_negatives else 2
        return tokenize_groups(self.encoder, [[row[c] for row in items] for c in range(columns)])

    def training_step(self, batch: list[tuple[str, ...]] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features = self.to_device(views.features)
        if self.mlm is not None:  # MLM masking draws from torch's RNG in the step, as dropout does
            features = self.mlm.contrastive_inputs(features)  # masked in mlm_mode=masked
        embeddings = self.encoder(features).split(views.size)
        return with_mlm_term(self.loss_fn(*embeddings), self.mlm, self.mlm_weight, features)
