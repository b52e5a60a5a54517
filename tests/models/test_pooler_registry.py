"""The pooler registry (issue 36, item 3): ``pooler=NAME`` → one class that says what it reads and pools; the config
checks ask it before torch loads, the encoder asks it how to run and pool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from cl_bench.config.catalog import options
from cl_bench.models.pooler_names import (
    AVERAGING_POOLERS,
    POOLERS,
    PROMPT_POOLERS,
    REGISTRY,
    Pooler,
    register,
)
from cl_bench.models.poolers import masked_mean, pool

ROOT = Path(__file__).resolve().parents[2]


def test_every_pooler_option_names_a_registered_pooler_and_back() -> None:
    """conf/pooler/NAME.yaml and the registry hold the same names; each class is registered under its own name."""
    assert sorted(options("pooler")) == sorted(REGISTRY)
    assert all(cls.name == name and issubclass(cls, Pooler) for name, cls in REGISTRY.items())


def test_the_traits_give_the_groups_the_checks_use() -> None:
    """What the config checks and the encoder ask, from each pooler's declaration."""
    assert POOLERS == ("cls", "cls_before_pooler", "avg", "avg_top2", "avg_first_last", "cls_avg", "mask", "prompt_last",
                       "last_token")
    assert PROMPT_POOLERS == ("mask", "prompt_last") and AVERAGING_POOLERS == ("avg", "avg_top2", "avg_first_last", "cls_avg")
    assert [n for n, c in REGISTRY.items() if c.has_mlp] == ["cls"]
    assert [n for n, c in REGISTRY.items() if c.first_token] == ["cls", "cls_before_pooler", "cls_avg"]
    assert [n for n, c in REGISTRY.items() if c.reads_layers] == ["avg_top2", "avg_first_last"]
    assert [n for n, c in REGISTRY.items() if c.reads_first_layer] == ["avg_first_last"]
    assert [n for n, c in REGISTRY.items() if c.appends_eos] == ["last_token"]


def test_the_registry_imports_no_torch() -> None:
    """The config checks read it before torch is imported."""
    code = "import sys, cl_bench.models.pooler_names; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout.strip()
    assert out == "[]"


def test_a_registered_pooler_pools() -> None:
    """A new pooler is one class: registered, :func:`cl_bench.models.poolers.pool` runs it by name."""

    class Max(Pooler):
        name = "max_test"

        @staticmethod
        def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205
            return last_hidden.masked_fill(attention_mask.unsqueeze(-1) == 0, float("-inf")).amax(1)

    hidden = torch.tensor([[[1.0, 5.0], [3.0, 2.0], [9.0, 9.0]]])
    mask = torch.tensor([[1, 1, 0]])
    register(Max)
    try:
        assert pool("max_test", hidden, mask).tolist() == [[3.0, 5.0]]
    finally:
        del REGISTRY["max_test"]
    assert pool("avg", hidden, mask).tolist() == masked_mean(hidden, mask).tolist() == [[2.0, 3.5]]
