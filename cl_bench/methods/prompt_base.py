"""The base of methods whose sentence embedding is the ``[MASK]`` state of a template (PromptBERT, SNCSE).

Both official codes wrap each view in its own template, read the last-layer state at ``[MASK]``, put
it through a freshly initialised MLP (Linear + tanh, SimCSE's ``MLPLayer``) in training only
(``--mlp_only_train``) and score the raw ``[MASK]`` state of the first template at evaluation. The
base sets the encoder that way (``pooler=mask``, ``model.prompt`` = the first template, one view prompt
per template), so such a method picks its own pooler and prompts; :mod:`cl_bench.models.prompts` does
the token work.
"""

from __future__ import annotations

import torch

from cl_bench.methods.base import Method, MethodContext
from cl_bench.models.poolers import MLPHead
from cl_bench.specs import MethodSpec


class PromptTemplateMethod(Method):
    """A method whose views are template-wrapped sentences pooled at ``[MASK]`` (see the module docstring).

    Args:
        context: shared build context.
        spec: the method's settings.
        templates: the template of each view/column (the first one is also the evaluation prompt).
        prompt_period: the final-period rule of the official code (:data:`cl_bench.models.prompts.PeriodRule`).
    """

    def __init__(self, context: MethodContext, spec: MethodSpec, templates: list[str], prompt_period: str) -> None:
        super().__init__(context, spec)
        encoder = self.encoder
        encoder.pooler = "mask"
        encoder.mlp = None  # the [MASK] pooler has no MLP at evaluation; the training MLP is self.head
        encoder.prompt = templates[0]
        encoder.view_prompts = list(templates)
        encoder.prompt_period = prompt_period
        encoder.include_prompt = True
        config = encoder.backbone.config
        self.head = MLPHead(encoder.hidden_size, float(getattr(config, "initializer_range", 0.02)))
        for template in templates:  # fail at build on a tokenizer without a mask token
            encoder.prompt_layout(template)

    def mask_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, H) last-layer ``[MASK]`` states of a prompted batch on the encoder's device."""
        outputs = self.encoder.token_states(features)
        return self.encoder.pool_outputs(outputs, features["attention_mask"], prompt_layout=features["prompt_layout"])
