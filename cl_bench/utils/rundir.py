"""The run directory: the one place that names the files a run writes.

Training, evaluation, tracking, ``cl-bench-sync``, ``cl-bench-export`` and ``cl-bench-report`` all
reach a run's files through :class:`RunDir` (and a sweep's through :class:`SweepDir`), so a file
name is written once, here.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass
from pathlib import Path


@functools.cache
def process_token() -> str:
    """Six random hex digits, the same for the whole process: the suffix of the default run and sweep folders
    (``conf/config.yaml``: ``${now:...}-${cl_bench.unique:}``), so two commands started in the same microsecond, on
    one machine or on two sharing a filesystem, never share a folder (one in 16.7 million pairs would, and then
    :func:`cl_bench.config.run_folder.check_run_folder` refuses the second rather than mixing them)."""
    return secrets.token_hex(3)


#: cl-bench's settings saved beside a model's weights (pooler, prompt): in a run's ``best_model/``, an exported
#: folder, any encoder folder cl-bench writes
ENCODER_META_FILE = "cl_bench_encoder.json"


@dataclass(frozen=True)
class RunDir:
    """A Hydra job's output directory and the files cl-bench keeps in it."""

    path: Path

    RESULTS = "results.json"  # final figures, written before MLflow sees them
    METRICS = "metrics.jsonl"  # every logged metric, one JSON record per line
    PARAMS = "params.json"  # the flattened params sent to MLflow
    TAGS = "tags.json"  # the tags sent to MLflow
    STATUS = "status.json"  # FINISHED / FAILED / KILLED and the error
    RUN_ID = "mlflow_run_id.txt"  # the MLflow run this directory belongs to
    TRACKING = "tracking.json"  # where the run logs: tracking URI (absolute), experiment, run name, parent run
    SEGMENTS = "segments.jsonl"  # one record per resumed segment: the settings it changed (train.max_steps, ...)
    DATASETS = "datasets.json"  # the run's data as MLflow dataset inputs (cl-bench-sync logs them if MLflow missed them)
    SENT_LINES = "mlflow_sent_lines.txt"  # how many metrics.jsonl lines reached MLflow
    CONFIG = ".hydra/config.yaml"  # Hydra's resolved job config
    HYDRA_CONFIG = ".hydra/hydra.yaml"  # Hydra's own settings for the job (runtime.cwd: where it was launched)
    CHECKPOINT = "checkpoint.pt"  # resume state (model, optimizer, scheduler, RNGs, data position)
    BEST_MODEL = "best_model"  # the best weights, Hugging Face format
    BEST_STATE = "best_state.pt"  # the best method state (all modules), for the final evaluation
    ANISOTROPY_PLOT = "anisotropy.png"
    PAIR_SCORES = "sts_pair_scores.npz"  # every STS test pair's cosine and gold score (cl-bench-report --compare)

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    @property
    def results(self) -> Path:
        return self.path / self.RESULTS

    @property
    def metrics(self) -> Path:
        return self.path / self.METRICS

    @property
    def params(self) -> Path:
        return self.path / self.PARAMS

    @property
    def tags(self) -> Path:
        return self.path / self.TAGS

    @property
    def status(self) -> Path:
        return self.path / self.STATUS

    @property
    def run_id(self) -> Path:
        return self.path / self.RUN_ID

    @property
    def sent_lines(self) -> Path:
        return self.path / self.SENT_LINES

    @property
    def config(self) -> Path:
        return self.path / self.CONFIG

    @property
    def hydra_config(self) -> Path:
        return self.path / self.HYDRA_CONFIG

    @property
    def checkpoint(self) -> Path:
        return self.path / self.CHECKPOINT

    @property
    def best_model(self) -> Path:
        return self.path / self.BEST_MODEL

    @property
    def best_state(self) -> Path:
        return self.path / self.BEST_STATE

    @property
    def anisotropy_plot(self) -> Path:
        return self.path / self.ANISOTROPY_PLOT

    @property
    def pair_scores(self) -> Path:
        return self.path / self.PAIR_SCORES

    @property
    def tracking(self) -> Path:
        return self.path / self.TRACKING

    @property
    def segments(self) -> Path:
        return self.path / self.SEGMENTS

    @property
    def datasets(self) -> Path:
        return self.path / self.DATASETS

    def is_run(self) -> bool:
        """True when the folder holds a cl-bench run (its results or its Hydra config)."""
        return self.results.is_file() or self.config.is_file()

    #: what a run writes once it starts (Hydra's ``.hydra/`` and the job log are written before it, by Hydra): a
    #: folder holding any of them holds a run, which no other run may overwrite
    RUN_FILES = (RESULTS, STATUS, CHECKPOINT, METRICS, BEST_MODEL, PARAMS)

    def run_files(self) -> list[str]:
        """The :data:`RUN_FILES` present: non-empty when the folder holds a run another must not overwrite."""
        return [name for name in self.RUN_FILES if (self.path / name).exists()]

    def clear_run(self) -> None:
        """Delete what a run wrote here (``train.overwrite_output_dir=true``): its records, weights and plots, so
        that the new run's ``metrics.jsonl`` holds its own lines only; Hydra's ``.hydra/`` and the job log stay."""
        import shutil

        names = (*self.RUN_FILES, self.TAGS, self.RUN_ID, self.SENT_LINES, self.TRACKING, self.SEGMENTS, self.DATASETS,
                 self.BEST_STATE, self.PAIR_SCORES)
        for name in names:
            path = self.path / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        for png in self.path.glob("*.png"):
            png.unlink()


#: the param value of a key that could not act in this job of a sweep but acts in others
INERT_VALUE = "n/a"


@dataclass(frozen=True)
class SweepDir:
    """A Hydra multirun's sweep directory (the jobs are its numbered subfolders)."""

    path: Path

    PARENT_RUN_ID = "mlflow_parent_run_id.txt"  # the sweep's MLflow parent run
    VARIED_KEYS = "varied_keys.json"  # the keys whose values differ among the sweep's jobs
    PARTLY_INERT = "partly_inert_keys.json"  # params acting in some jobs only: n/a in the others
    TRACKING = "tracking.json"  # the parent run's tracking URI (absolute) and experiment, for cl-bench-sync

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    @property
    def parent_run_id(self) -> Path:
        return self.path / self.PARENT_RUN_ID

    @property
    def tracking(self) -> Path:
        return self.path / self.TRACKING

    @property
    def varied_keys_file(self) -> Path:
        return self.path / self.VARIED_KEYS

    @property
    def partly_inert_file(self) -> Path:
        return self.path / self.PARTLY_INERT

    def partly_inert(self) -> list[str]:
        """Params that act in some jobs of the sweep and not in others: the others log them as
        :data:`INERT_VALUE` (absent in some runs only, they would look swept), written before the first job starts."""
        import json

        return json.loads(self.partly_inert_file.read_text()) if self.partly_inert_file.is_file() else []

    def varied_keys(self) -> list[str] | None:
        """The keys the sweep varies (written before the first job starts), None if unknown."""
        import json

        return json.loads(self.varied_keys_file.read_text()) if self.varied_keys_file.is_file() else None
