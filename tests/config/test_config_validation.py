"""Bad input fails before any model loads, with one line naming the key (or file and line)."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import data_root
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from cl_bench.config import ConfigError, validate
from cl_bench.config.early_checks import CONF_DIR, check_group_choices
from cl_bench.models.hub import ModelLoadError, check_model_reachable
from cl_bench.utils.network import PROBE_TIMEOUT


def _compose(data_dir: Path, overrides: list[str]):
    # the data root as an override, not CL_BENCH_DATA: the environment would leak into later tests
    root = [] if any(o.startswith("paths.data_dir=") for o in overrides) else [f"paths.data_dir={data_dir}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*root, *overrides])


@pytest.fixture()
def corpus_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "sts").symlink_to(data_root() / "sts")  # the evaluation's files: nothing to fetch
    (root / "corpus" / "ok.txt").write_text("a man plays the guitar\nthe dog runs\n")
    return root


def _ok(root: Path, tiny_bert: Path) -> list[str]:
    return [f"model.name_or_path={tiny_bert}", f"data.train_file={root}/corpus/ok.txt"]


def test_valid_config_passes(corpus_root, tiny_bert) -> None:
    validate(_compose(corpus_root, _ok(corpus_root, tiny_bert)))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("loss.tau=0", "loss.tau: must be > 0"),
        ("loss.tau=-0.5", "loss.tau: must be > 0"),
        ("batch_size=1", "batch_size: must be >= 2"),
        ("dropout=1.0", "dropout: must be in [0, 1)"),
        ("dropout=-0.1", "dropout: must be in [0, 1)"),
        ("model.max_length=0", "model.max_length: must be >= 1"),
        ("train.lr=0", "train.lr: must be > 0"),
        ("pooler.name=max", "pooler.name: must be one of cls, "),
        ("train.compile=maybe", "train.compile: must be one of auto, true, false, got 'maybe'"),
    ],
)
def test_bad_values_name_their_key(corpus_root, tiny_bert, override: str, message: str) -> None:
    cfg = _compose(corpus_root, [*_ok(corpus_root, tiny_bert), override])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_key_in_a_target_node(corpus_root, tiny_bert) -> None:
    cfg = _compose(corpus_root, _ok(corpus_root, tiny_bert))
    with open_dict(cfg.method):  # as Hydra's +method.mlm_wieght=0.1 adds it past the method's schema
        cfg.method.mlm_wieght = 0.1
    with pytest.raises(ConfigError, match=r"method.mlm_wieght: unknown key .* valid keys: mlm_weight"):
        validate(cfg)


def test_misspelled_override_key_fails_at_composition(corpus_root) -> None:
    with pytest.raises(Exception, match="tua"):
        _compose(corpus_root, ["loss.tua=0.1"])
    with pytest.raises(Exception, match="train.max_steps=abc") as err:
        _compose(corpus_root, ["train.max_steps=abc"])
    assert "could not be converted to Integer" in str(err.value.__cause__)
    with pytest.raises(Exception, match="method.mlm_weight=abc") as err:  # typed by the method's spec (its schema)
        _compose(corpus_root, ["method.mlm_weight=abc"])
    assert "could not be converted to Float" in str(err.value.__cause__)
    for override, choices in (("mode=serve", "[train, eval]"), ("method.mlm_mode=noisy", "[clean, masked, untied]")):
        with pytest.raises(Exception, match=override) as err:  # a choice is a StrEnum: no other value composes
            _compose(corpus_root, [override])
        assert f"expected one of {choices}" in str(err.value.__cause__)


def test_missing_files_are_named(corpus_root, tiny_bert, tmp_path) -> None:
    cfg = _compose(corpus_root, [*_ok(corpus_root, tiny_bert), f"data.train_file={corpus_root}/corpus/nope.txt"])
    with pytest.raises(ConfigError, match="corpus file not found: .*nope.txt"):
        validate(cfg)
    cfg = _compose(corpus_root, [*_ok(corpus_root, tiny_bert), f"paths.data_dir={tmp_path}/absent"])
    with pytest.raises(ConfigError, match="paths.data_dir: data root .*absent.* not found"):
        validate(cfg)
    cfg = _compose(corpus_root, [f"data.train_file={corpus_root}/corpus/ok.txt", f"model.name_or_path={tmp_path}/nomodel"])
    with pytest.raises(ConfigError, match="model.name_or_path: no Hugging Face model"):
        validate(cfg)


def test_empty_and_non_utf8_corpora(corpus_root, tiny_bert) -> None:
    (corpus_root / "corpus" / "empty.txt").write_text("\n  \n")
    cfg = _compose(corpus_root, [*_ok(corpus_root, tiny_bert), f"data.train_file={corpus_root}/corpus/empty.txt"])
    with pytest.raises(ConfigError, match="empty.txt: corpus is empty"):
        validate(cfg)
    with gzip.open(corpus_root / "corpus" / "bad.txt.gz", "wb") as fh:
        fh.write(b"fine line\nsecond line\ncaf\xe9 latin-1\n")
    cfg = _compose(corpus_root, [*_ok(corpus_root, tiny_bert), f"data.train_file={corpus_root}/corpus/bad.txt.gz"])
    with pytest.raises(ConfigError, match=r"bad.txt.gz:3: not valid UTF-8"):
        validate(cfg)


def test_hub_id_offline_fails_at_once_with_a_hint(corpus_root, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(corpus_root / "empty_hf_home"))
    cfg = _compose(corpus_root, [f"data.train_file={corpus_root}/corpus/ok.txt", "model.name_or_path=bert-base-uncased"])
    with pytest.raises(ConfigError, match="point model.name_or_path at a local Hugging Face directory"):
        validate(cfg)


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def test_hub_id_without_network_is_one_probe(corpus_root, monkeypatch) -> None:
    """No HF_HUB_OFFLINE, no network (a hub endpoint nothing listens on): one probe, one line, at once."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", _closed_port_url())
    monkeypatch.setenv("HF_HOME", str(corpus_root / "empty_hf_home"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(corpus_root / "empty_hf_home" / "hub"))
    started = time.perf_counter()
    with pytest.raises(ModelLoadError, match="model.name_or_path: cannot load 'bert-base-uncased'") as err:
        check_model_reachable("bert-base-uncased")
    assert time.perf_counter() - started < PROBE_TIMEOUT + 1 and "\n" not in str(err.value)


@pytest.mark.parametrize("offline", ["1", ""])
def test_hub_id_without_network_exits_2_with_one_line(corpus_root, tiny_bert, offline: str) -> None:
    """The console command, with and without HF_HUB_OFFLINE: exit 2, one line (before: 40 s and 102 lines)."""
    env = dict(os.environ, CL_BENCH_DATA=str(corpus_root), HF_HUB_OFFLINE=offline, TRANSFORMERS_OFFLINE=offline,
               HF_HOME=str(corpus_root / "empty_hf_home"), HF_ENDPOINT=_closed_port_url())
    cmd = [sys.executable, "-m", "cl_bench.commands.cli", *_ok(corpus_root, tiny_bert), "model.name_or_path=bert-base-uncased",
           f"hydra.run.dir={corpus_root}/run", "logger.enabled=false"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    seconds = time.perf_counter() - started
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "cl-bench: error: model.name_or_path: cannot load 'bert-base-uncased' from the Hugging Face hub (offline or "
        "no network); point model.name_or_path at a local Hugging Face directory"), proc.stderr
    if "e.g. model.name_or_path=" in lines[0]:  # an example only when it exists
        assert (Path(lines[0].split("e.g. model.name_or_path=")[1].split(",")[0]) / "config.json").is_file()
    # no retries: the hub's took 40 s. Compared with the same command on a missing local folder, timed in the same
    # test, so that a loaded machine's slower start-up is in both figures
    missing = [arg if not arg.startswith("model.name_or_path=") else f"model.name_or_path={corpus_root}/no_model"
               for arg in cmd]
    started = time.perf_counter()
    reference = subprocess.run(missing, capture_output=True, text=True, env=env, timeout=120)
    reference_seconds = time.perf_counter() - started
    assert reference.returncode == 2 and "model.name_or_path" in reference.stderr, reference.stderr
    assert seconds < 1.5 * reference_seconds + 10, (seconds, reference_seconds)


def test_unknown_group_option_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match="method: unknown method 'simcsee'; valid: .*simcse"):
        check_group_choices(["method=simcsee"])
    with pytest.raises(ConfigError, match="pooler: unknown pooler 'max'"):
        check_group_choices(["-m", "pooler=avg,max"])
    check_group_choices(["method=simcse", "loss.tau=0.1", "experiment=null"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["loss.tua=0.1"], "loss.tua: unknown key; closest valid key: loss.tau"),
        (["dropuot=0.1"], "dropuot: unknown key; closest valid key: dropout"),
        (["-m", "method=simcse,sg_opt", "method.mlm_wieght=0.1"], "method.mlm_wieght: unknown key; closest valid key: method.mlm_weight"),
        (["method=sg_opt", "method.mlm_weight=0.1"], "method.mlm_weight: unknown key"),  # SimCSE's key, not SG-OPT's
    ],
)
def test_misspelled_key_names_the_closest_valid_one(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_group_choices(argv)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_valid_keys_of_any_swept_option_pass() -> None:
    # mlm_weight is a key of simcse, one of the swept methods; list items, +new keys and hydra keys are Hydra's
    check_group_choices(["-m", "method=sg_opt,simcse", "method.mlm_weight=0.1", "dropout=0,0.1", "eval.tasks.0=sts",
                         "+extra=1", "hydra.run.dir=x", "experiment=cpu_repro", "+experiment/points=tau_0.1"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["loss=nope"], "cl-bench: error: loss: unknown loss 'nope'; valid:"),
        (["loss.tau=0"], "cl-bench: error: loss.tau: must be > 0, got 0"),
        (["loss.tua=0.1"], "cl-bench: error: loss.tua: unknown key; closest valid key: loss.tau"),
        (["dropuot=0.1"], "cl-bench: error: dropuot: unknown key; closest valid key: dropout"),
    ],
)
def test_console_command_exits_nonzero_with_one_line(corpus_root, tiny_bert, args, message) -> None:
    env = dict(os.environ, CL_BENCH_DATA=str(corpus_root))
    cmd = [sys.executable, "-m", "cl_bench.commands.cli", *_ok(corpus_root, tiny_bert), *args,
           f"hydra.run.dir={corpus_root}/run", "logger.enabled=false"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("cl-bench: error:")]
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr
    assert not (corpus_root / "run").exists()  # no run directory left behind by a command that failed
