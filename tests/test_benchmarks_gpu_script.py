"""The GPU measurements of issue 25 item 4 (``benchmarks/gpu_checks.sh``) run end to end on CPU at tiny
sizes, so that a session lent a GPU for a few minutes runs a command already known to work."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_suite_gpu  # noqa: E402 (the benchmarks' modules, not a package)
import bench_train_step  # noqa: E402
from _common import (  # noqa: E402
    RANDOM_CONFIGS,
    datasheet_bf16,
    device_gemm_peaks,
    encoder_flops,
    gemm_shapes,
)
from conftest import minilm_path  # noqa: E402


def test_training_step_benchmark_prints_every_figure(tiny_bert: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"a dog plays in the park number {i}.\n" for i in range(12)))
    bench_train_step.main(["--model", str(tiny_bert), "--random-config", "tiny", "--corpus", str(corpus),
                           "--batch-size", "4", "--max-length", "12", "--steps", "2", "--warmup", "1",
                           "--device", "cpu", "--precision", "bf16", "--peak-tokens", "64"])
    out = capsys.readouterr().out
    assert out.startswith("device: CPU") and "torch " in out
    for dtype in ("float32", "bfloat16"):
        assert re.search(rf"^{dtype} matmul peak \(measured, this run\): [0-9.e+-]+ TFLOP/s at \d+x\d+x\d+ on cpu$",
                         out, re.M), out
    assert "model random tiny" in out and "precision bf16, batch 4 (8 views)" in out
    for label in ("plain PyTorch+transformers SimCSE step", "cl-bench SimCSE step"):
        line = next(line for line in out.splitlines() if line.startswith(label))
        assert re.search(r"ms median, +[0-9.]+ sentences/s, [0-9.e+-]+ TFLOP/s, MFU [0-9.]+% of the measured bf16", line)
    ratio = re.search(r"throughput ratio cl-bench/plain = ([0-9.]+)", out)
    assert ratio is not None and float(ratio.group(1)) > 0
    assert "cl-bench SimCSE step, compiled" not in out  # --compile auto: on CUDA only
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        assert "sentence-transformers is not installed" in out
    else:
        assert re.search(r"^sentence-transformers MNRL step +: +[0-9.]+ ms median", out, re.M), out
        assert re.search(r"^throughput ratio sentence-transformers MNRL/plain = [0-9.]+$", out, re.M), out


def test_shape_recorder_counts_the_padded_batches(tiny_bert: Path) -> None:
    """The FLOPs of the MFU come from the batches the backbone ran (both views, padded)."""
    step, shapes, config = bench_train_step.plain_step_fn(str(tiny_bert), 1e-5, torch.device("cpu"), None, 8)
    step(["a dog", "the man plays the guitar in the park today"])
    assert shapes.batches == [(4, 8)]  # 2 sentences x 2 views, cut at max length 8
    assert encoder_flops(config, shapes.batches) > 0


def test_random_bert_base_is_bert_base_uncased_shaped() -> None:
    from transformers import AutoTokenizer, BertConfig

    config = BertConfig(**RANDOM_CONFIGS["bert-base"])
    shape = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size,
             config.vocab_size, config.max_position_embeddings)
    assert shape == (12, 768, 12, 3072, 30522, 512)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    # bert-base-uncased's vocabulary: 30,522 uncased WordPiece entries with its special-token ids
    assert len(tokenizer) == 30522 and tokenizer.do_lower_case
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
            tokenizer.mask_token_id] == [0, 100, 101, 102, 103]


def test_device_gemm_peaks_and_datasheet(monkeypatch: pytest.MonkeyPatch) -> None:
    config = type("C", (), {"hidden_size": 16, "intermediate_size": 32})()
    shapes = gemm_shapes(config, 64)
    assert shapes == [(64, 16, 16), (64, 16, 32), (64, 32, 16), (32, 32, 32)]
    assert gemm_shapes(config, 64, large=True)[-1] == (8192, 8192, 8192)
    peaks = device_gemm_peaks(torch.device("cpu"), shapes, repeats=1, inner=1)
    assert set(peaks) == {"float32", "bfloat16"} and all(rate > 0 for rate, _ in peaks.values())
    assert "not applicable" in datasheet_bf16(torch.device("cpu"))
    for name, expected in (("NVIDIA H100 80GB HBM3", "989 TFLOP/s"), ("NVIDIA H100 PCIe", "756 TFLOP/s"),
                           ("NVIDIA H200", "989 TFLOP/s"), ("NVIDIA H100 NVL", "835 TFLOP/s"), ("Tesla T4", "unknown")):
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None, name=name: name)
        assert expected in datasheet_bf16(torch.device("cuda")), name


def test_a_failing_suite_part_is_reported_and_the_run_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    assert not bench_suite_gpu.guarded("[bf16] encoding", broken)
    assert bench_suite_gpu.guarded("[fp32] encoding", lambda: None)
    out = capsys.readouterr().out
    assert out.startswith("[bf16] encoding: FAILED\nTraceback") and "illegal memory access" in out


@pytest.mark.slow
def test_gpu_checks_cpu_smoke_runs_every_part() -> None:
    """``bash benchmarks/gpu_checks.sh --cpu-smoke``: every part exits 0 and prints its figures, each issue 37
    target beside its baseline (a few minutes on the loaded 2-core machine)."""
    env = {**os.environ, "CL_BENCH_MINILM": str(minilm_path())}
    result = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_checks.sh"), "--cpu-smoke"], capture_output=True,
                            text=True, env=env, timeout=1200, check=False)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for part in ("training step, bf16", "training step, bf16, large batch", "evaluation suite"):
        assert re.search(rf"^=== {re.escape(part)}: exit 0, ", out, re.M), out
    assert out.count("throughput ratio cl-bench/plain = ") == 2
    assert re.search(r"^suite fp32: STS \(encode \+ score\) [0-9.]+ s \+ transfer encoding [0-9.]+ s \+ "
                     r"CPU classifiers [0-9.]+ s = [0-9.]+ s \(the baseline", out, re.M), out
    summary = out.split("=== summary ===", 1)[1]
    for target in (r"suite end to end: [0-9.]+ s .* target <= 15 s", r"STS-B dev evaluation .* target <= 0.3 s",
                   r"sweep job set-up in one process: .* target <= 2 s",
                   r"real-model STS bf16 vs fp32: largest \|difference\| [0-9.]+ .* rule \|difference\| <= 0.05",
                   r"classifiers: torch on cpu .* largest \|difference\| of any figure 0.00; target <= 0.1 on every "
                   r"task: MET"):
        assert re.search(target, summary), target + "\n" + summary
    assert re.search(r"\[(bf16|fp32)\] classifier trec : torch on cpu", out) and "finite: True" in out
    assert "classifier warm-up" in out


#: Packages cl-bench depends on that the GPU machine's image lacks (its package list, /work/.library/device/KINDS.md
#: in this workplace): the GPU benchmarks must run without them, since nothing can be installed there.
ABSENT_ON_GPU_IMAGE = ("hydra", "omegaconf", "mlflow", "nltk", "wn", "faiss", "pooch", "antlr4")


def test_gpu_benchmarks_import_without_packages_the_gpu_image_lacks() -> None:
    code = f"""
import importlib.abc, importlib.util, sys
absent = {ABSENT_ON_GPU_IMAGE!r}
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in absent:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, Absent())
find = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: None if name.split(".")[0] in absent else find(name, package)
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
import bench_train_step, bench_suite_gpu
import cl_bench.eval.suite, cl_bench.eval.transfer, cl_bench.methods.simcse.modeling
print("imported")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0 and result.stdout.strip() == "imported", result.stderr[-2000:]


def test_the_benchmarks_simcse_spec_is_its_yamls() -> None:
    """The GPU benchmarks write SimCSE's spec out (no Hydra on the GPU image): it equals conf/method/simcse.yaml's."""
    import bench_precision

    from cl_bench.config import yaml_spec

    assert bench_train_step.DROPOUT_SIMCSE == yaml_spec("method", "simcse") == bench_precision.DROPOUT_SIMCSE
