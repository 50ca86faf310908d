"""DeBERTa-v2 (models/deberta_v2): disentangled attention over relative positions, switches written as words in
its config.json, a convolution beside the first layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .record import Family, Forward

POS_ATT_TYPES = ("c2p", "p2c")
WORDS = ("pos_att_c2p", "pos_att_p2c", "norm_rel_ebd")  # switches its config.json writes as words
# Keys counted at one value only, and why.
ONLY = {"attention_head_size": "counted when it is H / A (the only width its output projection accepts)",
        "pooler_hidden_size": "counted when it is H (the classifier reads H)", "conv_groups": "counted when 1"}


def read_words(data: Mapping[str, Any], hidden: int, heads: int) -> dict[str, Any]:
    """`pos_att_type` ("p2c|c2p" or a list) and `norm_rel_ebd` as the switches, and the keys counted only at one
    value (a ConfigError naming the key otherwise: its rule follows the value)."""
    values: dict[str, Any] = {}
    kinds = data.get("pos_att_type")
    if isinstance(kinds, str):
        kinds = [kind.strip() for kind in kinds.lower().split("|")]
    if kinds is None:
        kinds = []
    if not isinstance(kinds, list) or not all(isinstance(kind, str) and kind in POS_ATT_TYPES for kind in kinds):
        raise ConfigError("pos_att_type", data["pos_att_type"],
                          f"must be a list of (or '|'-separated) {' and '.join(POS_ATT_TYPES)}")
    values.update(pos_att_c2p="c2p" in kinds, pos_att_p2c="p2c" in kinds)
    norm = data.get("norm_rel_ebd", "none")
    if not isinstance(norm, str):
        raise ConfigError("norm_rel_ebd", norm, "must be a string such as 'layer_norm'")
    values["norm_rel_ebd"] = "layer_norm" in [word.strip() for word in norm.lower().split("|")]
    counted = {"attention_head_size": hidden // heads if heads > 0 else None, "pooler_hidden_size": hidden,
               "conv_groups": 1}
    for key, only in counted.items():
        if key in data and data[key] != only:
            raise ConfigError(key, data[key], f"is not counted: bert-tui counts {key} = {only} only ({ONLY[key]})")
    return values


def write_words(config: Any) -> dict[str, Any]:
    """The switches as its config class takes them (the inverse of `read_words`), and its −1s for none."""
    return {"pos_att_type": [kind for kind in POS_ATT_TYPES if getattr(config, f"pos_att_{kind}")],
            "norm_rel_ebd": "layer_norm" if config.norm_rel_ebd else "none",
            "position_buckets": config.position_buckets or -1,
            "max_relative_positions": config.max_relative_positions or -1}


DEBERTA = Family(
    "deberta-v2", "DebertaV2", "deberta",
    # its ContextPooler (`pooler.dense`) belongs to the sequence and multiple-choice classes
    {"none": False, "mlm": False, "sequence-classification": True, "token-classification": False,
     "question-answering": False, "multiple-choice": True},
    fields=("embedding_size", "position_buckets", "max_relative_positions", "conv_kernel_size"),
    switches=("relative_attention", "share_att_key", "pos_att_c2p", "pos_att_p2c", "norm_rel_ebd",
              "position_biased_input", "legacy"),
    defaults={"vocab_size": 128100, "hidden_size": 1536, "num_hidden_layers": 24, "num_attention_heads": 24,
              "intermediate_size": 6144, "type_vocab_size": 0},
    zero_types=True,
    lora_targets=("query_proj", "value_proj"),
    ia3_targets=("key_proj", "value_proj", "output.dense"), ia3_feedforward=("output.dense",),
    roles=((r"\.attention\.self\.(query|key|value)_proj\.", r".attention.self.\1."),),
    forward=Forward(layer="DebertaV2Layer", projection="E≠H", eager_only=True, reads_values=True),
    words=WORDS,
    read_words=read_words,
    write_words=write_words,
)
