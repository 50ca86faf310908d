"""The step's symbols and the config's facts: their values for a config and a workload, and what no gradient reaches.

b, b' (sequences: b·c for multiple choice), s, n = b'·s, H, E, I, A, V, N, c (choices), L (the config's layers), K
(the layers each of them runs: ALBERT's per group, 1 elsewhere; a layer's terms count L·K times), S (stored layers),
D, d, Ll and Y (ModernBERT's local layers and layer types), s₁₆ and s₃₂ (s rounded up to 16 and 32). The symbols the
counting room also writes (H, E, I, A, V, N, L, K, D) mean what they mean there.
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from ..config import LM_HEADS, BertConfig
from ..facts import holds
from .kinds import Saved
from .layouts import STEPS
from .workload import Workload


def symbol_values(config: BertConfig, workload: Workload) -> dict[str, int]:
    """Values of the symbols: b' is the number of sequences (b·c for multiple choice), n = b'·s tokens."""
    sequences = workload.batch * (workload.choices if config.head == "multiple-choice" else 1)
    return {"b": workload.batch, "b'": sequences, "s": workload.seq, "n": sequences * workload.seq,
            "s₁₆": -(-workload.seq // 16) * 16, "s₃₂": -(-workload.seq // 32) * 32,
            "H": config.hidden_size, "E": config.embedding_width, "I": config.intermediate_size,
            "A": config.num_attention_heads, "V": config.vocab_size, "N": config.num_labels, "c": workload.choices,
            "L": config.num_hidden_layers, "K": runs_per_layer(config), "S": stored_layers(config),
            "D": config.relative_span,
            "d": config.hidden_size // config.num_attention_heads, **layer_types(config),
            "1": 1, "2": 2}


def attention_run(config: BertConfig, workload: Workload) -> Workload:
    """The workload as the attention runs it: the math path for a family transformers has no sdpa for."""
    if config.family.forward.eager_only and workload.attention != "eager":
        return replace(workload, attention="eager")
    return workload


def runs_per_layer(config: BertConfig) -> int:
    """K: the encoder layers each of the config's L runs (ALBERT: a group of K stored layers; 1 elsewhere)."""
    return config.inner_group_num if config.family.forward.shared_layers else 1


def layer_runs(config: BertConfig) -> int:
    """L·K: how many times an encoder layer runs (ALBERT runs each of its G groups of K layers L/G times)."""
    return config.num_hidden_layers * runs_per_layer(config)


def stored_layers(config: BertConfig) -> int:
    """S: the encoder layers stored (ALBERT's G·K; every other family stores each layer it runs)."""
    if config.family.forward.shared_layers:
        return config.num_hidden_groups * config.inner_group_num
    return layer_runs(config)


GLOBAL_EVERY = 3  # ModernBERT's global_attn_every_n_layers (other values are refused through `step_keys`)
HALF_WINDOW = 64  # ModernBERT's local_attention // 2: from this length on, a local layer's mask is not all ones


def layer_types(config: BertConfig) -> dict[str, int]:
    """Ll, the local (sliding-window) layers, and Y, the layer types present (ModernBERT; elsewhere 0 and 1)."""
    if not STEPS[config.model_type].layer_types:
        return {"Ll": 0, "Y": 1}
    layers = config.num_hidden_layers
    local = layers - -(-layers // GLOBAL_EVERY)  # layer i is global when i % 3 == 0
    return {"Ll": local, "Y": 1 + (local > 0)}


def additive_mask(config: BertConfig, workload: Workload) -> bool:
    """Whether eager attention adds a float mask to its scores: a padding mask, or the causal mask of a decoder
    (a family that fills its scores through a boolean mask keeps their dtype)."""
    return (workload.attention == "eager" and (workload.padded or config.head == "causal-lm")
            and not STEPS[config.model_type].boolean_mask)


def config_facts(config: BertConfig) -> dict[str, bool]:
    """The config's facts the modules' conditions read (the workload's are `_step`'s)."""
    return {"regression": config.num_labels == 1, "project": projects(config),
             "one_head": config.num_attention_heads == 1,
             "token_types": config.type_vocab_size > 0, "relative": config.relative_attention,
             "c2p": config.pos_att_c2p, "p2c": config.pos_att_p2c, "share": config.share_att_key,
             "norm_rel": config.norm_rel_ebd, "position_biased": config.position_biased_input,
             "pos_key": config.relative_attention and (config.share_att_key or config.pos_att_c2p),
             "pos_query": config.relative_attention and (config.share_att_key or config.pos_att_p2c),
             "pos_proj": config.relative_attention and (config.share_att_key or config.pos_att_c2p
                                                        or config.pos_att_p2c)}


def projects(config: BertConfig) -> bool:
    """Whether a projection maps the embeddings (E wide) to the encoder's H."""
    projection = config.family.forward.projection
    return projection == "always" or (projection == "E≠H" and config.embedding_width != config.hidden_size)


def unused(config: BertConfig) -> tuple[int, int]:
    """(elements, tensors) of parameters the forward never uses, so no gradient and no optimizer state.

    An untied LM head builds `cls.predictions.bias` and a decoder bias of its own; the forward uses the decoder's.
    A family may build parameters its step does not use (DeBERTa's relative embeddings and their LayerNorm
    without a score type that reads them: `StepLayout.unused`).
    """
    elements, tensors = 0, 0
    if config.head in LM_HEADS and not config.tie_word_embeddings:
        elements, tensors = config.vocab_size, 1
    facts, values = config_facts(config), symbol_values(config, Workload(1, 1))
    for part in STEPS[config.model_type].unused:
        if holds(facts, part.when):
            elements, tensors = elements + prod(values[f] for f in part.factors), tensors + part.tensors
    return elements, tensors


def unused_modules(config: BertConfig) -> tuple[str, ...]:
    """The modules (under the body) whose parameters the step never reaches (`StepLayout.unused`)."""
    facts = config_facts(config)
    return tuple(part.module for part in STEPS[config.model_type].unused if part.module and holds(facts, part.when))


_BATCH_FACTORS = frozenset(("b", "b'", "n"))


def per_b(term: Saved) -> bool:
    """Whether a saved term grows with the batch (one of b, b', n among its factors; else it is free of b)."""
    return bool(_BATCH_FACTORS.intersection(term.factors))
