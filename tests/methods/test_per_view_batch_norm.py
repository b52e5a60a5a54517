"""Per-view batch norm (issue 28 point 8): with ``method.batch_norm=per_view`` the BatchNorm heads of Barlow
Twins (projector) and BYOL (projector, predictor, target projector) give each view what it would get projected
alone, as SCD, BSL and both original papers normalise; ``joint`` (both views stacked) does not when the views
differ. Checked on the tensors the method hands its loss, on a batch whose two views are different sentences."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import SENTENCES
from conftest import build_objective_method as build

from cl_bench.methods.base import tokenize_groups

OTHER = [
    "stock prices fell sharply on monday", "a red car is parked outside", "the orchestra played until midnight",
    "rain is expected later this week", "he fixed the old bicycle", "the museum opens at nine",
]


def _loss_inputs(method) -> tuple[list[torch.Tensor], torch.Tensor, int]:  # noqa: ANN001
    """One training step's loss arguments, the encoder's output of the stacked views, and the view size."""
    views = tokenize_groups(method.encoder, [SENTENCES, OTHER])  # view 1 and view 2: different sentences
    captured: list[torch.Tensor] = []
    loss_fn = method.loss_fn

    def recording(*args: torch.Tensor, **kwargs: object) -> torch.Tensor:
        captured.extend(args)
        return loss_fn(*args, **kwargs)

    method.loss_fn = recording
    method.train()  # heads: BatchNorm on batch statistics
    method.encoder.eval()  # encoders deterministic (no dropout), so that the views are encoded alike below
    if hasattr(method, "target_encoder"):
        method.target_encoder.eval()
    with torch.no_grad():
        method.training_step(views)
        z = method.encoder(method.to_device(views.features))
    return captured, z, views.size


def _gaps(got: list[torch.Tensor], alone: list[torch.Tensor]) -> list[float]:
    return [float((g - a).abs().max()) for g, a in zip(got, alone, strict=True)]


def test_barlow_twins_projector_normalises_each_view_alone(tiny_bert: Path, data_dir: Path) -> None:
    method, _ = build(tiny_bert, data_dir, ["method=barlow_twins", "loss=barlow_twins", "method.projector=[16,8]",
                                              "method.batch_norm=joint"])
    assert method.spec.batch_norm == "joint"  # the key reaches the method; the YAML's default is per_view
    for mode in ("joint", "per_view"):
        method.spec.batch_norm = mode
        got, z, n = _loss_inputs(method)
        with torch.no_grad():
            alone = [method.projector(z[:n]), method.projector(z[n:])]
        gaps = _gaps(got, alone)
        if mode == "per_view":
            assert max(gaps) < 1e-6, gaps
        else:  # stacked statistics: the views' outputs are not what each gets alone
            assert min(gaps) > 1e-3, gaps


def test_byol_heads_normalise_each_view_alone(tiny_bert: Path, data_dir: Path) -> None:
    method, _ = build(tiny_bert, data_dir, ["method=byol", "loss=byol", "method.projection=[16,8]",
                                            "method.batch_norm=joint"])
    assert method.spec.batch_norm == "joint"
    views = tokenize_groups(method.encoder, [SENTENCES, OTHER])
    for mode in ("joint", "per_view"):
        method.spec.batch_norm = mode
        got, z, n = _loss_inputs(method)  # predictions of views 1 and 2, then their targets
        with torch.no_grad():
            target_z = method.target_encoder(method.to_device(views.features))
            alone = [method.predictor(method.projector(z[:n])), method.predictor(method.projector(z[n:])),
                     method.target_projector(target_z[:n]), method.target_projector(target_z[n:])]
        gaps = _gaps(got, alone)
        if mode == "per_view":
            assert max(gaps) < 1e-6, gaps
        else:
            assert min(gaps) > 1e-3, gaps


def test_per_view_is_the_default() -> None:
    from cl_bench.config import yaml_spec

    for method in ("barlow_twins", "byol"):
        assert yaml_spec("method", method).batch_norm == "per_view"  # the spec's default, which the YAML keeps
