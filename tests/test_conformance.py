"""The core against what transformers builds: names, order, shapes, ties and totals, case by case.

The cases come from tests/fixtures/generate.py (every preset × head, BertModel without pooler, and seeded
random configs), run against the real classes on the meta device and committed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tui.core import BertConfig, build_tree, closed_form_total, report
from tui.presets import load_catalog

from .hf_cases import load_hf_cases

CASES = load_hf_cases()


def config_of(case: dict[str, Any]) -> BertConfig:
    return BertConfig.from_mapping(case["config"])


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_names_shapes_and_order_match_transformers(case: dict[str, Any]) -> None:
    tree = build_tree(config_of(case))
    ours = [[p.name, list(p.shape)] for p in tree.unique_params()]
    assert ours == case["params"]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_totals_class_and_ties_match_transformers(case: dict[str, Any]) -> None:
    config = config_of(case)
    tree = build_tree(config)
    assert config.hf_class == case["class"]
    assert tree.total == case["total"]
    assert closed_form_total(config) == case["total"]
    assert {p.name: p.tied_to for p in tree.tied_params()} == case["tied"]
    assert report(tree)["total"] == case["total"]


def test_fixtures_cover_every_preset_and_head() -> None:
    ids = {case["id"] for case in CASES}
    heads = {"none", "none-no-pooler", "mlm", "pretraining", "sequence-classification", "token-classification",
             "question-answering", "multiple-choice", "next-sentence", "causal-lm"}
    for name, preset in load_catalog().presets.items():
        expected = heads if preset.config.model_type == "bert" else heads - {"pretraining", "next-sentence"}
        assert {f"{name}/{head}" for head in expected} <= ids, name
    assert sum(case["id"].startswith("random-") for case in CASES) >= 80
    assert {case["config"]["model_type"] for case in CASES} == {"bert", "roberta", "xlm-roberta", "camembert"}
    untied = {(case["config"]["model_type"], case["config"]["head"]) for case in CASES
              if case["config"].get("tie_word_embeddings") is False}
    assert untied == {(m, h) for m in ("bert", "roberta", "xlm-roberta", "camembert") for h in ("mlm", "causal-lm")} | {
        ("bert", "pretraining")}


@pytest.mark.parametrize("preset", sorted(load_catalog().presets))
def test_preset_expected_total_is_what_transformers_and_the_core_give(preset: str) -> None:
    found = load_catalog().presets[preset]
    hf_total = next(case["total"] for case in CASES if case["id"] == f"{preset}/none")
    assert found.expected_total == hf_total
    assert build_tree(found.config).total == found.expected_total
