"""Command-line overrides read by Hydra's own parser (one place: every override string goes through it)."""

from __future__ import annotations

import functools
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
