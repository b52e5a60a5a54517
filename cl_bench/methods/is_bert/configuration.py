"""The spec of ``method=is_bert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.is_bert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.data.nli import senteval_snli_split
from cl_bench.specs import MethodSpec, RunSetting, check_ranges

#: ``method.activation`` of IS-BERT's CNN
Activation = StrEnum("Activation", "relu none")
#: ``method.discriminator`` of IS-BERT
Discriminator = StrEnum("Discriminator", "dot mlp_dot")


@dataclass(kw_only=True)
class ISBERTSpec(MethodSpec):
    """IS-BERT (:class:`cl_bench.methods.is_bert.modeling.ISBERT`; conf/method/is_bert.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.is_bert.modeling.ISBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("local_global",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=nli_sentences", "method.channels=4")
    summary: ClassVar[str] = ("IS-BERT: a CNN over token states; JSD mutual information between local n-gram and "
                              "global features")

    kernel_sizes: list[int] | None
    channels: int
    activation: Activation
    discriminator: Discriminator
    discriminator_size: int
    snli_splits: list[str] | None

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "channels": (lambda v: v >= 1, ">= 1"),
            "discriminator_size": (lambda v: v >= 1, ">= 1"),
            "kernel_sizes": (lambda v: len(v) > 0 and all(k >= 1 and k % 2 == 1 for k in v),
                             "odd positive window sizes ('same' padding)"),
        })

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if self.discriminator != "mlp_dot":
            inert["discriminator_size"] = "only method.discriminator=mlp_dot has a size"
        if senteval_snli_split(setting.train_file) is None:
            inert["snli_splits"] = (
                f"data.train_file is not a SentEval SNLI file (s1.<split>): {setting.train_file}"
            )
        return inert
