"""The counting core on its own: validation, leaves that explain themselves, closed form, margins, memory."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core import (
    FAMILIES,
    BertConfig,
    ConfigError,
    Module,
    Param,
    build_tree,
    closed_form_symbols,
    closed_form_total,
    marginal_costs,
    memory_bytes,
    per_layer,
    report,
    training_bytes,
)
from tui.core.config import (
    CROSS_FLAGS,
    FLAG_FIELDS,
    MAX_LAYERS,
    MAX_SIZE,
    families_with,
)


@st.composite
def valid_configs(draw: st.DrawFn) -> BertConfig:
    heads = draw(st.integers(1, 64))
    model_type = draw(st.sampled_from(list(FAMILIES)))
    head = draw(st.sampled_from(list(FAMILIES[model_type].heads)))
    labelled_qa = (model_type, head) == ("distilbert", "question-answering")
    return BertConfig(
        vocab_size=draw(st.integers(1, 300_000)),
        hidden_size=heads * draw(st.integers(1, 256)),
        num_hidden_layers=draw(st.integers(1, 48)),
        num_attention_heads=heads,
        intermediate_size=draw(st.integers(1, 65_536)),
        max_position_embeddings=draw(st.integers(1, 16_384)),
        type_vocab_size=draw(st.integers(0 if FAMILIES[model_type].zero_types else 1, 64)),
        head=head,
        pooler=draw(st.booleans()) if head == "none" else True,
        num_labels=2 if labelled_qa else draw(st.integers(1, 1000)),
        model_type=model_type,
        tie_word_embeddings=draw(st.booleans()),
        embedding_size=draw(st.integers(0, 1024)),
        num_hidden_groups=draw(st.integers(1, 4)),
        inner_group_num=draw(st.integers(1, 4)),
        relative_attention_num_buckets=draw(st.integers(1, 128)),
        position_buckets=draw(st.integers(0, 512)),
        max_relative_positions=draw(st.integers(0, 2048)),
        conv_kernel_size=draw(st.integers(0, 7)),
        **{flag: draw(st.booleans()) for flag in FLAG_FIELDS if flag not in CROSS_FLAGS},
        add_cross_attention=model_type in families_with("add_cross_attention") and draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(valid_configs())
def test_closed_form_equals_tree_sum_and_json_total(config: BertConfig) -> None:
    tree = build_tree(config)
    assert closed_form_total(config) == tree.total == sum(p.numel for p in tree.unique_params())
    assert report(tree)["total"] == tree.total == sum(tree.groups().values())


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size", "num_labels", "head", "pooler"]),
    st.one_of(st.integers(-10**40, 10**40), st.text(max_size=12), st.floats(allow_nan=True), st.booleans(), st.none()),
))
def test_any_input_is_a_config_or_a_config_error(data: dict[str, object]) -> None:
    try:
        config = BertConfig.from_mapping(data)
    except ConfigError as error:
        assert error.field in data or error.field in ("hidden_size", "pooler")
        assert str(error).startswith(f"{error.field} = ")
    else:
        assert build_tree(config).total == closed_form_total(config)


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"hidden_size": 770}, "hidden_size", "multiple of num_attention_heads (12), e.g. 768 or 780"),
        ({"num_attention_heads": 0}, "num_attention_heads", "between 1 and"),
        ({"vocab_size": -1}, "vocab_size", "between 1 and"),
        ({"vocab_size": 10**30}, "vocab_size", f"between 1 and {MAX_SIZE:,}"),
        ({"num_hidden_layers": 0}, "num_hidden_layers", f"between 1 and {MAX_LAYERS:,}"),
        ({"num_hidden_layers": MAX_LAYERS + 1}, "num_hidden_layers", f"between 1 and {MAX_LAYERS:,}"),
        ({"intermediate_size": 1.5}, "intermediate_size", "whole number"),
        ({"intermediate_size": "abc"}, "intermediate_size", "whole number"),
        ({"type_vocab_size": True}, "type_vocab_size", "whole number"),
        ({"head": "lm"}, "head", "must be one of: none, mlm"),
        ({"head": "sequence-classification", "pooler": False}, "pooler", "always builds the pooler"),
        ({"pooler": "yes"}, "pooler", "true or false"),
        ({"num_labels": 0}, "num_labels", "between 1 and"),
    ],
)
def test_invalid_values_name_field_value_and_rule(changes: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BertConfig.from_mapping(changes)
    assert caught.value.field == field
    assert fragment in caught.value.rule
    assert repr(caught.value.value) in str(caught.value)


def test_text_numbers_are_accepted_as_typed() -> None:
    assert BertConfig.from_mapping({"vocab_size": " 40_000 "}).vocab_size == 40000


def test_leaves_explain_themselves() -> None:
    params = {p.name: p for p in build_tree(BertConfig()).root.params()}
    ffn = params["encoder.layer.0.intermediate.dense.weight"]
    assert ffn.formula == "I × H = 3072 × 768 = 2,359,296"
    assert (ffn.kind, ffn.count, ffn.head_split) == ("weight", 2_359_296, None)
    query = params["encoder.layer.3.attention.self.query.weight"]
    assert query.head_split == "12 heads × [64, 768]"
    assert params["encoder.layer.3.attention.self.query.bias"].head_split == "12 heads × [64]"
    assert params["embeddings.word_embeddings.weight"].kind == "embedding"
    assert params["embeddings.LayerNorm.weight"].kind == "norm"
    assert params["pooler.dense.bias"].formula == "H = 768"


def test_tied_decoder_leaves_add_nothing_and_name_their_source() -> None:
    tree = build_tree(BertConfig(head="mlm"))
    tied = {p.name: p for p in tree.tied_params()}
    assert tied["cls.predictions.decoder.weight"].tied_to == "bert.embeddings.word_embeddings.weight"
    assert tied["cls.predictions.decoder.bias"].tied_to == "cls.predictions.bias"
    assert all(p.count == 0 and p.numel > 0 for p in tied.values())


def test_groups_and_closed_form_in_symbols() -> None:
    config = BertConfig()
    assert build_tree(config).groups() == {"embeddings": 23_837_184, "encoder": 85_054_464, "pooler": 590_592}
    assert closed_form_symbols(config) == "(V + P + T)·H + 2H + L·(4H² + 2H·I + 9H + I) + H² + H"
    assert build_tree(config.replace(head="token-classification")).groups()["pooler"] == 0


def test_marginal_costs_are_exact_differences() -> None:
    config = BertConfig()
    costs = {m.field: m for m in marginal_costs(config)}
    assert costs["num_hidden_layers"].delta == per_layer(config) == 7_087_872
    assert costs["vocab_size"].delta == 768
    assert costs["num_attention_heads"].delta == 0
    assert "add no parameters" in costs["num_attention_heads"].note
    step = closed_form_total(config.replace(hidden_size=780)) - closed_form_total(config)
    assert (costs["hidden_size"].delta, costs["hidden_size"].step) == (step, 12)
    assert "num_labels" not in costs
    labels = {m.field: m for m in marginal_costs(config.replace(head="sequence-classification"))}
    assert labels["num_labels"].delta == 769


@pytest.mark.parametrize("changes", [
    {"num_hidden_layers": 10_000}, {"num_hidden_layers": 9_999}, {"num_hidden_layers": 1},
    {"vocab_size": 2**31 - 1}, {"vocab_size": 1}, {"intermediate_size": 2**31 - 1},
    {"max_position_embeddings": 2**31 - 1}, {"type_vocab_size": 2**31 - 1},
    {"hidden_size": 2**31 - 1, "num_attention_heads": 1}, {"hidden_size": 12},
])
def test_every_marginal_cost_is_its_own_fields_at_the_limits(changes: dict[str, int]) -> None:
    """At a field's maximum no +1 exists: the cost says so and gives what the last step added, never another
    field's cost (layers at 10,000 showed hidden size's +1.48 B / 12 H)."""
    config = BertConfig(**changes)
    base = closed_form_total(config)
    for cost in marginal_costs(config):
        if cost.field == "num_attention_heads":
            continue
        if cost.note == "switch":  # a family's switch: what it adds when on, the rest as it is
            on, off = (closed_form_total(config.replace(**{cost.field: value})) for value in (True, False))
            assert cost.delta == on - off
            continue
        current = getattr(config, cost.field)
        if cost.at_limit:
            with pytest.raises(ConfigError):
                config.replace(**{cost.field: current + cost.step})
            assert cost.delta == base - closed_form_total(config.replace(**{cost.field: current - cost.step}))
        else:
            assert cost.delta == closed_form_total(config.replace(**{cost.field: current + cost.step})) - base
    layers = next(cost for cost in marginal_costs(config) if cost.field == "num_hidden_layers")
    assert layers.step == 1 and layers.at_limit == (config.num_hidden_layers == 10_000)


def test_memory_per_dtype_and_training() -> None:
    total = build_tree(BertConfig()).total
    assert memory_bytes(total) == {
        "float32": 4 * total, "float16": 2 * total, "bfloat16": 2 * total, "int8": total, "int4": total // 2,
    }
    assert memory_bytes(3)["int4"] == 2  # two a byte, rounded up
    assert training_bytes(total) == 16 * total


def test_config_is_immutable() -> None:
    config = BertConfig()
    with pytest.raises(AttributeError):
        config.hidden_size = 1024  # type: ignore[misc]


def test_find_reaches_any_node_by_its_hf_name() -> None:
    tree = build_tree(BertConfig(head="pretraining"))
    for node in [*tree.root.modules(), *tree.root.params()]:
        assert tree.find(node.name) is node
    assert tree.find("bert.encoder.layer.12.output.dense.weight") is None  # 12 layers: 0 … 11
    assert tree.find("encoder.layer.0") is None  # head classes prefix `bert.`


def test_layers_are_built_only_when_reached() -> None:
    tree = build_tree(BertConfig(num_hidden_layers=MAX_LAYERS))
    assert tree.total == closed_form_total(tree.config)
    query = tree.find(f"encoder.layer.{MAX_LAYERS - 1}.attention.self.query.weight")
    assert isinstance(query, Param) and query.shape == (768, 768)
    encoder = tree.find("encoder")
    assert isinstance(encoder, Module) and len(encoder.children._built) == 2  # type: ignore[union-attr]


@settings(max_examples=100, deadline=None)
@given(valid_configs())
def test_groups_equal_the_sum_of_their_parameters(config: BertConfig) -> None:
    tree = build_tree(config)
    by_param: dict[str, int] = {}
    for param in tree.root.params():
        by_param[param.group] = by_param.get(param.group, 0) + param.count
    assert {g: n for g, n in tree.groups().items() if n} == {g: n for g, n in by_param.items() if n}


@settings(max_examples=50, deadline=None)
@given(valid_configs())
def test_module_tensor_counts_match_the_leaves(config: BertConfig) -> None:
    tree = build_tree(config)
    for module in tree.root.modules():
        params = list(module.params())
        assert module.tensors == sum(not p.tied_to for p in params)
        assert module.tied == sum(bool(p.tied_to) for p in params)
