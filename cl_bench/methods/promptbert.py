"""PromptBERT (Jiang et al. 2022; kongds/Prompt-BERT): template-wrapped views, the ``[MASK]`` state as
the sentence embedding, and template denoising.

As ``run.sh unsup-bert`` trains it (``train.py``, ``prompt_bert/models.py`` ``cl_forward``): each
sentence is wrapped in two different templates (``--mask_embedding_sentence_template`` and
``--mask_embedding_sentence_different_template``), one per view, in one forward pass with dropout;
each view's ``[MASK]`` state minus its template's own ``[MASK]`` state (``--mask_embedding_sentence_delta``:
the template with no sentence, its suffix positions shifted by the sentence's length, computed in the
same training step with dropout and gradients; :func:`cl_bench.models.prompts.template_mask_states`)
goes through the training-only MLP into InfoNCE. Evaluation (``evaluation.py`` with ``eargs`` of
``unsup-bert``) reads the first template's raw ``[MASK]`` state without denoising, a ``.`` appended to
a sentence that ends in none of . ? " ' (``model.prompt_period=promptbert``).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from cl_bench.methods.base import TextViews, check_choice, tokenize_groups
from cl_bench.methods.prompt_base import PromptTemplateMethod, check_templates
from cl_bench.models.prompts import template_mask_states

#: kongds/Prompt-BERT run.sh, "unsup-bert": TEMPLATE and TEMPLATE2 in its ``*cls*_..._*sent_0*...``
#: notation (``_`` a space, ``*sent_0*`` the sentence, ``*mask*`` [MASK], ``*sep+*`` the [SEP])
OFFICIAL_TEMPLATES = ('*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*',
                      '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*')


class PromptBERT(PromptTemplateMethod):
    """Two templates as the two views, ``[MASK]`` pooling, template denoising, in-batch InfoNCE.

    Args:
        context: shared build context.
        template: the first view's template, also the evaluation prompt.
        second_template: the second view's template.
        denoise: subtract each template's own ``[MASK]`` state in training (the official ``--mask_embedding_sentence_delta``).
        prompt_period: the evaluation's final period (``promptbert``: as the official evaluation.py; ``none``).
    """

    name = "promptbert"
    loss_kinds = ("pair",)
    summary = "PromptBERT: two templates as views, the [MASK] state as the embedding, template denoising, in-batch negatives"

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        check_templates(values, ("template", "second_template"))
        check_choice(values, "prompt_period", ("promptbert", "none"))

    def __init__(
        self,
        context: Any,
        template: str = 'This sentence of "[X]" means [MASK].',
        second_template: str = 'This sentence : "[X]" means [MASK].',
        denoise: bool = True,
        prompt_period: str = "promptbert",
    ) -> None:
        super().__init__(context, [template, second_template], prompt_period)
        self.denoise = denoise

    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """Both views' token ids: the sentences in the first, then in the second template."""
        return tokenize_groups(self.encoder, (items, items))

    def denoised(self, states: torch.Tensor, layout: torch.Tensor, views: int, size: int) -> torch.Tensor:
        """``states`` minus each row's template ``[MASK]`` state at the row's sentence length."""
        rows = []
        for view in range(views):
            block = slice(view * size, (view + 1) * size)
            lengths, inverse = torch.unique(layout[block, 1], return_inverse=True)
            template = self.encoder.prompt_layout(self.encoder.view_prompt(view))
            delta = template_mask_states(self.encoder.backbone, template, lengths)
            rows.append(states[block] - delta[inverse.to(delta.device)].to(states.dtype))
        return torch.cat(rows)

    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features, n = self.to_device(views.features), views.size
        states = self.mask_states(features)
        if self.denoise:
            states = self.denoised(states, features["prompt_layout"], 2, n)
        z = self.head(states)
        loss = self.loss_fn(z[:n], z[n:])
        return {"loss": loss, "loss_contrastive": loss}
