"""The pure counting core: config, parameter tree, closed forms, memory. Imports neither textual nor rich."""

from .config import HEADS, MODEL_TYPES, SIZE_FIELDS, SYMBOLS, BertConfig, ConfigError, HeadSpec
from .report import config_dict, report
from .totals import (
    ADAM_CONVENTION,
    LAYER_SYMBOLS,
    Marginal,
    Term,
    closed_form,
    closed_form_symbols,
    closed_form_total,
    marginal_costs,
    memory_bytes,
    per_layer,
    training_bytes,
)
from .families import build_tree
from .tree import GROUPS, Module, Node, Param, ParamTree
from .units import short_bytes, short_count

__all__ = [
    "ADAM_CONVENTION", "GROUPS", "MODEL_TYPES", "LAYER_SYMBOLS", "HEADS", "SIZE_FIELDS", "SYMBOLS", "BertConfig", "ConfigError", "HeadSpec",
    "Marginal", "Module", "Node", "Param", "ParamTree", "Term", "build_tree", "closed_form", "closed_form_symbols",
    "closed_form_total", "config_dict", "marginal_costs", "memory_bytes", "per_layer", "report", "short_bytes",
    "short_count", "training_bytes",
]
