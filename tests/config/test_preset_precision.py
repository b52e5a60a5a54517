"""Every training preset says in which precision its official code trained, and the presets of papers whose
official code trained in fp32 train in fp32 on every device (docs/methods/recipes.md, "Training precision of the official runs").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from cl_bench.commands.cli import CONF_DIR

PRESETS = Path(CONF_DIR) / "experiment"

# Official code without mixed precision (the source of each finding is the preset's "# Precision:" line).
FP32_OFFICIAL = {
    "sg_opt_bert", "ablation_sg_opt_loss", "is_bert", "cert_bert", "cert_mochi", "quickthoughts_bert",
    "sbert_nli", "sbert_stsb", "sbert_triplet_nli", "memory_bank_wiki",
    "mixcse_bert", "sncse_bert",
}
# Official scripts that train in fp16 mixed precision: the preset keeps cl-bench's default (auto), which
# also runs on CPUs; train.precision=fp16 on CUDA matches them.
FP16_OFFICIAL = {
    "simcse_sup_bert", "ablation_batch_size", "ablation_hard_negative", "ablation_mlm_weight", "ablation_tau",
    "ablation_dropout", "ablation_pooling", "augmentation_comparison", "ablation_augmentation",
    "declutr_small", "barlow_twins_wiki", "byol_wiki", "swav_wiki", "angle_nli", "angle_stsb",
    "esimcse_bert", "diffcse_bert", "promptbert_bert", "promptbert_sup_bert",
}
# fp16 official runs whose presets set train.precision=fp16_cuda (fp16 on CUDA, fp32 elsewhere; issue 40)
FP16_ON_CUDA = {"esimcse_bert", "promptbert_bert"}
CPU_ONLY = {"cpu_repro"}


def _training_presets() -> set[str]:
    names = set()
    for path in PRESETS.glob("*.yaml"):
        if OmegaConf.load(path).get("mode") != "eval":
            names.add(path.stem)
    return names


def test_every_training_preset_is_classified_and_states_its_precision() -> None:
    presets = _training_presets()
    assert presets == FP32_OFFICIAL | FP16_OFFICIAL | CPU_ONLY
    for name in sorted(presets):
        text = (PRESETS / f"{name}.yaml").read_text()
        assert "# Precision:" in text, f"{name}.yaml has no '# Precision:' line"


@pytest.mark.parametrize("name", sorted(FP32_OFFICIAL | FP16_OFFICIAL))
def test_preset_trains_in_the_official_precision(name: str) -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={name}"])
    expected = "fp32" if name in FP32_OFFICIAL else "fp16_cuda" if name in FP16_ON_CUDA else "auto"
    assert cfg.train.precision == expected
