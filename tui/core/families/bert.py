"""BERT (transformers' models/bert): the family every other is described against."""

from __future__ import annotations

from .record import Family

POOLERS: dict[str, bool | None] = {"none": None, "mlm": False, "causal-lm": False, "pretraining": True,
                                   "sequence-classification": True, "token-classification": False,
                                   "question-answering": False, "multiple-choice": True, "next-sentence": True}

BERT = Family(
    "bert", "Bert", "bert", POOLERS,
    switches=("add_cross_attention",),
    bert_names=True,
    lora_targets=("query", "value"),
    ia3_targets=("key", "value", "output.dense"), ia3_feedforward=("output.dense",),
)
