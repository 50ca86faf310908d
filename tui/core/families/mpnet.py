"""MPNet (models/mpnet): a relative position bias shared by the layers, positions from the ids, no token types."""

from __future__ import annotations

from .record import Family, Forward

MPNET = Family(
    "mpnet", "MPNet", "mpnet",
    {"none": None, "mlm": False, "sequence-classification": False, "token-classification": False,
     "question-answering": False, "multiple-choice": True},
    fields=("relative_attention_num_buckets",),
    lacks=("type_vocab_size",),
    defaults={"vocab_size": 30527},
    roles=(
        (r"\.attention\.attn\.q\.", ".attention.self.query."),
        (r"\.attention\.attn\.k\.", ".attention.self.key."),
        (r"\.attention\.attn\.v\.", ".attention.self.value."),
        (r"\.attention\.attn\.o\.", ".attention.output.dense."),
        (r"\.attention\.LayerNorm\.", ".attention.output.LayerNorm."),
    ),
    forward=Forward(layer="MPNetLayer", positions_from_ids=True, positions_add_past=False, token_types=False,
                    classifier="dense", relative_bias=True,
                    eager_only=True),
)
