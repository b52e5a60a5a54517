"""Every missing-file answer comes before torch is imported, in the job's words (issue 38, item 6): a corpus, a
``train.resume`` folder, a data root; with a local model, the hub's default offline, inside or outside the data root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import _PROBE, data_root, job_first_error, minilm_path

ROOT = Path(__file__).resolve().parents[2]


def test_missing_files_answer_before_torch_as_the_job(tmp_path: Path) -> None:
    """Each command's one line and exit 2 come with torch, transformers, MLflow and scikit-learn not imported, and
    equal the job's own first rejection (:func:`cl_bench.config.validate`)."""
    model = f"model.name_or_path={minilm_path()}"
    data = data_root()
    argvs = [
        [model, f"data.train_file={tmp_path / 'nope.txt'}"],
        [f"data.train_file={tmp_path / 'nope.txt'}"],  # the default hub model, offline and not looked for first
        [model, f"data.train_file={data / 'corpus' / 'nope.txt'}"],  # in the data root: no download for it
        [model, f"train.resume={tmp_path / 'no_run'}"],
        [model, f"paths.data_dir={tmp_path / 'no_data'}"],
    ]
    expected_starts = ["data.train_file: corpus file not found: ", "data.train_file: corpus file not found: ",
                       "data.train_file: ", "train.resume: run directory not found: ",
                       "data.train_file: data root "]
    env = dict(os.environ, PYTHONPATH=str(ROOT), CL_BENCH_DATA=str(data), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [], f"imported before the answer: {result['heavy']}"
    for argv, start, (code, stderr, _) in zip(argvs, expected_starts, result["answers"], strict=True):
        assert code == 2 and stderr.startswith(f"cl-bench: error: {start}"), (argv, stderr)
        assert stderr.strip().splitlines() == [stderr.strip()]
        assert stderr.strip() == job_first_error(argv), argv
    assert not (tmp_path / "outputs").exists()
