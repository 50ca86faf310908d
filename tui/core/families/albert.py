"""ALBERT (models/albert): factorized embeddings, layers stored in groups and shared, a sentence-order head."""

from __future__ import annotations

from .bert import POOLERS
from .record import Family, Forward, StepKeys

ALBERT = Family(
    "albert", "Albert", "albert",
    {head: pooler for head, pooler in POOLERS.items() if head not in ("causal-lm", "next-sentence")},
    fields=("embedding_size", "num_hidden_groups", "inner_group_num"),
    defaults={"vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096, "num_attention_heads": 64,
              "intermediate_size": 16384},
    layer_stack="encoder.albert_layer_groups",
    roles=(
        (r"\.attention\.(query|key|value)\.", r".attention.self.\1."),
        (r"\.attention\.dense\.", ".attention.output.dense."),
        (r"\.attention\.LayerNorm\.", ".attention.output.LayerNorm."),
        (r"\.ffn\.", ".intermediate.dense."),
        (r"\.ffn_output\.", ".output.dense."),
        (r"\.full_layer_layer_norm\.", ".output.LayerNorm."),
        (r"^pooler\.", "pooler.dense."),
    ),
    grouped_layers=r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.",
    # shared layers, gelu_new written out, no dropout but the classifier's; its pre-training's sentence order
    forward=Forward(layer="AlbertLayer", lm_head="narrow-bias-first", sentence_order=True, projection="always",
                    shared_layers=True, encoder_dropout=False, activation="gelu_new"),
    step_keys=StepKeys(activation_value="gelu_new", dropout_free=True),
)
