"""Embedding-space geometry: alignment/uniformity, anisotropy, and BERT-whitening.

* Alignment and uniformity follow Wang & Isola (2020) on L2-normalised embeddings:
  ``align = E ||f(x) - f(x+)||^alpha`` over positive pairs (alpha = 2) and
  ``uniform = log E exp(-t ||f(x) - f(y)||^2)`` over distinct pairs of sentences (t = 2), the
  pairs i < j of ``torch.pdist`` in their reference code.
* Anisotropy: the mean cosine of two different random sentences, computed exactly over all
  distinct pairs, and the singular-value spectrum of the L2-normalised (uncentred) embedding
  matrix, summarised as the energy share of the top direction(s) and the effective rank.
* BERT-whitening (Su et al., 2021): ``mu`` and ``W = U diag(1/sqrt(s))`` from the SVD of the
  covariance of the fitting embeddings (``np.cov``, as in the official ``compute_kernel_bias``);
  ``y = (x - mu) W[:, :k]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


def normalize_rows(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64); all-zero rows stay zero."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, eps)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two (N, H) arrays; NaN-free like SentEval's similarity."""
    return np.nan_to_num((normalize_rows(a) * normalize_rows(b)).sum(axis=1))


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Wang & Isola alignment: mean ``||x_i - y_i||^alpha`` of normalised positive pairs (lower is better).

    Args:
        x: (N, H) embeddings of the first sentences of the positive pairs.
        y: (N, H) embeddings of their positives.
        alpha: the exponent (2 in SimCSE).
    """
    if len(x) == 0:
        raise ValueError("alignment: no positive pair")
    distances = np.linalg.norm(normalize_rows(x) - normalize_rows(y), axis=1)
    return float(np.mean(distances**alpha))


def uniformity(x: np.ndarray, t: float = 2.0, block_rows: int = 1024) -> float:
    """Wang & Isola uniformity: ``log`` of the mean of ``exp(-t ||x_i - x_j||^2)`` over pairs i < j.

    Computed block-wise from the Gram matrix (``||a - b||^2 = 2 - 2 a.b`` for unit vectors), so
    memory stays at ``block_rows x N`` whatever the number of sentences.

    Args:
        x: (N, H) embeddings, N >= 2.
        t: the temperature (2 in SimCSE).
        block_rows: rows of the Gram matrix computed at once.
    """
    unit = normalize_rows(x)
    n = len(unit)
    if n < 2:
        raise ValueError("uniformity: needs at least two embeddings")
    total = 0.0
    for start in range(0, n, block_rows):
        block = unit[start : start + block_rows]
        # only columns j >= start can hold pairs j > i for the rows of this block
        squared = np.clip(2.0 - 2.0 * block @ unit[start:].T, 0.0, 4.0)
        kernel = np.exp(-t * squared)
        size = len(block)
        total += float(np.triu(kernel[:, :size], k=1).sum() + kernel[:, size:].sum())
    return float(np.log(total / (n * (n - 1) / 2)))


def mean_pairwise_cosine(x: np.ndarray) -> float:
    """Mean cosine of two different sentences, exactly over all N(N-1) ordered pairs.

    ``sum_{i != j} cos(x_i, x_j) = ||sum_i u_i||^2 - sum_i ||u_i||^2`` for unit rows ``u``, so
    this is the expectation over random pairs without sampling noise.
    """
    unit = normalize_rows(x)
    n = len(unit)
    if n < 2:
        raise ValueError("mean_pairwise_cosine: needs at least two embeddings")
    total = unit.sum(axis=0)
    return float((total @ total - (unit * unit).sum()) / (n * (n - 1)))


def singular_values(x: np.ndarray) -> np.ndarray:
    """Singular values (descending) of the L2-normalised, uncentred embedding matrix."""
    return np.linalg.svd(normalize_rows(x), compute_uv=False)


def anisotropy_metrics(x: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """Anisotropy summary of an embedding matrix.

    Returns:
        ``({anisotropy_mean_cos, anisotropy_sv_top1, anisotropy_sv_top10, anisotropy_effective_rank},
        singular_values)``: the mean cosine of random pairs; the share of squared singular values
        in the top 1 and top 10 directions; ``exp`` of the entropy of the normalised squared spectrum.
    """
    spectrum = singular_values(x)
    energy = spectrum**2 / max(float((spectrum**2).sum()), 1e-30)
    nonzero = energy[energy > 0]
    metrics = {
        "anisotropy_mean_cos": mean_pairwise_cosine(x),
        "anisotropy_sv_top1": float(energy[0]),
        "anisotropy_sv_top10": float(energy[:10].sum()),
        "anisotropy_effective_rank": float(np.exp(-(nonzero * np.log(nonzero)).sum())),
    }
    return metrics, spectrum


def plot_spectrum(spectrum: np.ndarray, metrics: dict[str, float], path: str | Path, title: str = "") -> Path:
    """Write the normalised singular-value spectrum (log scale) as a PNG.

    Args:
        spectrum: singular values, descending.
        metrics: :func:`anisotropy_metrics` output, quoted in the legend.
        path: where the PNG goes (parent folders are created).
        title: plot title.
    """
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on training machines
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    try:
        relative = spectrum / spectrum[0]
        ax.plot(np.arange(1, len(spectrum) + 1), relative, lw=1.5)
        ax.set_yscale("log")
        # a few numerically-zero directions would otherwise squash the informative part
        ax.set_ylim(bottom=max(float(relative[relative > 0].min()), 1e-4), top=1.5)
        ax.set_xlabel("singular value index")
        ax.set_ylabel("singular value / largest")
        ax.set_title(title or "singular-value spectrum of the normalised embeddings")
        ax.text(
            0.03,
            0.05,
            f"mean cos of random pairs: {metrics['anisotropy_mean_cos']:.3f}\n"
            f"top-1 energy: {metrics['anisotropy_sv_top1']:.3f}\n"
            f"effective rank: {metrics['anisotropy_effective_rank']:.1f}",
            transform=ax.transAxes,
            ha="left",
            va="bottom",
            fontsize=9,
        )
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


@dataclass(frozen=True, eq=False)
class Whitening:
    """A fitted BERT-whitening transform ``y = (x - mean) @ kernel``.

    Attributes:
        mean: (H,) mean of the fitting embeddings.
        kernel: (H, k) the first k columns of ``U diag(1/sqrt(s))``.
    """

    mean: np.ndarray
    kernel: np.ndarray

    @classmethod
    def fit(cls, embeddings: np.ndarray, k: int) -> Whitening:
        """Fit on (N, H) embeddings, keeping the ``k`` leading whitened dimensions.

        Raises:
            ValueError: if ``k`` exceeds the embedding width.
        """
        x = np.asarray(embeddings, dtype=np.float64)
        if not 1 <= k <= x.shape[1]:
            raise ValueError(f"eval.whitening: k={k} must be between 1 and the embedding width {x.shape[1]}")
        if len(x) < 2:
            raise ValueError("eval.whitening: needs at least two embeddings to fit")
        mean = x.mean(axis=0)
        u, s, _ = np.linalg.svd(np.cov(x.T))
        # directions with (numerically) zero variance would blow up: floor them like a tiny ridge
        s = np.maximum(s, s[0] * 1e-12)
        kernel = (u / np.sqrt(s)[None, :])[:, :k]
        return cls(mean, kernel)

    def transform(self, embeddings: np.ndarray) -> np.ndarray:
        """Whiten (N, H) embeddings into (N, k)."""
        return (np.asarray(embeddings, dtype=np.float64) - self.mean) @ self.kernel
