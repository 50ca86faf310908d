"""The heads: each head class BERT has, named once (the families' classes are these, renamed by their record)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HeadSpec:
    """One head choice: the HF class it counts as, and what that class builds."""

    name: str
    hf_class: str
    pooler: bool | None  # None: the user chooses (BertModel only)
    uses_num_labels: bool


HEADS: dict[str, HeadSpec] = {
    spec.name: spec
    for spec in (
        HeadSpec("none", "BertModel", None, False),
        HeadSpec("mlm", "BertForMaskedLM", False, False),
        HeadSpec("causal-lm", "BertLMHeadModel", False, False),
        HeadSpec("pretraining", "BertForPreTraining", True, False),
        HeadSpec("sequence-classification", "BertForSequenceClassification", True, True),
        HeadSpec("token-classification", "BertForTokenClassification", False, True),
        HeadSpec("question-answering", "BertForQuestionAnswering", False, True),
        HeadSpec("multiple-choice", "BertForMultipleChoice", True, False),
        HeadSpec("next-sentence", "BertForNextSentencePrediction", True, False),
    )
}
LM_HEADS = ("mlm", "pretraining", "causal-lm")  # the heads with a vocabulary decoder (tied unless untied)
