"""Hints that fit: the key a user meant, one line for a wrong type, no advice to do what was already done."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cl_bench.config import ConfigError, validate
from cl_bench.config.early_checks import CONF_DIR, check_override_keys
from cl_bench.data.download import ensure_data
from cl_bench.models.hub import hub_hint, wants_decoder


def test_a_bare_leaf_key_suggests_the_full_key() -> None:
    with pytest.raises(ConfigError, match=r"^tau: unknown key; closest valid key: loss\.tau$"):
        check_override_keys(["tau=0.05"])
    with pytest.raises(ConfigError, match=r"^trian\.lr: unknown key; closest valid key: train\.lr$"):
        check_override_keys(["trian.lr=1e-5"])


@pytest.mark.parametrize("arg", ["train.lr=abc", "train.lr=1e-5,abc", "train.max_steps=1.5"])
def test_a_value_of_the_wrong_type_is_one_line(arg: str) -> None:
    key = arg.split("=")[0]
    with pytest.raises(ConfigError, match=rf"^{key}: Value '.*' of type '.*' could not be converted to "):
        check_override_keys([arg])
    check_override_keys(["train.lr=1e-5", "dropout=0,0.1"])  # right types pass


def test_console_exit_2_and_help() -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-m", "cl_bench", "train.lr=abc"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "cl-bench: error: train.lr: Value 'abc' of type 'str' could not be converted to Float"], proc.stderr
    out = subprocess.run([sys.executable, "-m", "cl_bench", "--help"], capture_output=True, text=True, env=env,
                         timeout=120).stdout
    head = "\n".join(out.splitlines()[:8])
    assert "cl-bench list" in head and "README" in head


def test_hub_hint_suggests_only_a_folder_that_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CL_BENCH_DATA", str(tmp_path / "data"))
    assert "e.g." not in hub_hint("bert-base-uncased")  # nothing local: no example rather than a wrong one
    model = tmp_path / "models" / "mini"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    hint = hub_hint("bert-base-uncased")
    assert f"e.g. model.name_or_path={model}," in hint and Path(hint.split("e.g. model.name_or_path=")[1].split(",")[0]).is_dir()
    assert hint.endswith("or put the hub model in the cache on a machine with network "
                         "(how: docs/compare.md#offline-models-that-are-not-on-the-machine)")


def test_hub_hint_names_no_path_of_this_repositorys_test_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``../shared/models`` beside the working directory is this repository's test set-up, not a user's folder:
    the hint names a folder beside the user's data root only, by its absolute path."""
    (tmp_path / "shared" / "models" / "mini").mkdir(parents=True)
    (tmp_path / "shared" / "models" / "mini" / "config.json").write_text("{}")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.delenv("CL_BENCH_DATA", raising=False)
    assert "shared" not in hub_hint("bert-base-uncased") and "e.g." not in hub_hint("bert-base-uncased")
    monkeypatch.setenv("CL_BENCH_DATA", "../shared/data")  # the data root as the user gave it, relative
    hint = hub_hint("bert-base-uncased")
    assert f"e.g. model.name_or_path={tmp_path / 'shared' / 'models' / 'mini'}," in hint and "../" not in hint


def test_hub_hint_points_a_decoder_run_at_a_decoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder run (pooler=last_token) is not pointed at a local encoder such as all-MiniLM-L6-v2."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CL_BENCH_DATA", str(tmp_path / "data"))
    encoder = tmp_path / "models" / "all-MiniLM-L6-v2"
    encoder.mkdir(parents=True)
    (encoder / "config.json").write_text('{"architectures": ["BertModel"], "model_type": "bert"}')
    assert wants_decoder("last_token") and wants_decoder("avg", True) and not wants_decoder("avg")
    assert f"e.g. model.name_or_path={encoder}," in hub_hint("bert-base-uncased", decoder=False)
    decoder_hint = hub_hint("Qwen/Qwen2-0.5B", decoder=True)
    assert "e.g." not in decoder_hint and "MiniLM" not in decoder_hint and "in the cache" in decoder_hint
    qwen = tmp_path / "models" / "qwen2-tiny"
    qwen.mkdir()
    (qwen / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}')
    assert f"e.g. model.name_or_path={qwen}," in hub_hint("Qwen/Qwen2-0.5B", decoder=True)


def test_data_advice_leaves_out_what_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CL_BENCH_DATA_OFFLINE", "1")
    wanted = [("data.train_file", "corpus/wiki1m_for_simcse.head.txt")]
    with pytest.raises(Exception, match="data=wiki1m_head") as plain:
        ensure_data(tmp_path, wanted, progress=False)
    with pytest.raises(Exception) as given:
        ensure_data(tmp_path, wanted, progress=False, tried={"data=wiki1m_head"})
    assert "data=wiki1m_head" not in str(given.value) and "data.train_file=FILE" in str(given.value)
    del plain


def test_offline_model_and_data_problems_are_reported_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # nothing cached
    monkeypatch.delenv("CL_BENCH_DATA", raising=False)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"paths.data_dir={tmp_path / 'data'}", "data=wiki1m_head",
                                           "model.name_or_path=bert-base-uncased"])
    with pytest.raises(ConfigError) as err:
        validate(cfg, ["data=wiki1m_head", "model.name_or_path=bert-base-uncased"])
    message = str(err.value)
    assert "\n" not in message and message.startswith("model.name_or_path: cannot load 'bert-base-uncased'")
    assert "data.train_file: " in message and "data=wiki1m_head" not in message.split("data.train_file: ")[1]
