"""Command-line overrides read by Hydra's own parser (one place: every override string goes through it)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import Any


@functools.cache
def override_parser() -> Any:
    """Hydra's override parser (made once: every override string is read by it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def is_override(arg: str) -> bool:
    """A Hydra override (``key=value``, ``+key=value``, ``group=option``, ``~key``), not a flag or a flag's value."""
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def parsed_overrides(argv: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """``(arg, Hydra's Override)`` for each override of ``argv`` that Hydra's parser reads (flags, and what it cannot
    parse, left out: Hydra's own message names those)."""
    for arg in argv:
        if not is_override(arg):
            continue
        try:
            yield arg, override_parser().parse_override(arg)
        except Exception:  # noqa: BLE001 (Hydra's OverrideParseException)
            continue


def override_key(text: str) -> str | None:
    """The key or config group an override string names, as Hydra's parser reads it (``+a.b=1``, ``~a.b`` and
    ``a.b@pkg=1``: ``a.b``); None for a string Hydra does not parse as an override (its composition says why)."""
    try:
        return str(override_parser().parse_override(text).key_or_group)
    except Exception:  # noqa: BLE001 (Hydra's OverrideParseException)
        return None


def syntax_error(text: str) -> str | None:
    """Why Hydra's grammar does not read the override ``text``, in one line with the 1-based column where it stops
    (``column 10: no viable alternative at input '[0.05'``); None when it parses.

    Hydra's own error drops the column (its listener keeps the message only): the text is read once more here, by
    Hydra's generated lexer and parser, with a listener that keeps it.
    """
    try:
        override_parser().parse_override(text)
        return None
    except Exception as err:  # noqa: BLE001 (Hydra's HydraException: read again for the column)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
    from antlr4 import CommonTokenStream, InputStream
    from antlr4.error.ErrorListener import ErrorListener
    from hydra.grammar.gen.OverrideLexer import OverrideLexer
    from hydra.grammar.gen.OverrideParser import OverrideParser

    found: list[tuple[int, str]] = []

    class _Keep(ErrorListener):  # type: ignore[misc]
        def syntaxError(self, recognizer: Any, symbol: Any, line: Any, column: int, msg: str, e: Any) -> None:  # noqa: N802
            if not found:
                found.append((int(column), str(msg)))

    lexer = OverrideLexer(InputStream(text))
    lexer.removeErrorListeners()
    lexer.addErrorListener(_Keep())
    parser = OverrideParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(_Keep())
    try:
        parser.override()
    except Exception:  # noqa: BLE001 (the first error is kept; what follows it is noise)
        pass
    if not found:  # a rule Hydra checks after parsing (e.g. a sweep where none may be)
        return reason
    column, message = found[0]
    message = re.sub(r" expecting \{[^}]*,[^}]*\}", "", message)  # the grammar's token names: no help to a user
    return f"column {column + 1}: {message}"
