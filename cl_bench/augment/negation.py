"""Negation: the sentence's negated form (SNCSE's soft negative; Wang et al. 2022, Sense-GVT/SNCSE).

SNCSE's ``generate_soft_negative_samples.py`` (``convert_to_negation``) negates with spaCy's
``en_core_web_sm`` dependency parse:

1. a sentence with the token ``not`` loses its first ``not``;
2. else, scanning the tokens' dependency labels in order: at the first ``aux``/``auxpass`` token,
   `` not`` is appended to it; or, if the ``ROOT`` comes first, the root gets `` not`` when it is one of
   14 special words (am, is, was, are, were, can, could, will, would, shall, should, may, must, might),
   else ``do not``/``does not``/``did not`` + its lemma for the tags VBP/VBZ/VBD, else ``Not`` is put
   before the sentence;
3. the tokens are joined with single spaces.

spaCy and its English model cannot be installed here (the model is no PyPI package), so
``source=rules`` applies the same rule without a parser: tokens are words and punctuation marks (a
regular expression, close to spaCy's tokenizer for plain text), rule 1 as the official, then the first
token that is one of the special words or a form of *do*/*have* (the words that are auxiliaries before a
main verb) gets `` not``, else ``Not`` goes first. What differs: a main verb without an auxiliary
(``The man plays``) gets ``Not The man plays`` where the parser gives ``The man does not play``, and an
auxiliary after the root (``He said she will come``) is negated where the parser negates the root.
``source=file`` reads precomputed negations, SNCSE's ``soft_negative_samples.txt`` format (one JSON
list ``[sentence, negation]`` a line); a sentence missing from it gets ``"Not " + sentence``, the
official fallback (train_SNCSE.py l.514).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

from cl_bench.augment.base import Augmentation
from cl_bench.augment.specs import NegationSpec

#: SNCSE's ``special_words``: a ROOT among them takes `` not`` directly
SPECIAL_WORDS = frozenset({"am", "is", "was", "are", "were", "can", "could", "will", "would", "shall", "should",
                           "may", "must", "might"})
#: words negated in place without a parser: the special words and the forms of do/have, which are
#: auxiliaries (or, for do/have as main verbs, still read naturally with "not")
AUXILIARIES = SPECIAL_WORDS | {"do", "does", "did", "has", "have", "had"}
_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


def negate(sentence: str) -> str:
    """The rule-based negation of ``sentence`` (see the module docstring)."""
    tokens = _TOKEN.findall(sentence)
    if "not" in tokens:
        del tokens[tokens.index("not")]
        return " ".join(tokens)
    for i, token in enumerate(tokens):
        if token.lower() in AUXILIARIES:
            tokens[i] += " not"
            return " ".join(tokens)
    return " ".join(["Not", *tokens])


def read_negations(path: str | Path) -> dict[str, str]:
    """``{sentence: negation}`` from a file of JSON ``[sentence, negation]`` lines (SNCSE's format)."""
    table: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                sentence, negation = json.loads(line)
            except (ValueError, TypeError) as err:
                raise ValueError(f"{path}:{line_no}: expected a JSON list [sentence, negation] ({err})") from err
            table[str(sentence)] = str(negation)
    return table


class Negation(Augmentation):
    """Each sentence's negation: rule-based (``source=rules``) or read from ``file`` (``source=file``).

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.NegationSpec`).
    """

    spec: NegationSpec

    def __init__(self, spec: NegationSpec) -> None:
        super().__init__(spec)
        self.table = read_negations(spec.file) if spec.source == "file" and spec.file else {}

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        """The negation of each sentence (deterministic: ``rng`` is not used)."""
        if self.spec.source == "file":
            return [self.table.get(s, "Not " + s) for s in sentences]
        return [negate(s) for s in sentences]
