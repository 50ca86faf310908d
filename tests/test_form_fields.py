"""The config form's pure helpers (tui/explorer/widgets/form_fields.py), without Pilot: what the form reads from
its fields, the pooler's state, the head's choices and the text beside each field."""

from __future__ import annotations

import pytest

from tui.core import BertConfig, ConfigError, marginal_costs
from tui.core.config import FAMILIES
from tui.explorer.widgets.form_fields import (
    as_read,
    config_from_fields,
    cost_text,
    family_switched,
    field_label,
    field_value,
    first_line,
    form_flags,
    head_choices,
    pooler_state,
)
from tui.presets import load_catalog


@pytest.mark.parametrize("name", sorted(load_catalog().presets))
def test_a_preset_reads_back_from_its_fields_as_the_same_model(name: str) -> None:
    """A size left to its default (E following H) is read as the number its field shows: the same model, and
    read again, the same config."""
    from tui.core import build_tree

    config = load_catalog().get(name).config
    read = as_read(config)
    assert build_tree(read).total == build_tree(config).total and read.hf_class == config.hf_class
    assert as_read(read) == read
    assert all(field_value(read, field) == field_value(config, field) for field in config.fields)


def test_the_fields_are_read_over_the_last_config_and_validated_by_the_core() -> None:
    base = BertConfig()
    read = config_from_fields({"hidden_size": "1024", "num_attention_heads": "16", "head": "mlm"}, base)
    assert (read.hidden_size, read.num_attention_heads, read.head, read.pooler) == (1024, 16, "mlm", True)
    with pytest.raises(ConfigError) as refused:
        config_from_fields({"hidden_size": "770"}, base)
    assert refused.value.field == "hidden_size"
    assert config_from_fields({"model_type": "roberta"}, base.replace(add_cross_attention=True)).add_cross_attention
    assert not config_from_fields({"model_type": "distilbert"}, base).add_cross_attention


def test_the_pooler_switch_says_who_decides_it() -> None:
    assert pooler_state("bert", "none", False) == (False, False, "off: adds H² + H")
    assert pooler_state("bert", "sequence-classification", False) == (True, True, "on: fixed by head")
    assert pooler_state("roberta", "mlm", True)[:2] == (False, True)


def test_every_family_names_its_heads_and_shows_its_own_switches() -> None:
    for family in FAMILIES:
        config = BertConfig(model_type=family, **({"type_vocab_size": 0} if family == "deberta-v2" else {}))
        choices = dict((name, label) for label, name in head_choices(config))
        assert choices["none"].startswith("none (") and choices["none"].endswith("Model)")
        assert "add_cross_attention" not in form_flags(family)


def test_cost_texts_from_the_core_s_marginals() -> None:
    costs = {m.field: cost_text(m) for m in marginal_costs(BertConfig())}
    assert costs["num_hidden_layers"] == "+7.09 M/layer" and costs["num_attention_heads"] == "+0: split H"
    assert costs["hidden_size"].endswith("/12 H")  # H must stay a multiple of A: the next valid H
    assert cost_text(next(m for m in marginal_costs(BertConfig(num_hidden_layers=10_000))
                          if m.field == "num_hidden_layers")).startswith("max · +")


def test_labels_values_and_cut_text() -> None:
    assert field_label("hidden_size") == "hidden H"
    assert field_value(BertConfig(model_type="electra"), "embedding_size") == 768
    assert first_line("conv kernel C", 12) == "conv kernel"
    assert first_line("+1.54 K/bucket and more", 10, ellipsis=True) == "+1.54 K/b…"


def test_a_family_switch_carries_what_both_have_and_takes_the_head_asked_where_it_can() -> None:
    """The family select: the core's `as_family` of what the form holds, then the head the head select asks
    (possibly refused by the old family) where the new family has that class and takes it."""
    bert = BertConfig(hidden_size=512, num_attention_heads=8, intermediate_size=2048, head="mlm")
    distil = family_switched(bert, "distilbert", "mlm")
    assert (distil.model_type, distil.hidden_size, distil.intermediate_size, distil.head) == ("distilbert", 512, 2048, "mlm")
    # next-sentence: asked while DistilBERT (which has no such class) was shown, taken once BERT is
    back = family_switched(distil, "bert", "next-sentence")
    assert (back.model_type, back.head, back.hidden_size) == ("bert", "next-sentence", 512)
    # a head the new family lacks: its own head stands (as_family's)
    assert family_switched(bert, "distilbert", "next-sentence") == bert.as_family("distilbert")
    # DistilBERT's question answering takes 2 labels only: with 3, the family's own head stands
    three = BertConfig(num_labels=3)
    assert family_switched(three, "distilbert", "question-answering") == three.as_family("distilbert")
    with pytest.raises(ConfigError):
        three.as_family("distilbert").replace(head="question-answering")
