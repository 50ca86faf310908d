"""Audit (explaining published counts) and diff (comparing configs): core, presets' claims, CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings

from tui.cli import main
from tui.core import BertConfig, build_tree, closed_form_total, per_layer
from tui.core.count.audit import audit, hand_count
from tui.core.count.claims import ClaimError, parse_claim, round_figures
from tui.core.count.diff import diff
from tui.presets import load_catalog

from .hf_cases import hf_total
from .test_core import valid_configs


def config(preset: str) -> BertConfig:
    return load_catalog().get(preset).config


@settings(max_examples=200, deadline=None)
@given(valid_configs())
def test_hand_count_without_conventions_is_the_exact_count(cfg: BertConfig) -> None:
    assert sum(hand_count(cfg).values()) == closed_form_total(cfg) == build_tree(cfg).total
    assume(cfg.family.bert_names)  # per-layer hand counts are BERT's; the other families are refused
    assert sum(hand_count(cfg, scope="layer").values()) == per_layer(cfg)


def test_186828288_for_example_40k_names_all_four_causes() -> None:
    result = audit(parse_claim("186828288"), config("example-40k"))
    assert result.exact == hf_total("example-40k/none") == 88_409_856
    best = result.matches[0]
    assert set(best.conventions) == {"no-biases", "no-layernorm", "pooler", "qkv-full-per-head"}
    assert best.value == 186_828_288 and best.changes["pooler"] == -590_592


def test_7113216_per_bert_base_layer_is_qkv_bias_per_head() -> None:
    result = audit(parse_claim("7,113,216"), config("bert-base-uncased"), scope="layer")
    assert result.exact == 7_087_872
    assert result.matches[0].conventions == ("qkv-bias-per-head",)
    assert result.matches[0].changes == {"qkv.bias": 25_344}


def test_110106428_is_the_pretraining_heads() -> None:
    result = audit(parse_claim("110,106,428"), config("bert-base-uncased"))
    assert result.matches[0].conventions == ("pretraining-heads",)
    assert result.matches[0].value == hf_total("bert-base-uncased/pretraining")


def test_110m_is_a_rounding_of_the_exact_count_first() -> None:
    result = audit(parse_claim("110M"), config("bert-base-uncased"))
    first = result.matches[0]
    assert first.conventions == () and first.rounded == 110_000_000 and first.assumptions == 1
    assert ("pretraining-heads",) in [m.conventions for m in result.matches]


def test_no_match_gives_the_nearest_combination() -> None:
    result = audit(parse_claim("12345"), config("bert-base-uncased"))
    assert result.matches == () and result.nearest is not None
    assert "no-embeddings" in result.nearest.conventions


@pytest.mark.parametrize("preset", sorted(load_catalog().presets))
def test_every_claim_a_preset_carries_is_explained(preset: str) -> None:
    found = load_catalog().get(preset)
    for claim in found.claims:
        assert audit(parse_claim(claim.value), found.config, claim.scope).matches, claim


@pytest.mark.parametrize(
    ("text", "value", "figures"),
    [("186828288", 186_828_288, None), ("186,828,288", 186_828_288, None), ("110M", 110_000_000, 2),
     ("0.11B", 110_000_000, 2), ("109.48M", 109_480_000, 5), ("340k", 340_000, 2), (" 7_113_216 ", 7_113_216, None)],
)
def test_claims_parse_with_their_precision(text: str, value: int, figures: int | None) -> None:
    claim = parse_claim(text)
    assert (claim.value, claim.figures) == (value, figures)


@pytest.mark.parametrize("text", ["abc", "", "-5", "1.5", "110X", "1e8", "0", "0.0001K", "9" * 50, "110,00",
                                  "1,10,000", "1,000_000", ",100", "1_0"])
def test_unreadable_claims_are_refused(text: str) -> None:
    with pytest.raises(ClaimError):
        parse_claim(text)


def test_round_figures() -> None:
    assert round_figures(109_482_240, 2) == 110_000_000
    assert round_figures(109_482_240, 3) == 109_000_000
    assert round_figures(335_141_888, 2) == 340_000_000


def test_diff_base_to_large() -> None:
    result = diff(build_tree(config("bert-base-uncased")), build_tree(config("bert-large-uncased")))
    assert result.delta == 225_659_648 == hf_total("bert-large-uncased/none") - hf_total("bert-base-uncased/none")
    assert result.groups["encoder"] == (85_054_464, 302_309_376)
    rows = {row.name: row for row in result.rows()}
    added = rows["encoder.layer.{12..23}.intermediate.dense.weight"]
    assert (added.shape_a, added.shape_b, added.times, added.delta) == (None, (4096, 1024), 12, 12 * 4096 * 1024)
    assert sum(row.delta for row in rows.values()) == result.delta


def test_diff_across_head_classes_matches_names_without_the_bert_prefix() -> None:
    base = config("bert-base-uncased")
    result = diff(build_tree(base), build_tree(base.replace(head="mlm")))
    names = {p.name for p in result.params}
    assert names == {"pooler.dense.weight", "pooler.dense.bias", "cls.predictions.bias",
                     "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
                     "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias"}
    assert result.delta == hf_total("bert-base-uncased/mlm") - hf_total("bert-base-uncased/none")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_audit_explains_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "186828288", "--preset", "example-40k")
    assert code == 0
    for words in ("88,409,856", "biases omitted", "LayerNorm weights and biases omitted", "pooler (H² + H) omitted",
                  "full H × H matrix per head", "1 explanation reproduces it"):
        assert words in out


def test_cli_audit_json_and_no_match(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "7,113,216", "--scope", "layer", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["exact"] == 7_087_872 and data["matches"][0]["conventions"][0]["key"] == "qkv-bias-per-head"
    code, out, _ = run(capsys, "audit", "12345")
    assert code == 1 and "No combination" in out and "Nearest" in out


def test_cli_audit_bad_claim_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "audit", "lots")
    assert code == 2 and out == "" and "claim 'lots'" in err


def test_cli_diff(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", "bert-base-uncased", "bert-large-uncased")
    assert code == 1 and "+225,659,648" in out and "encoder.layer.{12..23}" in out  # they differ: exit 1
    code, out, _ = run(capsys, "diff", "bert-base-uncased", "bert-base-uncased", "--num-hidden-layers", "13", "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["delta"] == 7_087_872 and data["groups"]["encoder"]["delta"] == 7_087_872
    code, _, err = run(capsys, "diff", "bert-base-uncased", "nope")
    assert code == 2 and "unknown preset 'nope'" in err


@pytest.mark.parametrize("written", ["110000000", "110,000,000", "110_000_000"])
def test_a_count_written_in_full_is_read_at_its_significant_figures_when_nothing_gives_it_exactly(
    capsys: pytest.CaptureFixture[str], written: str
) -> None:
    code, out, _ = run(capsys, "audit", written)
    assert code == 0 and "read at its 2 significant figures" in " ".join(out.split())  # prose wraps at 80
    assert "1. 109,482,240, rounded to 110,000,000" in out and "the exact count itself, rounded" in out
    code, out, _ = run(capsys, "audit", written, "--format", "json")
    data = json.loads(out)
    assert data["read_at_significant_figures"] is True and data["significant_figures"] == 2
    assert data["matches"][0]["value"] == hf_total("bert-base-uncased/none")


def test_a_full_count_that_a_convention_gives_exactly_stays_exact(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "186828288", "--preset", "example-40k", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["read_at_significant_figures"] is False and data["significant_figures"] is None
    code, out, _ = run(capsys, "audit", "123000000", "--format", "json")  # 3 figures: 109M nowhere near
    assert code == 1 and json.loads(out)["read_at_significant_figures"] is False


def test_albert_counted_unshared_is_named() -> None:
    """ALBERT-base's layer stored once and run 12 times: a count of 12 stored layers is ALBERT counted
    unshared, and the audit says so (the count is the core's, the convention the family's)."""
    cfg = config("albert-base-v2")
    unshared = build_tree(cfg).total + 11 * per_layer(cfg)
    result = audit(parse_claim(f"{unshared:,}"), cfg)
    assert result.matches and result.matches[0].conventions == ("unshared-layers",)
    assert result.matches[0].changes == {"encoder": 11 * per_layer(cfg)}


def test_a_family_counted_without_its_embeddings_is_named() -> None:
    cfg = config("electra-base-discriminator")
    tree = build_tree(cfg)
    result = audit(parse_claim(f"{tree.total - tree.groups()['embeddings']:,}"), cfg)
    assert result.matches and result.matches[0].conventions == ("no-embeddings",)


def test_family_layer_claims_are_refused_by_name() -> None:
    with pytest.raises(ClaimError, match="per-layer claims are audited for the BERT layout"):
        audit(parse_claim("7M"), config("albert-base-v2"), scope="layer")


def test_diff_across_families_matches_parameters_by_role() -> None:
    """BERT-base against DistilBERT: the six layers DistilBERT keeps match BERT's first six by role (its
    q_lin is BERT's self.query), so what differs is the six layers it drops, the token types and the pooler."""
    a, b = build_tree(config("bert-base-uncased")), build_tree(config("distilbert-base-uncased"))
    result = diff(a, b)
    assert sum(p.delta for p in result.params) == b.total - a.total
    names = {row.name for row in result.rows()}
    assert "encoder.layer.{6..11}.attention.self.query.weight" in names
    assert not any(name.startswith("encoder.layer.{0..5}") or "q_lin" in name for name in names)
    assert {"embeddings.token_type_embeddings.weight", "pooler.dense.weight"} <= names


@pytest.mark.parametrize(("preset", "claim"), [("deberta-v3-small", "44M"), ("deberta-v3-base", "86M"),
                                               ("deberta-v3-large", "304M")])
def test_deberta_backbone_claims_are_the_model_without_embeddings_with_a_pretraining_head(preset: str, claim: str) -> None:
    """The model cards' "backbone" figures: no embeddings (V·E and their LayerNorm), the relative position
    embeddings kept, and the pre-training checkpoint's head counted: the fewest assumptions that give each."""
    cfg = config(preset)
    result = audit(parse_claim(claim), cfg)
    assert result.matches and result.matches[0].conventions == ("no-embeddings", "pretraining-heads")
    assert result.matches[0].changes["embeddings"] == -build_tree(cfg).groups()["embeddings"]


def test_deberta_diff_matches_its_projections_by_role() -> None:
    """DeBERTa's query_proj is BERT's self.query: what differs is what DeBERTa adds or drops, not every layer."""
    a, b = build_tree(config("bert-base-uncased")), build_tree(config("deberta-v3-base"))
    result = diff(a, b)
    assert sum(p.delta for p in result.params) == b.total - a.total
    names = {row.name for row in result.rows()}
    assert names == {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                     "embeddings.token_type_embeddings.weight", "encoder.rel_embeddings.weight",
                     "encoder.LayerNorm.weight", "encoder.LayerNorm.bias", "pooler.dense.weight", "pooler.dense.bias"}
