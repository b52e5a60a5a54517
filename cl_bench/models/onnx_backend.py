"""The ONNX Runtime backend: a backbone exported once with ``torch.onnx.export``, run on the CPU provider.

Only the backbone (token ids -> every layer's hidden states) is exported; pooling, the MLP head and
any module of an encoder subclass (IS-BERT's CNN) stay cl-bench's own torch code, so every pooler
works unchanged. The graph has dynamic batch and sequence axes and outputs all hidden states
(``hidden_0`` = embeddings … ``hidden_L`` = last layer); a run fetches only the ones it pools.

The export is written to ``<cache folder>/onnx/<key>.onnx``, the key hashing the backbone's weights,
its config, and the torch version, so a model is exported once per machine and a changed weight
is a new export. The exporter is torch's TorchScript-based one with eager attention: on our CPU
its graph ran ~15% faster under ONNX Runtime than the ``dynamo=True`` export and exported ~5x
faster (``benchmarks/bench_eval_sts.py`` measures the backend it uses).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

from cl_bench.models.embedding_cache import atomic_write, state_digest

log = logging.getLogger(__name__)

ONNX_SUBDIR = "onnx"
#: Opset 17 has LayerNormalization as one operator (ONNX Runtime fuses it further).
OPSET = 17
#: Backbone inputs that a tokenizer may produce, in the order the exported graph takes them.
MODEL_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")

_sessions: dict[Path, Any] = {}
_sessions_lock = threading.Lock()


class _HiddenStates(nn.Module):
    """Export wrapper: named token inputs -> the tuple of all hidden states."""

    def __init__(self, backbone: nn.Module, input_names: tuple[str, ...]) -> None:
        super().__init__()
        self.backbone = backbone
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = self.backbone(
            **dict(zip(self.input_names, inputs, strict=True)), output_hidden_states=True, return_dict=True
        )
        return tuple(outputs.hidden_states)


def graph_inputs(tokenizer: Any) -> tuple[str, ...]:
    """The backbone inputs the tokenizer produces (BERT: ids, mask, token types; RoBERTa: no types)."""
    names = set(getattr(tokenizer, "model_input_names", ("input_ids", "attention_mask")))
    return tuple(name for name in MODEL_INPUTS if name in names)


def export_key(backbone: nn.Module, input_names: tuple[str, ...]) -> str:
    """Name of a backbone's export: its weights, config, inputs, the opset and the torch version."""
    config = backbone.config.to_json_string() if hasattr(backbone, "config") else ""
    blob = f"{state_digest(backbone)}|{config}|{input_names}|{OPSET}|{torch.__version__}|{type(backbone).__name__}"
    return hashlib.blake2b(blob.encode(), digest_size=20).hexdigest()


def export_backbone(backbone: nn.Module, input_names: tuple[str, ...], path: Path) -> None:
    """Export ``backbone`` (a copy, on CPU, fp32, eval mode, eager attention) to ``path``."""
    model = copy.deepcopy(backbone).to("cpu", torch.float32).eval()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")  # plain MatMul/Softmax attention: ONNX Runtime fuses it
    layers = int(model.config.num_hidden_layers)
    output_names = [f"hidden_{i}" for i in range(layers + 1)]
    vocab = int(getattr(model.config, "vocab_size", 100))
    # a padded example (second row shorter), so that no mask branch is traced as "no padding"
    input_ids = torch.arange(16, dtype=torch.long).reshape(2, 8) % vocab
    attention_mask = torch.ones(2, 8, dtype=torch.long)
    attention_mask[1, 5:] = 0
    example = {"input_ids": input_ids, "attention_mask": attention_mask,
               "token_type_ids": torch.zeros(2, 8, dtype=torch.long)}
    axes = {name: {0: "batch", 1: "sequence"} for name in (*input_names, *output_names)}
    with warnings.catch_warnings():
        # the legacy-exporter DeprecationWarning and tracer notes about shape-dependent Python branches
        # (checked: the padding branches they name do not depend on the batch)
        warnings.simplefilter("ignore")
        atomic_write(
            path,
            lambda fh: torch.onnx.export(
                _HiddenStates(model, input_names),
                tuple(example[name] for name in input_names),
                fh,
                input_names=list(input_names),
                output_names=output_names,
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            ),
        )


class OnnxBackbone:
    """An ONNX Runtime CPU session standing in for a backbone's forward pass.

    Args:
        path: the exported graph.
        input_names: its inputs (see :func:`graph_inputs`).
        num_threads: intra-op threads (torch's setting, so both backends use the same cores).
    """

    def __init__(self, path: Path, input_names: tuple[str, ...], num_threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = input_names
        self.output_names = [output.name for output in self.session.get_outputs()]

    def __call__(self, features: dict[str, torch.Tensor], hidden_states: bool) -> SimpleNamespace:
        """Run a padded batch; returns ``last_hidden_state`` (and all ``hidden_states`` if asked), as torch."""
        feeds = {name: features[name].cpu().numpy().astype(np.int64, copy=False) for name in self.input_names}
        wanted = self.output_names if hidden_states else self.output_names[-1:]
        outputs = [torch.from_numpy(array) for array in self.session.run(wanted, feeds)]
        return SimpleNamespace(last_hidden_state=outputs[-1], hidden_states=tuple(outputs) if hidden_states else None)


def export_path(backbone: nn.Module, tokenizer: Any, cache_folder: Path) -> Path:
    """Where :func:`onnx_backbone` keeps ``backbone``'s export."""
    return Path(cache_folder) / ONNX_SUBDIR / f"{export_key(backbone, graph_inputs(tokenizer))}.onnx"


def discard_export(path: Path) -> None:
    """Delete an export and its session (an ``auto`` probe's export when torch was chosen)."""
    with _sessions_lock:
        _sessions.pop(path, None)
        path.unlink(missing_ok=True)


def export_seconds(backbone: nn.Module, tokenizer: Any, cache_folder: Path) -> float:
    """Seconds an export of ``backbone`` and its session cost on this machine (what ``eval.backend=auto`` weighs
    against ONNX Runtime's gain for a checkpoint not yet exported). The cache's export is made when missing (the
    caller then runs it); when it exists, a throw-away export in a temporary folder is timed instead."""
    import tempfile
    import time

    path = export_path(backbone, tokenizer, cache_folder)
    started = time.perf_counter()
    if not path.is_file():
        onnx_backbone(backbone, tokenizer, cache_folder)
        return time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder) / path.name
        export_backbone(backbone, graph_inputs(tokenizer), scratch)
        OnnxBackbone(scratch, graph_inputs(tokenizer), torch.get_num_threads())
        return time.perf_counter() - started


def onnx_backbone(backbone: nn.Module, tokenizer: Any, cache_folder: Path) -> OnnxBackbone:
    """The ONNX Runtime session for ``backbone``'s current weights (exported on first use, then reused)."""
    input_names = graph_inputs(tokenizer)
    path = export_path(backbone, tokenizer, cache_folder)
    with _sessions_lock:
        session = _sessions.get(path)
        if session is None:
            if not path.is_file():
                log.info("exporting the backbone to ONNX: %s", path)
                export_backbone(backbone, input_names, path)
            session = OnnxBackbone(path, input_names, torch.get_num_threads())
            _sessions.clear()  # one model at a time: sessions hold the weights in memory
            _sessions[path] = session
        path.touch()  # recently used: the cache pruning removes it last
    return session
