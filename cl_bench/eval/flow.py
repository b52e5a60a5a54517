"""BERT-flow (Li et al., EMNLP 2020): a Glow-style invertible flow fitted to frozen sentence embeddings.

The flow ``f`` maps an embedding ``x`` to ``z = f(x)`` whose density is a standard Gaussian; it is
fitted by maximum likelihood, ``log p(x) = log N(f(x); 0, I) + log |det ∂f/∂x|``, on the embeddings
of a corpus (the encoder stays frozen), and STS is then scored by the cosine of the ``z``.

The architecture follows the official code (bohanli/BERT-flow, ``flow/glow_ops_1x1.py`` with
``config_l3_d3_w32``), written here in torch: ``levels`` levels (default 3) of ``depth`` steps
(default 3), each step = actnorm (data-dependent initialisation on the first batch, log-scale
factor 3) → a fixed channel reversal (``permutation: true``) → an additive coupling whose shift
network is Linear–ActNorm–ReLU–Linear–ActNorm–ReLU–Linear (hidden width ``width``, default 32; last
layer zero-initialised with a learnt output scale); after every level but the last, half of the
channels are factored out under a standard normal. ``z`` is every factored-out part followed by
the top part (the full embedding width).

Fitting follows the official run (``run_siamese.py`` with ``--flow=1 --flow_loss=1``,
``optimization_bert_flow.py``, ``flow/glow_1x1.py``); each difference that can move a figure is an
``eval.flow.*`` switch whose default is the official behaviour:

* ``fit_mode=train``: the flow is fitted on embeddings computed with the encoder in training mode
  (dropout on, the official ``get_embedding(bert_config, is_training=True)``) and applied to
  embeddings without dropout; ``eval`` fits on the dropout-free embeddings it scores.
* ``pooler=official``: the embeddings are BERT-flow's ``avg-last-2`` (the mean of the first
  transformer layer's and the last layer's token averages, ``pooler=avg_first_last
  pooler.first_layer=1``) whatever the run's pooler; ``run``: the run's pooler.
* ``adam_bias_correction=false``: the official ``AdamWeightDecayOptimizer`` has no bias correction
  (:class:`cl_bench.utils.optim.AdamWNoBiasCorrection`); ``true``: torch's AdamW. Both: decoupled weight
  decay 0.01, ε 1e-6, lr 1e-3 (``--flow_learning_rate``), no warm-up.
* ``loss=bits_pair_sum``: the official objective is in bits per dimension and sums the two sides
  of a pair (each side a mean over 32 sentences), i.e. 2/ln 2 ≈ 2.885 × the nats mean; Adam is
  invariant to the scale, but the gradient-norm clip at 1 is not. ``nats_mean``: the mean in nats.
* ``init_batch_size=32``: the data-dependent actnorm initialisation runs on a draw of its own, as
  the official ``GlowInitHook`` (one side of its first batch of 32 pairs); ``0``: on the first
  training batch.

The rest as the official flags: gradient norm clipped at 1, 1 epoch (``--num_train_epochs``), 32
pairs (64 sentences) a batch (``--train_batch_size``), seed 1234. Batches are drawn from the
shuffled sentences rather than from shuffled pairs; inputs are truncated only at the model's limit
(the official script at 64 tokens; see docs/evaluation.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from cl_bench.eval.flow_options import FlowOptions  # the schema lives torch-free
from cl_bench.utils.optim import AdamWNoBiasCorrection

#: official ``logscale_factor`` of actnorm and of the coupling network's output scale
LOGSCALE_FACTOR = 3.0
WEIGHT_DECAY = 0.01
ADAM_EPS = 1e-6
CLIP_NORM = 1.0
LOG_2PI = math.log(2 * math.pi)
#: a channel whose batch standard deviation is below this fraction of the largest is treated as constant
CONSTANT_STD = 1e-6
#: BERT-flow's "avg-last-2": mean of hidden_states[1] (first transformer layer) and the last layer
OFFICIAL_POOLER: tuple[str, int] = ("avg_first_last", 1)


class ActNorm(nn.Module):
    """Per-channel ``(x + b) · exp(3·s)``, initialised from the first batch to zero mean, unit variance."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels))
        self.log_scale = nn.Parameter(torch.zeros(channels))
        self.register_buffer("initialized", torch.tensor(False))

    @torch.no_grad()
    def _initialize(self, x: torch.Tensor) -> None:
        mean = x.mean(0)
        std = (x - mean).pow(2).mean(0).sqrt()
        # A channel that is constant on the batch (all-MiniLM-L6-v2's mean-pooled embeddings have
        # one) is centred and left unscaled: the official 1/(std + 1e-6) would scale it by 1e6 and
        # the likelihood diverges. Other channels get the official initialisation.
        constant = std <= CONSTANT_STD * std.max()
        self.bias.copy_(-mean)
        self.log_scale.copy_(torch.where(constant, 0.0, torch.log(1.0 / (std + 1e-6)) / LOGSCALE_FACTOR))
        self.initialized.fill_(True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not bool(self.initialized):
            self._initialize(x)
        scale = self.log_scale * LOGSCALE_FACTOR
        return (x + self.bias) * scale.exp(), scale.sum().expand(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * (-self.log_scale * LOGSCALE_FACTOR).exp() - self.bias


class ShiftNetwork(nn.Module):
    """The additive coupling's ``NN(x1)``: Linear–ActNorm–ReLU, Linear–ActNorm–ReLU, zero-initialised Linear."""

    def __init__(self, inputs: int, outputs: int, width: int) -> None:
        super().__init__()
        self.first = nn.Linear(inputs, width, bias=False)
        self.second = nn.Linear(width, width, bias=False)
        for layer in (self.first, self.second):
            nn.init.normal_(layer.weight, std=0.05)  # the official default initialiser
        self.norms = nn.ModuleList([ActNorm(width), ActNorm(width)])
        self.last = nn.Linear(width, outputs)
        nn.init.zeros_(self.last.weight)
        nn.init.zeros_(self.last.bias)
        self.last_log_scale = nn.Parameter(torch.zeros(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norms[0](self.first(x))[0])
        h = torch.relu(self.norms[1](self.second(h))[0])
        return self.last(h) * (self.last_log_scale * LOGSCALE_FACTOR).exp()


class FlowStep(nn.Module):
    """ActNorm → channel reversal → additive coupling (log-determinant: actnorm's only)."""

    def __init__(self, channels: int, width: int) -> None:
        super().__init__()
        self.actnorm = ActNorm(channels)
        self.kept = channels - channels // 2
        self.shift = ShiftNetwork(self.kept, channels // 2, width)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, logdet = self.actnorm(x)
        x = x.flip(-1)
        x1, x2 = x[:, : self.kept], x[:, self.kept :]
        return torch.cat([x1, x2 + self.shift(x1)], dim=1), logdet

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        y1, y2 = y[:, : self.kept], y[:, self.kept :]
        x = torch.cat([y1, y2 - self.shift(y1)], dim=1).flip(-1)
        return self.actnorm.inverse(x)


def standard_normal_log_density(z: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log N(z; 0, I)``."""
    return -0.5 * (z.pow(2) + LOG_2PI).sum(-1)


class Glow(nn.Module):
    """BERT-flow's multi-level flow on (N, dim) vectors: :meth:`forward` gives ``z`` and ``log p(x)``."""

    def __init__(self, dim: int, levels: int = 3, depth: int = 3, width: int = 32) -> None:
        super().__init__()
        self.levels = nn.ModuleList()
        self.widths: list[int] = []
        channels = dim
        for level in range(levels):
            if channels < 2:
                raise ValueError(f"eval.flow.levels: {levels} levels halve a {dim}-wide embedding below 2 channels")
            self.widths.append(channels)
            self.levels.append(nn.ModuleList([FlowStep(channels, width) for _ in range(depth)]))
            if level < levels - 1:
                channels -= channels // 2  # the factored-out half goes to the prior

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Map (N, dim) inputs to (N, dim) latents and their (N,) log-likelihoods in nats."""
        log_likelihood = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        factored: list[torch.Tensor] = []
        for index, steps in enumerate(self.levels):
            for step in steps:
                x, logdet = step(x)
                log_likelihood = log_likelihood + logdet
            if index < len(self.levels) - 1:
                keep = x.shape[1] - x.shape[1] // 2
                x, out = x[:, :keep], x[:, keep:]
                log_likelihood = log_likelihood + standard_normal_log_density(out)
                factored.append(out)
        log_likelihood = log_likelihood + standard_normal_log_density(x)
        return torch.cat([*factored, x], dim=1), log_likelihood

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        """Map (N, dim) latents back to inputs (the exact inverse of :meth:`forward`)."""
        sizes = [w // 2 for w in self.widths[:-1]]  # the halves factored out at each level, in order
        *factored, x = torch.split(z, [*sizes, z.shape[1] - sum(sizes)], dim=1)
        for index in reversed(range(len(self.levels))):
            if index < len(self.levels) - 1:
                x = torch.cat([x, factored[index]], dim=1)
            for step in reversed(self.levels[index]):
                x = step.inverse(x)
        return x


@dataclass(frozen=True, eq=False)
class FittedFlow:
    """A flow fitted to embeddings: :meth:`transform` maps (N, H) embeddings to their latents."""

    model: Glow
    #: mean negative log-likelihood per dimension (nats) over the last epoch's batches
    final_nll_per_dim: float

    def transform(self, embeddings: np.ndarray) -> np.ndarray:
        """Latents ``z = f(x)`` of (N, H) embeddings, float64."""
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(embeddings), dtype=torch.float64)
            return self.model(x)[0].numpy()

    @classmethod
    def fit(cls, embeddings: np.ndarray, options: FlowOptions | None = None) -> FittedFlow:
        """Fit a flow by maximum likelihood to (N, H) embeddings (float64, CPU).

        Raises:
            ValueError: with fewer than two embeddings or a flow too deep for the width.
        """
        options = options or FlowOptions()
        x = torch.as_tensor(np.asarray(embeddings), dtype=torch.float64)
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValueError("eval.postprocess=flow: needs at least two embeddings to fit")
        generator = torch.Generator().manual_seed(options.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(options.seed)
            model = Glow(x.shape[1], options.levels, options.depth, options.width).double()
        if options.adam_bias_correction:
            optimizer: torch.optim.Optimizer = torch.optim.AdamW(
                model.parameters(), lr=options.lr, eps=ADAM_EPS, weight_decay=WEIGHT_DECAY)
        else:  # the official AdamWeightDecayOptimizer: no 1/(1 - beta^t) factors
            optimizer = AdamWNoBiasCorrection(model.parameters(), lr=options.lr, eps=ADAM_EPS, weight_decay=WEIGHT_DECAY)
        batch = min(options.batch_size, x.shape[0])
        if options.init_batch_size:  # GlowInitHook: the actnorms see a draw of their own first
            with torch.no_grad():
                model(x[torch.randperm(x.shape[0], generator=generator)[: options.init_batch_size]])
        # official objective: bits per dimension, the two sides' batch means summed (2 x the mean)
        scale = 2.0 / math.log(2.0) if options.loss == "bits_pair_sum" else 1.0
        steps = max(1, math.ceil(options.epochs * math.ceil(x.shape[0] / batch)))
        order = torch.empty(0, dtype=torch.long)
        last_epoch: list[float] = []
        for _ in range(steps):
            if order.numel() < batch:
                order = torch.cat([order, torch.randperm(x.shape[0], generator=generator)])
                last_epoch = []
            index, order = order[:batch], order[batch:]
            _, log_likelihood = model(x[index])
            nats = -log_likelihood.mean() / x.shape[1]
            optimizer.zero_grad()
            (nats * scale).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
            optimizer.step()
            last_epoch.append(float(nats.detach()))
        model.eval()
        return cls(model, float(np.mean(last_epoch)))
