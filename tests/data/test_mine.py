"""``cl-bench-data mine``: on a corpus with a planted near-duplicate, the ranks and margins exclude or include
exactly it; cross-encoder rescoring; the real command writes the triples and the record of what mined them; the
mined file trains supervised SimCSE through the real ``cl-bench`` command (slow)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from cl_bench.data.fetch import sha256_file
from cl_bench.data.mine import MineError, MineOptions, mine_negatives, mining_device
from cl_bench.data.nli import read_nli_triples


def unit(angle_deg: float, plane: int = 0) -> np.ndarray:
    """A unit vector at ``angle_deg`` from e0, in the plane (e0, e_{plane+1})."""
    v = np.zeros(4)
    v[0], v[plane + 1] = math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))
    return v


# anchor a0 and its positive p0 (cos 0.95); "d0" is a planted near-duplicate of p0 (cos 0.94 with a0), the
# positive of another row; p1 and p3 are ordinary candidates (cos 0.5 and 0.2 with a0)
VECTORS = {
    "a0": unit(0), "p0": unit(math.degrees(math.acos(0.95))), "d0": unit(math.degrees(math.acos(0.94)), 1),
    "a1": unit(90, 2), "p1": unit(60, 2), "a2": unit(85, 1), "a3": unit(95, 2), "p3": unit(math.degrees(math.acos(0.2)), 2),
}
PAIRS = [("a0", "p0"), ("a1", "p1"), ("a2", "d0"), ("a3", "p3")]


def encode(texts):
    return np.stack([VECTORS[t] for t in texts]).astype(np.float32)


def negatives_of(anchor: str, **options) -> list[str]:
    return [n for a, _, n in mine_negatives(PAIRS, encode, MineOptions(**options), progress=False) if a == anchor]


def test_the_planted_duplicate_is_included_or_excluded_exactly() -> None:
    assert negatives_of("a0") == ["d0"]  # no margin: the near-duplicate is the hardest candidate
    assert negatives_of("a0", num_negatives=3) == ["d0", "p1", "p3"]  # rank order; own positive never
    assert negatives_of("a0", absolute_margin=0.005) == ["d0"]  # 0.94 <= 0.95 − 0.005
    assert negatives_of("a0", absolute_margin=0.05) == ["p1"]  # 0.94 > 0.95 − 0.05: excluded
    assert negatives_of("a0", relative_margin=0.05) == ["p1"]  # 0.94 > 0.95 × 0.95
    assert negatives_of("a0", relative_margin=0.01) == ["d0"]  # 0.94 <= 0.95 × 0.99
    assert negatives_of("a0", range_min=1) == ["p1"]  # rank 0 (the duplicate) skipped
    assert negatives_of("a0", range_max=1, absolute_margin=0.05) == []  # only rank 0 considered, and excluded
    assert negatives_of("a0", range_min=1, range_max=2, num_negatives=5) == ["p1"]


def test_cross_encoder_rescoring_decides_the_margins() -> None:
    def rescore(pairs):  # a stand-in cross-encoder that knows d0 is a paraphrase of p0 (score above the positive)
        return np.array([0.99 if b == "d0" else 0.9 if b == "p0" else 0.1 for _, b in pairs])

    rows = mine_negatives(PAIRS, encode, MineOptions(num_negatives=3), rescore=rescore, progress=False)
    assert [n for a, _, n in rows if a == "a0"] == ["p1", "p3"]  # d0 scored above the positive: not a negative


def test_options_are_checked() -> None:
    for options, flag in ((dict(range_min=-1), "--range-min"), (dict(range_min=3, range_max=3), "--range-max"),
                          (dict(absolute_margin=-0.1), "--absolute-margin"), (dict(relative_margin=1.0), "--relative-margin"),
                          (dict(num_negatives=0), "--num-negatives")):
        with pytest.raises(MineError, match=f"^{flag}: "):
            MineOptions(**options).check()


def test_the_device_is_checked_and_auto_follows_torch() -> None:
    assert mining_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert mining_device("cpu") == torch.device("cpu")
    with pytest.raises(MineError, match="^--device: unknown device 'gpu0'"):
        mining_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(MineError, match="^--device: cuda:1, but torch sees no CUDA device"):
            mining_device("cuda:1")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("cl-bench-data") or "cl-bench-data", "mine", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ))


@pytest.fixture(scope="module")
def tiny_cross_encoder(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in cross-encoder: a tiny random BertForSequenceClassification with one logit."""
    from transformers import BertConfig, BertForSequenceClassification

    out = tmp_path_factory.mktemp("cross_encoder")
    BertForSequenceClassification(BertConfig.from_pretrained(tiny_bert, num_labels=1)).save_pretrained(out)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (tiny_bert / name).is_file():
            shutil.copy(tiny_bert / name, out / name)
    return out


def test_the_command_writes_triples_and_what_mined_them(tiny_bert: Path, tiny_cross_encoder: Path, data_dir: Path,
                                                       tmp_path: Path) -> None:
    source = data_dir / "nli" / "snli_devtest_triples_for_simcse.csv.gz"
    if not source.is_file():
        pytest.fail(f"missing {source}")
    out = tmp_path / "mined.csv"
    done = _cli(str(source), "--out", str(out), "--model", str(tiny_bert), "--limit", "24", "--range-min", "1",
                "--num-negatives", "2", "--cross-encoder", str(tiny_cross_encoder),
                "--max-length", "16", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_nli_triples(out)
    record = json.loads((tmp_path / "mined.csv.mined.json").read_text())
    assert len(rows[0]) == 3 and len(rows) == record["output_rows"] > 0
    assert record["input_sha256"] == sha256_file(source) and record["output_sha256"] == sha256_file(out)
    assert record["encoder"] == str(tiny_bert) and record["cross_encoder"] == str(tiny_cross_encoder)
    assert record["options"]["range_min"] == 1 and record["options"]["num_negatives"] == 2
    assert "faiss" in record["nearest_neighbours"] and record["input_rows"] == 24
    assert record["device"] == ("cuda" if torch.cuda.is_available() else "cpu")  # --device auto
    pairs = {(a, p) for a, p, *_ in read_nli_triples(source, limit=24)}
    assert all((a, p) in pairs and n not in (a, p) for a, p, n in rows)
    bad = _cli(str(source), "--out", str(out), "--model", str(tmp_path / "none"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("cl-bench-data: error: --model: ")


@pytest.mark.slow
def test_the_mined_file_trains_supervised_simcse(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    source = data_dir / "nli" / "snli_devtest_triples_for_simcse.csv.gz"
    if not source.is_file():
        pytest.fail(f"missing {source}")
    out = tmp_path / "mined.csv"
    assert _cli(str(source), "--out", str(out), "--model", str(tiny_bert), "--limit", "32", "--max-length", "16",
                "--no-progress", cwd=tmp_path).returncode == 0
    env = dict(os.environ, CL_BENCH_DATA=str(data_dir))
    env.pop("MLFLOW_TRACKING_URI", None)
    run = subprocess.run(
        [shutil.which("cl-bench") or "cl-bench", "method=simcse_sup", f"data.train_file={out}", f"model.name_or_path={tiny_bert}",
         "model.max_length=16", "batch_size=8", "train.max_steps=2", "train.eval_steps=0", "eval=quick", "logger=none",
         "eval.anisotropy=false", "train.num_threads=1", "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "sts/stsb" in json.loads((tmp_path / "run" / "results.json").read_text())
