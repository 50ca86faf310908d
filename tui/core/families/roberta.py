"""RoBERTa and the classes generated from its code (models/roberta, xlm_roberta, camembert): BERT's modules, the
positions made from the ids, a classification head of its own, no next-sentence heads."""

from __future__ import annotations

from .bert import POOLERS
from .record import Family, Forward

HEADS = {head: pooler for head, pooler in POOLERS.items() if head not in ("pretraining", "next-sentence")}
HEADS["sequence-classification"] = False  # RobertaForSequenceClassification builds its body without the pooler
FORWARD = Forward(positions_from_ids=True, position_table_last=True, classifier="dense")
# XLM-RoBERTa's and CamemBERT's generated classes assign the head before the body (it owns the tied table).
HEAD_FIRST = Forward(positions_from_ids=True, position_table_last=True, classifier="dense", head_first=True)
CAUSAL = {"causal-lm": "ForCausalLM"}
CROSS = ("add_cross_attention",)

ROBERTA = Family(
    "roberta", "Roberta", "roberta", HEADS, switches=CROSS, defaults={"vocab_size": 50265}, own_classes=CAUSAL,
    bert_names=True, forward=FORWARD, lora_targets=("query", "value"),
    ia3_targets=("key", "value", "output.dense"), ia3_feedforward=("output.dense",),
)
XLM_ROBERTA = Family(
    "xlm-roberta", "XLMRoberta", "roberta", HEADS, switches=CROSS, own_classes=CAUSAL, bert_names=True,
    forward=HEAD_FIRST, lora_targets=("query", "value"),
)
CAMEMBERT = Family(
    "camembert", "Camembert", "roberta", HEADS, switches=CROSS, own_classes=CAUSAL, bert_names=True,
    forward=HEAD_FIRST,
)
