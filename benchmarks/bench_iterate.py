"""Issue 50's before/after: the README's offline job and a 4-job sweep, timed end to end with the code of another
commit ("before", default: ``main``) and with this tree ("after"), in the same run, on the same machine.

    python benchmarks/bench_iterate.py                 # the issue's exact commands (minutes each on 2 cores)
    python benchmarks/bench_iterate.py --short         # reduced sizes: checks the script works

"before" is a ``git archive`` of ``--before`` extracted into a temporary folder and run with ``PYTHONPATH`` pointing
there; "after" is this tree. Each run starts in a folder of its own (its Hydra outputs and ``mlruns``) with an empty
``CL_BENCH_CACHE`` of its own side (as a fresh clone: the side's first job pays its ONNX probe or export, later
jobs of that side reuse them), ``CL_BENCH_DATA`` and the model as given, offline. The jobs (the issue's targets):

* the README's offline job: before with ``eval=quick`` (today's README), after with ``eval=iterate`` (target: after
  <= 40% of before);
* the sweep ``-m method=simcse,sg_opt dropout=0,0.1 ... train.max_steps=3 batch_size=16 eval=iterate`` on both
  (target: after <= 30% of before).

Prints the CPU model and flags, the load (``uptime``) before and after each run, and a table of wall times, ratios
and targets. Machine load inflates both sides; run it on a quiet machine for the figures of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = "method=simcse model.name_or_path={model} pooler=avg data=wiki1m_head"

#: (name, before overrides, after overrides, target ratio); --short cuts the sizes
JOBS = {
    "full": [
        ("README offline job", f"{BASE} train.max_steps=50 train.eval_steps=25 eval=quick",
         f"{BASE} train.max_steps=50 train.eval_steps=25 eval=iterate", 0.40),
        ("4-job sweep", "-m method=simcse,sg_opt dropout=0,0.1 model.name_or_path={model} pooler=avg data=wiki1m_head "
         "train.max_steps=3 batch_size=16 eval=iterate", None, 0.30),
    ],
    "short": [
        ("README offline job (4 steps)", f"{BASE} train.max_steps=4 train.eval_steps=2 batch_size=16 eval=quick",
         f"{BASE} train.max_steps=4 train.eval_steps=2 batch_size=16 eval=iterate", 0.40),
        ("2-job sweep (2 steps)", "-m method=simcse dropout=0,0.1 model.name_or_path={model} pooler=avg "
         "data=wiki1m_head train.max_steps=2 batch_size=16 eval=iterate", None, 0.30),
    ],
}


def uptime() -> str:
    """The machine's load as ``uptime`` prints it."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def cpu_line() -> str:
    """CPU model, core count and the flags that matter here (bf16 units, AVX-512)."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    wanted = sorted(f for f in flags if f.startswith(("avx512f", "avx512_bf16", "amx")))
    return f"cpu: {model}; {os.cpu_count()} cores; flags: {' '.join(wanted) or '-'}"


def extract(revision: str, into: Path) -> Path:
    """``git archive revision`` of this repository extracted into ``into``; returns the folder."""
    archive = into / "before.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), revision], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "before", filter="data")
    return into / "before"


def run(label: str, code: Path, overrides: str, work: Path, cache: Path, log: Path) -> float:
    """Wall seconds of ``python -m cl_bench OVERRIDES`` with ``code`` first on PYTHONPATH, run in ``work``."""
    work.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(code), CL_BENCH_CACHE=str(cache), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("MLFLOW_TRACKING_URI", None)  # each run's own ./mlruns
    print(f"[{label}] load before: {uptime()}", flush=True)
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "-m", "cl_bench", *overrides.split()], cwd=work, env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - started
    print(f"[{label}] {seconds:.1f} s (exit {done.returncode}, log {log}); load after: {uptime()}", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"{label} failed (exit {done.returncode}): see {log}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="the commit (or branch) of 'before' (default: main)")
    parser.add_argument("--model", default=str(REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--short", action="store_true", help="reduced sizes: check that the script works")
    parser.add_argument("--keep", type=Path, default=None, help="a folder for the runs and logs (default: temporary)")
    args = parser.parse_args()
    model = str(Path(args.model).resolve())
    revision = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.before], capture_output=True,
                              text=True, check=True).stdout.strip()
    after_rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                               text=True, check=True).stdout.strip()
    print(cpu_line())
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, check=True).stdout.strip()
    print(f"before: {args.before} ({revision}); after: this tree ({REPO}, HEAD {after_rev}"
          f"{' + uncommitted changes' if dirty else ''})")
    print(f"CL_BENCH_DATA={os.environ.get('CL_BENCH_DATA', '(default)')}; model {model}")
    with tempfile.TemporaryDirectory(prefix="bench_iterate_") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        before_code = extract(args.before, root)
        rows = []
        for index, (name, before, after, target) in enumerate(JOBS["short" if args.short else "full"]):
            before_s = run(f"{name}, before", before_code, before.format(model=model), root / f"{index}-before",
                           root / "cache-before", root / f"{index}-before.log")
            after_s = run(f"{name}, after", REPO, (after or before).format(model=model), root / f"{index}-after",
                          root / "cache-after", root / f"{index}-after.log")
            rows.append((name, before_s, after_s, target))
        print(f"\n| job | before ({revision}) s | after s | after / before | target |")
        print("|---|---|---|---|---|")
        for name, before_s, after_s, target in rows:
            ratio = after_s / before_s
            print(f"| {name} | {before_s:.0f} | {after_s:.0f} | {100 * ratio:.0f}% | <= {100 * target:.0f}% "
                  f"{'(met)' if ratio <= target else '(missed)'} |")
        print(f"load at the end: {uptime()}")


if __name__ == "__main__":
    main()
