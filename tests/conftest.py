"""Shared fixtures: offline environment, the real data root, tiny random BERTs built locally."""

from __future__ import annotations

import compileall
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cl_bench.utils.cache_dirs import data_dir_from_environment

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# ONNX exports, embeddings, back-translations of a test session go to a fresh folder, not ~/.cache
os.environ.setdefault("CL_BENCH_CACHE", tempfile.mkdtemp(prefix="cl_bench_cache_"))

REPO_ROOT = Path(__file__).resolve().parents[1]
# A relative CL_BENCH_DATA made absolute once, for the whole session: subprocesses run from temporary folders and
# tests reading the variable directly then see the folder the user meant, not one relative to where they run.
if (_data_dir := data_dir_from_environment()) is not None:
    os.environ["CL_BENCH_DATA"] = str(_data_dir)
# Many tests run `cl-bench` in a subprocess, each importing cl_bench; where PYTHONDONTWRITEBYTECODE is set (CI's
# machines) nothing writes cl_bench's .pyc files and every subprocess compiles the sources again (1.5 s for the
# training stack here): compiled once for the session instead.
compileall.compile_dir(REPO_ROOT / "cl_bench", quiet=1)
MISSING_DATA = (
    "real data not found: set CL_BENCH_DATA to a data root with sts/, transfer/, corpus/, nli/ "
    "(e.g. CL_BENCH_DATA=../shared/data), or fetch it with `cl-bench-data download`"
)
WORDS = (
    "the a an and of to in is was for on with as by at it he she they we you this that from his her their "
    "man woman dog cat plays playing runs running eats food music guitar piano street car house water "
    "child children ball field red blue green big small old new good bad happy sad fast slow people two three "
    "sits sitting walks walking table chair book reads reading sun sky tree park bike rides riding"
).split()


def data_root() -> Path:
    """The real data root from CL_BENCH_DATA, as an absolute path; fails (never skips) when it is missing.

    A relative value (the README's ``CL_BENCH_DATA=../shared/data``) is made absolute by cl-bench's own helper,
    so that a test linking ``data_root() / "sts"`` into a temporary data root makes a link that resolves."""
    root = data_dir_from_environment()
    if root is None or not (root / "sts").is_dir():
        pytest.fail(MISSING_DATA)
    return root


def minilm_path() -> Path:
    """The real pretrained all-MiniLM-L6-v2 (models/ beside the data root, or CL_BENCH_MINILM)."""
    path = Path(os.environ.get("CL_BENCH_MINILM", data_root().parent / "models" / "all-MiniLM-L6-v2"))
    if not (path / "config.json").is_file():
        pytest.fail(f"all-MiniLM-L6-v2 not found at {path}: set CL_BENCH_MINILM to its directory")
    return path


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for `cl-bench` subprocesses on tiny models: real data root, one torch thread
    (tiny matrices gain nothing from a second thread and lose a lot when cores are busy)."""
    env = dict(os.environ, CL_BENCH_DATA=str(data_dir), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def build_tiny_bert(out_dir: Path, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """Save a tiny random BertModel + WordPiece tokenizer to ``out_dir`` (no download)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"],
             *"abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()"]
    vocab = list(dict.fromkeys(vocab))
    (out_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(out_dir / "vocab.txt"), do_lower_case=True)  # transformers 5 ignores vocab_file=
    tokenizer.save_pretrained(out_dir)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=hidden * 2, max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(out_dir)
    return out_dir


@pytest.fixture(autouse=True)
def _restore_data_root_variable() -> Iterator[None]:
    """Tests that compose a config point CL_BENCH_DATA at their own folder: restore it after each, so
    that a later test's :func:`data_root`/:func:`minilm_path` find the real data whatever ran before."""
    saved = os.environ.get("CL_BENCH_DATA")
    yield
    if saved is None:
        os.environ.pop("CL_BENCH_DATA", None)
    else:
        os.environ["CL_BENCH_DATA"] = saved


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of a tiny random BERT saved in Hugging Face format."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data root (CL_BENCH_DATA)."""
    return data_root()
