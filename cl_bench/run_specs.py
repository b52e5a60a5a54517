"""The specs of the run's own config groups (``model``, ``pooler``, ``data``, ``train``, ``logger``, ``paths``): their keys
with types and defaults, as Hydra's structured config (``cl_bench.config.CLBenchConfig`` composes them with ``eval``'s
:class:`cl_bench.eval.options.EvalConfig` and the options' specs).

Torch-free and low in the package, so that the trainer receives these typed objects and the preflight
(:mod:`cl_bench.config`) checks them before torch loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from omegaconf import MISSING

from cl_bench.specs import AugmentationSpec, LossSpec, MethodSpec

#: ``model.prompt_period``: how a final period is added to the sentence inside the prompt
#: * ``none``: never;
#: * ``promptbert``: at evaluation only, ``.`` appended unless the sentence ends in . ? " '
#:   (Prompt-BERT evaluation.py's batcher; its training appends nothing);
#: * ``sncse``: in training and evaluation, `` .`` appended unless the sentence ends in any of
#:   ``string.punctuation`` (SNCSE train_SNCSE.py and bert_prediction.py);
#: * ``prompteol``: at evaluation only, as ``promptbert``, then ``"`` -> ``'`` and a final ``?`` -> ``.``
#:   (kongds/scaling_sentemb evaluation.py l.197-200).
PeriodRule = StrEnum("PeriodRule", "none promptbert sncse prompteol")
#: ``train.precision`` (fp16_cuda: fp16 on CUDA, fp32 elsewhere)
TrainPrecision = StrEnum("TrainPrecision", "auto fp32 bf16 fp16 fp16_cuda")
#: ``train.nonfinite``: what a NaN/Inf loss or gradient does
NonfiniteAction = StrEnum("NonfiniteAction", "stop skip")
#: logger.log_model: which runs log their best checkpoint as an MLflow model (best: single runs and a sweep's best job)
LogModel = StrEnum("LogModel", "all best none")
#: logger.system_metrics's values (true/false arrive from the command line as booleans, so the key is text)
SYSTEM_METRICS_VALUES = ("auto", "true", "false")
#: ``train.early_stopping_rule``: no_gain (reset by a new best) | drops (SG-BERT: below the previous evaluation)
EarlyStoppingRule = StrEnum("EarlyStoppingRule", "no_gain drops")
#: ``train.final_weights``: the weights of the final evaluation
FinalWeights = StrEnum("FinalWeights", "best last")


@dataclass
class LoraOptions:
    """LoRA adapters through peft (cl_bench/models/decoders.py); r=0 trains the full backbone."""

    r: int = 0  # rank; 0 = off (full fine-tuning)
    alpha: float = 32.0  # lora_alpha (scaling alpha/r); LLM2Vec: r=16, alpha=32
    dropout: float = 0.05  # lora_dropout
    target_modules: list[str] | None = None  # null: peft's default for the family (Llama: q_proj, v_proj); [all-linear]: every linear layer


@dataclass
class ModelConfig:
    name_or_path: str = "bert-base-uncased"  # hub id or local Hugging Face directory (model=NAME presets set it)
    max_length: int = 32  # training truncation; evaluation never truncates below the model limit
    dropout: float = MISSING  # interpolated from the top-level `dropout`
    prompt: str = ""  # prefix ("query: ") or [X] template around every sentence, training and evaluation (cl_bench/models/prompts.py)
    view_prompts: list[str] = field(default_factory=list)  # one prompt per view/column in training (last one repeats); [] = model.prompt
    include_prompt: bool = True  # false: averaging poolers leave the prompt's tokens out (sentence-transformers' include_prompt)
    prompt_period: PeriodRule = PeriodRule.none  # none | promptbert | sncse | prompteol: the final period each recipe's code adds (cl_bench/models/prompts.py)
    bidirectional: bool = False  # decoders: replace the causal mask by a bidirectional one (LLM2Vec)
    attn_implementation: str | None = None  # eager | sdpa | flash_attention_2 (null: transformers' default)
    gradient_checkpointing: bool = False  # recompute activations in the backward pass (training only)
    lora: LoraOptions = field(default_factory=LoraOptions)


@dataclass
class PoolerConfig:
    name: str = "cls"  # pooler=NAME: cls, cls_before_pooler, avg, avg_top2, avg_first_last (cl_bench/models/poolers.py)
    mlp_only_train: bool = True  # SimCSE --mlp_only_train: MLP in training only
    first_layer: int = 1  # avg_first_last: hidden_states index of "first": 0 = embedding output (SimCSE paper), 1 = first transformer layer (SimCSE >= 206d7ae)


@dataclass
class DataConfig:
    name: str = "wiki1m"  # the data=NAME option that set the corpus
    train_file: str = MISSING  # the training corpus file (data=NAME sets it under paths.data_dir; the method's reader reads it)
    limit: int | None = None  # use only the first `limit` items of the corpus


@dataclass
class TrainConfig:
    batch_size: int = MISSING  # interpolated from the top-level `batch_size`
    lr: float = 3e-5  # peak learning rate (AdamW, linear schedule)
    epochs: int = 1  # passes over the corpus (train.max_steps > 0 overrides)
    max_steps: int = -1  # > 0 stops after this many optimizer steps (overrides epochs)
    warmup_ratio: float = 0.0  # fraction of the steps with a linear warm-up
    weight_decay: float = 0.0  # AdamW weight decay
    adam_beta1: float = 0.9  # AdamW beta1
    adam_beta2: float = 0.999  # AdamW beta2
    adam_eps: float = 1e-8  # AdamW epsilon
    adam_bias_correction: bool = True  # false: transformers' AdamW(correct_bias=False), as IS-BERT and DeCLUTR (cl_bench/train/optim.py)
    max_grad_norm: float = 1.0  # HF Trainer default used by SimCSE; 0 disables clipping
    eval_steps: int = 125  # evaluate on the dev metric every N steps (0 = only at the end)
    log_steps: int = 10  # log train_loss and lr every N steps
    select_metric: str = "stsb_dev"  # dev metric that picks the best checkpoint
    save_best: bool = True  # write the best weights to best_model/ (Hugging Face format)
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    precision: TrainPrecision = TrainPrecision.auto  # auto (bf16 on CUDA, and on a bf16 CPU when eval.sample_pairs is set; fp32 elsewhere) | fp32 | bf16 (CUDA or CPU) | fp16 (CUDA)
    compile: str = "auto"  # auto (CUDA, jobs >= 1000 steps) | true | false: compiled backbone on bucketed lengths (cl_bench/train/compile.py)
    num_workers: int = -1  # DataLoader worker processes preparing batches (augmentation, tokenisation); -1: auto (2 on CUDA, else 0)
    num_threads: int | None = None  # torch CPU threads (None = torch default)
    progress_bar: bool = True  # tqdm progress bar of the training steps
    checkpoint_steps: int = 500  # write run_dir/checkpoint.pt every N steps (0 = only on interruption)
    resume: str = ""  # "" = fresh run; "true"/"auto" = continue this run dir's checkpoint; or a run dir path
    overwrite_output_dir: bool = False  # true: a run folder (hydra.run.dir) already holding a run is replaced; false: refused (cl_bench/config/run_folder.py)
    nonfinite: NonfiniteAction = NonfiniteAction.stop  # NaN/Inf loss or gradient: stop (keep last good checkpoint) | skip (count it)
    early_stopping_patience: int = 0  # > 0: stop after this many dev evaluations without a new best (SG-BERT: 10); needs train.eval_steps > 0
    early_stopping_rule: EarlyStoppingRule = EarlyStoppingRule.no_gain  # no_gain (reset by a new best) | drops (SG-BERT: falls below the previous evaluation, never reset)
    final_weights: FinalWeights = FinalWeights.best  # weights of the final evaluation: best (dev) | last (SG-BERT's training.py)
    gradcache_chunk: int = 0  # GradCache chunk size (0 = off); cl_bench/train/gradcache.py
    matryoshka_dims: list[int] | None = None  # Matryoshka: the loss summed over these embedding prefix sizes (cl_bench/losses/matryoshka.py)
    matryoshka_weights: list[float] | None = None  # one weight per size (null: 1 each)


@dataclass
class LoggerConfig:
    enabled: bool = True  # false (logger=none): no MLflow; the run directory still gets every file
    tracking_uri: str | None = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db
    experiment_name: str = "cl-bench"  # MLflow experiment
    run_name: str | None = None  # None: named by what differs (a sweep child: the swept values)
    system_metrics: str = "auto"  # auto (on when CUDA is available) | true | false: MLflow's system metrics (CPU, memory, GPU with nvidia-ml-py)
    log_model: LogModel = LogModel.best  # all | best (single runs, a sweep's best job) | none: best checkpoint as an MLflow model (sentence-transformers flavor)


@dataclass
class PathsConfig:
    data_dir: str = MISSING  # data root (sts/, transfer/, corpus/, nli/): $CL_BENCH_DATA, else ~/.cache/cl-bench/data
    output_dir: str = MISSING  # the run directory (Hydra's)


@dataclass(frozen=True)
class RunSpecs:
    """One run, typed: what the trainer and the entry point's evaluation read instead of the composed config.

    Built once per job from the composed, checked config (:func:`cl_bench.config.typed.run_specs_from_config`);
    the config itself stays with the entry point for what records plain dicts (``config.yaml``, the params).

    Attributes:
        mode: ``train`` or ``eval``.
        seed: the run seed (python, numpy and torch RNGs, the data order).
        model, pooler, data, train, logger, paths: the run groups' specs (this module's dataclasses).
        eval: the ``eval`` group's spec, a :data:`cl_bench.eval.options.EvalConfig` (typed ``Any`` here: this module
            sits below ``eval/``).
        method, loss, augmentation: the options' specs (:mod:`cl_bench.specs`), None where the run does not use the
            group (``mode=eval``; a group the method does not use, e.g. the augmentation of a method without one).
    """

    mode: str
    seed: int
    model: ModelConfig
    pooler: PoolerConfig
    data: DataConfig
    train: TrainConfig
    eval: Any
    logger: LoggerConfig
    paths: PathsConfig
    method: MethodSpec | None = None
    loss: LossSpec | None = None
    augmentation: AugmentationSpec | None = None
