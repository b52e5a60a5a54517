"""SNCSE (Wang et al. 2022; Sense-GVT/SNCSE): PromptBERT's representation, the negated sentence as a
soft negative, and the bidirectional margin loss.

As ``train_SNCSE.py`` (``Different_Prompt_Negation = True``) builds a batch: a sentence that does not
end in a punctuation mark gets `` .``; its negation (missing from the file: ``"Not " + sentence``;
:mod:`cl_bench.augment.negation`) gets `` .`` the same way; view 1 is the sentence in
``This sentence : "[X]" means [MASK].``, view 2 and the negation in ``This sentence of "[X]" means
[MASK].``, each cut so that the whole input is at most ``max_seq_length`` tokens. The three ``[MASK]``
states go through the training-only MLP (``--pooler_type cls --mlp_only_train``, no template
denoising) into the ``soft_negative`` loss (InfoNCE of views 1 and 2 + λ·BML; :mod:`cl_bench.losses.sncse`).
Evaluation (``bert_prediction.py``) reads the raw ``[MASK]`` state in the first template, `` .``
appended the same way (``model.prompt_period=sncse``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from cl_bench.methods.base import MethodContext, Prepared
from cl_bench.methods.prompt_base import PromptTemplateMethod
from cl_bench.methods.sncse.configuration import SNCSESpec
from cl_bench.models.prompts import tokenize_with_prompts, with_period
from cl_bench.specs import RunSetting


@dataclass
class SoftNegativeViews(Prepared):
    """Three groups of ``size`` rows: view 1, view 2, the soft negatives (token ids on the CPU)."""

    size: int
    features: dict[str, torch.Tensor]


class SNCSE(PromptTemplateMethod):
    """Two template views + the negation as a soft negative under the bidirectional margin loss.

    Keys: declared on its spec (:class:`cl_bench.methods.sncse.configuration.SNCSESpec`); the context's augmentation
    makes the soft negatives (``augmentation=negation``).
    """

    def __init__(self, context: MethodContext, spec: SNCSESpec) -> None:
        super().__init__(context, spec, [spec.template, spec.second_template], "sncse")
        # the spec's rule (the preflight ran it already; a method built from Python runs it here)
        spec.check_setting(RunSetting(augmentation=None if self.augmentation is None else self.augmentation.spec))

    def prepare(self, items: list[str], rng: random.Random) -> SoftNegativeViews:
        """Views 1, 2 and the soft negatives, each cut so the whole input fits ``model.max_length``."""
        texts = [with_period(s, "sncse", training=True) for s in items]
        # the augmentation sees the corpus sentence (a file source is keyed by it); the official code looked
        # its negation up by the period-appended text (docs/methods/recipes.md: what differs)
        negations = [with_period(s, "sncse", training=True) for s in self.augmentation.augment_text(items, rng)]
        first, second = (self.encoder.prompt_layout(self.encoder.view_prompt(g)) for g in (0, 1))
        layouts = [first] * len(texts) + [second] * (2 * len(texts))
        budgets = [self.encoder.max_length - layout.length for layout in layouts]
        features = tokenize_with_prompts(self.encoder.tokenizer, texts + texts + negations, layouts, budgets)
        return SoftNegativeViews(len(items), features)

    def training_step(self, batch: list[str] | SoftNegativeViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features, n = self.to_device(views.features), views.size
        z = self.head(self.mask_states(features))
        loss = self.loss_fn(z[:n], z[n : 2 * n], z[2 * n :])
        return {"loss": loss}
