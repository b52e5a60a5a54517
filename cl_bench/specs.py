"""Specs: what each method, loss and augmentation takes and checks, declared once and torch-free.

A spec is a dataclass beside the code it describes. Its fields are the option's config keys (the YAML's
keys other than ``_target_``, ``_partial_`` and ``defaults``) with their types, a key with a fixed set of values
typed by a :class:`enum.StrEnum` (``MlmMode = StrEnum("MlmMode", "clean masked untied")``: OmegaConf rejects any
other value, and a member equals its string); its class attributes say
what the option is (the groups a method uses, the loss calls it makes, a loss's kind, whether an
augmentation rewrites text, the one-line summary of ``cl-bench list``); its methods hold the rules that
decide, before any model loads, whether a value can work (:meth:`Spec.check`) and whether a key can act
on this run (:meth:`MethodSpec.inert_keys`).

Each built-in option's YAML extends its spec's schema (:meth:`Spec.schema`, stored in Hydra's ConfigStore as
``schema/<group>/<SpecClass>``), so composition rejects a key the option lacks and a wrongly typed value. The
YAML keeps the values and their comments. A method or augmentation is built by :func:`build`, which passes the
spec to its class (``SimCSE(context, spec)``); a loss stays a pure function, built ``_partial_`` by Hydra with
its keys as keyword arguments.

A spec names its target (:attr:`Spec.target`) and is registered under it when its class is defined.
A built-in method is one folder, ``cl_bench/methods/<name>/``: ``configuration.py`` holds its spec (no torch),
``modeling.py`` the ``nn.Module`` its ``_target_`` names (``cl_bench.methods.<name>.modeling.<Class>``), and
``__init__.py`` imports nothing. A ``_target_`` of that shape finds its spec in the sibling ``configuration``
module without importing the ``modeling`` one (:func:`spec_for`), and every such folder under ``cl_bench/methods/``
is found by listing it (:func:`builtin_spec_modules`). The losses' and augmentations' specs live in
``cl_bench/losses/specs.py`` and ``cl_bench/augment/specs.py``. None of them imports torch, so every check answers
before torch loads. A
user's spec may sit in the same module as their ``nn.Module`` (their checks then run after that module,
and torch, are imported) or in a module of its own; their YAML may leave out the schema line (its spec, not yet
imported when Hydra composes, then checks the keys and types: :func:`cl_bench.config.build_spec`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin, get_type_hints

from annotated_types import BaseMetadata, Ge, Gt, Interval, Le, Lt, MaxLen, MinLen

#: the torch-free modules holding the specs of cl-bench's own losses and augmentations (imported on the first lookup;
#: the methods' are found by :func:`builtin_spec_modules`)
BUILTIN_SPEC_MODULES = ("cl_bench.losses.specs", "cl_bench.augment.specs")
#: the folder of cl-bench's own methods: each subfolder holding a ``configuration.py`` is one method
METHODS_DIR = Path(__file__).resolve().parent / "methods"
#: the module of a method folder that holds its spec, beside ``MODELING`` that holds its ``nn.Module``
CONFIGURATION, MODELING = "configuration", "modeling"
#: the config groups a method may use (:attr:`MethodSpec.uses`)
METHOD_GROUPS = ("loss", "augmentation", "pooler")

#: the auxiliary-MLM modes of SimCSE-style methods (``method.mlm_mode``; :mod:`cl_bench.models.mlm` implements them)
MlmMode = StrEnum("MlmMode", "clean masked untied")

_REGISTRY: dict[str, type[Spec]] = {}


class Checked:
    """What every spec answers, an option's (:class:`Spec`) or a run group's (:mod:`cl_bench.run_specs`): its rules,
    the ones declared on its fields (:func:`check_fields`), then the ones across its keys (:meth:`check_combination`)."""

    #: the config group of the keys (``method``, ``train``, ``model.lora``; "" for the top-level keys)
    group: ClassVar[str] = ""

    def check(self) -> None:
        """The spec's value rules, run before any model loads: the rules declared on each field
        (:func:`check_fields`), then the rules across its keys (:meth:`check_combination`). Not overridden.

        Raises:
            ValueError: one line starting with the key, e.g. ``method.queue_size: must be >= 1, got 0``.
        """
        check_fields(self, f"{self.group}." if self.group else "")
        self.check_combination()

    def check_combination(self) -> None:
        """The rules that read several of the spec's keys together (a rule of one key is declared on its field).

        Raises:
            ValueError: one line starting with the key to change.
        """


@dataclass(kw_only=True)
class Spec(Checked):
    """Base of every option's spec: the option's config keys as typed fields, and its value rules."""

    #: the dotted path of what the option builds (the YAML's ``_target_``); a subclass that sets it is registered
    target: ClassVar[str] = ""
    #: the config group the option belongs to (``method``, ``loss``, ``augmentation``)
    group: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("target"):
            _REGISTRY[cls.target] = cls

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The option's config keys (the dataclass fields)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_config(cls, node: Mapping[str, Any], **changes: Any) -> Spec:
        """The spec of an option's config values (a YAML's keys, ``changes`` applied); the node's ``_target_``,
        ``_partial_`` and ``defaults`` are not settings and are left out; a key the node lacks keeps its declared
        default. Values are not checked here: :func:`cl_bench.config.build_spec` checks a run's, :meth:`check` checks
        any."""
        values = {**node, **changes}
        return cls(**{key: values[key] for key in cls.keys() if key in values})

    @classmethod
    @functools.cache
    def schema(cls) -> type:
        """The spec as the structured config its YAML extends (``defaults: [/schema/<group>/<SpecClass>@_here_]``):
        its fields and the YAML's ``_target_`` (and a loss's ``_partial_``), so Hydra's composition rejects an unknown
        key and a value of the wrong type (:func:`cl_bench.config.register_schemas` stores it)."""
        extra: list[tuple[str, type, Any]] = [("_target_", str, dataclasses.field(default=cls.target))]
        if cls.group == "loss":
            extra.append(("_partial_", bool, dataclasses.field(default=True)))
        return dataclasses.make_dataclass(cls.__name__, extra, bases=(cls,), kw_only=True)

    def values(self) -> dict[str, Any]:
        """The option's values by key (what its target is built with)."""
        return {name: getattr(self, name) for name in self.keys()}



@dataclass(frozen=True)
class RunSetting:
    """The rest of a run's choices, as a method's rules see them (read before any model loads).

    Attributes:
        augmentation: the configured augmentation's spec (None when the method uses no augmentation).
        train_file: ``data.train_file``.
        loss: the configured loss's spec (None without a loss).
        dropout: the encoder's dropout rate (``model.dropout``; None: the checkpoint's own).
        pooler: the pooler group's ``name``; mlp_only_train: its ``mlp_only_train`` (DiffCSE's projector).
        model_type: the backbone's ``model_type`` read from a local folder's config.json (None for a hub id).
    """

    augmentation: AugmentationSpec | None = None
    train_file: str = ""
    loss: LossSpec | None = None
    dropout: float | None = None
    pooler: str = ""  # ``pooler.name`` (a method that sets its own pooler may ignore it)
    mlp_only_train: bool | None = None  # ``pooler.mlp_only_train``
    model_type: str | None = None  # ``model_type`` of a local checkpoint's config.json (None: not read)

    @property
    def loss_kind(self) -> str | None:
        """The configured loss's kind (None without a loss)."""
        return None if self.loss is None else self.loss.kind

    @property
    def loss_inputs(self) -> frozenset[str]:
        """The keyword inputs the configured loss accepts from a method (e.g. ``ignore``, GISTEmbed's ``guide``)."""
        return frozenset() if self.loss is None else self.loss.inputs

    @property
    def augmentation_name(self) -> str:
        """The augmentation's name, for messages."""
        return "none" if self.augmentation is None else self.augmentation.name

    @property
    def rewrites_text(self) -> bool:
        """True when the augmentation changes sentences (a text-level one: not dropout, not a cutoff)."""
        return self.augmentation is not None and self.augmentation.rewrites_text

    @property
    def embedding_level(self) -> bool:
        """True when the augmentation edits token embeddings (token, feature or span cutoff)."""
        return self.augmentation is not None and self.augmentation.embedding_level


@dataclass(kw_only=True)
class MethodSpec(Spec):
    """A method's spec (``conf/method/NAME.yaml``; its target is a :class:`cl_bench.methods.base.Method`)."""

    group: ClassVar[str] = "method"
    name: str
    #: config groups whose choice acts on this method's training: a group left out here is rejected when
    #: overridden and left out of the run's params and tags
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    #: the loss calls this method makes (:attr:`LossSpec.kind`); other losses are rejected
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    #: inputs the method passes to its loss besides the views (``hard_negatives``, ``labels``): a loss key
    #: that needs one of them (:attr:`LossSpec.needs`) acts only when it is supplied
    supplies: ClassVar[frozenset[str]] = frozenset()
    #: what the method is, in one line (``cl-bench list``)
    summary: ClassVar[str] = ""
    #: what a first run of this method needs that the others' do not (a line of its docs page's "Run it"; Markdown)
    run_note: ClassVar[str] = ""
    #: the overrides with which it trains a step of a tiny model (2 layers, width 32) on a few plain sentences: a
    #: ``data=`` preset when it reads another format, and the keys that make its heads and queues that small (the
    #: tests' per-method cases are built from these)
    tiny_run: ClassVar[tuple[str, ...]] = ()
    #: True when the method encodes groups of views/columns through ``tokenize_groups``, where
    #: ``model.view_prompts`` acts (one prompt per group)
    encodes_views: ClassVar[bool] = False
    #: True when the method sets the encoder's prompts and pooler itself (PromptBERT, SNCSE): then
    #: ``model.prompt``, ``model.view_prompts``, ``model.prompt_period`` and the pooler group cannot act
    own_prompts: ClassVar[bool] = False
    #: False when the method builds its views from token ids, where no prompt layout survives (ESimCSE):
    #: then ``model.prompt``/``view_prompts`` and the prompt poolers are rejected
    takes_prompts: ClassVar[bool] = True
    #: what the method needs that only a BERT-shaped encoder has (a masked-LM form, a [MASK] token), said when a
    #: decoder backbone is chosen (``""``: it trains decoders too; :func:`cl_bench.models.decoders.check_backbone_options`)
    needs_masked_lm: ClassVar[str] = ""

    def supplied_inputs(self) -> frozenset[str]:
        """The loss inputs this configuration supplies (default: :attr:`supplies`)."""
        return self.supplies

    def unused_groups(self) -> dict[str, str]:
        """The config groups (:data:`METHOD_GROUPS`) whose choice cannot act on this method (:attr:`uses`), with why."""
        uses = ", ".join(g for g in METHOD_GROUPS if g in self.uses) or "none of loss, augmentation, pooler"
        return {group: f"method={self.name} does not use the {group} group (it uses: {uses})"
                for group in METHOD_GROUPS if group not in self.uses}

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        """Method keys that cannot act under these values and the run's other choices, each with the reason
        (e.g. the MLM probability when the MLM weight is 0). Overriding one is rejected; they are left out of
        the params."""
        return {}

    def check_setting(self, setting: RunSetting) -> None:
        """Reject values that cannot work with the run's other choices (SNCSE without a text augmentation).

        Raises:
            ValueError: one line starting with the key or group to change.
        """


@dataclass(kw_only=True)
class LossSpec(Spec):
    """A loss's spec (``conf/loss/NAME.yaml``; its target is a pure tensor function, built ``_partial_``)."""

    group: ClassVar[str] = "loss"
    name: str
    #: the call the loss expects (``pair``, ``triplet``, ...: :mod:`cl_bench.losses`)
    kind: ClassVar[str]
    #: key -> what it needs to act: an input the method must supply (``hard_negatives``) or a condition on the
    #: loss's own values (``similarity=cosine``); overriding it without that is rejected as a no-op
    needs: ClassVar[Mapping[str, str]] = {}
    #: the keyword inputs a method may pass besides the views (``labels``, ``ignore``, ``guide``, ...)
    inputs: ClassVar[frozenset[str]] = frozenset()

    def inert_keys(self, method: MethodSpec) -> dict[str, str]:
        """The loss keys (``loss.<key>``) that cannot act under ``method``: each key of :attr:`needs` whose condition on
        the loss's own values (``similarity=cosine``) fails, or whose input the method does not supply."""
        inert = {}
        for key, need in self.needs.items():
            if "=" in need:  # a condition on the loss's own values (similarity=cosine)
                condition_key, _, expected = need.partition("=")
                if str(getattr(self, condition_key, None)) != expected:
                    inert[f"loss.{key}"] = f"loss={self.name} uses {key} only with loss.{need}"
            elif need not in method.supplied_inputs():
                inert[f"loss.{key}"] = f"method={method.name} gives its loss no {need.replace('_', ' ')}"
        return inert


@dataclass(kw_only=True)
class AugmentationSpec(Spec):
    """An augmentation's spec (``conf/augmentation/NAME.yaml``; its target is a :class:`cl_bench.augment.base.Augmentation`)."""

    group: ClassVar[str] = "augmentation"
    #: the augmentation's name, for messages
    name: ClassVar[str] = "none"
    #: True when it changes sentences (a text-level augmentation); False for dropout and the cutoffs
    rewrites_text: ClassVar[bool] = True
    #: True when it edits token embeddings inside the encoder (token, feature or span cutoff)
    embedding_level: ClassVar[bool] = False

    def runs_model_in_training(self) -> bool:
        """Whether, under these values, it runs a neural model on the training device at every step (a GPU
        model cannot run in forked DataLoader workers)."""
        return False


def covered(key: str, inert: Mapping[str, str]) -> str | None:
    """The reason ``key`` (or a group or prefix it belongs to: ``model.lora`` covers ``model.lora.r``) cannot act, given
    the run's inert keys with their reasons; None when it can act."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        reason = inert.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return None


def builtin_spec_modules() -> tuple[str, ...]:
    """The torch-free modules of cl-bench's own specs: each method folder's ``configuration``, then the losses' and
    the augmentations' (a new method folder is found here, listed nowhere)."""
    methods = sorted(f"cl_bench.methods.{path.parent.name}.{CONFIGURATION}"
                     for path in METHODS_DIR.glob(f"*/{CONFIGURATION}.py"))
    return (*methods, *BUILTIN_SPEC_MODULES)


@functools.cache
def _import_builtin() -> None:
    """Import cl-bench's own specs, once per process (the package's folders do not change while it runs)."""
    for module in builtin_spec_modules():
        importlib.import_module(module)


def spec_for(target: str, import_target: bool = True) -> type[Spec] | None:
    """The spec registered for ``target`` (a ``_target_`` path), or None.

    cl-bench's own specs are imported first (no torch). A target of a method folder's shape
    (``<package>.modeling.<Class>``, in cl-bench or a user's folder on the search path) has its sibling
    ``<package>.configuration`` imported, torch-free; another target has its module imported (``import_target``),
    which registers a spec defined there.
    """
    _import_builtin()
    module, _, _ = target.rpartition(".")
    if target not in _REGISTRY and module.endswith(f".{MODELING}"):
        configuration = f"{module.rpartition('.')[0]}.{CONFIGURATION}"
        try:
            found = importlib.util.find_spec(configuration) is not None
        except ModuleNotFoundError:  # the package itself is missing: the target's import below says so
            found = False
        if found:
            importlib.import_module(configuration)
    if target not in _REGISTRY and import_target and module:
        importlib.import_module(module)
    return _REGISTRY.get(target)


def loss_spec_of(loss_fn: Any) -> type[LossSpec] | None:
    """The spec of a built loss (its function, or the ``functools.partial`` Hydra made of it), None if it has none."""
    fn = getattr(loss_fn, "func", loss_fn)
    spec = spec_for(f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}", import_target=False)
    return spec if spec is not None and issubclass(spec, LossSpec) else None


def build(node: Mapping[str, Any], *args: Any) -> Any:
    """The object a ``method`` or ``augmentation`` config node describes: its target class called with ``args`` and the
    node's spec (``SimCSE(context, SimCSESpec(...))``, ``RandomDeletion(RandomDeletionSpec(alpha=0.1))``), the one
    route from such a node to its object. The node's values are plain (``OmegaConf.to_container``) and checked."""
    spec = spec_for(str(node["_target_"]))
    if spec is None:
        raise ValueError(f"no spec describes '{node['_target_']}'")
    module, _, name = spec.target.rpartition(".")
    return getattr(importlib.import_module(module), name)(*args, spec.from_config(node))


def registered() -> dict[str, type[Spec]]:
    """Every spec registered so far, by target (cl-bench's own imported)."""
    _import_builtin()
    return dict(_REGISTRY)


# ------------------------------------------------------------------------------------------------
# Rules declared on the fields they govern, read by one checker
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Must(BaseMetadata):
    """A single-key rule the standard constraints cannot state: ``holds(value)`` must be true; ``says`` completes
    the message "must ...": ``max_steps: Annotated[int, Must(lambda v: v > 0 or v == -1, "be > 0 or -1")]``."""

    holds: Callable[[Any], bool]
    says: str


@dataclass(frozen=True)
class Because(BaseMetadata):
    """Why a field's range is what it is, said in its message: ``Annotated[int, Ge(2), Because("in-batch negatives
    need two")]`` -> ``batch_size: must be >= 2 (in-batch negatives need two), got 1``."""

    why: str


#: the one-sided constraints: class, sign, attribute holding the bound
_BOUNDS = ((Gt, ">", "gt"), (Ge, ">=", "ge"), (Lt, "<", "lt"), (Le, "<=", "le"))


def _bound(rule: Any) -> str:
    """What a standard constraint asks, completing "must be ..."."""
    if isinstance(rule, Interval):
        low = f"[{rule.ge}" if rule.ge is not None else f"({rule.gt}" if rule.gt is not None else None
        high = f"{rule.le}]" if rule.le is not None else f"{rule.lt})" if rule.lt is not None else None
        if low and high:
            return f"in {low}, {high}"
        return " and ".join(_bound(r) for r in rule)  # one-sided: Interval(gt=0) says "> 0"
    for kind, sign, bound in _BOUNDS:
        if isinstance(rule, kind):
            return f"{sign} {getattr(rule, bound)}"
    if isinstance(rule, MinLen):
        return f"a list of at least {rule.min_length} item{'s' * (rule.min_length != 1)}"
    if isinstance(rule, MaxLen):
        return f"a list of at most {rule.max_length} item{'s' * (rule.max_length != 1)}"
    raise TypeError(f"no message for the rule {rule!r}")


def describe_rule(rule: Any, each: bool = False) -> str:
    """What a declared rule asks, as :func:`check_fields` words it after "must" (``be > 0``, ``be in [0, 1)``, a
    :class:`Must`'s ``says``; ``each``: the rule of a list's items, ``be a list of values >= 1``). The docs'
    reference shows the same words (:mod:`cl_bench.commands.docs_gen`)."""
    if isinstance(rule, Must):
        return rule.says
    return f"be a list of values {_bound(rule)}" if each else f"be {_bound(rule)}"


def _holds(rule: Any, value: Any) -> bool:
    if isinstance(rule, Must):
        return bool(rule.holds(value))
    if isinstance(rule, Interval):
        return all(_holds(r, value) for r in rule)
    if isinstance(rule, MinLen):
        return len(value) >= rule.min_length
    if isinstance(rule, MaxLen):
        return len(value) <= rule.max_length
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False  # a range asks for a number (OmegaConf types a run's values; a spec built in Python is not)
    for kind, _, bound in _BOUNDS:
        if isinstance(rule, kind):
            limit = getattr(rule, bound)
            return {"gt": value > limit, "ge": value >= limit, "lt": value < limit, "le": value <= limit}[bound]
    raise TypeError(f"cannot check the rule {rule!r}")


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """A field's type hint as (the type without its rules, its rules): ``Annotated[float, Gt(0)] | None`` ->
    (``float | None``, ``(Gt(0),)``)."""
    if get_origin(hint) is Annotated:
        base, *extra = get_args(hint)
        return base, tuple(extra)
    if get_origin(hint) in (Union, type(int | None)):
        for arm in get_args(hint):
            if get_origin(arm) is Annotated:
                return hint, tuple(get_args(arm)[1:])
    return hint, ()


@functools.cache
def field_rules(cls: type) -> dict[str, tuple[Any, ...]]:
    """Each dataclass field's declared rules (the ``annotated_types`` constraints, :class:`Must` and :class:`Because` in
    its ``Annotated`` type); a list's item rules under ``"<field>[]"``. A field's doc is its comment (``#:`` above it,
    or at the end of its line), which the docs' reference shows beside its type, default and rules."""
    hints = get_type_hints(cls, include_extras=True)
    rules: dict[str, tuple[Any, ...]] = {}
    for f in dataclasses.fields(cls):
        base, extra = _split(hints[f.name])
        rules[f.name] = extra
        for arm in (base, *get_args(base)):  # list[Annotated[int, Gt(0)]], alone or in an Optional
            arm = get_args(arm)[0] if get_origin(arm) is Annotated else arm
            if get_origin(arm) is list and get_args(arm):
                rules[f"{f.name}[]"] = _split(get_args(arm)[0])[1]
    return rules


def check_fields(obj: Any, prefix: str) -> None:
    """Check every field of the dataclass instance ``obj`` against the rules declared on it (the one checker of
    single-key rules; a ``None`` value passes: an optional key unset). ``prefix`` is the key's group, e.g.
    ``"loss."``.

    Raises:
        ValueError: one line naming the first key that breaks its rule, e.g. ``loss.tau: must be > 0, got 0``.
    """
    for key, rules in field_rules(type(obj)).items():
        name, each = key.removesuffix("[]"), key.endswith("[]")
        value = getattr(obj, name)
        if value is None:
            continue
        why = next((f" ({r.why})" for r in rules if isinstance(r, Because)), "")
        for rule in rules:
            if isinstance(rule, Because):
                continue
            items = list(value) if each else [value]
            if not all(_holds(rule, item) for item in items):
                raise ValueError(f"{prefix}{name}: must {describe_rule(rule, each)}{why}, got {value!r}")


# ------------------------------------------------------------------------------------------------
# Helpers the specs' rules share
# ------------------------------------------------------------------------------------------------
