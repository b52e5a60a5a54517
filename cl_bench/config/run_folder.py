"""A run's folder before anything is written in it: no run overwrites another, a resume continues the run it
names with the settings that run computed with, and a folder cl-bench cannot write is refused.

Torch-free. :func:`check_run_folder` runs before Hydra's job (``cl-bench``'s checks,
:func:`cl_bench.config.early_checks.check_command`: Hydra would write ``.hydra/`` into the folder first) and again
in the job (a command those checks did not compose, a sweep's job); :func:`check_sweep_folder` before a sweep's
first job. What a resume may change is declared once, :data:`RESUMABLE_KEYS`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from cl_bench.config import ConfigError
from cl_bench.config.params import acting_params
from cl_bench.tracking.params import knob_params
from cl_bench.utils.rundir import INERT_VALUE, RunDir

#: the option that lets a run replace the run already in its folder (Hugging Face Trainer's name for it)
OVERWRITE_KEY = "train.overwrite_output_dir"

#: The keys a resumed run may set to other values than the run it continues: how long it trains (``train.max_steps``,
#: ``train.epochs``: the linear schedule then decays over the new total from the step reached), how often it logs and
#: checkpoints, how fast it runs (threads, DataLoader workers: the same batches), what it logs to, and the final
#: evaluation (``eval.*``). A name ending in ``.`` covers its whole group. Any other key that differs from the run's
#: ``params.json`` is refused: one run made of two configurations would be recorded as the first.
RESUMABLE_KEYS: tuple[str, ...] = (
    "train.max_steps", "train.epochs", "train.log_steps", "train.checkpoint_steps", "train.progress_bar",
    "train.num_threads", "train.num_workers", "train.resume", OVERWRITE_KEY, "eval.", "logger.", "paths.",
)

#: keys that differ at every resume by construction (where the command was started from): not recorded as a change
_ALWAYS_DIFFERENT = ("train.resume", OVERWRITE_KEY, "paths.output_dir")


class FinishedRun(Exception):  # noqa: N818 (not an error: `cl-bench` says it and exits 0)
    """``train.resume`` names a finished run: there is nothing to continue (``cl-bench`` prints it, exit 0)."""


def may_change_on_resume(key: str) -> bool:
    """True when ``key`` is one of :data:`RESUMABLE_KEYS` (or in a group listed there)."""
    return any(key == name or (name.endswith(".") and key.startswith(name)) for name in RESUMABLE_KEYS)


def resume_target(cfg: DictConfig, run_dir: Path) -> Path | None:
    """The folder ``train.resume`` continues (``true``/``auto``: ``run_dir`` itself), or None for a fresh run."""
    if cfg.get("mode") != "train":
        return None
    value = str(cfg.train.get("resume", "") or "")
    if value.lower() in ("", "false", "none", "null"):
        return None
    return Path(run_dir) if value.lower() in ("true", "auto") else Path(value)


def check_writable(folder: Path, key: str) -> None:
    """Refuse a run folder cl-bench could not create or write, before anything is written: the nearest existing
    folder on its path takes a temporary folder (removed at once), which is what creating it needs.

    Raises:
        ConfigError: one line naming ``key``, the folder and the reason (read-only, permission denied).
    """
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{key}: {existing} is a file, not a folder; choose another {key}")
    try:
        _probe(existing)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"{key}: cannot write the run folder {folder} ({existing}: {reason}); choose a writable "
                          f"{key}") from None


def _probe(folder: Path) -> None:
    """Create and remove an empty folder in ``folder`` (root's writes pass permission bits, not a read-only mount)."""
    Path(tempfile.mkdtemp(prefix=".cl-bench-write-check-", dir=folder)).rmdir()


def recorded_params(run_dir: Path) -> dict[str, Any] | None:
    """The params the run recorded when it started (``params.json``), or None before it recorded any."""
    path = RunDir(run_dir).params
    return json.loads(path.read_text()) if path.is_file() else None


def as_recorded(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as ``params.json`` holds them (the same JSON round trip: a value JSON cannot hold as its text)."""
    return json.loads(json.dumps(params, default=str))


def current_params(cfg: DictConfig, run_dir: Path, inert: Mapping[str, str]) -> dict[str, Any]:
    """This command's params, as ``params.json`` records them (:func:`cl_bench.tracking.params.knob_params` of the acting
    params, the group choices from Hydra's ``runtime.choices``; the same JSON round trip). ``inert``: the preflight's
    :attr:`~cl_bench.run_specs.RunSpecs.inert` (the specs are not built again)."""
    from hydra.core.hydra_config import HydraConfig

    choices = OmegaConf.select(cfg, "hydra.runtime.choices")  # composed before Hydra's job (early_checks)
    if choices is None and HydraConfig.initialized():  # in the job: Hydra's own record
        choices = HydraConfig.get().runtime.choices
    node = cfg.copy()
    with open_dict(node):
        node.pop("hydra", None)
        node.paths.output_dir = str(run_dir)  # Hydra's interpolation: resolvable before its job too
    acting = acting_params(node, inert)
    return as_recorded(knob_params(acting, dict(choices or {})))


def resume_changes(run_dir: Path, now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Every param whose value in this command (``now``, as :func:`current_params` gives them) differs from the run's
    ``params.json``: key -> (was, now), a key absent on one side as None (``n/a`` of a sweep's partly-inert key counts
    as absent)."""
    before = recorded_params(run_dir)
    if before is None:
        return {}
    changes = {}
    for key in sorted(set(before) | set(now)):
        was, new = before.get(key), now.get(key)
        if was == INERT_VALUE and key not in now:
            continue
        if was != new:
            changes[key] = (was, new)
    return changes


def _finished(run_dir: Path) -> bool:
    status = RunDir(run_dir).status
    try:
        return status.is_file() and json.loads(status.read_text()).get("status") == "FINISHED"
    except (OSError, ValueError):
        return False


def check_run_folder(cfg: DictConfig, run_dir: Path, inert: Mapping[str, str] | None) -> None:
    """The folder a single run or a sweep's job writes, before it writes: writable; holding no run unless this
    one resumes it or ``train.overwrite_output_dir=true``; a resumed run unfinished and computed as this command
    would compute it (only :data:`RESUMABLE_KEYS` may differ). ``inert``: the preflight's inert keys; None where the
    preflight gave no specs (the run is refused for that anyway): the settings are then not compared.

    Raises:
        FinishedRun: ``train.resume`` names a finished run (one line; nothing to do).
        ConfigError: one line naming the folder and the ways on, or each differing key with both values.
    """
    run_dir = Path(run_dir)
    # mode=eval writes results.json and metrics.jsonl too: refused alike, and not replaced (the run it would replace
    # may be a training run; an evaluation is cheap to rerun in another folder)
    overwrite = bool(OmegaConf.select(cfg, OVERWRITE_KEY, default=False)) and cfg.get("mode") == "train"
    target = resume_target(cfg, run_dir)
    if target is None:
        check_writable(run_dir, "hydra.run.dir")
        held = RunDir(run_dir).run_files()
        if held and not overwrite:
            if cfg.get("mode") != "train":
                ways = "choose another hydra.run.dir"
            elif _finished(run_dir):  # nothing left to continue
                ways = f"choose another hydra.run.dir, or replace it with {OVERWRITE_KEY}=true"
            else:
                ways = f"continue it with train.resume={run_dir}, or replace it with {OVERWRITE_KEY}=true"
            what = "a finished run" if _finished(run_dir) else "a run"
            raise ConfigError(f"hydra.run.dir: {run_dir} already holds {what} ({', '.join(held)}); {ways}")
        return
    if overwrite:
        raise ConfigError(f"{OVERWRITE_KEY}=true and train.resume={cfg.train.resume}: continue the run or replace it, "
                          "not both")
    check_writable(target, "train.resume")
    if _finished(target):
        raise FinishedRun(f"train.resume: {target} is a finished run (status.json: FINISHED; its checkpoint was "
                          f"removed); nothing to do. Score it again with mode=eval "
                          f"model.name_or_path={RunDir(target).best_model}")
    if inert is None:
        return
    changes = resume_changes(target, current_params(cfg, target, inert))
    refused = {k: v for k, v in changes.items() if not may_change_on_resume(k)}
    if refused:
        listed = "; ".join(f"{k}: was {_shown(was)}, now {_shown(new)}" for k, (was, new) in refused.items())
        raise ConfigError(f"train.resume: the run in {target} was started with other settings ({listed}); resume "
                          "with its own values, or start a new run (what a resume may change: docs/faults-data.md)")


def segment_changes(run_dir: Path, now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The resumable keys this resume sets to other values than the run's first segment (what its segment record
    and MLflow's ``segment.N`` tag show), without those that differ at every resume (``train.resume``...);
    ``now`` as :func:`resume_changes` takes it."""
    return {k: v for k, v in resume_changes(run_dir, now).items() if k not in _ALWAYS_DIFFERENT}


def _shown(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value) if not isinstance(value, str) else value


def check_sweep_folder(config: DictConfig) -> None:
    """A sweep's folder before its first job: writable, and holding no job's run unless the sweep resumes its jobs
    (``train.resume=true``) or replaces them (``train.overwrite_output_dir=true``).

    Raises:
        ConfigError: one line naming the sweep folder and the job folders that hold runs.
    """
    sweep_dir = Path(str(config.hydra.sweep.dir))
    check_writable(sweep_dir, "hydra.sweep.dir")
    if not sweep_dir.is_dir():
        return
    resume = str(OmegaConf.select(config, "train.resume", default="") or "").lower() not in ("", "false", "none", "null")
    if resume or bool(OmegaConf.select(config, OVERWRITE_KEY, default=False)):
        return
    held = sorted(job.name for job in sweep_dir.iterdir() if job.is_dir() and RunDir(job).run_files())
    if held:
        raise ConfigError(f"hydra.sweep.dir: {sweep_dir} already holds the runs of a sweep (job folders "
                          f"{', '.join(held[:5])}{', ...' if len(held) > 5 else ''}); choose another hydra.sweep.dir, "
                          f"or replace them with {OVERWRITE_KEY}=true")
