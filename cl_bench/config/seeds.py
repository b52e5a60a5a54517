"""Seeds as a sweep axis: ``seeds=N`` runs every grid point with N seeds.

    cl-bench experiment=ablation_dropout seeds=5         # 8 points x 5 seeds = 40 jobs
    cl-bench method=simcse seeds=3 seed=7                 # seeds 7, 8, 9 of one setting (a sweep)

``seeds=N`` is expanded on the command line, before Hydra sees it, into the seed list
``seed=S,S+1,…,S+N-1`` (``S``: the command line's ``seed=``, else the preset's, else the default 42)
and multirun mode: Hydra's basic sweeper then forms the product with the preset's grid, and every
job of a point differs from its siblings by ``seed`` alone. The jobs carry an MLflow tag ``point``
(their run name without the seed), so the MLflow UI groups replicates ("Group by: tag point") and
``cl-bench-report`` reads the seeds of a point as its replicates. ``seeds`` stays in every job's
config (param ``seeds``), which is how the report knows the number of seeds asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from cl_bench.config import CLBenchConfig, ConfigError
from cl_bench.config.catalog import CONF_DIR
from cl_bench.utils.overrides import parsed_overrides

KEY = "seeds"


def _value(argv: Sequence[str], key: str) -> str | None:
    """The last ``key=value`` (also ``+key=``/``++key=``) of ``argv``, or None."""
    found = None
    for _, override in parsed_overrides(argv):  # Hydra's parser: what Hydra will read
        if override.key_or_group == key and not override.is_delete():
            found = override.get_value_string()
    return found


def _base_seed(argv: Sequence[str]) -> int:
    """The seed the run would use without ``seeds``: ``seed=`` of argv, else the composed config's."""
    given = _value(argv, "seed")
    if given is not None:
        try:
            return int(given)
        except ValueError:
            raise ConfigError(f"seed: expected one whole number with seeds=N (seeds lists the seeds), got '{given}'") from None
    from hydra import compose, initialize_config_dir


    groups = [arg for arg, override in parsed_overrides(argv) if override.key_or_group in ("experiment", "method", "train")
              and not override.is_delete() and not override.is_sweep_override()]
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return int(compose("config", overrides=groups).seed)
    except Exception:  # noqa: BLE001 (the schema default; Hydra judges a config that does not compose)

        return CLBenchConfig.seed


def expand_seeds(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``seeds=N`` turned into ``seeds=N seed=S,…,S+N-1 --multirun`` (unchanged without it).

    Raises:
        ConfigError: ``seeds`` is not a whole number >= 1, ``seed=`` already lists several seeds, or
            ``train.resume`` names one run to continue (one line naming the key).
    """
    argv = list(argv)
    raw = _value(argv, KEY)
    if raw is None:
        return argv
    try:
        count = int(raw)
    except ValueError:
        raise ConfigError(f"{KEY}: expected a whole number >= 1 (replicates per grid point), got '{raw}'") from None
    if count < 1:
        raise ConfigError(f"{KEY}: expected a whole number >= 1 (replicates per grid point), got {count}")
    seed = _value(argv, "seed")
    if seed is not None and ("," in seed or "(" in seed):
        raise ConfigError(f"{KEY}: seed={seed} already lists the seeds; give seeds=N (with one seed=S to start from) "
                          "or a seed list, not both")
    resume = _value(argv, "train.resume")
    if resume is not None and resume.lower() not in ("", "false", "none", "null"):
        raise ConfigError(f"{KEY}: train.resume continues one run; seeds={count} asks for {count} runs of each point")
    if count == 1:
        return argv
    start = _base_seed(argv)
    # seeds=N first, then the seed list: a run seeds cannot act on (mode=eval) is rejected naming seeds
    given_seed = {arg for arg, override in parsed_overrides(argv) if override.key_or_group == "seed"}
    out = [a for a in argv if a not in given_seed]
    out.append(f"seed={','.join(str(start + i) for i in range(count))}")
    if not any(a in ("-m", "--multirun") for a in out):
        out.insert(0, "--multirun")
    return out
