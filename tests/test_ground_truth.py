"""DESIGN.md's ground-truth table, read from the fixtures that transformers wrote, reproduced by the core."""

from __future__ import annotations

import pytest

from tui.core import BertConfig, build_tree
from tui.presets import load_catalog

from .hf_cases import load_hf_cases

HF_TOTALS = {case["id"]: case["total"] for case in load_hf_cases()}


@pytest.mark.parametrize(
    ("case_id", "design_figure"),
    [
        ("bert-base-uncased/none", "109,482,240"),
        ("bert-large-uncased/none", "335,141,888"),
        ("example-40k/none", "88,409,856"),
        ("bert-base-uncased/none-no-pooler", "108,891,648"),
        ("bert-base-uncased/mlm", "109,514,298"),
        ("bert-base-uncased/pretraining", "110,106,428"),
        ("bert-base-uncased/sequence-classification", "109,483,778"),
        ("bert-base-uncased/token-classification", "108,893,186"),
        ("bert-base-uncased/question-answering", "108,893,186"),
        ("bert-base-uncased/multiple-choice", "109,483,009"),
    ],
)
def test_design_table_agrees_with_transformers_and_core(case_id: str, design_figure: str) -> None:
    """The published figure, the transformers fixture and the core all say the same number."""
    preset, variant = case_id.split("/")
    base = load_catalog().get(preset).config
    config = base.replace(pooler=False) if variant == "none-no-pooler" else base.replace(head=variant)
    assert HF_TOTALS[case_id] == int(design_figure.replace(",", ""))
    assert build_tree(config).total == HF_TOTALS[case_id]


def test_bert_base_has_199_parameters_and_its_first_and_last_names() -> None:
    params = build_tree(BertConfig()).unique_params()
    assert len(params) == 199
    assert (params[0].name, params[0].shape) == ("embeddings.word_embeddings.weight", (30522, 768))
    assert (params[-1].name, params[-1].shape) == ("pooler.dense.bias", (768,))
