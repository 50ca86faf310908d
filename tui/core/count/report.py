"""The counted model as plain data: the JSON contract of DESIGN.md, shared by every export format."""

from __future__ import annotations

from typing import Any

from ..config import CROSS_FLAGS, BertConfig
from .totals import (
    ADAM_CONVENTION,
    closed_form_symbols,
    layer_sharing,
    memory_bytes,
    training_bytes,
)
from .tree import ParamTree


def config_dict(config: BertConfig) -> dict[str, Any]:
    """HF's keys plus head, pooler (as built) and num_labels."""
    data: dict[str, Any] = {name: getattr(config, name) for name in config.fields}
    if "embedding_size" in data:
        data["embedding_size"] = config.embedding_width
    data.update({flag: getattr(config, flag) for flag in config.switches
                 if flag not in CROSS_FLAGS or getattr(config, flag)})  # a decoder's cross-attention where on
    data.update(head=config.head, pooler=config.has_pooler, num_labels=config.num_labels, model_type=config.model_type,
                tie_word_embeddings=config.tie_word_embeddings)
    return data


def report(tree: ParamTree) -> dict[str, Any]:
    """One JSON-ready object: model, config, total, parameters in model order, tied, groups, memory."""
    total = tree.total
    sharing = layer_sharing(tree.config, total)
    extra = {} if sharing is None else {"layer_sharing": {"stored": sharing.stored, "runs": sharing.runs,
                                                          "per_layer": sharing.per_layer, "unshared_total": sharing.unshared}}
    return {
        "model": tree.config.hf_class,
        "config": config_dict(tree.config),
        "total": total,
        "formula": closed_form_symbols(tree.config),
        "parameters": [
            {"name": p.name, "shape": list(p.shape), "count": p.count, "kind": p.kind} for p in tree.unique_params()
        ],
        "tied": [{"name": p.name, "tied_to": p.tied_to} for p in tree.tied_params()],
        "groups": tree.groups(),
        "memory_bytes": memory_bytes(total),
        "training_bytes": {"adam_mixed_precision": training_bytes(total), "convention": ADAM_CONVENTION},
        **extra,
    }

