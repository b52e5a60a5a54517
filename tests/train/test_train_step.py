"""Issue 37 item 1: the training step without host synchronisation (the CUDA path, run on the CPU).

The deferred non-finite guard is what a CUDA run takes by default; ``defer_guard=True`` with torch's fused
AdamW (which torch also has on the CPU) runs the same code on the CPU, so the tests here check it: no host
read in the step (Tensor.item/tolist/cpu/numpy/__bool__/__float__/__int__ counted while it runs), a
non-finite step skipped on the device exactly as the synchronous guard skips it, and both guards giving
the same weights on finite steps.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.train.step import TrainStep

SENTENCES = [f"a dog number {i} plays in the park with a red ball" for i in range(8)]
HOST_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")


def _simcse(tiny_bert: Path, tau: float = 0.05, seed: int = 0) -> SimCSE:
    torch.manual_seed(seed)
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=0.1, max_length=16, mlp_only_train=True)
    return SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=tau, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec())),
                  yaml_spec("method", "simcse"))


def _stepper(method: SimCSE, defer: bool, fused: bool = True) -> TrainStep:
    params = [p for p in method.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3, **({"fused": True} if fused else {"foreach": True}))
    return TrainStep(method, method.training_step, optimizer, params, 1.0, defer_guard=defer)


@contextlib.contextmanager
def count_host_reads() -> Iterator[dict[str, int]]:
    """Count every call of a Tensor method that copies a value to the host (a device synchronisation on CUDA)."""
    counts = dict.fromkeys(HOST_READS, 0)
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counting(name: str):  # noqa: ANN202
        original = originals[name]

        def wrapper(self: torch.Tensor, *args: object, **kwargs: object) -> object:
            counts[name] += 1
            return original(self, *args, **kwargs)

        return wrapper

    try:
        for name in HOST_READS:
            setattr(torch.Tensor, name, counting(name))
        yield counts
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def test_the_deferred_step_reads_nothing_on_the_host(tiny_bert: Path) -> None:
    method = _simcse(tiny_bert)
    step = _stepper(method, defer=True)
    assert not step.synchronous
    batches = [method.prepare(SENTENCES, random.Random(i)) for i in range(3)]  # what the workers hand over
    method.train()
    step(batches[0])  # the first step creates the optimizer's state
    with count_host_reads() as counts:
        for batch in batches[1:]:
            terms, stepped = step(batch)
    assert stepped is None
    assert sum(counts.values()) == 0, counts
    with count_host_reads() as counts:  # the log step reads the guard: the one synchronisation
        assert step.flush().count == 0
        float(terms["loss"])
    assert sum(counts.values()) >= 1


def test_the_synchronous_guard_reads_the_host_every_step(tiny_bert: Path) -> None:
    """The counter sees host reads where they happen (so the zero above is not an artefact of the patching)."""
    method = _simcse(tiny_bert)
    step = _stepper(method, defer=False)
    assert step.synchronous
    method.train()
    with count_host_reads() as counts:
        _, stepped = step(method.prepare(SENTENCES, random.Random(0)))
    assert stepped is True and counts["__bool__"] >= 1


def test_a_nonfinite_step_is_skipped_on_the_device(tiny_bert: Path) -> None:
    """tau=1e-39 makes the logits overflow: the step is skipped (weights, moments and the step count kept)."""
    method = _simcse(tiny_bert, tau=1e-39)
    step = _stepper(method, defer=True)
    method.train()
    before = {k: v.clone() for k, v in method.state_dict().items()}
    step.steps_taken = 41  # a run at step 41: the report numbers the step as the run does
    for i in range(2):
        step(method.prepare(SENTENCES, random.Random(i)))
    after = method.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(int(state["step"]) == 0 for state in step.optimizer.state.values())
    report = step.flush()
    assert (report.count, report.first_step) == (2, 42)
    assert report.values().startswith("loss=nan")
    assert step.flush().count == 0  # read once


def test_deferred_and_synchronous_guards_train_alike(tiny_bert: Path) -> None:
    """On finite steps the two guards run the same arithmetic: the same weights after three steps."""
    weights = []
    for defer in (True, False):
        method = _simcse(tiny_bert)
        step = _stepper(method, defer=defer)
        method.train()
        torch.manual_seed(1)  # dropout masks
        for i in range(3):
            step(method.prepare(SENTENCES, random.Random(i)))
        weights.append(method.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


@pytest.mark.parametrize("fused", [True, False])
def test_only_the_fused_adamw_defers(tiny_bert: Path, fused: bool) -> None:
    """foreach AdamW ignores ``found_inf``: with it the guard stays synchronous, never silently unguarded."""
    method = _simcse(tiny_bert)
    assert _stepper(method, defer=True, fused=fused).synchronous is not fused


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_the_4d_padding_mask_encodes_as_the_2d_one(tiny_bert: Path, implementation: str) -> None:
    """What the host-free mask changes is how the mask reaches the backbone, not the sentence vectors."""
    method = _simcse(tiny_bert)
    encoder = method.encoder.eval()
    encoder.backbone.set_attn_implementation(implementation)
    features = encoder.tokenize(["a dog", "the man plays the guitar in the park today"])
    assert not bool(features["attention_mask"].all())  # padded rows
    with torch.no_grad():
        expected = encoder(features)
        encoder.host_free_mask = True
        got = encoder(features)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_bert_family_encoders_use_sdpa(tiny_bert: Path) -> None:
    """transformers' default attention for BERT here is PyTorch's SDPA (model.attn_implementation=null keeps it)."""
    assert _simcse(tiny_bert).encoder.backbone.config._attn_implementation == "sdpa"


def _trainer(tiny_bert: Path, data_dir: Path, tmp_path: Path, *extra: str):  # noqa: ANN202
    from conftest import hooks_trainer

    return hooks_trainer("simcse", tiny_bert, data_dir, tmp_path, "pooler=cls", *extra)


@pytest.fixture
def cuda_step_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Trainer takes the CUDA path on the CPU: fused AdamW and the deferred guard."""
    import functools

    import cl_bench.train.loop as loop
    import cl_bench.train.optim as optim

    monkeypatch.setattr(optim, "implementation", lambda device, autocast_dtype=None: {"fused": True})
    monkeypatch.setattr(loop, "TrainStep", functools.partial(TrainStep, defer_guard=True))


@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_the_trainer_reads_the_deferred_guard_at_log_steps(cuda_step_path: None, tiny_bert: Path, data_dir: Path,
                                                           tmp_path: Path, policy: str) -> None:
    from cl_bench.train.loop import NonFiniteLossError

    logged: list[tuple[dict[str, float], int]] = []
    trainer = _trainer(tiny_bert, data_dir, tmp_path, "loss.tau=1e-39", f"train.nonfinite={policy}",
                       "train.max_steps=3", "train.log_steps=2")
    trainer.log_metrics = lambda metrics, step: logged.append((metrics, step))
    assert not trainer.stepper.synchronous
    if policy == "stop":
        with pytest.raises(NonFiniteLossError, match=r"^step 1: non-finite loss or gradient \(loss=nan"):
            trainer.fit()
        assert trainer.state.step == 2  # read at the first log step, steps 1 and 2 skipped on the device
        return
    _, state = trainer.fit()
    assert state.skipped_steps == 3
    assert [(m["train/skipped_steps"], step) for m, step in logged if "train/skipped_steps" in m] == [(2, 2), (3, 3)]


def test_a_compiled_trainer_trains_on_bucketed_lengths(monkeypatch: pytest.MonkeyPatch, tiny_bert: Path,
                                                       data_dir: Path, tmp_path: Path) -> None:
    """train.compile=true: the backbone compiled (aot_eager here, for speed) and the batches padded to buckets."""
    import cl_bench.train.loop as loop
    from cl_bench.train.compile import compile_encoder

    modes: list[str] = []
    monkeypatch.setattr(loop, "compile_encoder",
                        lambda method, mode: modes.append(mode) or compile_encoder(method, backend="aot_eager"))
    trainer = _trainer(tiny_bert, data_dir, tmp_path, "train.compile=true", "model.max_length=32")
    assert trainer.compiled and modes == ["default"] and trainer.method.encoder.compiled_backbone is not None
    lengths = {batch.features["input_ids"].shape[1] for batch in trainer.data.epoch(0)}
    assert lengths <= {8, 16, 24, 32}
    _, state = trainer.fit()
    assert state.step == 2
    assert not _trainer(tiny_bert, data_dir, tmp_path / "auto", "train.compile=auto").compiled  # CPU: eager


def test_auto_data_workers(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """train.num_workers=-1 (the default): 2 workers on CUDA, 0 elsewhere and under GradCache; a number is kept."""
    trainer = _trainer(tiny_bert, data_dir, tmp_path)
    assert trainer.train_spec.num_workers == -1 and trainer.data_workers() == 0  # the CPU
    trainer.device = torch.device("cuda")  # what the choice reads (no GPU needed to ask it)
    assert trainer.data_workers() == 2
    trainer.grad_cache = object()
    assert trainer.data_workers() == 0
    assert _trainer(tiny_bert, data_dir, tmp_path / "n", "train.num_workers=3").data_workers() == 3


def test_a_model_running_augmentation_keeps_auto_workers_at_zero(tiny_bert: Path, data_dir: Path,
                                                                 tmp_path: Path) -> None:
    from cl_bench.augment.mlm_replace import MLMReplace

    trainer = _trainer(tiny_bert, data_dir, tmp_path)
    trainer.device = torch.device("cuda")
    augmentation = MLMReplace(yaml_spec("augmentation", "mlm_replace"))  # not set up: nothing of it runs here
    assert augmentation.spec.runs_model_in_training()  # its spec decides
    trainer.method.augmentation = augmentation
    assert trainer.data_workers() == 0


@pytest.mark.parametrize(("precision", "fused"), [("bf16", True), ("fp32", False)])
def test_the_cpu_trainer_fuses_adamw_under_bf16_only(tiny_bert: Path, data_dir: Path, tmp_path: Path,
                                                      precision: str, fused: bool) -> None:
    """On a CPU the bf16 step runs torch's fused AdamW; fp32 keeps foreach (bit for bit what the references pin)."""
    trainer = _trainer(tiny_bert, data_dir, tmp_path, f"train.precision={precision}", "train.max_steps=1")
    assert bool(trainer.optimizer.defaults.get("fused")) is fused
    assert bool(trainer.optimizer.defaults.get("foreach")) is not fused


_FAULTS_OF_A_REUSED_ALLOCATION = """
import resource, sys
import torch
from cl_bench.train.step import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
def faults_of_an_allocation():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(16 << 20, dtype=torch.float32).fill_(1.0)  # 64 MB, freed at once
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
for _ in range(10):  # glibc's free chunks settle after a few rounds (the heap grows to ~6x the tensor here)
    faults_of_an_allocation()
print(sum(faults_of_an_allocation() for _ in range(5)))
"""


def test_a_cpu_step_keeps_freed_memory(tiny_bert: Path) -> None:
    """Building a CPU TrainStep makes glibc keep freed memory: once the heap has settled, a freed 64 MB tensor
    allocated again faults in no new pages, where glibc's defaults map and unmap it each time (16,384 faults of
    4 KiB pages, 5 rounds counted).

    The faults are counted in a fresh process: a long test process's heap may already hold more than
    KEPT_FREE_BYTES free, which glibc then trims by design, so its count says nothing about the setting.
    """
    import subprocess
    import sys

    import cl_bench.train.step as step_module

    _stepper(_simcse(tiny_bert), defer=False)
    assert step_module._kept_freed_memory is True  # this suite runs on glibc Linux

    def faults(setting: str) -> int:
        done = subprocess.run([sys.executable, "-c", _FAULTS_OF_A_REUSED_ALLOCATION, setting],
                              capture_output=True, text=True, check=True)
        return int(done.stdout.split()[-1])

    assert faults("kept") < 1000
    assert faults("defaults") > 5 * 16_000
