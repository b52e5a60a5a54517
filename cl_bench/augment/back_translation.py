"""Back-translation: a round trip source -> pivot -> source through two MarianMT models.

Shared by the ``back_translation`` augmentation and the CERT method (which pre-trains on
(sentence, back-translation) pairs). Three pieces, usable on their own:

* :class:`BackTranslator` runs the round trip with any pair of seq2seq models
  (:meth:`BackTranslator.from_pretrained` loads ``Helsinki-NLP/opus-mt-{src}-{pivot}`` and back);
* :class:`ParaphraseTable` maps each corpus sentence to a precomputed paraphrase, read from a file
  with one paraphrase per corpus line (for machines that cannot load the translation models);
* :func:`write_paraphrase_file` precomputes that file (``python -m cl_bench.augment.back_translation``);
* :func:`cached_back_translations` translates a corpus once into a cache file keyed by the
  translation models, the generation settings and the corpus's SHA-256, and reads it back in later
  runs (CERT back-translated its corpus offline, once).

:class:`BackTranslation` uses the cache (beam search is deterministic, so a cached paraphrase is the
one an on-the-fly translation would give), the models on the fly when sampling, and the paraphrase
file when the models cannot load.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from cl_bench.augment.base import Augmentation
from cl_bench.augment.specs import BackTranslationSpec
from cl_bench.data.text import DataFileError, iter_lines, read_sentences
from cl_bench.utils.cache_dirs import cache_root
from cl_bench.utils.progress import progress_bar

log = logging.getLogger(__name__)


class BackTranslationUnavailable(RuntimeError):
    """Neither the translation models nor a paraphrase file can be used; the message says what to set."""


def marian_model_id(source_lang: str, target_lang: str) -> str:
    """The Helsinki-NLP OPUS-MT model translating ``source_lang`` into ``target_lang``."""
    return f"Helsinki-NLP/opus-mt-{source_lang}-{target_lang}"


class BackTranslator:
    """Round-trip translation with a forward (source -> pivot) and a backward (pivot -> source) model.

    Args:
        forward_model: seq2seq model translating into the pivot language.
        forward_tokenizer: its tokenizer.
        backward_model: seq2seq model translating back.
        backward_tokenizer: its tokenizer.
        num_beams: beam size (used when not sampling).
        do_sample: sample translations (seeded) instead of beam search, for diverse paraphrases.
        max_length: longest generated sequence, in tokens.
        batch_size: sentences per generation call.

    The generation settings are :class:`~cl_bench.augment.specs.BackTranslationSpec`'s keys (their defaults and rules
    are declared there: :meth:`~cl_bench.augment.specs.BackTranslationSpec.generation`).
    """

    def __init__(
        self,
        forward_model: Any,
        forward_tokenizer: Any,
        backward_model: Any,
        backward_tokenizer: Any,
        *,
        num_beams: int,
        do_sample: bool,
        max_length: int,
        batch_size: int,
    ) -> None:
        self.forward = (forward_model.eval(), forward_tokenizer)
        self.backward = (backward_model.eval(), backward_tokenizer)
        self.num_beams = num_beams
        self.do_sample = do_sample
        self.max_length = max_length
        self.batch_size = batch_size

    @classmethod
    def from_pretrained(
        cls,
        source_lang: str,
        pivot_lang: str,
        forward_model: str | None,
        backward_model: str | None,
        device: torch.device | str = "cpu",
        **generation: Any,
    ) -> BackTranslator:
        """Load the two translation models (OPUS-MT when ``forward_model``/``backward_model`` are None) onto ``device``;
        ``generation``: the translator's settings (:meth:`~cl_bench.augment.specs.BackTranslationSpec.generation`).

        Raises:
            BackTranslationUnavailable: when a model or tokenizer cannot be loaded (offline, no
                sentencepiece, wrong name), naming the model.
        """
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        loaded = []
        for name in (
            forward_model or marian_model_id(source_lang, pivot_lang),
            backward_model or marian_model_id(pivot_lang, source_lang),
        ):
            try:
                model = AutoModelForSeq2SeqLM.from_pretrained(name).to(device)
                tokenizer = AutoTokenizer.from_pretrained(name)
            except (OSError, ValueError, ImportError) as err:
                first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise BackTranslationUnavailable(
                    f"cannot load translation model '{name}': {first_line}"
                ) from err
            loaded += [model, tokenizer]
        return cls(*loaded, **generation)

    def to(self, device: torch.device | str) -> BackTranslator:
        """Move both models to ``device``."""
        self.forward = (self.forward[0].to(device), self.forward[1])
        self.backward = (self.backward[0].to(device), self.backward[1])
        return self

    def translate(
        self, sentences: Sequence[str], model: Any, tokenizer: Any, seed: int | None = None
    ) -> list[str]:
        """Translate ``sentences`` with one model, in batches, keeping the order."""
        device = next(model.parameters()).device
        out: list[str] = []
        for start in range(0, len(sentences), self.batch_size):
            chunk = list(sentences[start : start + self.batch_size])
            batch = tokenizer(
                chunk, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
            with (
                torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
                torch.inference_mode(),
            ):
                if seed is not None:
                    torch.manual_seed(
                        seed + start
                    )  # sampling draws from the global RNG: seed it, then restore it
                generated = model.generate(
                    **batch,
                    max_length=self.max_length,
                    num_beams=1 if self.do_sample else self.num_beams,
                    do_sample=self.do_sample,
                )
            out += [text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True)]
        return out

    def round_trip(self, sentences: Sequence[str], seed: int | None = None) -> list[str]:
        """Back-translate each sentence; an empty translation falls back to the original sentence."""
        pivot = self.translate(sentences, *self.forward, seed=seed)
        back = self.translate(pivot, *self.backward, seed=None if seed is None else seed + 1)
        return [
            paraphrase if paraphrase else original
            for original, paraphrase in zip(sentences, back, strict=True)
        ]


class ParaphraseTable:
    """Precomputed paraphrases: ``paraphrase_file`` line i paraphrases ``corpus_file`` line i.

    Blank corpus lines are skipped (as the corpus reader does), their paraphrase lines ignored.
    """

    def __init__(self, paraphrases: dict[str, str]) -> None:
        self.paraphrases = paraphrases

    @classmethod
    def from_files(cls, corpus_file: str | Path, paraphrase_file: str | Path) -> ParaphraseTable:
        """Read the two line-aligned files.

        Raises:
            DataFileError: missing file, different line counts, or an empty paraphrase of a
                non-blank corpus line (naming file and line).
        """
        corpus_file, paraphrase_file = Path(corpus_file), Path(paraphrase_file)
        for key, path in (
            ("augmentation.corpus_file", corpus_file),
            ("augmentation.paraphrase_file", paraphrase_file),
        ):
            if not path.is_file():
                hint = (
                    " (write it with: python -m cl_bench.augment.back_translation CORPUS OUT)"
                    if "paraphrase" in key
                    else ""
                )
                raise DataFileError(f"{key}: file not found: {path}{hint}")
        corpus = list(iter_lines(corpus_file))
        paraphrases = list(iter_lines(paraphrase_file))
        if len(corpus) != len(paraphrases):
            raise DataFileError(
                f"{paraphrase_file}: {len(paraphrases)} lines, but {corpus_file} has {len(corpus)}; "
                "the paraphrase file needs one line per corpus line"
            )
        table: dict[str, str] = {}
        for (_, sentence), (line_no, paraphrase) in zip(corpus, paraphrases, strict=True):
            if not sentence.strip():
                continue
            if not paraphrase.strip():
                raise DataFileError(
                    f"{paraphrase_file}:{line_no}: empty paraphrase of a non-empty corpus line"
                )
            table.setdefault(sentence.strip(), paraphrase.strip())
        return cls(table)

    def lookup(self, sentences: Sequence[str]) -> list[str]:
        """The paraphrase of each sentence.

        Raises:
            KeyError: (one line) for a sentence that is not in the corpus file.
        """
        out = []
        for sentence in sentences:
            paraphrase = self.paraphrases.get(sentence.strip())
            if paraphrase is None:
                raise KeyError(
                    f"augmentation.paraphrase_file: no paraphrase for {sentence[:60]!r} (not in corpus_file)"
                )
            out.append(paraphrase)
        return out


def write_paraphrase_file(
    corpus_file: str | Path, out_file: str | Path, translator: BackTranslator, seed: int | None = None
) -> int:
    """Back-translate every line of ``corpus_file`` into ``out_file`` (blank lines stay blank).

    Returns:
        The number of sentences translated.
    """
    lines = [line for _, line in iter_lines(corpus_file)]
    sentences = [line.strip() for line in lines if line.strip()]
    paraphrases = iter(translator.round_trip(sentences, seed=seed))
    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as out:
        for line in lines:
            out.write((next(paraphrases) if line.strip() else "") + "\n")
    return len(sentences)


def default_cache_dir() -> Path:
    """``back_translation/`` in cl-bench's cache folder (:func:`cl_bench.utils.cache_dirs.cache_root`)."""
    return cache_root() / "back_translation"


def cache_key(sentences: Sequence[str], model_ids: Sequence[str], generation: dict[str, Any]) -> dict[str, Any]:
    """What a cached back-translation depends on: the two models, the generation settings and the corpus."""
    corpus = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()
    settings = {k: v for k, v in generation.items() if k != "batch_size"}  # batching does not change the output
    return {"models": list(model_ids), "generation": settings, "corpus_sha256": corpus, "sentences": len(sentences)}


def cached_back_translations(
    sentences: Sequence[str],
    model_ids: Sequence[str],
    generation: dict[str, Any],
    cache_dir: str | Path,
    load_translator: Callable[[], BackTranslator],
    progress: bool = True,
) -> list[str]:
    """The back-translation of every sentence, computed once and then read from ``cache_dir``.

    The cache file is ``<cache_dir>/<key>.txt`` (one paraphrase per sentence; ``<key>.json`` beside
    it says what the key covers, see :func:`cache_key`). A miss loads the translator (only then),
    translates the corpus with a progress bar and writes the file atomically.

    Raises:
        BackTranslationUnavailable: on a miss, when the translation models cannot be loaded.
    """
    key = cache_key(sentences, model_ids, generation)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    path = Path(cache_dir) / f"{digest}.txt"
    if path.is_file():
        cached = path.read_text(encoding="utf-8").split("\n")[:-1]
        if len(cached) == len(sentences):
            log.info("back-translations of %d sentences from the cache %s", len(sentences), path)
            return cached
        log.warning("back-translation cache %s has %d lines, not %d: translating again", path, len(cached), len(sentences))
    translator = load_translator()

    paraphrases: list[str] = []
    step = translator.batch_size * 8  # a few generation batches per progress update
    with progress_bar(len(sentences), "back-translating", progress, unit="sent") as bar:
        for start in range(0, len(sentences), step):
            chunk = sentences[start : start + step]
            paraphrases += [p.replace("\n", " ") for p in translator.round_trip(chunk)]
            bar.update(len(chunk))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(p + "\n" for p in paraphrases), encoding="utf-8")
    os.replace(tmp, path)
    path.with_suffix(".json").write_text(json.dumps(key, indent=2))
    log.info("wrote %d back-translations to the cache %s", len(paraphrases), path)
    return paraphrases


class BackTranslation(Augmentation):
    """Back-translated views: MarianMT round trip when the models load, else a paraphrase file.

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.BackTranslationSpec`).
    """

    spec: BackTranslationSpec

    def __init__(self, spec: BackTranslationSpec) -> None:
        super().__init__(spec)
        self.generation = spec.generation()  # as the translator and the cache key take them
        self.translator: BackTranslator | None = None
        self.table: ParaphraseTable | None = None
        self._encoder: Any = None

    def model_ids(self) -> tuple[str, str]:
        """The forward and backward translation models' ids or paths."""
        spec = self.spec
        return (
            spec.forward_model or marian_model_id(spec.source_lang, spec.pivot_lang),
            spec.backward_model or marian_model_id(spec.pivot_lang, spec.source_lang),
        )

    def load_translator(self) -> BackTranslator:
        """Load the two translation models (raises BackTranslationUnavailable)."""
        spec = self.spec
        return BackTranslator.from_pretrained(
            spec.source_lang, spec.pivot_lang, spec.forward_model, spec.backward_model, **self.generation
        )

    def setup(self, encoder: Any, model_name_or_path: str) -> None:
        """Load the translation models, or the paraphrase table when they cannot be loaded."""
        self._encoder, spec = encoder, self.spec
        if spec.source in ("auto", "models"):
            try:
                if spec.translates_corpus_once():
                    sentences = read_sentences(str(spec.corpus_file), limit=spec.limit)
                    paraphrases = cached_back_translations(
                        sentences, self.model_ids(), self.generation, spec.cache_dir or default_cache_dir(),
                        self.load_translator,
                    )
                    self.table = ParaphraseTable(dict(zip(sentences, paraphrases, strict=True)))
                else:
                    self.translator = self.load_translator()
                return
            except BackTranslationUnavailable as err:
                if spec.source == "models" or not spec.paraphrase_file:
                    raise BackTranslationUnavailable(
                        f"augmentation=back_translation: {err}; set augmentation.paraphrase_file to precomputed "
                        "back-translations (python -m cl_bench.augment.back_translation CORPUS OUT on a machine with the models)"
                    ) from err
                log.warning("back-translation models unavailable (%s); using %s", err, spec.paraphrase_file)
        if not spec.paraphrase_file or not spec.corpus_file:
            raise BackTranslationUnavailable(
                "augmentation=back_translation with source=file needs augmentation.paraphrase_file and augmentation.corpus_file"
            )
        self.table = ParaphraseTable.from_files(spec.corpus_file, spec.paraphrase_file)

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        """Back-translations of the sentences (sampling, if on, is seeded from ``rng``)."""
        if self.translator is not None:
            device = getattr(self._encoder, "device", None)
            if device is not None:
                self.translator.to(device)  # the loop moves the encoder after setup()
            return self.translator.round_trip(sentences, seed=rng.getrandbits(62))
        if self.table is None:
            raise RuntimeError(
                "augmentation=back_translation: setup(encoder, model_name_or_path) was not called"
            )
        return self.table.lookup(sentences)


def main(argv: Sequence[str] | None = None) -> None:
    """Precompute a paraphrase file: ``python -m cl_bench.augment.back_translation CORPUS OUT``."""
    spec = BackTranslationSpec()  # the augmentation's defaults are the command's
    parser = argparse.ArgumentParser(description="Back-translate a one-sentence-per-line corpus.")
    parser.add_argument("corpus", help="corpus file (.txt or .txt.gz), one sentence per line")
    parser.add_argument("out", help="paraphrase file to write, one line per corpus line")
    parser.add_argument("--pivot", default=spec.pivot_lang, help=f"pivot language (default: {spec.pivot_lang})")
    parser.add_argument("--source", default=spec.source_lang, help=f"corpus language (default: {spec.source_lang})")
    parser.add_argument("--forward-model", default=spec.forward_model, help="source->pivot model (default: OPUS-MT)")
    parser.add_argument("--backward-model", default=spec.backward_model, help="pivot->source model (default: OPUS-MT)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=spec.batch_size)
    parser.add_argument("--num-beams", type=int, default=spec.num_beams)
    parser.add_argument("--max-length", type=int, default=spec.max_length, help="longest translation, in tokens")
    parser.add_argument("--sample", action="store_true", help="sample instead of beam search")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    spec = dataclasses.replace(spec, pivot_lang=args.pivot, source_lang=args.source, forward_model=args.forward_model,
                               backward_model=args.backward_model, batch_size=args.batch_size, num_beams=args.num_beams,
                               max_length=args.max_length, do_sample=args.sample)
    try:
        spec.check()  # the spec's rules (>= 1 ...), one line
    except ValueError as err:
        parser.error(str(err))
    translator = BackTranslator.from_pretrained(
        spec.source_lang, spec.pivot_lang, spec.forward_model, spec.backward_model, device=args.device,
        **spec.generation(),
    )
    count = write_paraphrase_file(args.corpus, args.out, translator, seed=args.seed)
    print(f"wrote {count} back-translations to {args.out}")


if __name__ == "__main__":
    main()
