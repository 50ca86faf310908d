"""The BERT configuration as one validated, immutable value.

Field names are Hugging Face's `BertConfig` keys, so a `config.json` maps onto it directly. A `BertConfig`
that exists is valid: construction validates and raises `ConfigError`, which names the field, the value
and the rule, so the CLI and the explorer can show it as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import ConfigError
from .families import DEFAULT, FAMILIES, Family
from .fields import FIELDS, MAX_LAYERS, MAX_SIZE, SWITCHES
from .heads import HEADS, LM_HEADS, HeadSpec

__all__ = ["CROSS_FLAGS", "DEFAULT", "EXTRA_FIELDS", "FAMILIES", "FLAG_FIELDS", "HEADS", "LM_HEADS", "SIZE_FIELDS",
           "SYMBOLS", "ZERO_MEANS", "BertConfig", "ConfigError", "Family", "HeadSpec", "families_with", "family_of",
           "parse_int"]

# Sizes, in HF's names and in the symbols the formulas use.
SIZE_FIELDS: tuple[str, ...] = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)
SYMBOLS: dict[str, str] = {name: FIELDS[name].symbol for name in (*SIZE_FIELDS, "num_labels")}


CROSS_FLAGS = ("add_cross_attention",)  # the switch a decoder has, where its family builds one
# The families' own sizes beyond the seven every family has (a family's record says which it has or lacks).
FLAG_FIELDS = tuple(SWITCHES)
EXTRA_FIELDS = ("embedding_size", "num_hidden_groups", "inner_group_num", "relative_attention_num_buckets",
                "position_buckets", "max_relative_positions", "conv_kernel_size")
EXTRA_SYMBOLS = {name: FIELDS[name].symbol for name in EXTRA_FIELDS if FIELDS[name].symbol}
# Sizes where 0 means "none" or "the default" rather than an error (as the config classes read -1 or 0).
ZERO_MEANS: dict[str, str] = {
    "embedding_size": "H",
    "position_buckets": "none (the span is max_relative_positions)",
    "max_relative_positions": "P",
    "conv_kernel_size": "none (no convolution)",
}


def family_of(model_type: str) -> Family:
    """The record of `model_type` (a ConfigError naming the families counted for any other)."""
    if model_type not in FAMILIES:
        raise ConfigError("model_type", model_type, f"must be one of: {', '.join(FAMILIES)}")
    return FAMILIES[model_type]


def families_with(switch: str) -> tuple[str, ...]:
    """The families that have the switch `switch`."""
    return tuple(name for name, family in FAMILIES.items() if switch in family.switches)


@dataclass(frozen=True, slots=True)
class BertConfig:
    """A BERT configuration; the defaults are bert-base-uncased and HF's `BertConfig()` defaults."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    head: str = "none"
    pooler: bool = True
    num_labels: int = 2
    model_type: str = DEFAULT
    tie_word_embeddings: bool = True  # HF's key: False gives the LM decoder a weight and bias of its own
    embedding_size: int = 0  # E (ALBERT, ELECTRA): 0 means H, as a config without the key gets from the family
    num_hidden_groups: int = 1  # G (ALBERT): layer groups stored
    inner_group_num: int = 1  # K (ALBERT): layers stored per group
    relative_attention_num_buckets: int = 32  # R (MPNet): rows of the relative attention bias
    norm_bias: bool = False  # ModernBERT: LayerNorms with a bias
    attention_bias: bool = False  # ModernBERT: Wqkv and Wo with biases
    mlp_bias: bool = False  # ModernBERT: Wi and Wo of the MLP with biases
    classifier_bias: bool = False  # ModernBERT: the prediction head's dense with a bias
    decoder_bias: bool = True  # ModernBERT: the MLM decoder with a bias
    position_buckets: int = 0  # DeBERTa: relative positions bucketed into this many (0: none, HF's -1)
    max_relative_positions: int = 0  # DeBERTa: the relative span without buckets (0: P, HF's -1)
    conv_kernel_size: int = 0  # C (DeBERTa-v2): the convolution beside the first layer (0: none)
    relative_attention: bool = False  # DeBERTa: disentangled attention with relative position embeddings
    share_att_key: bool = False  # DeBERTa: positions projected by the content key/query (no pos_*_proj)
    pos_att_c2p: bool = False  # DeBERTa: "c2p" in pos_att_type (content to position: pos_key_proj)
    pos_att_p2c: bool = False  # DeBERTa: "p2c" in pos_att_type (position to content: pos_query_proj)
    norm_rel_ebd: bool = False  # DeBERTa: "layer_norm" in norm_rel_ebd (a LayerNorm of the relative embeddings)
    position_biased_input: bool = True  # DeBERTa: an absolute position table added to the input
    legacy: bool = True  # DeBERTa: the masked-LM head as `cls.predictions` (tied decoder) or `lm_predictions`
    add_cross_attention: bool = False  # BERT-style decoders: a cross-attention block in every layer
    # (key, value) of a config.json's keys that change what a training step saves but no parameter (activations,
    # dropout probabilities), set where compute does not model them: counted as any config, refused by compute.
    step_keys: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        zero_types = self.model_type in FAMILIES and FAMILIES[self.model_type].zero_types
        for name in SIZE_FIELDS:
            if not (name == "type_vocab_size" and zero_types and self.type_vocab_size == 0):
                _check_size(name, getattr(self, name))
        _check_size("num_labels", self.num_labels)
        for name in EXTRA_FIELDS:
            if name not in ZERO_MEANS or getattr(self, name) != 0:
                _check_size(name, getattr(self, name))
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError("hidden_size", self.hidden_size, _multiple_rule(self))
        if self.head not in HEADS:
            raise ConfigError("head", self.head, f"must be one of: {', '.join(HEADS)}")
        family = family_of(self.model_type)
        if self.head not in family.heads:
            heads = family.heads
            rule = f"{self.model_type} has no {self.head} class; its heads: {', '.join(heads)}"
            having = [name for name, other in FAMILIES.items() if self.head in other.heads]
            if family.bert_names and self.head in ("pretraining", "next-sentence"):
                rule = f"{self.model_type} has no {self.head} class (no NSP head); only {', '.join(having)} has"
            raise ConfigError("head", self.head, rule)
        if family.fixed_qa_labels and self.head == "question-answering" and self.num_labels != 2:
            raise ConfigError("num_labels", self.num_labels, f"{self.hf_class} requires 2 (start, end)")
        if self.num_hidden_groups * self.inner_group_num > MAX_LAYERS:
            raise ConfigError("num_hidden_groups", self.num_hidden_groups,
                              f"times inner_group_num must be at most {MAX_LAYERS:,} layers stored")
        for flag in ("pooler", "tie_word_embeddings", *FLAG_FIELDS):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(flag, getattr(self, flag), "must be true or false")
        if self.add_cross_attention and "add_cross_attention" not in family.switches:
            raise ConfigError("add_cross_attention", True, f"{self.model_type} has no cross-attention; the families "
                              f"that build one: {', '.join(families_with('add_cross_attention'))}")
        if not self.pooler and self.fixed_pooler:
            rule = f"{self.hf_class} always builds the pooler; the pooler can be dropped only with head 'none'"
            raise ConfigError("pooler", self.pooler, rule)

    @property
    def family(self) -> Family:
        """The family's record (`tui.core.families`)."""
        return FAMILIES[self.model_type]

    @property
    def switches(self) -> tuple[str, ...]:
        """The switches this family has (its boolean keys)."""
        return self.family.switches

    @property
    def lm_decoder(self) -> bool:
        """Whether the head has b·s·V logits: masked or causal LM, and a pre-training class's LM head (not a
        replaced-token discriminator's: one logit a token)."""
        return self.head in ("mlm", "causal-lm") or (self.head == "pretraining" and not self.family.forward.discriminator)

    @property
    def spec(self) -> HeadSpec:
        return HEADS[self.head]

    @property
    def hf_class(self) -> str:
        """The transformers class counted: BertForMaskedLM, RobertaModel, XLMRobertaForTokenClassification..."""
        return self.family.hf_class(self.head)

    @property
    def body(self) -> str:
        """The attribute of a head class that holds the encoder: `bert` or `roberta`."""
        return self.family.body

    @property
    def body_prefix(self) -> str:
        """What the class's parameter names start with: `bert.` under a head, nothing for the base model."""
        return f"{self.body}." if self.head != "none" else ""

    @property
    def fixed_pooler(self) -> bool | None:
        """Whether the head class builds `pooler` whatever the user says (None: the user chooses)."""
        return self.family.heads[self.head]

    @property
    def has_pooler(self) -> bool:
        """Whether the HF class builds `pooler`: fixed by the head class, the user's choice for BertModel."""
        fixed = self.fixed_pooler
        return self.pooler if fixed is None else fixed

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def uses_num_labels(self) -> bool:
        """Whether the head class has num_labels outputs (the form shows the field then)."""
        return HEADS[self.head].uses_num_labels or (self.head == "pretraining" and self.family.forward.sentence_order)

    @property
    def fields(self) -> tuple[str, ...]:
        """The sizes this family has, in the form's order: the seven (less any it lacks), then its own."""
        family = self.family
        return (*(f for f in SIZE_FIELDS if f not in family.lacks), *family.fields)

    @property
    def embedding_width(self) -> int:
        """E: the embedding width (H where the family has no embedding_size, or the config leaves it out)."""
        return self.embedding_size or self.hidden_size

    @property
    def relative_span(self) -> int:
        """D (DeBERTa): the relative distances embedded each way (`rel_embeddings` has 2D rows): the buckets,
        else max_relative_positions, else P, as DebertaV2Encoder reads them."""
        return self.position_buckets or self.max_relative_positions or self.max_position_embeddings

    def symbol_values(self) -> dict[str, int]:
        """The value of each formula symbol (V, H, L, A, I, P, T, N, and E, G, K, R, C, D)."""
        values = {symbol: getattr(self, name) for name, symbol in SYMBOLS.items()}
        values.update({symbol: getattr(self, name) for name, symbol in EXTRA_SYMBOLS.items()})
        values["E"] = self.embedding_width
        values["D"] = self.relative_span
        return values

    def sizes(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in SIZE_FIELDS}

    def replace(self, **changes: Any) -> BertConfig:
        return replace(self, **changes)

    def as_family(self, model_type: str) -> BertConfig:
        """This config as another family's: what both families have is carried (the sizes both count, the
        switches both have, the head if the family has that class, the pooler, labels and tying), where the new
        family takes the value; every other key is its default. DeBERTa's T = 0 is not carried to BERT."""
        if model_type == self.model_type:
            return self
        family = family_of(model_type)
        target = BertConfig(model_type=model_type)
        shared = [f for f in self.fields if f in target.fields]
        shared += [f for f in self.family.switches if f in family.switches]
        if self.head in family.heads:
            shared.append("head")
        shared += ["pooler", "num_labels", "tie_word_embeddings"]
        while True:
            try:
                return target.replace(**{key: getattr(self, key) for key in shared})
            except ConfigError as refused:  # a value the new family does not take: its default instead
                if refused.field not in shared:
                    raise
                shared.remove(refused.field)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, base: BertConfig | None = None) -> BertConfig:
        """Build from HF-style keys (unknown keys are the caller's business), validating each value's type."""
        known = {f.name for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue
            if key in ("head", "model_type"):
                changes[key] = str(value) if isinstance(value, str) else _bad(key, value, f"must be a {key} name")
            elif key in ("pooler", "tie_word_embeddings", *FLAG_FIELDS):
                changes[key] = value if isinstance(value, bool) else _bad(key, value, "must be true or false")
            else:
                changes[key] = parse_int(key, value)
        return replace(base or cls(), **changes)


WHOLE_NUMBER = re.compile(r"[+-]?[0-9](?:_?[0-9])*", re.ASCII)


def parse_int(field: str, value: object) -> int:
    """Accept an int or the text of one ("3072", " 3072 ", "3_072"); refuse bools, floats and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        _bad(field, value, "must be a whole number")
    if isinstance(value, str):
        text = value.strip()
        # Python's own grammar for a decimal literal, ASCII digits only: what passes, int() takes ('²', '٧',
        # '1__0', '_768' and '+-1' are refused here, not by int()).
        if len(text) > 40 or not WHOLE_NUMBER.fullmatch(text):
            _bad(field, value, "must be a whole number")
        value = int(text)
    assert isinstance(value, int)
    return value


def _check_size(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _bad(field, value, "must be a whole number")
    assert isinstance(value, int)
    largest = FIELDS[field].largest if field in FIELDS else MAX_SIZE  # one rule, said one way
    if not 1 <= value <= largest:
        raise ConfigError(field, value, f"must be between 1 and {largest:,}")


def _multiple_rule(cfg: BertConfig) -> str:
    h, a = cfg.hidden_size, cfg.num_attention_heads
    below, above = h - h % a, h - h % a + a
    nearest = f"{below} or {above}" if below else f"{above}"
    return f"must be a multiple of num_attention_heads ({a}), e.g. {nearest}"


def _bad(field: str, value: object, rule: str) -> Any:
    raise ConfigError(field, value, rule)

