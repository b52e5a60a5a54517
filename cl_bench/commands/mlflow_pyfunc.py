"""cl-bench's own encoder as an MLflow pyfunc model: the ``logger.log_model`` fallback for a checkpoint that
sentence-transformers' stock modules cannot express (a prompted pooler: PromptBERT's ``[MASK]``, ``prompt_last``).

The logged model holds the checkpoint folder (``best_model/``, with ``cl_bench_encoder.json``) as its artifact
``encoder``; loading it rebuilds the encoder as ``mode=eval`` does (:func:`cl_bench.models.encoder.build_encoder`
with the recorded pooler and prompt), so it needs cl-bench installed where it is loaded.
``mlflow.pyfunc.load_model("models:/<id>").predict(sentences)`` returns the embeddings, one row per sentence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc

from cl_bench.models.encoder import build_encoder
from cl_bench.utils.rundir import ENCODER_META_FILE

#: the recorded settings (``cl_bench_encoder.json``) the encoder is rebuilt with
RECORDED_KEYS = ("pooler", "mlp_only_train", "first_layer", "prompt", "include_prompt", "prompt_period")


class ClBenchEncoder(mlflow.pyfunc.PythonModel):
    """A saved cl-bench encoder behind MLflow's pyfunc interface: sentences in, embeddings out."""

    def load_context(self, context: Any) -> None:
        """Rebuild the encoder from the ``encoder`` artifact (the checkpoint folder) and its recorded settings."""
        folder = Path(context.artifacts["encoder"])
        meta = json.loads((folder / ENCODER_META_FILE).read_text())
        self.encoder = build_encoder(str(folder), fresh_mlp=False, **{k: meta[k] for k in RECORDED_KEYS if k in meta})

    def predict(self, context: Any, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        """Embeddings of ``model_input``: a list of sentences, or a one-column DataFrame of them."""
        sentences = list(model_input.iloc[:, 0]) if hasattr(model_input, "iloc") else list(model_input)
        return self.encoder.encode(sentences, batch_size=int((params or {}).get("batch_size", 64)))


def log_pyfunc_encoder(tracking_uri: str, run_id: str, model_dir: Path, step: int, name: str = "best_model",
                       pip_requirements: list[str] | None = None) -> Any:
    """Log the checkpoint ``model_dir`` as the run's pyfunc model at ``step`` (in the run's experiment, with its
    params, as :func:`cl_bench.tracking.mlflow_objects.log_sentence_transformer` does); returns MLflow's ModelInfo."""
    import mlflow
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    client = mlflow.MlflowClient(tracking_uri)
    run = client.get_run(run_id)
    logged = client.create_logged_model(run.info.experiment_id, name=name, source_run_id=run_id,
                                        params=dict(run.data.params))
    from mlflow.models import Model

    with _use_tracking_uri(tracking_uri):  # Model.log: pyfunc.log_model's own call, which takes the run's id
        return Model.log(artifact_path=None, name=name, flavor=mlflow.pyfunc, python_model=ClBenchEncoder(),
                         artifacts={"encoder": str(model_dir)}, model_id=logged.model_id, run_id=run_id, step=step,
                         pip_requirements=pip_requirements)
