"""The core against what transformers builds: names, order, shapes, ties and totals, case by case.

The cases come from tests/fixtures/generate.py (every preset × head, BertModel without pooler, and seeded
random configs), run against the real classes on the meta device and committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tui.core import FAMILIES, BertConfig, build_tree, closed_form_total, report
from tui.core.config import families_with
from tui.core.count.families import bare_modules
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
def test_totals_class_ties_and_modules_without_parameters_match_transformers(case: dict[str, Any]) -> None:
    config = config_of(case)
    tree = build_tree(config)
    assert config.hf_class == case["class"]
    assert tree.total == case["total"]
    assert closed_form_total(config) == case["total"]
    assert {p.name: p.tied_to for p in tree.tied_params()} == case["tied"]
    assert report(tree)["total"] == case["total"]
    assert sorted(bare_modules(config)) == sorted(case["bare"])  # what a peft target name can match beside the tree


def test_fixtures_cover_every_preset_and_head() -> None:
    ids = {case["id"] for case in CASES}
    for name, preset in load_catalog().presets.items():
        heads = FAMILIES[preset.config.model_type].heads
        expected = {*heads, *(["none-no-pooler"] if heads["none"] is None else [])}
        assert {f"{name}/{head}" for head in expected} <= ids, name
    assert sum(case["id"].startswith("random-") for case in CASES) >= 80
    assert {case["config"]["model_type"] for case in CASES} == set(FAMILIES)
    untied = {(case["config"]["model_type"], case["config"]["head"]) for case in CASES
              if case["config"].get("tie_word_embeddings") is False}
    assert untied >= {(m, h) for m in ("bert", "roberta", "xlm-roberta", "camembert") for h in ("mlm", "causal-lm")} | {
        ("bert", "pretraining")}


def test_fixtures_cover_every_family_class_and_structural_flag() -> None:
    """At least 20 seeded random configs per new family; every class of each; E below, at and above H
    (ELECTRA's projection present and absent); ALBERT with several groups and layers per group; MPNet's buckets
    varied; ModernBERT's and DeBERTa's flags both ways; DeBERTa's token types absent, its relative span from
    buckets, max_relative_positions or P, with and without the convolution; tied and untied decoders; the
    library's default config of each family read by our loader."""
    for family in ("distilbert", "albert", "electra", "mpnet", "modernbert", "deberta-v2"):
        cases = [case for case in CASES if case["config"]["model_type"] == family]
        assert sum(case["id"].startswith(f"random-{family}-") for case in cases) >= 20
        assert {case["config"]["head"] for case in cases} == set(FAMILIES[family].heads)
        assert f"defaults/{family}" in {case["id"] for case in cases}
        untied = {case["config"]["head"] for case in cases if case["config"].get("tie_word_embeddings") is False}
        assert {"mlm"} <= untied
    for family in ("albert", "electra", "deberta-v2"):
        widths = {(c["config"]["embedding_size"] > c["config"]["hidden_size"]) - (c["config"]["embedding_size"] < c["config"]["hidden_size"])
                  for c in CASES if c["config"]["model_type"] == family}
        assert widths == {-1, 0, 1}
    albert = [c["config"] for c in CASES if c["config"]["model_type"] == "albert"]
    assert {c["num_hidden_groups"] for c in albert} >= {1, 2, 3} and {c["inner_group_num"] for c in albert} >= {1, 2, 3}
    assert len({c["config"]["relative_attention_num_buckets"] for c in CASES if c["config"]["model_type"] == "mpnet"}) >= 10
    for family, flags in ((name, family.switches) for name, family in FAMILIES.items()):
        configs = [c["config"] for c in CASES if c["config"]["model_type"] == family]
        for flag in flags:  # every flag both ways (recorded where on); more than one layer (ModernBERT's first
            assert {c.get(flag, False) for c in configs} == {False, True}, flag  # has no attn_norm)
        assert max(c["num_hidden_layers"] for c in configs) > 1
    deberta = [c["config"] for c in CASES if c["config"]["model_type"] == "deberta-v2"]
    assert {c["type_vocab_size"] == 0 for c in deberta} == {False, True}
    assert {(c["position_buckets"] > 0, c["max_relative_positions"] > 0) for c in deberta} >= {(True, False), (False, True), (False, False)}
    assert {c["conv_kernel_size"] > 0 for c in deberta} == {False, True}
    spans = [(c["relative_attention"], c["share_att_key"], c["pos_att_c2p"], c["pos_att_p2c"]) for c in deberta]
    assert {span for span in spans if span[0] and not span[1]} >= {(True, False, True, False), (True, False, False, True)}
    for family in families_with("add_cross_attention"):  # a decoder's cross-attention in every class of every family that builds one
        crossed = {c["config"]["head"] for c in CASES
                   if c["config"]["model_type"] == family and c["config"].get("add_cross_attention")}
        assert crossed == set(FAMILIES[family].heads), family


@pytest.mark.parametrize("preset", sorted(load_catalog().presets))
def test_preset_expected_total_is_what_transformers_and_the_core_give(preset: str) -> None:
    found = load_catalog().presets[preset]
    hf_total = next(case["total"] for case in CASES if case["id"] == f"{preset}/none")
    assert found.expected_total == hf_total
    assert build_tree(found.config).total == found.expected_total


HUB_CASES = [case for case in CASES if case["id"].startswith("hub/")]
HUB_FOLDER = Path(__file__).parent / "fixtures" / "hub"


def test_a_real_config_json_of_every_family_is_a_fixture() -> None:
    assert {case["config"]["model_type"] for case in HUB_CASES} == set(FAMILIES) - {"roberta", "xlm-roberta", "camembert"}
    assert sorted(path.parent.name for path in HUB_FOLDER.glob("*/config.json")) == sorted(c["id"][4:] for c in HUB_CASES)


@pytest.mark.parametrize("case", HUB_CASES, ids=[case["id"] for case in HUB_CASES])
def test_count_config_reads_a_real_config_json_as_transformers_builds_it(case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """`bert-tui count --config FILE --format json` on the published file (transformers was given the raw
    keys by the generator, not our reading of them): the class, every name and shape in order, the total."""
    from tui.cli import main

    code = main(["count", "--config", str(HUB_FOLDER / case["id"][4:] / "config.json"), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["model"] == case["class"] and data["total"] == case["total"]
    assert [[p["name"], p["shape"]] for p in data["parameters"]] == case["params"]
