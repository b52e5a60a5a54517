"""nox sessions: `nox -s tests` (default suite), `nox -s slow` (long tests), `nox -s lint`."""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "tests"]
os.environ.setdefault("CL_BENCH_DATA", os.path.abspath("../shared/data"))


def _install(session: nox.Session) -> None:
    session.install("torch==2.13.0")
    session.install("-e", ".[dev,mteb]")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The default test suite (excludes tests marked slow)."""
    _install(session)
    session.run("pytest", "-m", "not slow", *session.posargs)


@nox.session(python="3.11")
def slow(session: nox.Session) -> None:
    """Tests marked slow: real short training runs, sweeps, servers."""
    _install(session)
    session.run("pytest", "-m", "slow", *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", "cl_bench", "tests", "benchmarks", "noxfile.py")
