"""The export's model card shows the run's values, never a ``${...}`` interpolation."""

from __future__ import annotations

import json
from pathlib import Path

from cl_bench.commands.st_model import _load_config


def test_config_values_left_as_interpolations_come_from_the_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(
        "paths:\n  data_dir: ${cl_bench.data_dir:}\n  output_dir: ${hydra:runtime.output_dir}\n"
        "data:\n  name: wiki1m_head\n  train_file: ${paths.data_dir}/corpus/head.txt\n"
        "dropout: 0.1\nmodel:\n  dropout: ${dropout}\n")
    (run / "params.json").write_text(json.dumps({"paths.data_dir": "/data", "data.train_file": "/data/corpus/head.txt"}))
    config = _load_config(run / ".hydra" / "config.yaml")
    assert config["paths"] == {"data_dir": "/data", "output_dir": str(run)}
    assert config["data"]["train_file"] == "/data/corpus/head.txt" and config["model"]["dropout"] == 0.1
