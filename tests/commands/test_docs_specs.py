"""The reference's key tables come from the specs' declarations: type, default, rule (as the checker words it), doc."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

import pytest
from annotated_types import Ge, Gt, Interval, MinLen

from cl_bench.commands.docs_gen import field_docs, rule_text, spec_rows
from cl_bench.losses import specs as loss_specs
from cl_bench.specs import Because, LossSpec, Must, check_fields, registered

Colour = StrEnum("Colour", "red green")


@dataclass(kw_only=True)
class _Base:
    #: the base's key, documented
    #: over two lines
    width: Annotated[int, Ge(2), Because("two columns at least")] = 4


@dataclass(kw_only=True)
class _Example(_Base):
    tau: Annotated[float, Gt(0)] = 0.05  # a trailing doc
    share: Annotated[float, Interval(ge=0, lt=1)] | None = None  # an optional key in [0, 1)
    sizes: Annotated[list[Annotated[int, Ge(1)]], MinLen(1)] = field(default_factory=lambda: [8])  # prefix sizes
    steps: Annotated[int, Must(lambda v: v > 0 or v == -1, "be > 0 or -1 (epochs decide)")] = -1
    colour: Colour = Colour.red
    plain: str = "x"


def test_a_fields_doc_is_its_comment_above_or_beside_it_in_the_class_that_declares_it() -> None:
    assert field_docs(_Example) == {"width": "the base's key, documented over two lines", "tau": "a trailing doc",
                                    "share": "an optional key in [0, 1)", "sizes": "prefix sizes"}


@pytest.mark.parametrize(("key", "bad"), [("width", 1), ("tau", 0), ("share", 1.0), ("sizes", [0]), ("sizes", []),
                                          ("steps", 0)])
def test_the_rule_is_worded_as_the_checker_words_its_message(key: str, bad: object) -> None:
    with pytest.raises(ValueError) as err:
        check_fields(dataclasses.replace(_Example(), **{key: bad}), "x.")
    message = str(err.value).removeprefix(f"x.{key}: ").rsplit(", got ", 1)[0]
    assert message in rule_text(_Example, key).split("; ")


def test_a_row_shows_type_default_rule_and_doc() -> None:
    rows = {row.split(" | ")[0].removeprefix("| "): row for row in spec_rows(_Example, "x.")}
    assert rows["<code>x.<wbr>tau</code>"] == "| <code>x.<wbr>tau</code> | `float` | `0.05` | must be > 0 | a trailing doc |"
    assert " | `int` | `4` | must be >= 2 (two columns at least) | " in rows["<code>x.<wbr>width</code>"]
    assert " | <code>float &#124; None</code> | `null` | must be in [0, 1) | " in rows["<code>x.<wbr>share</code>"]
    assert " | `list[int]` | `[8]` | must be a list of at least 1 item; must be a list of values >= 1 | " in (
        rows["<code>x.<wbr>sizes</code>"])
    assert " | must be > 0 or -1 (epochs decide) | " in rows["<code>x.<wbr>steps</code>"]
    assert rows["<code>x.<wbr>colour</code>"].startswith("| <code>x.<wbr>colour</code> | <code>red &#124; green</code> | `red` |")
    # an option's own value, with the spec's default beside it
    (row,) = [r for r in spec_rows(_Example, "x.", {"tau": 0.1}) if "x.<wbr>tau" in r]
    assert " | `0.1` (spec: `0.05`) | " in row


@pytest.mark.parametrize("spec", sorted((s for s in registered().values() if issubclass(s, LossSpec)
                                         and s.__module__ == loss_specs.__name__), key=lambda s: s.__name__),
                         ids=lambda s: s.__name__)
def test_every_loss_key_has_a_doc(spec: type[LossSpec]) -> None:
    docs = field_docs(spec)
    assert all(docs.get(key) for key in spec.keys() if key != "name"), (spec.__name__, docs)
