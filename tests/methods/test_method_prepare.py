"""Every method's CPU text work (augmentation, span sampling, tokenisation) runs in ``Method.prepare``,
in DataLoader workers: one training step on a batch prepared by 2 worker processes gives the same loss
terms as on one prepared in the main process, and as the step doing that work itself from the same RNG
(the path every method took before its work moved to ``prepare``)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import tiny_run
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, catalog, check_choices, typed_specs, validate
from cl_bench.data.loader import BatchLoader, batch_seed
from cl_bench.methods.base import Prepared
from cl_bench.train.loop import build_method

CORPUS = [
    "a man plays the guitar in the park", "the dog runs in the street", "two children read a book",
    "a woman eats food at the table", "the cat sits on the chair", "people walk in the park",
]
#: half the words deleted: two RNG seeds give different views of the 4-sentence batches
DELETION = ["augmentation=word_deletion", "augmentation.rate=0.5"]
def _cases() -> dict[str, tuple[str, str, list[str]]]:
    """``{case: (method, data, overrides)}``: every method's tiny run (small real data and the keys that make a tiny
    run possible: its spec's ``tiny_run``, :func:`conftest.tiny_run`), with a text augmentation (word deletion draws
    from the batch's RNG) for a method whose default is dropout; then SBERT's other loss kinds, SG-BERT's objective
    (it samples one layer per sentence, in prepare) and ``model.view_prompts``."""
    cases = {}
    for method in catalog.options("method"):
        data, keys = tiny_run(method)
        spec = catalog.method_spec(method)
        views = DELETION if "augmentation" in spec.uses and catalog.default_augmentation(method) == "dropout" else []
        cases[method] = (method, data, [*views, *keys])
    cases["sbert_regression"] = ("sbert", "stsb_train", ["loss=sbert_regression"])
    cases["sbert_triplet"] = ("sbert", "nli_snli_devtest", ["loss=sbert_triplet"])
    cases["sg_bert"] = ("sg_opt", cases["sg_opt"][1], [*cases["sg_opt"][2], "loss=sg"])
    cases["simcse_view_prompts"] = ("simcse", "corpus", [*DELETION, "model.view_prompts=[a: ,b: ]"])
    return cases


CASES = _cases()
SEED, BATCH_SIZE = 7, 4


def test_every_methods_tiny_run_names_data_and_keys_that_exist() -> None:
    """The cases come from the methods' specs: each ``tiny_run`` names a data preset that exists and only overrides."""
    presets = set(catalog.options("data"))
    for method, data, extra in CASES.values():
        assert catalog.method_spec(method) is not None, method
        assert data == "corpus" or data in presets, (method, data)
        assert all("=" in override for override in extra), (method, extra)


def _config(method: str, data: str, extra: list[str], tiny_bert: Path, data_dir: Path, corpus: Path) -> Any:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    overrides = [f"method={method}", f"model.name_or_path={tiny_bert}", "model.max_length=16", f"batch_size={BATCH_SIZE}",
                 "logger=none", "data.limit=40", f"seed={SEED}", "train.device=cpu", *extra]
    overrides.append(f"data.train_file={corpus}" if data == "corpus" else f"data={data}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    validate(cfg, overrides)
    return cfg


def _first_step_terms(cfg: Any, workers: int | None) -> tuple[dict[str, float], Any]:
    """The loss terms of one training step on the first batch of epoch 0, prepared by ``workers``
    DataLoader workers, or (None) by the training step itself from the batch's RNG."""
    torch.manual_seed(0)  # the same initial weights (heads, prototypes, queues) every time
    method = build_method(typed_specs(cfg), torch.device("cpu"))
    items = method.read_corpus(cfg.data.train_file)
    if workers is None:
        generator = torch.Generator().manual_seed(SEED)  # epoch 0's batch order, as the loader draws it
        batch = next(iter(method.batches(items, BATCH_SIZE, generator)))
        method.rng = random.Random(batch_seed(SEED, 0, 0))
    else:
        loader = BatchLoader(items, method.batches, method.prepare, BATCH_SIZE, SEED, num_workers=workers)
        batch = next(iter(loader.epoch(0)))
    torch.manual_seed(1)  # the same dropout masks
    method.train()
    terms = method.training_step(batch)
    return {name: value.item() for name, value in terms.items()}, batch


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_step_on_a_batch_prepared_in_workers_equals_the_in_step_preparation(
    case: str, tiny_bert: Path, data_dir: Path, corpus: Path
) -> None:
    method, data, extra = CASES[case]
    cfg = _config(method, data, extra, tiny_bert, data_dir, corpus)
    in_step, raw = _first_step_terms(cfg, None)
    in_main, prepared = _first_step_terms(cfg, 0)
    in_workers, from_worker = _first_step_terms(cfg, 2)
    assert not isinstance(raw, Prepared)
    # the workers did the text work: the step received token ids, not texts
    assert isinstance(prepared, Prepared) and type(from_worker) is type(prepared)
    assert in_workers == in_main == in_step, (case, in_step, in_main, in_workers)


def test_the_text_augmentation_runs_in_prepare_from_the_batch_rng(tiny_bert: Path, data_dir: Path, corpus: Path) -> None:
    """The augmented views leave ``prepare`` tokenized, drawn from the RNG it is given (the batch's)."""
    cfg = _config("cert", "corpus", CASES["cert"][2], tiny_bert, data_dir, corpus)
    method = build_method(typed_specs(cfg), torch.device("cpu"))
    first, again = (method.prepare(CORPUS[:4], random.Random(1)) for _ in range(2))
    other = method.prepare(CORPUS[:4], random.Random(2))
    assert torch.equal(first.query["input_ids"], method.encoder.tokenize(CORPUS[:4])["input_ids"])  # CERT: query as is
    assert torch.equal(first.key["input_ids"], again.key["input_ids"])
    assert not torch.equal(first.key["input_ids"], other.key["input_ids"])


@pytest.mark.parametrize(
    ("overrides", "rejected"),
    [
        (["augmentation=mlm_replace", "train.device=cuda"], True),
        (["augmentation=mlm_replace", "train.device=cpu"], False),  # the masked LM runs in the worker, on the CPU
        (["augmentation=back_translation", "augmentation.do_sample=true", "train.device=cuda"], True),
        (["augmentation=back_translation", "augmentation.cache=false", "train.device=cuda"], True),
        (["augmentation=back_translation", "train.device=cuda"], False),  # the cached corpus: a look-up
        (["augmentation=eda_synonym", "train.device=cuda"], False),
    ],
)
def test_workers_are_rejected_where_the_augmentation_runs_a_gpu_model(
    overrides: list[str], rejected: bool, tiny_bert: Path, data_dir: Path
) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    full = ["method=cert", f"model.name_or_path={tiny_bert}", "train.num_workers=2", *overrides]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=full)
    if not rejected:
        check_choices(cfg, full)
        return
    with pytest.raises(ConfigError, match=r"^train.num_workers: augmentation=\w+ runs its model on the training "
                                          r"device \(cuda\) at every step, .+; set train.num_workers=0$"):
        check_choices(cfg, full)
    with open_dict(cfg):
        cfg.train.num_workers = 0
    check_choices(cfg, [o for o in full if not o.startswith("train.num_workers")])
