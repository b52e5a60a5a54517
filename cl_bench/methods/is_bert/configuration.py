"""The spec of ``method=is_bert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.is_bert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge, MinLen

from cl_bench.data.nli import senteval_snli_split
from cl_bench.specs import MethodSpec, Must, RunSetting

#: ``method.activation`` of IS-BERT's CNN
Activation = StrEnum("Activation", "relu none")
#: ``method.discriminator`` of IS-BERT
Discriminator = StrEnum("Discriminator", "dot mlp_dot")
#: IS-BERT's window sizes (paper and code): ``method.kernel_sizes``'s default, and what null stands for
PAPER_KERNEL_SIZES = (1, 3, 5)
#: a window size of IS-BERT's CNN: odd, so that 'same' padding keeps the length
_ODD_WINDOW = Must(lambda k: isinstance(k, int) and k >= 1 and k % 2 == 1, "be odd positive window sizes ('same' padding)")


@dataclass(kw_only=True)
class ISBERTSpec(MethodSpec):
    """IS-BERT (:class:`cl_bench.methods.is_bert.modeling.ISBERT`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.is_bert.modeling.ISBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("local_global",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=nli_sentences", "method.channels=4")
    summary: ClassVar[str] = ("IS-BERT: a CNN over token states; JSD mutual information between local n-gram and "
                              "global features")

    #: the CNN's window sizes (paper and code: 1, 3, 5; null: those)
    kernel_sizes: Annotated[list[Annotated[int, _ODD_WINDOW]], MinLen(1)] | None = field(
        default_factory=lambda: list(PAPER_KERNEL_SIZES))
    channels: Annotated[int, Ge(1)] = 256  # per window size -> 768-d embedding (paper and code)
    activation: Activation = Activation.relu  # after the convolutions: relu = paper; none = official code (models.CNN)
    #: T_ω: dot = official code (local · global); mlp_dot = Deep InfoMax encode-and-dot critic
    discriminator: Discriminator = Discriminator.dot
    discriminator_size: Annotated[int, Ge(1)] = 512  # width of mlp_dot's encoders (unused by dot)
    #: splits read when data.train_file is a SentEval SNLI file (data=nli_sentences)
    snli_splits: list[str] | None = field(default_factory=lambda: ["dev", "test"])

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if self.discriminator != "mlp_dot":
            inert["discriminator_size"] = "only method.discriminator=mlp_dot has a size"
        if senteval_snli_split(setting.train_file) is None:
            inert["snli_splits"] = (
                f"data.train_file is not a SentEval SNLI file (s1.<split>): {setting.train_file}"
            )
        return inert
