"""ELECTRA (models/electra): embeddings E wide projected to H, a generator's LM head, a discriminator."""

from __future__ import annotations

from .bert import POOLERS
from .record import Family, Forward

ELECTRA = Family(
    "electra", "Electra", "electra", {head: False for head in POOLERS if head != "next-sentence"},
    fields=("embedding_size",),
    switches=("add_cross_attention",),
    defaults={"embedding_size": 128, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    own_classes={"causal-lm": "ForCausalLM"},
    lora_targets=("query", "value"),
    # the generator's head (LayerNorm, H → E), the replaced-token discriminator, gelu in its heads
    forward=Forward(lm_head="narrow", discriminator=True, classifier="dense", head_activation="gelu",
                    projection="E≠H", mask_after_projection=True),
)
