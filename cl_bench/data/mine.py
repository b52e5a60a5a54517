"""``cl-bench-data mine``: hard negatives for a pair or NLI file, written as a triples file supervised SimCSE reads.

For each (anchor, positive) row, every positive of the file (and every existing hard negative) is a candidate;
an encoder embeds anchors and candidates, and faiss (``IndexFlatIP`` over L2-normalised embeddings: exact cosine
search, the nearest-neighbour library sentence-transformers' ``mine_hard_negatives`` also uses) ranks the
candidates of each anchor. A candidate becomes a hard negative when

* its rank (0 = most similar, the row's own positive and the anchor itself excluded) lies in
  ``[range_min, range_max)``;
* its score is at most ``positive score − absolute_margin`` and at most ``positive score × (1 − relative_margin)``
  (the field's two margins; both off at 0);

and the first ``num_negatives`` qualifying candidates in rank order are kept (one output row each). With
``--cross-encoder`` the kept range is rescored by a cross-encoder (a sequence-classification checkpoint: its one
logit, or its last class's logit) and the margins are applied to those scores, as sentence-transformers does.

The output is ``sent0,sent1,hard_neg`` CSV (``method=simcse_sup data.train_file=OUT``), and ``OUT.mined.json``
records what mined it: the encoder and pooler, the cross-encoder, every option, the input's sha256 and row
counts, the output's sha256 and faiss's version.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from cl_bench.data.fetch import sha256_file
from cl_bench.data.nli import read_nli_triples
from cl_bench.data.text import DataFileError
from cl_bench.models.hub import ModelLoadError, check_model_reachable

if TYPE_CHECKING:
    import torch

log = logging.getLogger("cl_bench.data.mine")

Encode = Callable[[Sequence[str]], np.ndarray]
Rescore = Callable[[Sequence[tuple[str, str]]], np.ndarray]


class MineError(ValueError):
    """A bad mining option or input (one line naming the option or file)."""


@dataclass(frozen=True)
class MineOptions:
    """The mining options (``cl-bench-data mine --help``)."""

    range_min: int = 0
    range_max: int = 50
    absolute_margin: float = 0.0
    relative_margin: float = 0.0
    num_negatives: int = 1
    batch_size: int = 128

    def check(self) -> None:
        """Raise :class:`MineError` naming the first bad option."""
        if self.range_min < 0:
            raise MineError(f"--range-min: must be >= 0, got {self.range_min}")
        if self.range_max <= self.range_min:
            raise MineError(f"--range-max: must be > --range-min ({self.range_min}), got {self.range_max}")
        if self.absolute_margin < 0:
            raise MineError(f"--absolute-margin: must be >= 0, got {self.absolute_margin}")
        if not 0 <= self.relative_margin < 1:
            raise MineError(f"--relative-margin: must be in [0, 1), got {self.relative_margin}")
        if self.num_negatives < 1:
            raise MineError(f"--num-negatives: must be >= 1, got {self.num_negatives}")
        if self.batch_size < 1:
            raise MineError(f"--batch-size: must be >= 1, got {self.batch_size}")


def _normalized(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def mine_negatives(
    pairs: Sequence[tuple[str, ...]], encode: Encode, options: MineOptions, rescore: Rescore | None = None,
    progress: bool = True,
) -> list[tuple[str, str, str]]:
    """The (anchor, positive, hard negative) triples mined for ``pairs`` (see the module docstring).

    Args:
        pairs: rows of (anchor, positive[, existing hard negative]).
        encode: texts -> (N, D) embeddings.
        options: ranks, margins, negatives per pair.
        rescore: optional cross-encoder: (anchor, candidate) pairs -> scores; the margins then use its scores.
        progress: show progress bars.
    """
    import faiss

    options.check()
    candidates = list(dict.fromkeys([row[1] for row in pairs] + [row[2] for row in pairs if len(row) > 2]))
    anchors = [row[0] for row in pairs]
    corpus = _normalized(encode(candidates))
    queries = _normalized(encode(anchors))
    index = faiss.IndexFlatIP(corpus.shape[1])
    index.add(corpus)
    # the row's own positive and the anchor's own text may be among the hits: fetch 2 more than the range
    k = min(len(candidates), options.range_max + 2)
    scores, hits = index.search(queries, k)
    position = {text: i for i, text in enumerate(candidates)}
    triples: list[tuple[str, str, str]] = []
    for row, (anchor, positive) in enumerate(tqdm([(r[0], r[1]) for r in pairs], desc="mining", disable=not progress)):
        ranked = [(int(h), float(s)) for h, s in zip(hits[row], scores[row], strict=True)
                  if h >= 0 and candidates[h] not in (positive, anchor)]
        ranked = ranked[options.range_min:options.range_max]
        if not ranked:
            continue
        if rescore is not None:
            values = np.asarray(rescore([(anchor, positive)] + [(anchor, candidates[h]) for h, _ in ranked]), dtype=float)
            positive_score, ranked = float(values[0]), [(h, float(v)) for (h, _), v in zip(ranked, values[1:], strict=True)]
        else:
            positive_score = float(queries[row] @ corpus[position[positive]])
        kept = [candidates[h] for h, score in ranked
                if score <= positive_score - options.absolute_margin
                and score <= positive_score * (1.0 - options.relative_margin)]
        triples += [(anchor, positive, negative) for negative in kept[: options.num_negatives]]
    return triples


def mining_device(name: str) -> torch.device:
    """The ``torch.device`` the encoder and the cross-encoder run on: ``auto`` is CUDA when torch sees one, else the CPU.

    Raises:
        MineError: a device torch does not know, or CUDA named where torch sees none (one line).
    """
    import torch

    from cl_bench.models.inference import probable_eval_device

    if name == "auto":
        return probable_eval_device()
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as err:
        raise MineError(f"--device: unknown device '{name}'; e.g. auto, cpu, cuda, cuda:1") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise MineError(f"--device: {name}, but torch sees no CUDA device; use --device cpu (or auto)")
    return device


def cross_encoder_scorer(name_or_path: str, batch_size: int = 32, device: torch.device | str = "cpu") -> Rescore:
    """A sequence-classification checkpoint as a pair scorer (its one logit, or its last class's logit), on ``device``."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        check_model_reachable(name_or_path)
    except ModelLoadError as err:
        raise MineError(str(err).replace("model.name_or_path", "--cross-encoder", 1)) from err
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    model = AutoModelForSequenceClassification.from_pretrained(name_or_path).eval().to(device)
    # a tokenizer without a model_max_length reports a huge one: stay within the position embeddings
    limit = min(int(tokenizer.model_max_length), int(getattr(model.config, "max_position_embeddings", 512)), 512)

    def score(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for start in range(0, len(pairs), batch_size):
                chunk = pairs[start:start + batch_size]
                features = tokenizer([a for a, _ in chunk], [b for _, b in chunk], padding=True, truncation=True,
                                     max_length=limit, return_tensors="pt").to(device)
                out.append(model(**features).logits[:, -1].float().cpu().numpy())
        return np.concatenate(out)

    return score


def write_triples(triples: Sequence[tuple[str, str, str]], out: Path) -> None:
    """``sent0,sent1,hard_neg`` CSV (SimCSE's format, read by ``cl_bench.data.nli.read_nli_triples``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sent0", "sent1", "hard_neg"])
        writer.writerows(triples)


def mine_file(
    input_file: str | Path, out: str | Path, model: str, pooler: str = "avg", max_length: int = 128,
    options: MineOptions = MineOptions(), cross_encoder: str | None = None, limit: int | None = None,
    progress: bool = True, device: str = "auto",
) -> dict:
    """Mine ``input_file`` (a pair or NLI CSV) with the encoder ``model`` into ``out`` and ``out.mined.json``;
    the encoder and the cross-encoder run on ``device`` (:func:`mining_device`).

    Returns:
        The record written to ``<out>.mined.json``.
    """
    import faiss

    from cl_bench.models.encoder import build_encoder
    from cl_bench.models.poolers import POOLERS

    options.check()
    if pooler not in POOLERS:
        raise MineError(f"--pooler: unknown '{pooler}'; valid: {', '.join(POOLERS)}")
    try:
        pairs = read_nli_triples(input_file, limit=limit)
    except DataFileError as err:
        raise MineError(str(err).replace("data.train_file", "--input", 1)) from err
    try:
        check_model_reachable(model)
    except ModelLoadError as err:
        raise MineError(str(err).replace("model.name_or_path", "--model", 1)) from err
    on = mining_device(device)
    rescore = cross_encoder_scorer(cross_encoder, device=on) if cross_encoder else None
    encoder = build_encoder(model, pooler=pooler, max_length=max_length, fresh_mlp=False).to(on)
    triples = mine_negatives(pairs, lambda texts: encoder.encode(list(texts), batch_size=options.batch_size),
                             options, rescore, progress)
    out = Path(out)
    write_triples(triples, out)
    record = {
        "input": str(Path(input_file).resolve()), "input_sha256": sha256_file(input_file), "input_rows": len(pairs),
        "encoder": model, "pooler": pooler, "max_length": max_length, "cross_encoder": cross_encoder, "device": str(on),
        "options": asdict(options), "limit": limit, "output": str(out.resolve()), "output_sha256": sha256_file(out),
        "output_rows": len(triples), "anchors_without_negative": len(pairs) - len({t[0:2] for t in triples}),
        "nearest_neighbours": f"faiss {faiss.__version__} IndexFlatIP (exact cosine)",
    }
    Path(f"{out}.mined.json").write_text(json.dumps(record, indent=2) + "\n")
    log.info("mined %d triples from %d pairs into %s", len(triples), len(pairs), out)
    return record


def add_parser(sub) -> None:  # noqa: ANN001 (argparse's private subparsers type)
    """The ``mine`` subcommand of ``cl-bench-data``."""
    mine = sub.add_parser("mine", help="mine hard negatives for a pair/NLI CSV into a sent0,sent1,hard_neg file")
    mine.add_argument("input", type=Path, help="CSV with sent0,sent1[,hard_neg] rows (SimCSE's NLI format)")
    mine.add_argument("--out", type=Path, required=True, help="output triples CSV (and OUT.mined.json)")
    mine.add_argument("--model", required=True, help="encoder: local folder or hub id")
    mine.add_argument("--pooler", default="avg", help="the encoder's pooling (default avg)")
    mine.add_argument("--max-length", type=int, default=128)
    mine.add_argument("--range-min", type=int, default=0, help="skip the top candidates (ranks below this)")
    mine.add_argument("--range-max", type=int, default=50, help="consider candidates ranked below this")
    mine.add_argument("--absolute-margin", type=float, default=0.0, help="negative score <= positive score − m")
    mine.add_argument("--relative-margin", type=float, default=0.0, help="negative score <= positive score × (1 − m)")
    mine.add_argument("--num-negatives", type=int, default=1, help="negatives per pair (one output row each)")
    mine.add_argument("--cross-encoder", default=None, help="rescore candidates with this sequence-classification model")
    mine.add_argument("--batch-size", type=int, default=128)
    mine.add_argument("--limit", type=int, default=None, help="only the first N rows of the input")
    mine.add_argument("--device", default="auto", help="where the encoder and cross-encoder run (default auto: CUDA "
                                                       "when torch sees one, else the CPU)")
    mine.add_argument("--no-progress", action="store_true")


def run(args) -> int:  # noqa: ANN001
    """Run ``cl-bench-data mine`` from parsed arguments; 0 on success, 2 on a bad option or input."""
    import sys

    options = MineOptions(args.range_min, args.range_max, args.absolute_margin, args.relative_margin,
                          args.num_negatives, args.batch_size)
    try:
        record = mine_file(args.input, args.out, args.model, args.pooler, args.max_length, options,
                           args.cross_encoder, args.limit, progress=not args.no_progress, device=args.device)
    except MineError as err:
        print(f"cl-bench-data: error: {err}", file=sys.stderr)
        return 2
    print(f"{record['output_rows']} triples from {record['input_rows']} pairs -> {record['output']} "
          f"(record: {record['output']}.mined.json)")
    return 0
