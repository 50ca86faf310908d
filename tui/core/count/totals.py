"""Closed forms, marginal costs and memory: the totals written as algebra, independent of the tree.

The closed form is derived by hand from the HF modules, not by summing the tree, so that the two can check
each other (a hypothesis test asserts they agree for every valid config).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BertConfig, ConfigError
from .families import derived_closed_form

LAYER_SYMBOLS = "4H² + 2H·I + 9H + I"  # one encoder layer
CROSS_LAYER_SYMBOLS = "8H² + 2H·I + 15H + I"  # with a decoder's cross-attention (4H² + 6H more)


@dataclass(frozen=True, slots=True)
class Term:
    """One group of the closed form: its formula in symbols and its value for a config."""

    group: str
    symbols: str
    value: int


def closed_form(config: BertConfig) -> list[Term]:
    """The total as a sum of per-group formulas (V, H, L, A, I, P, T, N as in the config). BERT's and the
    RoBERTa family's are written by hand (an independent check of the layouts); the other families' are read
    from their layout data (`derived_closed_form`), which the fixtures check against transformers."""
    if not config.family.bert_names:
        return [Term(group, symbols, value) for group, symbols, value in derived_closed_form(config)]
    c = config
    v, h, layers, p, t, n = (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.max_position_embeddings,
                             c.type_vocab_size, c.num_labels)
    terms = [
        Term("embeddings", "(V + P + T)·H + 2H", (v + p + t) * h + 2 * h),
        Term("encoder", f"L·({CROSS_LAYER_SYMBOLS if c.add_cross_attention else LAYER_SYMBOLS})",
             layers * per_layer(config)),
    ]
    if c.has_pooler:
        terms.append(Term("pooler", "H² + H", h * h + h))
    mlm = Term("head", "H² + 3H + V", h * h + 3 * h + v)  # transform dense + LayerNorm + output bias (decoder tied)
    if not c.tie_word_embeddings:  # the decoder's own weight and bias
        mlm = Term("head", "H² + 3H + V + V·H + V", mlm.value + v * h + v)
    head_terms = {
        "mlm": mlm,
        "causal-lm": mlm,
        "pretraining": Term("head", f"{mlm.symbols} + 2H + 2", mlm.value + 2 * h + 2),
        "next-sentence": Term("head", "2H + 2", 2 * h + 2),
        "multiple-choice": Term("head", "H + 1", h + 1),
        "sequence-classification": Term("head", "N·H + N", n * h + n) if c.family.forward.classifier == "pooler"
        else Term("head", "H² + H + N·H + N", h * h + h + n * h + n),  # RoBERTa: dense + out_proj
        "token-classification": Term("head", "N·H + N", n * h + n),
        "question-answering": Term("head", "N·H + N", n * h + n),
    }
    if c.head in head_terms:
        terms.append(head_terms[c.head])
    return terms


def per_layer(config: BertConfig) -> int:
    """One encoder layer: Q, K, V, O (4H² + 4H), two LayerNorms (4H), FFN in and out (2H·I + I + H); a decoder's
    cross-attention adds its own Q, K, V, O and LayerNorm (4H² + 6H)."""
    h, i = config.hidden_size, config.intermediate_size
    cross = 4 * h * h + 6 * h if config.add_cross_attention else 0
    return 4 * h * h + 2 * h * i + 9 * h + i + cross


def closed_form_total(config: BertConfig) -> int:
    return sum(term.value for term in closed_form(config))


def closed_form_symbols(config: BertConfig) -> str:
    return " + ".join(term.symbols for term in closed_form(config))


@dataclass(frozen=True, slots=True)
class Marginal:
    """The exact change in total for +`step` of a field (step 1, except where +1 is not a valid config)."""

    field: str
    delta: int
    step: int = 1
    note: str = ""
    at_limit: bool = False  # the field is at its maximum: `delta` is what its last `step` added


def marginal_costs(config: BertConfig) -> list[Marginal]:
    """For each size field (and num_labels where the head uses it), total(field + 1) − total(config); for each
    of the family's switches, what it adds when on: total(on) − total(off), the rest of the config as it is
    (DeBERTa's c2p adds nothing while the keys are shared)."""
    base = closed_form_total(config)
    names = [*config.fields, *(["num_labels"] if config.uses_num_labels else [])]
    return [*(_marginal(config, name, base) for name in names),
            *(_switch(config, flag, base) for flag in config.switches)]


def _switch(config: BertConfig, flag: str, base: int) -> Marginal:
    value = getattr(config, flag)
    try:
        other = closed_form_total(config.replace(**{flag: not value}))
    except ConfigError as refused:
        return Marginal(flag, 0, note=f"cannot be switched: {refused.rule}", at_limit=True)
    return Marginal(flag, base - other if value else other - base, note="switch")


def _marginal(config: BertConfig, name: str, base: int) -> Marginal:
    if name == "num_attention_heads" and not config.family.forward.relative_bias:
        return Marginal(name, 0, note="heads split H into H/A-wide slices: they add no parameters")
    if name == "num_attention_heads":
        return Marginal(name, config.relative_attention_num_buckets, note="R relative-position biases per head")
    current = config.embedding_width if name == "embedding_size" else getattr(config, name)
    step = config.num_attention_heads if name == "hidden_size" and config.num_attention_heads > 1 else 1
    for size in (1, step) if step > 1 else (1,):  # H + 1 is not a multiple of A: the next valid H instead
        try:
            delta = closed_form_total(config.replace(**{name: current + size})) - base
        except ConfigError:
            continue
        note = f"per +{size}: H must stay a multiple of A = {size}" if size > 1 else ""
        return Marginal(name, delta, size, note)
    return _at_limit(config, name, current, step, base)


def _at_limit(config: BertConfig, name: str, current: int, step: int, base: int) -> Marginal:
    """At a field's maximum no larger value is valid: the cost of the last `step` added, said to be that."""
    try:
        delta = base - closed_form_total(config.replace(**{name: current - step}))
    except ConfigError:
        return Marginal(name, 0, step, "at its limit", at_limit=True)
    return Marginal(name, delta, step, f"at its maximum ({current:,}): the last {step} added this", at_limit=True)


# Weight memory: bits a parameter takes in each storage type.
DTYPE_BITS: dict[str, int] = {"float32": 32, "float16": 16, "bfloat16": 16, "int8": 8, "int4": 4}
ADAM_BYTES_PER_PARAM = 16
ADAM_CONVENTION = (
    "mixed-precision Adam, 16 bytes/parameter: fp16 weights (2) + fp16 gradients (2) + fp32 master "
    "weights (4) + Adam first and second moments (4 + 4); activations not included"
)


def memory_bytes(total: int) -> dict[str, int]:
    """Bytes to hold `total` parameters in each dtype (int4 packs two a byte, rounded up)."""
    return {dtype: -(-total * bits // 8) for dtype, bits in DTYPE_BITS.items()}


def training_bytes(total: int) -> int:
    return total * ADAM_BYTES_PER_PARAM


@dataclass(frozen=True, slots=True)
class LayerSharing:
    """ALBERT's layers: G·K stored, run L times. `unshared` is what a model holding one layer per run
    would count (the encoder's stored layers replaced by L of them)."""

    stored: int
    runs: int
    per_layer: int
    unshared: int

    @property
    def text(self) -> str:
        return (f"{self.stored:,} layer{'s' if self.stored != 1 else ''} stored, run {self.runs:,} times "
                f"({self.per_layer:,} each); unshared it would hold {self.unshared:,}")


def layer_sharing(config: BertConfig, total: int) -> LayerSharing | None:
    """How the family shares its layers (ALBERT), or None where every layer run is stored."""
    if not config.family.forward.shared_layers:
        return None
    h, i = config.hidden_size, config.intermediate_size
    one = 4 * h * h + 2 * h * i + 9 * h + i  # an AlbertLayer: Q, K, V, dense, two LayerNorms, FFN in and out
    stored = config.num_hidden_groups * config.inner_group_num
    return LayerSharing(stored, config.num_hidden_layers, one, total + (config.num_hidden_layers - stored) * one)
