"""``cl-bench``: the Hydra entry point: the command line's checks before Hydra's job, then the job
(:mod:`cl_bench.commands.job`: train or evaluate, then log to the run dir and MLflow).

    cl-bench method=simcse loss.tau=0.05                 # one run
    cl-bench -m method=simcse dropout=0,0.1,0.3           # a sweep: one MLflow child run per job
    cl-bench mode=eval model.name_or_path=DIR pooler=avg  # score any encoder
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from cl_bench.config import ConfigError, catalog, register_schemas
from cl_bench.config.catalog import CONF_DIR
from cl_bench.config.early_checks import check_command
from cl_bench.config.run_folder import FinishedRun
from cl_bench.config.seeds import expand_seeds
from cl_bench.utils import interrupt
from cl_bench.utils.overrides import is_override
from cl_bench.utils.rundir import RunDir

register_schemas()


def main() -> None:
    """Console-script entry point."""
    interrupt.mark_launcher()
    interrupt.stop_at_startup()  # a signal before the run's own handler: 128+signal, never a half-made run
    interrupt.at_stop(_mark_started_job_killed)
    try:
        _main()
    except interrupt.Stopped as stopped:  # before a job started (its folder, if Hydra made one, is marked KILLED)
        interrupt.exit_stopped(stopped.signum)


def _mark_started_job_killed(signum: int) -> None:
    """A signal between Hydra making the job's folder and the job's own handler: the folder says KILLED."""
    started = interrupt.job_dir()
    if started is not None and started.is_dir() and not RunDir(started).status.is_file():
        from cl_bench.tracking.mlflow_logger import RunTracker

        RunTracker(started, enabled=False).finish("KILLED", error=f"{signal.Signals(signum).name} during start-up")


def _main() -> None:
    sys.argv[1:] = flags_first(sys.argv[1:])  # `cl-bench a=1 -m b=1,2`: Hydra's parser wants its flags first
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # A dead tracking server must cost seconds, not minutes of retries (cl-bench then logs locally).
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    listing = sys.argv[1:2] == ["list"]
    try:
        catalog.use_search_path(catalog.search_path_from_argv(sys.argv[2:] if listing else sys.argv[1:]))
    except ValueError as err:  # a user's evaluation task YAML
        print(f"cl-bench: error: {err}", file=sys.stderr)
        sys.exit(2)
    if listing:
        print(catalog.listing())
        return
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:  # Hydra's help wins over every other flag, too
        print(app_help(sys.argv[1:]))
        return
    try:
        sys.argv[1:] = expand_seeds(sys.argv[1:])  # seeds=N: N replicates per point (a seed list, multirun)
        check_command(sys.argv[1:])  # every check that needs no model, before torch loads
    except FinishedRun as done:  # train.resume=<a finished run>: nothing to do, nothing written
        print(f"cl-bench: {done}")
        sys.exit(0)
    except ConfigError as err:
        print(f"cl-bench: error: {err}", file=sys.stderr)
        sys.exit(2)
    if "WORLD_SIZE" in os.environ:  # under torchrun, join the process group and agree on one run dir
        from cl_bench.utils import distributed  # torch: only a launched job loads it before Hydra's run

        try:
            sys.argv += distributed.setup_torchrun(sys.argv[1:])
        except ValueError as err:
            print(f"cl-bench: error: {err}", file=sys.stderr)
            sys.exit(2)
    _hydra_main()


def flags_first(argv: Sequence[str]) -> list[str]:
    """``argv`` with its flags (``-m``/``--multirun``, ``--cfg job``, ...) and their values before the overrides,
    each part in its own order.

    Hydra's argument parser takes the overrides as one trailing positional list: an override after a flag
    (``cl-bench model.name_or_path=DIR -m method=simcse,sg_opt``) is an "unrecognized argument" and argparse
    prints its usage. A flag is accepted anywhere on the command line this way, ``python -m cl_bench`` too.
    """
    return [arg for arg in argv if not is_override(arg)] + [arg for arg in argv if is_override(arg)]


def app_help(overrides: Sequence[str], conf_dir: Path = CONF_DIR) -> str:
    """``cl-bench --help``: Hydra's app help (``hydra.help.template``: header, config groups, the config
    with ``overrides`` applied, footer), with the groups listed from the config folders directly
    (``overrides``: the command line; its flags are left out).

    Hydra lists each group's options through a fresh deep copy of its config repository: 3 s of a
    2-core machine for cl-bench's 15 groups, before a word of help.
    """
    import string

    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose("config", overrides=[o for o in overrides if not o.startswith("-")], return_hydra_config=True)
    template = str(cfg.hydra.help.template)
    options: dict[str, set[str]] = {}
    for root in catalog.conf_dirs():
        for path in root.rglob("*.yaml"):
            group = path.parent.relative_to(root).as_posix()
            if group != "." and group != "hydra" and not group.startswith("hydra/"):
                options.setdefault(group, set()).add(path.stem)
    groups = "".join(f"{group}: {', '.join(sorted(names))}\n" for group, names in sorted(options.items()))
    config = OmegaConf.to_container(cfg, resolve=False)
    config.pop("hydra")
    return string.Template(template).substitute(
        FLAGS_HELP="(Hydra's flags: cl-bench --hydra-help)", HYDRA_CONFIG_GROUPS="", APP_CONFIG_GROUPS=groups,
        CONFIG=OmegaConf.to_yaml(config),
    )


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    interrupt.stop_with_launcher()  # a launcher's worker ends with the launcher while the job's stack loads too
    # the job's stack (torch, transformers, pandas) loads here, once Hydra's job starts: never for a rejected command
    from cl_bench.commands import job

    return job.run(cfg)


if __name__ == "__main__":
    main()
