"""The pure core: the config (shared), the counting room (`count`) and the step room (`step`). Imports neither textual
nor rich; what is re-exported here is the counting API."""

from .config import (
    FAMILIES,
    HEADS,
    SIZE_FIELDS,
    SYMBOLS,
    BertConfig,
    ConfigError,
    HeadSpec,
)
from .count.families import build_tree
from .count.report import config_dict, report
from .count.totals import (
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
from .count.tree import GROUPS, Module, Node, Param, ParamTree
from .units import short_bytes, short_count

__all__ = [
    "ADAM_CONVENTION", "FAMILIES", "GROUPS", "LAYER_SYMBOLS", "HEADS", "SIZE_FIELDS", "SYMBOLS", "BertConfig", "ConfigError", "HeadSpec",
    "Marginal", "Module", "Node", "Param", "ParamTree", "Term", "build_tree", "closed_form", "closed_form_symbols",
    "closed_form_total", "config_dict", "marginal_costs", "memory_bytes", "per_layer", "report", "short_bytes",
    "short_count", "training_bytes",
]
