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

``run.sh sup-bert`` (``method.supervised=true``, ``experiment=promptbert_sup_bert``): rows of SimCSE's NLI file,
the premise in ``template`` and the entailment and contradiction in ``second_template`` (null: ``template``, as
sup-bert has no ``--mask_embedding_sentence_different_template``), the contradictions as extra negatives; the
head is the checkpoint's masked-LM transform (``--mask_embedding_sentence_org_mlp``: ``BertForMaskedLM``'s
``cls.predictions.transform``, dense + activation + LayerNorm; ``method.head=mlm_transform``) on the ``[MASK]``
state and on the template's own state, subtracted after the head and kept at evaluation, which denoises too
(sup-bert's eargs ``--mask_embedding_sentence_org_mlp --mask_embedding_sentence_delta``; ``method.denoise_eval``):
:class:`PromptBERTEncoder`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_bench.data.nli import read_nli_triples
from cl_bench.methods.base import MethodContext, TextViews, tokenize_groups
from cl_bench.methods.prompt_base import PromptTemplateMethod
from cl_bench.methods.promptbert.configuration import PromptBERTSpec
from cl_bench.models.encoder import SentenceEncoder
from cl_bench.models.hub import ModelLoadError
from cl_bench.models.prompts import template_mask_states
from cl_bench.utils.rundir import ENCODER_META_FILE

#: the evaluation head's weights beside a saved checkpoint
HEAD_WEIGHTS_FILE = "promptbert_head.pt"

#: kongds/Prompt-BERT run.sh, "unsup-bert": TEMPLATE and TEMPLATE2 in its ``*cls*_..._*sent_0*...``
#: notation (``_`` a space, ``*sent_0*`` the sentence, ``*mask*`` [MASK], ``*sep+*`` the [SEP])
OFFICIAL_TEMPLATES = ('*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*',
                      '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*')


def mlm_transform(config: Any) -> nn.Module:
    """A fresh BERT masked-LM head transform (dense + activation + LayerNorm) for ``config``."""
    from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

    return BertPredictionHeadTransform(config)


def load_mlm_transform(name_or_path: str, config: Any) -> nn.Module:
    """The checkpoint's own masked-LM head transform (Prompt-BERT train.py: ``BertForMaskedLM.from_pretrained(
    model_name_or_path).cls.predictions.transform``; a checkpoint without one gets it freshly initialised, as there)."""
    from transformers import AutoModelForMaskedLM

    try:  # model.name_or_path was checked reachable before any model loaded (offline-safe, as the encoder)
        model = AutoModelForMaskedLM.from_pretrained(name_or_path)
    except OSError as err:
        raise ModelLoadError(f"method.head: cannot load the masked-LM head of '{name_or_path}': {err}") from err
    predictions = getattr(getattr(model, "cls", None), "predictions", None)
    if predictions is None or not hasattr(predictions, "transform"):
        raise ValueError(f"method.head: mlm_transform needs a BERT masked-LM head (cls.predictions.transform); "
                         f"'{name_or_path}' is a {config.model_type}; use method.head=mlp")
    head = mlm_transform(config)
    head.load_state_dict(predictions.transform.state_dict())
    return head


class PromptBERTEncoder(SentenceEncoder):
    """``[MASK]`` pooling as sup-bert's evaluation: the head on the state (``head``), minus the head of the
    template's own ``[MASK]`` state at the row's sentence length (``denoise``; computed without dropout).

    In training it pools the raw ``[MASK]`` state: the method applies head and denoising per view template.
    Saved as the backbone plus the head's weights (``promptbert_head.pt``) and ``promptbert_eval`` in
    ``cl_bench_encoder.json``, so that ``mode=eval`` scores a checkpoint as it was evaluated in training.
    """

    def __init__(self, base: SentenceEncoder, head: nn.Module | None, denoise: bool) -> None:
        super().__init__(base.backbone, base.tokenizer, "mask", None, False, base.max_length, base.first_layer,
                         base.prompt, True, base.prompt_period)
        self.view_prompts = list(base.view_prompts)
        self.prompt_head = head
        self.denoise = denoise

    @property
    def onnx_capable(self) -> bool:
        return False  # the denoising term runs the torch backbone on the template alone

    def pool_outputs(self, outputs: Any, attention_mask: torch.Tensor, apply_mlp: bool | None = None,
                     prompt_layout: torch.Tensor | None = None) -> torch.Tensor:
        states = super().pool_outputs(outputs, attention_mask, apply_mlp, prompt_layout=prompt_layout)
        if self.training:
            return states
        delta = None
        if self.denoise:
            if prompt_layout is None:
                raise ValueError("PromptBERT's denoised evaluation needs prompted inputs")
            lengths, inverse = torch.unique(prompt_layout[:, 1], return_inverse=True)
            delta = template_mask_states(self.backbone, self.prompt_layout(self.prompt), lengths)
            delta = delta[inverse.to(delta.device)].to(states.dtype)
        if self.prompt_head is not None:
            states = self.prompt_head(states)
            delta = None if delta is None else self.prompt_head(delta)
        return states if delta is None else states - delta

    @classmethod
    def from_saved(cls, base: SentenceEncoder, model_dir: Path) -> PromptBERTEncoder:
        """The saved prompt, head and denoising around ``base``'s backbone."""
        meta = json.loads((model_dir / ENCODER_META_FILE).read_text())
        base.prompt, base.prompt_period = meta["prompt"], meta.get("prompt_period", "promptbert")
        base.max_length = int(meta.get("max_length", base.max_length))
        settings = meta["promptbert_eval"]
        head = None
        if settings["head"] == "mlm_transform":
            head = mlm_transform(base.backbone.config)
            head.load_state_dict(torch.load(model_dir / HEAD_WEIGHTS_FILE, map_location="cpu", weights_only=True))
        return cls(base, head, bool(settings["denoise"])).to(base.device)

    def save(self, out_dir: str | Path, extra_meta: dict[str, Any] | None = None) -> None:
        settings = {"head": "mlm_transform" if self.prompt_head is not None else None, "denoise": self.denoise}
        super().save(out_dir, {**(extra_meta or {}), "promptbert_eval": settings})
        if self.prompt_head is not None:
            torch.save(self.prompt_head.state_dict(), Path(out_dir) / HEAD_WEIGHTS_FILE)

    def cache_identity(self, backend: str, precision: str) -> dict[str, Any]:
        return {**super().cache_identity(backend, precision), "denoise": self.denoise}


class PromptBERT(PromptTemplateMethod):
    """Two templates as the two views, ``[MASK]`` pooling, template denoising, in-batch InfoNCE.

    Keys: declared on its spec (:class:`cl_bench.methods.promptbert.configuration.PromptBERTSpec`; ``dev_embedding``:
    :data:`cl_bench.methods.promptbert.configuration.DevEmbedding`).
    """

    def __init__(self, context: MethodContext, spec: PromptBERTSpec) -> None:
        second = spec.second_template or spec.template
        templates = [spec.template, second, second] if spec.supervised else [spec.template, second]
        super().__init__(context, spec, templates, spec.prompt_period)
        if spec.head == "mlm_transform":  # replaces the base's fresh training-only MLP
            self.head = load_mlm_transform(context.model_name_or_path, self.encoder.backbone.config)
        if spec.head == "mlm_transform" or spec.denoise_eval:
            self.encoder = PromptBERTEncoder(self.encoder, self.head if spec.head == "mlm_transform" else None,
                                             spec.denoise_eval)

    def selection_encoder(self) -> SentenceEncoder:
        """``dev_embedding=trainer``: the official trainer's dev embedding over the encoder's modules (the template's
        own ``[MASK]`` state subtracted, through the kept head if any, no period); else the evaluation encoder."""
        encoder = self.eval_encoder()
        if not self.spec.denoise or self.spec.dev_embedding != "trainer":  # undenoised: the test's
            return encoder
        head = self.head if self.spec.head == "mlm_transform" else None
        trainer_dev = PromptBERTEncoder(encoder, head, denoise=True)
        trainer_dev.prompt_period = "none"
        return trainer_dev.train(encoder.training)  # a new module starts in training mode: take the encoder's

    def read_corpus(self, path: str) -> Sequence[Any]:
        """Sentences; supervised: NLI rows (premise, entailment, contradiction)."""
        if not self.spec.supervised:
            return super().read_corpus(path)
        rows = read_nli_triples(path, limit=self.context.data.get("limit"))
        if len(rows[0]) != 3:
            raise ValueError(f"data.train_file: {path} has no hard_neg column; method.supervised=true reads "
                             "sent0,sent1,hard_neg rows (SimCSE's nli_for_simcse.csv)")
        return rows

    def prepare(self, items: list[Any], rng: random.Random) -> TextViews:
        """The views' token ids: the sentences in the first, then in the second template; supervised: the
        premises in the first, the entailments and the contradictions in the second."""
        if self.spec.supervised:
            return tokenize_groups(self.encoder, [[row[c] for row in items] for c in range(3)])
        return tokenize_groups(self.encoder, (items, items))

    def denoised(
        self, states: torch.Tensor, layout: torch.Tensor, views: int, size: int, head: nn.Module | None = None
    ) -> torch.Tensor:
        """``states`` minus each row's template ``[MASK]`` state at the row's sentence length; with ``head``,
        head(state) − head(template state) (sup-bert's ``--mask_embedding_sentence_org_mlp`` with delta)."""
        head = nn.Identity() if head is None else head  # explicit: an nn.Module's truth value is its length
        rows = []
        for view in range(views):
            block = slice(view * size, (view + 1) * size)
            lengths, inverse = torch.unique(layout[block, 1], return_inverse=True)
            template = self.encoder.prompt_layout(self.encoder.view_prompt(view))
            delta = head(template_mask_states(self.encoder.backbone, template, lengths))
            rows.append(head(states[block]) - delta[inverse.to(delta.device)].to(states.dtype))
        return torch.cat(rows)

    def training_step(self, batch: list[Any] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features, n = self.to_device(views.features), views.size
        groups = 3 if self.spec.supervised else 2
        states = self.mask_states(features)
        if self.spec.head == "mlm_transform":
            z = self.denoised(states, features["prompt_layout"], groups, n, self.head) if self.spec.denoise else self.head(states)
        else:
            z = self.head(self.denoised(states, features["prompt_layout"], groups, n) if self.spec.denoise else states)
        loss = self.loss_fn(*z.split(n))
        return {"loss": loss, "loss_contrastive": loss}
