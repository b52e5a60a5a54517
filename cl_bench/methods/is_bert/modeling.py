"""IS-BERT: unsupervised sentence embeddings by mutual-information maximisation (Zhang et al., EMNLP 2020).

BERT's last-layer token states feed parallel 1-D convolutions with several window sizes (1, 3, 5;
256 channels each, "same" padding). Their per-token outputs, concatenated, are the local n-gram
features; their mean over the real tokens is the global sentence embedding, which is also what
evaluation scores. Training maximises the Jensen–Shannon MI estimate between each token's local
feature and its sentence's global feature, with the other sentences of the batch as negatives
(:func:`cl_bench.losses.jsd.jsd_mi_loss`); a discriminator T_ω scores (local, global) pairs.

Paper vs official code (yanzhangnlp/IS-BERT): the paper applies ReLU after the convolutions, the
repository's CNN module applies none (``activation: relu | none``, paper by default). The code's
T_ω is the plain dot product of local and global feature (``discriminator: dot``, the default; the
paper describes T_ω only as a discriminator); ``discriminator: mlp_dot`` is Deep InfoMax's
encode-and-dot critic (a small residual MLP on each side, then the dot product).

Padding: padded positions are zeroed before the convolutions (so they act like the convolution's
own zero padding) and excluded from the mean and from the estimator, which makes a sentence's
embedding independent of how much padding its batch has. The official code lets the padding
positions' BERT states into the convolution windows at a sentence's end.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_bench.data.nli import read_unlabelled_nli_sentences
from cl_bench.methods.base import Method, MethodContext, Tokenized
from cl_bench.methods.is_bert.configuration import PAPER_KERNEL_SIZES, ISBERTSpec
from cl_bench.models.encoder import SentenceEncoder
from cl_bench.models.poolers import masked_mean
from cl_bench.utils.rundir import ENCODER_META_FILE

CNN_WEIGHTS_FILE = "is_bert_cnn.pt"


class NGramCNN(nn.Module):
    """Parallel "same"-padded Conv1d layers over token states, outputs concatenated per token.

    Args:
        input_size: width H of the token states.
        channels: output channels per window size.
        kernel_sizes: odd window sizes.
        activation: ``relu`` (paper) or ``none`` (official code).

    The keys are :class:`~cl_bench.methods.is_bert.configuration.ISBERTSpec`'s (defaults and rules declared there).
    """

    def __init__(self, input_size: int, *, channels: int, kernel_sizes: Sequence[int], activation: str) -> None:
        super().__init__()
        self.kernel_sizes = [int(k) for k in kernel_sizes]
        self.channels = int(channels)
        self.activation = activation
        self.convs = nn.ModuleList(nn.Conv1d(input_size, channels, k, padding=(k - 1) // 2) for k in self.kernel_sizes)

    @property
    def output_size(self) -> int:
        """Width of a local feature: channels × number of window sizes."""
        return self.channels * len(self.kernel_sizes)

    def forward(self, token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, H) token states → (B, T, output_size) local features, zero at padding."""
        mask = attention_mask.unsqueeze(-1).to(token_states.dtype)
        inputs = (token_states * mask).transpose(1, 2)
        outputs = torch.cat([conv(inputs) for conv in self.convs], dim=1).transpose(1, 2)
        if self.activation == "relu":
            outputs = torch.relu(outputs)
        return outputs * mask


class EncodeAndDot(nn.Module):
    """Deep InfoMax's encode-and-dot critic: T(l, g) = φ_l(l) · φ_g(g), φ = residual 2-layer MLP."""

    def __init__(self, input_size: int, size: int) -> None:
        super().__init__()
        self.local_mlp = nn.Sequential(nn.Linear(input_size, size), nn.ReLU(), nn.Linear(size, size))
        self.local_shortcut = nn.Linear(input_size, size)
        self.global_mlp = nn.Sequential(nn.Linear(input_size, size), nn.ReLU(), nn.Linear(size, size))
        self.global_shortcut = nn.Linear(input_size, size)

    def forward(self, local: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
        """(B, T, D) local, (B, D) global → (B, T, B) scores."""
        encoded_local = self.local_mlp(local) + self.local_shortcut(local)
        encoded_global = self.global_mlp(global_) + self.global_shortcut(global_)
        return torch.einsum("btd,jd->btj", encoded_local, encoded_global)


class ISBERTEncoder(SentenceEncoder):
    """BERT + n-gram CNN + mean over real tokens: IS-BERT's sentence encoder (training and evaluation).

    Saved as the backbone in Hugging Face format plus the CNN weights in ``is_bert_cnn.pt`` and
    their configuration under ``is_bert_cnn`` in ``cl_bench_encoder.json``.
    """

    def __init__(self, backbone: nn.Module, tokenizer: Any, cnn: NGramCNN, max_length: int = 128) -> None:
        super().__init__(backbone, tokenizer, pooler="is_bert_cnn_mean", mlp=None, max_length=max_length)
        self.cnn = cnn

    @property
    def hidden_size(self) -> int:
        return self.cnn.output_size

    def local_features(self, outputs: Any, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D) CNN features of the backbone's last-layer token states."""
        return self.cnn(outputs.last_hidden_state, attention_mask)

    def pool_outputs(self, outputs: Any, attention_mask: torch.Tensor, apply_mlp: bool | None = None) -> torch.Tensor:
        return masked_mean(self.local_features(outputs, attention_mask), attention_mask)

    @classmethod
    def from_saved(cls, base: SentenceEncoder, model_dir: Path) -> ISBERTEncoder:
        """The saved CNN (configuration and weights) on top of ``base``'s backbone."""
        meta = json.loads((model_dir / ENCODER_META_FILE).read_text())
        cnn_meta = meta["is_bert_cnn"]
        cnn = NGramCNN(base.hidden_size, channels=cnn_meta["channels"], kernel_sizes=tuple(cnn_meta["kernel_sizes"]),
                       activation=cnn_meta["activation"])
        cnn.load_state_dict(torch.load(model_dir / cnn_meta["weights"], map_location="cpu", weights_only=True))
        return cls(base.backbone, base.tokenizer, cnn, int(meta.get("max_length", base.max_length)))

    def save(self, out_dir: str | Path, extra_meta: dict[str, Any] | None = None) -> None:
        cnn_meta = {
            "kernel_sizes": self.cnn.kernel_sizes,
            "channels": self.cnn.channels,
            "activation": self.cnn.activation,
            "weights": CNN_WEIGHTS_FILE,
        }
        super().save(out_dir, {**(extra_meta or {}), "is_bert_cnn": cnn_meta})
        torch.save(self.cnn.state_dict(), Path(out_dir) / CNN_WEIGHTS_FILE)


class ISBERT(Method):
    """IS-BERT training: JSD MI between local n-gram features and the global sentence vector.

    Keys: declared on its spec (:class:`cl_bench.methods.is_bert.configuration.ISBERTSpec`). The context's encoder
    gives its backbone and tokenizer (the configured pooler is not used: the sentence vector is the CNN mean); the
    loss is the JSD estimator (``loss=jsd``, :mod:`cl_bench.losses.jsd`).
    """

    def __init__(self, context: MethodContext, spec: ISBERTSpec) -> None:
        super().__init__(context, spec)
        base = context.encoder
        cnn = NGramCNN(base.hidden_size, channels=spec.channels, kernel_sizes=spec.kernel_sizes or PAPER_KERNEL_SIZES,
                       activation=spec.activation)
        # Replaces the context encoder (and any pooler MLP it carries); the backbone is shared.
        self.encoder = ISBERTEncoder(base.backbone, base.tokenizer, cnn, base.max_length)
        critic = spec.discriminator == "mlp_dot"
        self.discriminator = EncodeAndDot(cnn.output_size, spec.discriminator_size) if critic else None

    def read_corpus(self, path: str) -> Sequence[str]:
        """Distinct NLI sentences (SentEval SNLI files, SimCSE CSV, or one sentence per line)."""
        return read_unlabelled_nli_sentences(path, self.spec.snli_splits or None, limit=self.context.data.get("limit"))

    def scores(self, local: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
        """T_ω(local_{i,t}, global_j) for all pairs: (B, T, D), (B, D) → (B, T, B)."""
        if self.discriminator is not None:
            return self.discriminator(local, global_)
        return torch.einsum("btd,jd->btj", local, global_)

    def prepare(self, items: list[str], rng: random.Random) -> Tokenized:
        """The sentences as token ids (in a DataLoader worker)."""
        return Tokenized(self.encoder.tokenize(items))

    def training_step(self, batch: list[str] | Tokenized) -> dict[str, torch.Tensor]:
        features = self.to_device(self.prepared(batch).features)
        mask = features["attention_mask"]
        outputs = self.encoder.token_states(features)
        local = self.encoder.local_features(outputs, mask)
        global_ = masked_mean(local, mask)
        loss = self.loss_fn(self.scores(local, global_), mask)
        return {"loss": loss, "mi_jsd": -loss.detach()}
