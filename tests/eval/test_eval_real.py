"""Real SentEval data (CL_BENCH_DATA) and the real all-MiniLM-L6-v2: file reading as SentEval does
it, STS equal to the published MTEB figures, transfer equal to SentEval's own figures, and the
scikit-learn approximation's measured band on CR.

These tests fail (never skip) with a message naming ``cl-bench-data download`` when the data is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import minilm_path

from cl_bench.eval import EvalOptions, evaluate
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.sts import load_sts_task
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task, task_sentences

#: all-MiniLM-L6-v2 on the MTEB leaderboard (cosine Spearman x 100); MTEB scores each STS year on all
#: its pairs at once, i.e. SentEval's "all" aggregation, and STS-B on its test split.
MTEB_MINILM_L6 = {
    "sts12": 72.37,
    "sts13": 80.60,
    "sts14": 75.59,
    "sts15": 85.39,
    "sts16": 78.99,
    "stsb": 82.03,
}


def test_real_files_are_read_as_senteval_reads_them(data_dir: Path) -> None:
    # scored pairs per STS year (STS13 without SMT; STS15/16 without their unscored lines)
    expected_pairs = {"sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186}
    for task, pairs in expected_pairs.items():
        assert sum(len(part) for part in load_sts_task(data_dir, task).values()) == pairs
    assert "SMT" not in load_sts_task(data_dir, "sts13")
    stsb = load_sts_task(data_dir, "stsb", ("train", "dev", "test"))
    assert [len(stsb[s]) for s in ("train", "dev", "test")] == [5749, 1500, 1379]
    sick = load_sts_task(data_dir, "sickr", ("train", "dev", "test"))  # test file has CRLF ends
    assert [len(sick[s]) for s in ("train", "dev", "test")] == [4500, 500, 4927]
    assert not any("\r" in text for text in sick["test"].sent2)
    # latin-1 + str.splitlines(): byte 0x85 splits lines, as in SentEval (5331 newline-terminated lines)
    mr = load_transfer_task(data_dir, "mr")["all"]
    assert len(mr) == 5344 + 5341 and int(mr.labels.sum()) == 5344
    subj = load_transfer_task(data_dir, "subj")["all"]
    assert len(subj) == 5000 + 5021 and int(subj.labels.sum()) == 5000  # objective = label 1
    assert any("\u00e9" in text for text in mr.texts)  # latin-1 bytes decoded, e.g. "clichés"
    sst = load_transfer_task(data_dir, "sst2")
    assert [len(sst[s]) for s in ("train", "dev", "test")] == [67349, 872, 1821]
    trec = load_transfer_task(data_dir, "trec")
    assert [len(trec[s]) for s in ("train", "test")] == [5452, 500]
    mrpc = load_transfer_task(data_dir, "mrpc")
    assert [len(mrpc[s]) for s in ("train", "test")] == [4076, 1725]
    assert int(mrpc["test"].labels.sum()) == 1147
    # SentEval's order: sorted by number of words, then label
    lengths = [len(text.split()) for text in mr.texts]
    assert lengths == sorted(lengths)


@pytest.mark.slow
def test_minilm_sts_equals_published_mteb_figures(data_dir: Path) -> None:
    from cl_bench.models.encoder import build_encoder

    encoder = build_encoder(str(minilm_path()), pooler="avg", fresh_mlp=False)
    results = evaluate(encoder, data_dir, tasks=list(MTEB_MINILM_L6),
                       options=EvalOptions(align_uniform=False, anisotropy=False))
    differences = {task: round(results[task] - published, 4) for task, published in MTEB_MINILM_L6.items()}
    assert all(abs(d) <= 0.01 for d in differences.values()), differences


#: cl-bench task -> SentEval's task name in the reference file; cl-bench config -> SentEval's.
SENTEVAL_TASKS = {"mr": "MR", "cr": "CR", "subj": "SUBJ", "mpqa": "MPQA", "sst2": "SST2", "trec": "TREC", "mrpc": "MRPC"}
SENTEVAL_CONFIG_NAMES = {"full": "test", "fast": "fasttest"}


@pytest.mark.slow
def test_minilm_transfer_equals_sentevals_own_figures(data_dir: Path) -> None:
    """Every figure SentEval itself printed for all-MiniLM-L6-v2 + mean pooling (test accuracy,
    devacc, MRPC F1; ``test`` and ``fasttest`` configurations; shared/reference/senteval_minilm_avg.json)
    is reproduced within 0.1 by cl-bench's default (batched) classifier on cl-bench's embeddings."""
    from cl_bench.models.encoder import build_encoder

    reference_file = data_dir.parent / "reference" / "senteval_minilm_avg.json"
    if not reference_file.is_file():
        pytest.fail(f"{reference_file} not found (SentEval's own MiniLM figures)")
    reference = json.loads(reference_file.read_text())["results"]
    encoder = build_encoder(str(minilm_path()), pooler="avg", fresh_mlp=False)
    data = {task: load_transfer_task(data_dir, task) for task in SENTEVAL_TASKS}
    table = EmbeddingTable(encoder, [text for parts in data.values() for text in task_sentences(parts)], 128)
    differences: dict[str, float] = {}
    for config, senteval_config in SENTEVAL_CONFIG_NAMES.items():
        for task, name in SENTEVAL_TASKS.items():
            scores = run_transfer_task(task, data[task], table, config)
            expected = reference[senteval_config][name]
            pairs = {"acc": scores[task], "devacc": scores[f"{task}_dev"], "f1": scores.get(f"{task}_f1")}
            for key, value in pairs.items():
                if key in expected:
                    differences[f"{config}/{task}/{key}"] = round(value - expected[key], 2)
    assert len(differences) == 2 * (2 * 7 + 1)
    assert all(abs(d) <= 0.1 for d in differences.values()), differences


@pytest.mark.slow
def test_minilm_cr_accuracy_in_measured_band(data_dir: Path) -> None:
    """CR, full config, the scikit-learn approximation (``eval.transfer_classifier=sklearn``),
    all-MiniLM-L6-v2 with mean pooling.

    Measured on the project machine (fold seed 1111, SentEval's): accuracy 82.23, devacc 82.44.
    Other fold seeds (1-6) give 81.91-82.86 (std 0.35): that is the protocol's own noise. The run is
    deterministic, so the band only has to absorb float differences across platforms (a few
    flipped predictions, ~0.03 each) and is one seed-std wide: 82.0-82.5. It rejects a mis-mapped
    penalty, measured on the same embeddings: C = 1/l2 (no 1/n: almost unregularised) gives 81.91,
    C = l2 (over-regularised) 80.27.
    """
    from cl_bench.models.encoder import build_encoder

    encoder = build_encoder(str(minilm_path()), pooler="avg", fresh_mlp=False)
    results = evaluate(encoder, data_dir, tasks=["cr"],
                       options=EvalOptions(align_uniform=False, anisotropy=False, transfer_classifier="sklearn"))
    assert 82.0 <= results["cr"] <= 82.5, results
    assert 81.5 <= results["cr_dev"] <= 83.5, results
