"""What a model folder is checked for before any weights load (issue 46): the safetensors header, a path-looking name,
and the encoder class it records, which picks an entry of cl-bench's own registry and imports nothing it names."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cl_bench
from cl_bench.models.hub import (
    ENCODER_CLASSES,
    ModelLoadError,
    check_model_reachable,
    check_safetensors,
    encoder_class_name,
    is_hub_id,
    is_local_path,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_valid_safetensors_file_passes_and_broken_ones_are_named(tiny_bert: Path, tmp_path: Path) -> None:
    check_safetensors(tiny_bert / "model.safetensors")
    weights = (tiny_bert / "model.safetensors").read_bytes()
    header = int.from_bytes(weights[:8], "little")
    broken = {
        "empty": (b"", "0 bytes, shorter than its 8-byte header length"),
        "garbage": (b"\xff" * 4000, "header length"),
        "cut_header": (weights[: 8 + header // 2], "header length"),
        "cut_data": (weights[: 8 + header + 10], "the file is truncated"),
        "not_json": ((5).to_bytes(8, "little") + b"{oops" + b"\0" * 10, "header is not JSON"),
        "not_object": ((2).to_bytes(8, "little") + b"[]", "header is not a JSON object"),
    }
    for name, (content, why) in broken.items():
        path = tmp_path / f"{name}.safetensors"
        path.write_bytes(content)
        with pytest.raises(ModelLoadError, match=r"^model\.name_or_path: .*: not a readable safetensors file") as err:
            check_safetensors(path)
        assert str(path) in str(err.value) and why in str(err.value) and "\n" not in str(err.value), name


def test_the_safetensors_check_agrees_with_the_safetensors_library(tiny_bert: Path, tmp_path: Path) -> None:
    """Each file the check passes loads with safetensors; each it rejects, safetensors rejects too."""
    from safetensors import safe_open

    weights = (tiny_bert / "model.safetensors").read_bytes()
    for cut in (len(weights), len(weights) - 1, len(weights) // 2, 100, 7):
        path = tmp_path / f"cut_{cut}.safetensors"
        path.write_bytes(weights[:cut])
        try:
            check_safetensors(path)
            ours = True
        except ModelLoadError:
            ours = False
        try:
            with safe_open(str(path), framework="np") as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
                    handle.get_tensor(key)
            theirs = True
        except Exception:  # noqa: BLE001 (whatever the library raises)
            theirs = False
        assert ours == theirs, cut


@pytest.mark.parametrize(("name", "local"), [
    ("bert-base-uncased", False), ("princeton-nlp/unsup-simcse-bert-base-uncased", False),
    ("outputs/runs/2026-13-01/12-00-00/best_model", True), ("./model", True), ("../m", True), ("/abs/m", True),
    ("~/m", True), ("a/b/c", True), ("a b c", False),
])
def test_a_name_with_a_separator_that_is_no_hub_id_is_a_local_path(name: str, local: bool) -> None:
    assert is_local_path(name) is local
    if not local:
        assert is_hub_id(name) is (" " not in name)


def test_a_missing_run_folder_names_its_first_missing_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs" / "runs").mkdir(parents=True)
    with pytest.raises(ModelLoadError) as err:
        check_model_reachable("outputs/runs/2026-13-01/12-00-00/best_model")
    assert str(err.value) == ("model.name_or_path: no Hugging Face model at 'outputs/runs/2026-13-01/12-00-00/best_model' "
                              "(folder outputs/runs/2026-13-01 not found)")


def test_the_registry_holds_every_sentence_encoder_class_of_cl_bench() -> None:
    """ENCODER_CLASSES names each SentenceEncoder subclass defined in cl_bench, with its module."""
    from cl_bench.models.encoder import SentenceEncoder

    found = {}
    for module in pkgutil.walk_packages(cl_bench.__path__, "cl_bench."):
        if module.name.startswith(("cl_bench.commands", "cl_bench.__main__")):
            continue
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if inspect.isclass(value) and issubclass(value, SentenceEncoder) and value.__module__ == module.name:
                found[name] = module.name
    assert found == ENCODER_CLASSES


def test_recorded_names_old_paths_and_anything_else() -> None:
    assert encoder_class_name("ISBERTEncoder", "x") == "ISBERTEncoder"
    assert encoder_class_name("cl_bench.methods.is_bert.ISBERTEncoder", "x") == "ISBERTEncoder"  # saved before
    for bad in ("this.Foo", "os.system", "cl_bench.methods.simcse.ISBERTEncoder", "Foo"):
        with pytest.raises(ModelLoadError, match=r"is not one of cl-bench's encoder classes"):
            encoder_class_name(bad, "x")


def test_a_saved_encoder_records_a_registry_name_and_loads_back(tiny_bert: Path, tmp_path: Path) -> None:
    from cl_bench.methods.promptbert.modeling import PromptBERTEncoder
    from cl_bench.models.encoder import _saved_encoder_class, build_encoder

    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    encoder.save(tmp_path / "plain")
    assert json.loads((tmp_path / "plain" / "cl_bench_encoder.json").read_text())["encoder_class"] == "SentenceEncoder"
    assert _saved_encoder_class(str(tmp_path / "plain")) is None
    shutil.copytree(tmp_path / "plain", tmp_path / "old")
    meta = tmp_path / "old" / "cl_bench_encoder.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()),
                                "encoder_class": "cl_bench.methods.promptbert.PromptBERTEncoder"}))
    assert _saved_encoder_class(str(tmp_path / "old")) is PromptBERTEncoder  # a folder saved before the registry


def test_a_planted_class_path_imports_nothing(tiny_bert: Path, tmp_path: Path) -> None:
    """``"encoder_class": "this.Foo"``: loading the folder for evaluation fails in one line and ``this`` (whose import
    prints the Zen of Python) is never imported."""
    folder = tmp_path / "evil"
    shutil.copytree(tiny_bert, folder)
    (folder / "cl_bench_encoder.json").write_text(json.dumps({"encoder_class": "this.Foo", "pooler": "avg"}))
    probe = f"""
import sys
from cl_bench.models.encoder import build_encoder
from cl_bench.models.hub import ModelLoadError
try:
    build_encoder({str(folder)!r}, pooler="avg", fresh_mlp=False)
except ModelLoadError as err:
    print("rejected:", err)
print("imported this:", "this" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rejected: model.name_or_path: " in proc.stdout and "encoder_class 'this.Foo'" in proc.stdout
    assert "imported this: False" in proc.stdout and "Beautiful is better" not in proc.stdout
