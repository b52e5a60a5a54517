"""DDP on 2 CPU processes (gloo): torch's DistributedDataParallel plus the gathered in-batch negatives
give exactly the one-process big-batch loss and gradient; resume under DDP is exact."""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import mlflow
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hydra import compose, initialize_config_dir

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.config import typed_specs, yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.losses.moco import queue_info_nce
from cl_bench.losses.ntxent import ntxent
from cl_bench.methods.base import MethodContext
from cl_bench.methods.cert.modeling import CERT
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.methods.simcse_sup.modeling import SupervisedSimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.train.gradcache import GradCache
from cl_bench.utils import distributed

WORLD = 2
SENTENCES = [
    "a man plays the guitar", "the dog runs in the park", "two children sit at a table", "a woman reads a book",
    "the red car is fast", "people walk on the street", "a cat eats food", "the old man rides a bike",
]
TRIPLES = [(s, s.replace("the", "a"), "the " + s.split()[-1] + " is sad") for s in SENTENCES]
CASES = {
    # name: (method, loss, gradcache chunk)
    "simcse_infonce": ("simcse", functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), 0),
    "simcse_ntxent_symmetric": ("simcse", functools.partial(ntxent, tau=0.05), 0),
    "simcse_gradcache": ("simcse", functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), 2),
    "sup_hard_negatives_alpha2": ("sup", functools.partial(info_nce, tau=0.05, hard_negative_alpha=2.0), 0),
    "cert_queue": ("cert", functools.partial(queue_info_nce, tau=0.07), 0),
}


def _build(tiny_bert: str, method_name: str, loss_fn: object) -> torch.nn.Module:
    torch.manual_seed(0)  # identical initial weights (the MLP head and CERT's queue are freshly initialised)
    encoder = build_encoder(tiny_bert, pooler="cls", dropout=0.0, max_length=16, mlp_only_train=True)
    # what cl_bench.train.loop.build_method does: the loss sees the global batch under torchrun
    context = MethodContext(encoder=encoder, loss=distributed.gather_loss(loss_fn), augmentation=Dropout(DropoutSpec()))
    if method_name == "cert":
        return CERT(context, yaml_spec("method", "cert", queue_size=12, projection_dim=8))
    return SimCSE(context, yaml_spec("method", "simcse")) if method_name == "simcse" else SupervisedSimCSE(
        context, yaml_spec("method", "simcse_sup"))


def _step(tiny_bert: str, case: str) -> dict[str, object]:
    """Loss and gradient on this process's share of the global batch (all of it in one process), through
    the module the trainer calls (DDP under a process group)."""
    method_name, loss_fn, chunk = CASES[case]
    method = _build(tiny_bert, method_name, loss_fn)
    method.train()
    model = distributed.data_parallel(method, torch.device("cpu"))
    assert isinstance(model, torch.nn.parallel.DistributedDataParallel) == distributed.is_distributed()
    batch = next(iter(distributed.shard_batches([TRIPLES if method_name == "sup" else SENTENCES])))
    steps = 2 if method_name == "cert" else 1  # CERT: the second step's negatives are the first step's keys
    for step in range(steps):
        method.zero_grad(set_to_none=True)
        if chunk:
            cache = GradCache(method, chunk, model=model)
            loss = cache.forward(batch)["loss"]
            cache.backward(loss)
        else:
            loss = model("training_step", batch)["loss"]
            loss.backward()
        if step < steps - 1:
            method.on_after_step()  # momentum update, then every rank's keys enter the queue
    return {
        "batch": list(batch),
        "loss": loss.detach(),
        "grads": {n: p.grad.detach().clone() for n, p in method.named_parameters() if p.grad is not None},
        "queue": method.queue_in_order().clone() if method_name == "cert" else None,
    }


def _worker(rank: int, init_file: str, tiny_bert: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    # Gradients must be averaged by DDP's reducer, not by a hand-written dist.all_reduce of .grad:
    # record every Python-level all-reduce (the trainer's own are one-element int32 flags).
    reduced: list[tuple[torch.dtype, int]] = []
    all_reduce = dist.all_reduce

    def recording_all_reduce(tensor: torch.Tensor, *args: object, **kwargs: object) -> object:
        reduced.append((tensor.dtype, tensor.numel()))
        return all_reduce(tensor, *args, **kwargs)

    dist.all_reduce = recording_all_reduce
    try:
        results = {case: _step(tiny_bert, case) for case in CASES}
        results["_all_reduces"] = reduced
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.all_reduce = all_reduce
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_process_results(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("ddp")
    mp.spawn(_worker, args=(str(out / "init"), str(tiny_bert), str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_two_gloo_processes_match_one_process_on_the_full_batch(
    case: str, tiny_bert: Path, two_process_results: list[dict]
) -> None:
    torch.set_num_threads(1)
    single = _step(str(tiny_bert), case)  # no process group: the whole batch in this process
    ranks = [results[case] for results in two_process_results]
    # each rank encoded its contiguous half of the global batch
    assert ranks[0]["batch"] + ranks[1]["batch"] == single["batch"]
    assert len(ranks[0]["batch"]) == len(single["batch"]) // WORLD
    if case.startswith("cert"):
        # a mean of per-query terms: the ranks' mean is the full-batch loss; the queues are the same
        torch.testing.assert_close((ranks[0]["loss"] + ranks[1]["loss"]) / 2, single["loss"], rtol=1e-5, atol=1e-6)
        for shard in ranks:
            torch.testing.assert_close(shard["queue"], single["queue"], rtol=1e-5, atol=1e-6)
    else:
        for shard in ranks:
            torch.testing.assert_close(shard["loss"], single["loss"], rtol=1e-5, atol=1e-6)  # the global loss
    for shard in ranks:
        assert shard["grads"].keys() == single["grads"].keys() and len(single["grads"]) > 10
        for name, grad in single["grads"].items():
            torch.testing.assert_close(shard["grads"][name], grad, rtol=1e-4, atol=1e-6, msg=f"{case}: {name}")


@pytest.mark.slow
def test_gradients_are_averaged_by_ddp_not_by_hand(two_process_results: list[dict]) -> None:
    # The gradients above are right only if averaged once; a hand-written all-reduce of .grad would
    # show up here as a float all-reduce (DDP's reducer all-reduces from C++, outside torch.distributed).
    for results in two_process_results:
        floats = [(dtype, n) for dtype, n in results["_all_reduces"] if dtype.is_floating_point]
        assert floats == []
    assert not hasattr(distributed, "average_gradients")


def _trainer_config(tiny_bert: str, data_dir: str, *extra: str):  # noqa: ANN202
    os.environ["CL_BENCH_DATA"] = data_dir
    from cl_bench.commands.cli import CONF_DIR

    overrides = [
        f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=64", "batch_size=8", "dropout=0.1",
        "pooler=avg", "train.max_steps=6", "train.eval_steps=3", "train.checkpoint_steps=3", "train.device=cpu",
        "train.progress_bar=false", "train.num_threads=1", *extra,
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def _resume_worker(rank: int, init_file: str, tiny_bert: str, data_dir: str, out_dir: str) -> None:
    from cl_bench.train.loop import Trainer

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        cfg = _trainer_config(tiny_bert, data_dir)
        out = Path(out_dir)
        scores = itertools.count()  # a new best at every evaluation: the final weights are the best

        def dev_eval(encoder: object) -> dict[str, float]:
            return {"stsb_dev": float(next(scores))}

        whole = Trainer(typed_specs(cfg), out / "run", lambda m, s: None, dev_eval)
        method, _ = whole.fit()  # writes checkpoint.pt at step 3 (dropout on: each rank its own masks)
        final = {k: v.clone() for k, v in method.state_dict().items()}
        dist.barrier()
        resumed = Trainer(typed_specs(cfg), out / "run", lambda m, s: None, dev_eval)
        assert resumed.resume() and resumed.state.step == 3
        method, state = resumed.fit()
        torch.save({"whole": final, "resumed": method.state_dict(), "step": state.step}, out / f"resume{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_resume_under_ddp_continues_every_rank_exactly(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    mp.spawn(_resume_worker, args=(str(tmp_path / "init"), str(tiny_bert), str(data_dir), str(tmp_path)),
             nprocs=WORLD, join=True)
    for rank in range(WORLD):
        saved = torch.load(tmp_path / f"resume{rank}.pt", weights_only=False)
        assert saved["step"] == 6
        for name, value in saved["whole"].items():
            assert torch.equal(saved["resumed"][name], value), name


def test_helpers_are_no_ops_in_one_process() -> None:
    loss_fn = functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0)
    assert distributed.gather_loss(loss_fn) is loss_fn
    batches = [[1, 2, 3]]
    assert distributed.shard_batches(batches) is batches
    assert distributed.setup_torchrun(["-m", "dropout=0,0.1"]) == []  # not under torchrun: untouched
    assert distributed.all_true(False) is False and distributed.is_main_process()
    assert distributed.gather_objects({"a": 1}) == [{"a": 1}]
    model = distributed.data_parallel(torch.nn.Linear(2, 2), torch.device("cpu"))
    assert isinstance(model, distributed.MethodHooks)  # the trainer calls model(hook, ...) either way


def test_sharding_drops_the_uneven_tail_and_keeps_order() -> None:
    batches = [list(range(8)), list(range(8, 13)), [13]]
    assert list(distributed._shards(batches, 0, 2)) == [[0, 1, 2, 3], [8, 9]]
    assert list(distributed._shards(batches, 1, 2)) == [[4, 5, 6, 7], [10, 11]]


def test_gathered_loss_refuses_losses_with_other_tensor_inputs() -> None:
    with pytest.raises(ValueError, match="loss: .*queue.*multi-process training can only gather"):
        distributed.GatheredLoss(functools.partial(queue_info_nce, tau=0.07))
    wrapped = distributed.GatheredLoss(functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0))
    assert wrapped.keywords == {"tau": 0.05, "hard_negative_alpha": 1.0}  # attribute reads reach the wrapped partial


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_torchrun_cli_trains_once_and_only_rank0_tracks(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun not found beside the Python interpreter"
    env = dict(os.environ, CL_BENCH_DATA=str(data_dir), OMP_NUM_THREADS="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [
        torchrun, "--nproc_per_node=2", f"--master_port={_free_port()}", "-m", "cl_bench",  # the README's command
        f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=40", "batch_size=8",
        "train.max_steps=3", "train.eval_steps=3", "train.device=cpu", "train.progress_bar=false",
    ]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    run_dirs = [p.parent for p in (tmp_path / "outputs" / "runs").glob("*/*/results.json")]
    assert len(run_dirs) == 1  # both ranks agreed on one run directory
    run_dir = run_dirs[0]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["select/best_step"] == 3.0 and "sts/sts_avg" in results
    assert (run_dir / "cli_rank1.log").is_file() and (run_dir / ".hydra" / "config.yaml").is_file()
    assert proc.stdout.count("results: ") == 1  # only rank 0 evaluated and printed
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["train/loss"] > 0
