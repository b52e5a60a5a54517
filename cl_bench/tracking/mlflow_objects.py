"""A run's data and model as MLflow records them: dataset inputs and a logged model.

Datasets (``mlflow.log_input``'s records, the runs table's Dataset column): one per data set the run read, from its
provenance (``data_sha256``: file -> sha256, :mod:`cl_bench.commands.provenance`), so the digests are those
sha256 values (their first 36 hex digits, MLflow's limit; the whole value in the data set's profile): a data set
of one file has that file's sha256, one of several files (STS12's subsets) the sha256 of their sorted
``name sha256`` listing, the listing ``provenance.data_digest`` hashes for the whole run. The
training corpus has the context ``training``, the evaluation's files ``evaluation``.

The model: a ``SentenceTransformer`` logged with MLflow's sentence-transformers flavor under the run, at the step
of the final figures (MLflow then links the run's metrics of that step to the model: the Models page ranks by them).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: the longest digest MLflow stores (its datasets table: 36 characters)
DIGEST_CHARS = 36
#: the input tag MLflow reads a dataset's use from (mlflow.utils.mlflow_tags.MLFLOW_DATASET_CONTEXT)
CONTEXT_TAG = "mlflow.data.context"


def dataset_groups(data_sha256: Mapping[str, str], train_file: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    """``{data set name: (context, {file: sha256})}``: the training corpus (``train_file``, as provenance names it)
    alone, the other files grouped by their first two path parts (``sts/STS12-en-test``, ``transfer/MR``)."""
    groups: dict[str, tuple[str, dict[str, str]]] = {}
    for name, sha in sorted(data_sha256.items()):
        if train_file is not None and name == train_file:
            groups[name] = ("training", {name: sha})
            continue
        group = "/".join(Path(name).parts[:2])
        groups.setdefault(group, ("evaluation", {}))[1][name] = sha
    return groups


def group_digest(files: Mapping[str, str]) -> str:
    """A data set's digest: its one file's sha256, else the sha256 of the sorted ``name sha256`` listing."""
    if len(files) == 1:
        return next(iter(files.values()))
    return hashlib.sha256("\n".join(f"{n} {s}" for n, s in sorted(files.items())).encode()).hexdigest()


def dataset_records(data_sha256: Mapping[str, str], data_root: str | Path, train_file: str | None) -> list[dict[str, str]]:
    """The run's data sets as plain records (``datasets.json`` in the run folder; :func:`inputs_of` makes MLflow's
    entities of them): name, digest, source, profile and context, as the module docstring says."""
    records = []
    for name, (context, files) in dataset_groups(data_sha256, train_file).items():
        path = Path(name) if Path(name).is_absolute() else Path(data_root).absolute() / name
        sha = group_digest(files)
        records.append({"name": name, "digest": sha[:DIGEST_CHARS], "source": json.dumps({"uri": str(path)}),
                        "profile": json.dumps({"sha256": sha, "files": len(files)}), "context": context})
    return records


def inputs_of(records: list[dict[str, str]]) -> list[Any]:
    """MLflow ``DatasetInput`` entities of :func:`dataset_records`."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    return [DatasetInput(Dataset(name=r["name"], digest=r["digest"], source_type="local", source=r["source"],
                                 profile=r["profile"]), tags=[InputTag(CONTEXT_TAG, r["context"])]) for r in records]


def dataset_inputs(data_sha256: Mapping[str, str], data_root: str | Path, train_file: str | None) -> list[Any]:
    """MLflow ``DatasetInput`` entities of a run's data (see the module docstring); ``data_root``: where the
    relative names lie (each data set's source is its absolute path).

    MLflow keeps at most :data:`DIGEST_CHARS` characters of a digest: the digest is the sha256's first 36 hex
    digits, the whole sha256 and the file count are the data set's profile (``{"sha256": …, "files": N}``).
    """
    return inputs_of(dataset_records(data_sha256, data_root, train_file))


def log_sentence_transformer(tracking_uri: str, run_id: str, model: Any, step: int, name: str = "best_model",
                             pip_requirements: list[str] | None = None) -> Any:
    """Log ``model`` (a ``SentenceTransformer``) as the run's MLflow model at ``step``; returns MLflow's ModelInfo
    (``model_uri``: ``models:/<model id>``). ``pip_requirements`` given: MLflow does not infer them (inferring
    loads the model in a subprocess).

    The logged model is created first in the run's own experiment (``log_model`` alone would put it in the
    process's active experiment, MLflow's Default one here: the run is driven through a client, not
    ``mlflow.start_run``), with the run's params.
    """
    import mlflow
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    client = mlflow.MlflowClient(tracking_uri)
    run = client.get_run(run_id)
    logged = client.create_logged_model(run.info.experiment_id, name=name, source_run_id=run_id,
                                        params=dict(run.data.params))
    quiet = logging.getLogger("sentence_transformers")  # its INFO "Saving model to <temporary folder>" is no news
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        with _use_tracking_uri(tracking_uri):
            return mlflow.sentence_transformers.log_model(model, name=name, model_id=logged.model_id, run_id=run_id,
                                                          step=step, pip_requirements=pip_requirements)
    finally:
        quiet.setLevel(level)
