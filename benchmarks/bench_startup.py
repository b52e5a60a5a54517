"""How long ``cl-bench`` takes to answer when nothing needs a model, beside ``python -c pass``.

Runs each command ``--repeats`` times in a fresh interpreter (from an empty folder, with this
checkout first on ``PYTHONPATH``) and prints the median wall time and the median CPU time (user +
system of the child), then which of torch, transformers, MLflow, scikit-learn and pandas the
command imported (one more run under ``python -X importtime``). The CPU model, its flags and the load
average are printed first and last: on a shared machine the wall time follows the load, the CPU
time much less.

Usage::

    python benchmarks/bench_startup.py              # median of 5
    python benchmarks/bench_startup.py --reference  # also python -c "import torch, transformers, mlflow"
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "mlflow", "sklearn", "pandas")
#: a local checkpoint folder (its width is read from config.json): models/ beside the data root ($CL_BENCH_DATA)
MINILM = Path(os.environ.get("CL_BENCH_DATA", "data")).absolute().parent / "models" / "all-MiniLM-L6-v2"

#: (label, arguments after the interpreter); the rejections are the issue-25 inputs and its example
COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("cl-bench loss.tau=-1", ["-m", "cl_bench", "loss.tau=-1"]),
    ("cl-bench batch_size=abc", ["-m", "cl_bench", "batch_size=abc"]),
    ("cl-bench train.eval_steps=-5", ["-m", "cl_bench", "train.eval_steps=-5"]),
    ("cl-bench train.max_steps=0", ["-m", "cl_bench", "train.max_steps=0"]),
    ("cl-bench augmentation=eda_delete augmentation.p=2", ["-m", "cl_bench", "augmentation=eda_delete", "augmentation.p=2"]),
    ("cl-bench method=simcsee", ["-m", "cl_bench", "method=simcsee"]),
    ("cl-bench --help", ["-m", "cl_bench", "--help"]),
    ("cl-bench-report --help", ["-m", "cl_bench.commands.report_cli", "--help"]),
    ("cl-bench list", ["-m", "cl_bench", "list"]),
    # rejections decided by a method's or loss's spec (its declarations and keys)
    ("cl-bench loss=sg_opt", ["-m", "cl_bench", "loss=sg_opt"]),
    ("cl-bench method=sbert augmentation=eda_delete", ["-m", "cl_bench", "method=sbert", "augmentation=eda_delete"]),
    ("cl-bench method.mlm_weight=abc", ["-m", "cl_bench", "method.mlm_weight=abc"]),
    ("cl-bench loss.hard_negative_alpha=0.5", ["-m", "cl_bench", "loss.hard_negative_alpha=0.5"]),
    # rejections by a method's, loss's or augmentation's own rules (its spec's check, inert_keys, check_setting)
    ("cl-bench method=cert method.queue_size=0", ["-m", "cl_bench", "method=cert", "method.queue_size=0"]),
    ("cl-bench method=diffcse method.mask_ratio=2", ["-m", "cl_bench", "method=diffcse", "method.mask_ratio=2"]),
    ("cl-bench method=cert method.mochi_hardest=5", ["-m", "cl_bench", "method=cert", "method.mochi_hardest=5"]),
    ("cl-bench loss=mixcse loss.lambd=2", ["-m", "cl_bench", "loss=mixcse", "loss.lambd=2"]),
    ("cl-bench augmentation=word_repetition augmentation.dup_type=x",
     ["-m", "cl_bench", "augmentation=word_repetition", "augmentation.dup_type=x"]),
    ("cl-bench train.matryoshka_dims=[0]", ["-m", "cl_bench", "train.matryoshka_dims=[0]"]),
    ("cl-bench eval.seed=3", ["-m", "cl_bench", "eval.seed=3"]),
    ("cl-bench model.name_or_path=MiniLM eval.truncate_dim=400",
     ["-m", "cl_bench", f"model.name_or_path={MINILM}", "eval.truncate_dim=400"]),
    ("cl-bench eval.tasks=[sts,foo]", ["-m", "cl_bench", "eval.tasks=[sts,foo]"]),
    ("cl-bench eval.tasks=sts", ["-m", "cl_bench", "eval.tasks=sts"]),
    ("cl-bench mode=eval model.name_or_path=MiniLM eval.tasks=[foo]",
     ["-m", "cl_bench", "mode=eval", f"model.name_or_path={MINILM}", "eval.tasks=[foo]"]),
    # answered early where the data root (CL_BENCH_DATA) holds wiki1m_head and the evaluation's files
    ("cl-bench model.name_or_path=./no_such_model data=wiki1m_head",
     ["-m", "cl_bench", "model.name_or_path=./no_such_model", "data=wiki1m_head"]),
    # missing files (issue 38, item 6: the corpus took 6 s, torch loaded first)
    ("cl-bench model.name_or_path=MiniLM data.train_file=./nope.txt",
     ["-m", "cl_bench", f"model.name_or_path={MINILM}", "data.train_file=./nope.txt"]),
    ("cl-bench model.name_or_path=MiniLM train.resume=./no_run",
     ["-m", "cl_bench", f"model.name_or_path={MINILM}", "train.resume=./no_run"]),
    # a flag after the overrides (issue 39, item 2: argparse's usage before)
    ("cl-bench dropout=0,0.1 -m train.max_steps=0", ["-m", "cl_bench", "dropout=0,0.1", "-m", "train.max_steps=0"]),
]
REFERENCE = ("python -c 'import torch, transformers, mlflow'", ["-c", "import torch, transformers, mlflow"])


def cpu_description() -> str:
    """CPU model, the flags that decide the kernels, cores and the load average."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "unknown")
    flags_line = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    flags = sorted(set(flags_line) & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni"})
    return f"CPU: {model}, {os.cpu_count()} cores, flags: {' '.join(flags) or '-'}"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def time_command(args: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system of the child) and exit status of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def heavy_imports(args: list[str], cwd: str, env: dict[str, str]) -> list[str]:
    """The HEAVY top-level packages a run imports (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", proc.stderr, flags=re.MULTILINE))
    return [name for name in HEAVY if name in imported]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reference", action="store_true", help="also time importing torch, transformers, mlflow")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    commands = [c for c in COMMANDS if "MiniLM" not in c[0] or MINILM.is_dir()] + ([REFERENCE] if args.reference else [])
    print(cpu_description())
    print(f"load average (1, 5, 15 min) before: {load_average()}; python {sys.version.split()[0]}; "
          f"median of {args.repeats} runs each")
    width = max(len(label) for label, _ in commands)
    print(f"{'command':<{width}} {'exit':>4} {'wall s':>7} {'CPU s':>6}  imports")
    with tempfile.TemporaryDirectory() as cwd:  # a rejected command must leave no outputs/ anyway
        for label, command in commands:
            runs = [time_command(command, cwd, env) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            heavy = heavy_imports(command, cwd, env)
            print(f"{label:<{width}} {runs[0][2]:>4} {wall:>7.2f} {cpu:>6.2f}  {', '.join(heavy) or '-'}", flush=True)
        leftovers = sorted(str(p.relative_to(cwd)) for p in Path(cwd).iterdir())
    print(f"load average (1, 5, 15 min) after: {load_average()}")
    if leftovers:
        print(f"left in the working folder: {', '.join(leftovers)}")


if __name__ == "__main__":
    main()
