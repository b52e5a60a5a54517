"""The console scripts' argument parsing: a bad argument is one line on stderr and exit status 2, as every other bad
input of cl-bench (argparse prints its usage block first; ``--help`` still shows it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line, ``PROG: error: MESSAGE (PROG --help: the options)``,
    exit status 2. Its subparsers are of this class too (argparse makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        """Print the one line and exit with status 2."""
        sys.stderr.write(f"{self.prog}: error: {message} ({self.prog} --help: the options)\n")
        raise SystemExit(2)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer ``>= minimum`` (argparse names the flag in its message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def positive_float(text: str) -> float:
    """An argparse ``type``: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {value:g}")
    return value
