"""The specs of the run's own config groups (``model``, ``pooler``, ``data``, ``train``, ``logger``, ``paths``) and of
its top-level keys (:class:`RunKeys`): their keys with types, defaults, rules and docs, as Hydra's structured config
(``cl_bench.config.CLBenchConfig`` composes them with ``eval``'s :class:`cl_bench.eval.options.EvalConfig` and the
options' specs), and :class:`RunSpecs`, the typed specs of one run that the preflight returns
(:func:`cl_bench.config.preflight`) and the trainer receives.

A rule of one key is declared on its field (``Annotated[int, Ge(1)]``, read by :func:`cl_bench.specs.check_fields`);
a rule reading several keys of the group is its :meth:`RunGroup.check_combination`; what cannot act on a run
("acts only if") is its :meth:`RunGroup.inert_keys`. Torch-free and low in the package (stdlib, omegaconf,
annotated_types, :mod:`cl_bench.specs`, and the torch-free pooler registry :mod:`cl_bench.models.pooler_names` and
prompt rules :mod:`cl_bench.models.prompts`: the layer just above them), so that the trainer receives these typed objects and the preflight checks them before torch loads.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from annotated_types import Ge, Gt, Interval, MinLen
from omegaconf import II, MISSING

from cl_bench.losses.specs import MatryoshkaKeys
from cl_bench.models.hub import local_model_type
from cl_bench.models.pooler_names import AVERAGING_POOLERS, POOLERS, PROMPT_POOLERS, REGISTRY, Pooler
from cl_bench.models.prompts import PeriodRule
from cl_bench.specs import Because, Checked, Must, RunSetting

if TYPE_CHECKING:
    from cl_bench.specs import AugmentationSpec, LossSpec, MethodSpec

#: ``mode``: train (then evaluate) | eval (evaluate model.name_or_path)
Mode = StrEnum("Mode", "train eval")
#: ``train.precision`` (fp16_cuda: fp16 on CUDA, fp32 elsewhere)
TrainPrecision = StrEnum("TrainPrecision", "auto fp32 bf16 fp16 fp16_cuda")
#: ``train.nonfinite``: what a NaN/Inf loss or gradient does
NonfiniteAction = StrEnum("NonfiniteAction", "stop skip")
#: logger.log_model: which runs log their best checkpoint as an MLflow model (best: single runs and a sweep's best job)
LogModel = StrEnum("LogModel", "all best none")
#: logger.system_metrics's values (true/false arrive from the command line as booleans, so the key is text)
SYSTEM_METRICS_VALUES = ("auto", "true", "false")
#: ``train.compile``'s values (text for the same reason)
COMPILE_VALUES = ("auto", "true", "false")
#: ``train.early_stopping_rule``: no_gain (reset by a new best) | drops (SG-BERT: below the previous evaluation)
EarlyStoppingRule = StrEnum("EarlyStoppingRule", "no_gain drops")
#: ``train.final_weights``: the weights of the final evaluation
FinalWeights = StrEnum("FinalWeights", "best last")
#: why a key cannot act in ``mode=eval``
EVAL_MODE = "mode=eval scores an encoder as given (nothing is trained)"


def _one_of(values: tuple[str, ...]) -> Must:
    """A text key whose value is one of ``values`` (a boolean from the command line counts as its text)."""
    return Must(lambda v: str(v).strip().lower() in values, f"be one of {', '.join(values)}")


# The rules ``Must`` states, named here: a field's annotation is evaluated apart from this module's names, so a
# lambda written inside it would not see them.
_SYSTEM_METRICS = _one_of(SYSTEM_METRICS_VALUES)
_COMPILE = _one_of(COMPILE_VALUES)
_POOLER_NAME = Must(lambda v: v in REGISTRY, f"be one of {', '.join(POOLERS)}")
_ZERO_OR_ONE = Must(lambda v: v in (0, 1), "be 0 or 1")
_MAX_STEPS = Must(lambda v: v > 0 or v == -1, "be > 0 (stop after that many optimizer steps) or -1 (train.epochs decides)")
_DEVICE = Must(lambda v: re.fullmatch(r"auto|[a-z]+(:\d+)?", str(v)) is not None,
               "name a device, e.g. auto, cpu, cuda, cuda:1, mps")
_NUM_WORKERS = Must(lambda v: v >= -1, "be >= 0 (0 = prepare batches in the main process) or -1 (auto)")


class RunGroup(Checked):
    """A run group's spec: :meth:`check` (its fields' rules, then :meth:`check_combination`) and :meth:`inert_keys`."""

    def inert_keys(self, run: RunSpecs) -> dict[str, str]:
        """The keys of this group (full dotted names, or a whole group) that cannot act on ``run``, each with why.

        Overriding one is rejected and it is left out of the run's params (:func:`cl_bench.config.inert_keys`)."""
        return {}


@dataclass
class RunKeys(RunGroup):
    """The run's top-level keys: the mode, the seeds and the shortcuts interpolated into the groups."""

    mode: Mode = Mode.train  # train (then evaluate) | eval (evaluate model.name_or_path)
    seed: int = 42  # seeds torch, numpy, random and the data order (HF Trainer's default, used by SimCSE's scripts)
    #: replicates per grid point: seeds=N runs seed, seed+1, ... seed+N-1 of every point (cl_bench/config/seeds.py)
    seeds: Annotated[int, Ge(1)] = 1
    dropout: Annotated[float, Interval(ge=0, lt=1)] = 0.1  # shortcut: hidden and attention dropout of the encoder
    #: shortcut: train.batch_size
    batch_size: Annotated[int, Ge(2), Because("in-batch negatives need two")] = 64

    def inert_keys(self, run: RunSpecs) -> dict[str, str]:
        if self.mode != Mode.eval:
            return {}
        return dict.fromkeys(("method", "loss", "augmentation", "data", "dropout", "batch_size", "seed", "seeds"),
                             EVAL_MODE)


@dataclass
class LoraOptions(RunGroup):
    """LoRA adapters through peft (cl_bench/models/decoders.py); r=0 trains the full backbone."""

    group: ClassVar[str] = "model.lora"
    r: Annotated[int, Ge(0), Because("0 = off")] = 0  # rank; 0 = off (full fine-tuning)
    alpha: Annotated[float, Gt(0)] = 32.0  # lora_alpha (scaling alpha/r); LLM2Vec: r=16, alpha=32
    dropout: Annotated[float, Interval(ge=0, lt=1)] = 0.05  # lora_dropout
    #: null: peft's default for the family (Llama: q_proj, v_proj); [all-linear]: every linear layer
    target_modules: Annotated[list[str], MinLen(1), Because("null: peft's default for the family")] | None = None

    def inert_keys(self, run: RunSpecs) -> dict[str, str]:
        if self.r != 0:
            return {}
        return dict.fromkeys((f"model.lora.{key}" for key in ("alpha", "dropout", "target_modules")),
                             "model.lora.r is 0 (no LoRA adapters); set model.lora.r > 0")


@dataclass
class ModelConfig(RunGroup):
    """The encoder: its checkpoint, truncation, prompts and backbone options."""

    group: ClassVar[str] = "model"
    name_or_path: str = "bert-base-uncased"  # hub id or local Hugging Face directory (model=NAME presets set it)
    max_length: Annotated[int, Ge(1)] = 32  # training truncation; evaluation never truncates below the model limit
    dropout: float = II("dropout")  # interpolated from the top-level `dropout`
    prompt: str = ""  # prefix ("query: ") or [X] template around every sentence, training and evaluation (cl_bench/models/prompts.py)
    view_prompts: list[str] = field(default_factory=list)  # one prompt per view/column in training (last one repeats); [] = model.prompt
    include_prompt: bool = True  # false: averaging poolers leave the prompt's tokens out (sentence-transformers' include_prompt)
    prompt_period: PeriodRule = PeriodRule.none  # none | promptbert | sncse | prompteol: the final period each recipe's code adds (cl_bench/models/prompts.py)
    bidirectional: bool = False  # decoders: replace the causal mask by a bidirectional one (LLM2Vec)
    attn_implementation: str | None = None  # eager | sdpa | flash_attention_2 (null: transformers' default)
    gradient_checkpointing: bool = False  # recompute activations in the backward pass (training only)
    lora: LoraOptions = field(default_factory=LoraOptions)

    def inert_keys(self, run: RunSpecs) -> dict[str, str]:
        inert: dict[str, str] = {}
        if run.keys.mode == Mode.eval:
            inert.update(dict.fromkeys(("model.max_length", "model.dropout", "model.lora", "model.gradient_checkpointing"),
                                       EVAL_MODE))
        for key, why in (*self.lora.inert_keys(run).items(), *self._prompt_inert_keys(run).items()):
            inert.setdefault(key, why)
        return inert

    def _prompt_inert_keys(self, run: RunSpecs) -> dict[str, str]:
        """The prompt keys that cannot act: the method sets its own prompts or pools its own way, no prompt is set, or
        the pooler does not average the prompt's tokens."""
        method, pooler = run.method, str(run.pooler.name)
        if method is not None and (method.own_prompts or "pooler" not in method.uses):
            does = ("sets its own templates (method.* keys) and [MASK] pooler" if method.own_prompts
                    else "encodes with its own encoder (it uses no pooler group)")
            why = f"method={method.name} {does}"
            return dict.fromkeys(("model.prompt", "model.view_prompts", "model.prompt_period", "model.include_prompt"), why)
        inert: dict[str, str] = {}
        if method is None:
            inert["model.view_prompts"] = "mode=eval encodes no training views (model.prompt acts)"
        elif not method.encodes_views:
            inert["model.view_prompts"] = f"method={method.name} encodes no groups of views (model.prompt acts)"
        if not self.prompt and not self.view_prompts and pooler not in PROMPT_POOLERS:
            why = "no prompt is set (model.prompt, model.view_prompts)"
            inert["model.include_prompt"] = why
            inert["model.prompt_period"] = why
        elif pooler not in AVERAGING_POOLERS:
            inert["model.include_prompt"] = ("only the averaging poolers (avg, avg_top2, avg_first_last) pool the "
                                             f"prompt's tokens (pooler={pooler})")
        return inert


@dataclass
class PoolerConfig(RunGroup):
    """How token states become one vector (the pooler registry, cl_bench/models/pooler_names.py)."""

    group: ClassVar[str] = "pooler"
    #: pooler=NAME: cls, cls_before_pooler, avg, avg_top2, avg_first_last, ... (cl_bench/models/pooler_names.py)
    name: Annotated[str, _POOLER_NAME] = "cls"
    mlp_only_train: bool = True  # SimCSE --mlp_only_train: MLP in training only
    #: avg_first_last: hidden_states index of "first": 0 = embedding output (SimCSE paper), 1 = first transformer layer (SimCSE >= 206d7ae)
    first_layer: Annotated[int, _ZERO_OR_ONE] = 1

    @property
    def pooling(self) -> type[Pooler]:
        """The chosen pooler's class (a saved encoder subclass that records its own pooling: the base class)."""
        return REGISTRY.get(self.name, Pooler)

    def inert_keys(self, run: RunSpecs) -> dict[str, str]:
        inert = {"pooler.mlp_only_train": EVAL_MODE} if run.keys.mode == Mode.eval else {}
        if not self.pooling.has_mlp:
            with_mlp = "/".join(name for name, cls in REGISTRY.items() if cls.has_mlp)
            inert.setdefault("pooler.mlp_only_train", f"only pooler={with_mlp} has an MLP (pooler={self.name})")
        if not self.pooling.reads_first_layer:
            with_first = "/".join(name for name, cls in REGISTRY.items() if cls.reads_first_layer)
            inert["pooler.first_layer"] = f"only pooler={with_first} averages a first layer (pooler={self.name})"
        return inert


@dataclass
class DataConfig(RunGroup):
    """The training corpus."""

    group: ClassVar[str] = "data"
    name: str = "wiki1m"  # the data=NAME option that set the corpus
    train_file: str = MISSING  # the training corpus file (data=NAME sets it under paths.data_dir; the method's reader reads it)
    #: use only the first `limit` items of the corpus
    limit: Annotated[int, Ge(1), Because("or null: the whole corpus")] | None = None


@dataclass
class TrainConfig(MatryoshkaKeys, RunGroup):
    """The optimiser, the schedule, the evaluation cadence and where training runs."""

    group: ClassVar[str] = "train"
    #: the train.* keys that also act in mode=eval
    acts_in_eval: ClassVar[tuple[str, ...]] = ("device", "num_threads", "progress_bar")
    #: interpolated from the top-level `batch_size`
    batch_size: Annotated[int, Ge(2), Because("in-batch negatives need two")] = II("batch_size")
    lr: Annotated[float, Gt(0)] = 3e-5  # peak learning rate (AdamW, linear schedule)
    epochs: int = 1  # passes over the corpus (train.max_steps > 0 overrides)
    #: > 0 stops after this many optimizer steps (overrides epochs); -1: train.epochs decides
    max_steps: Annotated[int, _MAX_STEPS] = -1
    warmup_ratio: Annotated[float, Interval(ge=0, le=1)] = 0.0  # fraction of the steps with a linear warm-up
    weight_decay: float = 0.0  # AdamW weight decay
    adam_beta1: float = 0.9  # AdamW beta1
    adam_beta2: float = 0.999  # AdamW beta2
    adam_eps: float = 1e-8  # AdamW epsilon
    adam_bias_correction: bool = True  # false: transformers' AdamW(correct_bias=False), as IS-BERT and DeCLUTR (cl_bench/train/optim.py)
    max_grad_norm: float = 1.0  # HF Trainer default used by SimCSE; 0 disables clipping
    #: evaluate on the dev metric every N steps (0 = only at the end; SimCSE's scripts: 125, the paper says 250)
    eval_steps: Annotated[int, Ge(0), Because("0 = evaluate at the end only")] = 125
    log_steps: Annotated[int, Ge(1)] = 10  # log train_loss and lr every N steps
    select_metric: str = "stsb_dev"  # dev metric that picks the best checkpoint
    save_best: bool = True  # write the best weights to best_model/ (Hugging Face format)
    #: auto | cpu | cuda | cuda:N | mps
    device: Annotated[str, _DEVICE] = "auto"
    #: auto (bf16 on CUDA, and on a bf16 CPU when eval.sample_pairs is set; fp32 elsewhere) | fp32 | bf16 (CUDA or CPU:
    #: AVX512_BF16/AMX) | fp16 (CUDA) | fp16_cuda (fp16 on CUDA as the official --fp16 runs, fp32 elsewhere)
    precision: TrainPrecision = TrainPrecision.auto
    #: auto (CUDA, jobs >= 2000 steps) | true | false: torch.compile of the backbone on bucketed lengths, CUDA graphs on
    #: CUDA (cl_bench/train/compile.py)
    compile: Annotated[str, _COMPILE] = "auto"
    #: DataLoader worker processes preparing batches (augmentation, tokenisation); -1: auto (2 on CUDA, else 0)
    num_workers: Annotated[int, _NUM_WORKERS] = -1
    num_threads: int | None = None  # torch CPU threads (None = torch default)
    progress_bar: bool = True  # tqdm progress bar of the training steps
    #: write run_dir/checkpoint.pt every N steps (0 = only on interruption)
    checkpoint_steps: Annotated[int, Ge(0)] = 500
    resume: str = ""  # "" = fresh run; "true"/"auto" = continue this run dir's checkpoint; or a run dir path
    overwrite_output_dir: bool = False  # true: a run folder (hydra.run.dir) already holding a run is replaced; false: refused (cl_bench/config/run_folder.py)
    nonfinite: NonfiniteAction = NonfiniteAction.stop  # NaN/Inf loss or gradient: stop (keep last good checkpoint) | skip (count it)
    #: > 0: stop after this many dev evaluations without a new best (SG-BERT: 10); needs train.eval_steps > 0
    early_stopping_patience: Annotated[int, Ge(0), Because("0 = off")] = 0
    early_stopping_rule: EarlyStoppingRule = EarlyStoppingRule.no_gain  # no_gain (reset by a new best) | drops (SG-BERT: falls below the previous evaluation, never reset)
    final_weights: FinalWeights = FinalWeights.best  # weights of the final evaluation: best (dev) | last (SG-BERT's training.py)
    gradcache_chunk: Annotated[int, Ge(0), Because("0 = off")] = 0  # GradCache chunk size (0 = off); cl_bench/train/gradcache.py
    # matryoshka_dims, matryoshka_weights: declared with their rules in MatryoshkaKeys (cl_bench/losses/specs.py)

    def check_combination(self) -> None:
        if self.epochs < 1 and self.max_steps <= 0:
            raise ValueError("train.epochs: must be >= 1 unless train.max_steps > 0")
        if self.early_stopping_rule != EarlyStoppingRule.no_gain and self.early_stopping_patience == 0:
            raise ValueError(f"train.early_stopping_rule: '{self.early_stopping_rule}' needs "
                             "train.early_stopping_patience > 0 (early stopping is off)")
        device = str(self.device)
        if self.precision == TrainPrecision.fp16 and device != "auto" and not device.startswith("cuda"):
            raise ValueError(f"train.precision: fp16 needs a CUDA device (loss scaling), got train.device={device}; "
                             "use bf16 or fp32")
        super().check_combination()  # the Matryoshka keys' (MatryoshkaKeys)

    def inert_keys(self, run: RunSpecs) -> dict[str, str]:
        if run.keys.mode == Mode.eval:
            return {f"train.{key}": EVAL_MODE for key in self.__dataclass_fields__ if key not in self.acts_in_eval}
        if self.matryoshka_dims is None:
            return {"train.matryoshka_weights": "train.matryoshka_dims is null (no Matryoshka loss)"}
        return {}


@dataclass
class LoggerConfig(RunGroup):
    """MLflow tracking (logger=none: the run directory only)."""

    group: ClassVar[str] = "logger"
    enabled: bool = True  # false (logger=none): no MLflow; the run directory still gets every file
    tracking_uri: str | None = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db (MLflow's own default)
    experiment_name: str = "cl-bench"  # MLflow experiment
    run_name: str | None = None  # None: named by what differs (a sweep child: the swept values)
    #: auto (on when CUDA is available) | true | false: MLflow's system metrics (CPU, memory, disk; GPU with nvidia-ml-py)
    system_metrics: Annotated[str, _SYSTEM_METRICS] = "auto"
    log_model: LogModel = LogModel.best  # all | best (single runs, a sweep's best job) | none: best checkpoint as an MLflow model (sentence-transformers flavor)


@dataclass
class PathsConfig(RunGroup):
    """Where the data and the run live."""

    group: ClassVar[str] = "paths"
    #: data root (sts/, transfer/, corpus/, nli/): $CL_BENCH_DATA, else ~/.cache/cl-bench/data (cl_bench/utils/cache_dirs.py)
    data_dir: str = II("cl_bench.data_dir:")
    output_dir: str = II("hydra:runtime.output_dir")  # the run directory (Hydra's)


@dataclass(frozen=True)
class RunSpecs:
    """One run's config as typed specs, checked by the preflight (:func:`cl_bench.config.preflight` returns it).

    ``method``, ``loss`` and ``augmentation`` are the options' specs (None where the run does not use the group:
    ``mode=eval``, a method without a loss); ``eval`` is :class:`cl_bench.eval.options.EvalConfig` (typed ``Any`` here:
    this module stands below ``eval/``).
    """

    keys: RunKeys
    method: MethodSpec | None
    loss: LossSpec | None
    augmentation: AugmentationSpec | None
    model: ModelConfig
    pooler: PoolerConfig
    data: DataConfig
    train: TrainConfig
    eval: Any
    logger: LoggerConfig
    paths: PathsConfig

    @property
    def training(self) -> bool:
        """True for ``mode=train``."""
        return self.keys.mode == Mode.train

    @property
    def mode(self) -> str:
        """``mode``: train or eval."""
        return str(self.keys.mode)

    @property
    def seed(self) -> int:
        """The run seed (python, numpy and torch RNGs, the data order)."""
        return int(self.keys.seed)

    def setting(self) -> RunSetting:
        """The choices besides the method's own keys that decide whether a method key can act (:class:`RunSetting`)."""
        return RunSetting(self.augmentation, str(self.data.train_file or ""), self.loss, self.model.dropout,
                          pooler=str(self.pooler.name), mlp_only_train=self.pooler.mlp_only_train,
                          model_type=local_model_type(str(self.model.name_or_path)))

    @functools.cached_property
    def inert(self) -> dict[str, str]:
        """Config keys (or whole groups) that cannot act on this run, each with the reason: what each spec's
        ``inert_keys`` says, gathered once (a key's first reason stands; :func:`cl_bench.specs.covered` reads the
        most specific). A key listed here may not be overridden (:func:`cl_bench.config.check_overrides_act`) and is
        left out of the run's params and tags (:func:`cl_bench.tracking.params.flat_params`). Read it, do not change
        it: every later reader gets this dict."""
        said: list[dict[str, str]] = [self.keys.inert_keys(self)]
        if self.method is not None:
            said.append(self.method.unused_groups())
            said.append({f"method.{key}": why for key, why in self.method.inert_keys(self.setting()).items()})
            if self.loss is not None:
                said.append(self.loss.inert_keys(self.method))
        said += [spec.inert_keys(self) for spec in (self.model, self.pooler, self.train, self.eval)]
        inert: dict[str, str] = {}
        for reasons in said:
            for key, why in reasons.items():
                inert.setdefault(key, why)  # a key's first reason; the most specific key's reason is the one said
        return inert
