"""``cl-bench method=NAME`` alone trains with the official recipe's defaults: a method YAML may choose the
augmentation it uses when the user chose none (``override /augmentation@_group_: NAME`` in its defaults list,
read because conf/config.yaml lists the augmentation before the method); an explicit ``augmentation=NAME``
on the command line or in a preset still wins, or is rejected before load where it cannot act."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR  # importing the CLI registers the config schema
from cl_bench.config import ConfigError, catalog, check_choices

#: the augmentation each method brings (None: the global default, dropout) — the official recipes'
OFFICIAL = {"sncse": "negation", "esimcse": "word_repetition"}


def _compose(overrides: list[str], data_dir: Path) -> object:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def _augmentation(cfg: object) -> str:
    return str(cfg.hydra.runtime.choices.augmentation)


@pytest.mark.parametrize("method", sorted(catalog.options("method")))
def test_each_method_alone_gets_its_declared_augmentation(method: str, data_dir: Path) -> None:
    cfg = _compose([f"method={method}"], data_dir)
    assert _augmentation(cfg) == catalog.default_augmentation(method) == OFFICIAL.get(method, "dropout")


@pytest.mark.parametrize(("overrides", "target"), [
    (["method=sncse"], "cl_bench.augment.negation.Negation"),
    (["method=esimcse"], "cl_bench.augment.word_repetition.WordRepetition"),
    (["method=esimcse", "augmentation=dropout"], "cl_bench.augment.base.Dropout"),  # the user's choice wins
    (["method=sncse", "augmentation=eda_delete"], "cl_bench.augment.eda.RandomDeletion"),
    (["experiment=sncse_bert"], "cl_bench.augment.negation.Negation"),
    (["experiment=sncse_bert", "augmentation=crop"], "cl_bench.augment.words.Crop"),  # over a preset too
    (["experiment=bert_first_last_avg", "method=esimcse"], "cl_bench.augment.word_repetition.WordRepetition"),
    (["method=simcse"], "cl_bench.augment.base.Dropout"),
])
def test_an_explicit_augmentation_wins_over_the_method_default(overrides: list[str], target: str, data_dir: Path) -> None:
    assert _compose(overrides, data_dir).augmentation._target_ == target


def test_a_presets_augmentation_keys_do_not_fit_another_augmentation(data_dir: Path) -> None:
    """ESimCSE's preset sets ``augmentation.dup_rate`` (word repetition's key): with ``augmentation=crop`` chosen, crop's
    schema (its spec) rejects that key at composition, naming it; so does ESimCSE's for PromptBERT's preset keys."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="full_key: augmentation.dup_rate"):
        _compose(["experiment=esimcse_bert", "augmentation=crop"], data_dir)
    with pytest.raises(ConfigCompositionException, match="full_key: method.dev_embedding"):  # PromptBERT's key
        _compose(["experiment=promptbert_bert", "method=esimcse"], data_dir)


def test_the_method_defaults_keep_their_keys_overridable(data_dir: Path) -> None:
    cfg = _compose(["method=esimcse", "augmentation.dup_rate=0.2", "augmentation.dup_type=word"], data_dir)
    assert (cfg.augmentation.dup_rate, cfg.augmentation.dup_type) == (0.2, "word")
    assert _compose(["method=sncse", "augmentation.source=file"], data_dir).augmentation.source == "file"


def test_method_alone_is_accepted_and_an_explicit_augmentation_that_cannot_act_is_rejected(
        tiny_bert: Path, data_dir: Path) -> None:
    common = [f"model.name_or_path={tiny_bert}", "data=wiki1m_head"]
    for method in ("sncse", "esimcse"):
        check_choices(_compose([f"method={method}", *common], data_dir), [f"method={method}"])
    overrides = ["method=sncse", "augmentation=dropout"]
    with pytest.raises(ConfigError, match=r"^augmentation=dropout: method=sncse makes its soft negatives") as err:
        check_choices(_compose([*overrides, *common], data_dir), overrides)
    assert "\n" not in str(err.value)


def test_a_user_method_can_declare_its_default_augmentation(tmp_path: Path, data_dir: Path) -> None:
    """The same mechanism in a user's config folder (hydra.searchpath), as the README's "Your own method" shows."""
    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "my_method.yaml").write_text(
        "defaults:\n  - override /augmentation@_group_: word_deletion\n  - _self_\n"
        "_target_: cl_bench.methods.simcse.modeling.SimCSE\nname: my_method\n")
    cfg = _compose([f"hydra.searchpath=[file://{tmp_path}]", "method=my_method"], data_dir)
    assert cfg.augmentation._target_ == "cl_bench.augment.words.WordDeletion"


def test_listing_names_each_methods_default_augmentation() -> None:
    rows = {row["method"]: row for row in catalog.method_rows()}
    assert rows["sncse"]["default_augmentation"] == "negation"
    assert rows["esimcse"]["default_augmentation"] == "word_repetition"
    assert rows["simcse"]["default_augmentation"] == "dropout"
    assert rows["is_bert"]["default_augmentation"] == "-"  # it uses no augmentation group
    assert "defaults" not in rows["sncse"]["keys"]
