"""What a family is, as one record: every fact about it that more than one room reads.

A `Family` names its classes and their heads, the sizes and switches its config has, its config class's defaults
and its config.json's own names, peft's default targets, how its modules are named as BERT's (for `diff`), and
what its forward does (`Forward`: the traits the step reads in place of asking which family it is). Counting's
layout of its parameters (`tui.core.count.families`) and the step's layout of its ops (`tui.core.step.layouts`)
are keyed by its name; the record imports neither, so both rooms and the way in (`tui.io.hf_config`) read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..heads import HEADS


@dataclass(frozen=True, slots=True)
class Forward:
    """What the family's forward does, as the step needs it (each a fact of its modeling code, not its name).

    `layer` names the modeling code's layer class, whose op order the step follows (`BertLayer` and its kin run
    on BERT's run; a family with code of its own has a run of its own, `tui.core.step.allocations.EMULATORS`)."""

    layer: str = "BertLayer"  # BertLayer, TransformerBlock (DistilBERT), AlbertLayer, MPNetLayer, ...
    positions_from_ids: bool = False  # position ids made from the input ids (RoBERTa's, MPNet's), not a buffer
    positions_add_past: bool = True  # those positions add the past length (RoBERTa's `+ past_key_values_length`)
    position_table_last: bool = False  # the embeddings register the position table after their LayerNorm
    token_types: bool = True  # a token-type embedding runs in the forward
    head_first: bool = False  # the head classes assign their head before their body (generated classes)
    lm_head: str = "transform"  # transform (H → H, bias first), transform-bias-last, narrow (H → E), narrow-bias-first
    discriminator: bool = False  # the pre-training class is a replaced-token discriminator (one logit a token)
    sentence_order: bool = False  # the pre-training class's sentence head: N classes behind dropout (ALBERT's SOP)
    classifier: str = "pooler"  # sequence classification: the pooler and a Linear, or `dense` (dense, out_proj)
    head_activation: str = "tanh"  # the pooler's or classification head's activation (ELECTRA's: gelu)
    projection: str = "never"  # E → H: never, "E≠H" (in the embeddings), "always" (the encoder's first op)
    mask_after_projection: bool = False  # the attention mask takes the projected states' dtype (ELECTRA's)
    eager_only: bool = False  # transformers has no sdpa for it: the math path whatever is asked
    shared_layers: bool = False  # layers stored once and run again (ALBERT's groups)
    encoder_dropout: bool = True  # hidden and attention dropout in the encoder (ALBERT's configs: p = 0)
    activation: str = "gelu"  # the feed-forward's activation as the step models it (ALBERT's gelu_new)
    relative_bias: bool = False  # a relative position bias shared by the layers (MPNet's)
    qa_dropout: bool = False  # dropout before qa_outputs (DistilBERT's)
    reads_values: bool = False  # the forward reads tensor values (buckets, masks): the meta device cannot run it


@dataclass(frozen=True, slots=True)
class StepKeys:
    """A config.json's keys that change what a step saves but no parameter, and the values compute models."""

    activation: str = "hidden_act"  # the key naming the activation
    activation_value: str = "gelu"  # the value modelled
    dropouts: tuple[str, ...] = ("hidden_dropout_prob", "attention_probs_dropout_prob")
    dropout_free: bool = False  # the modelled step has no dropout in the encoder (p = 0)
    exact: Mapping[str, object] | None = None  # keys modelled at exactly these values (ModernBERT's), else the above


@dataclass(frozen=True, slots=True)
class Family:
    """One family: what its classes are called, what its config holds, what peft adapts, what its forward does."""

    name: str  # the config's model_type
    prefix: str  # its class names' prefix (Bert, Roberta, DistilBert, ...)
    body: str  # the attribute of a head class that holds the base model
    heads: Mapping[str, bool | None]  # its head classes, and whether each builds the pooler (None: the user's choice)
    fields: tuple[str, ...] = ()  # sizes beyond the seven every family has
    lacks: tuple[str, ...] = ()  # of those seven, the sizes it has not
    switches: tuple[str, ...] = ()  # the boolean keys it has (`tui.core.fields.SWITCHES`)
    defaults: Mapping[str, int] = field(default_factory=dict)  # its config class's defaults that are not BERT's
    aliases: Mapping[str, str] = field(default_factory=dict)  # its config.json's own names for the sizes
    own_classes: Mapping[str, str] = field(default_factory=dict)  # head → class suffix, where not BERT's renamed
    bert_names: bool = False  # its modules are BERT's (the RoBERTa family): the hand-written closed form, audit
    zero_types: bool = False  # type_vocab_size may be 0 (no token-type embedding)
    fixed_qa_labels: bool = False  # its question-answering class has exactly 2 outputs
    # peft's defaults (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, ..._IA3_TARGET_MODULES_MAPPING and
    # ..._IA3_FEEDFORWARD_MODULES_MAPPING; None: peft has none, and the modules must be named)
    lora_targets: tuple[str, ...] | None = None
    ia3_targets: tuple[str, ...] | None = None
    ia3_feedforward: tuple[str, ...] = ()
    layer_stack: str = "encoder.layer"  # the list of layers under the base model
    roles: tuple[tuple[str, str], ...] = ()  # its parameter names written as BERT's: (pattern, BERT's words)
    grouped_layers: str | None = None  # a stored layer's name as (group, index): it is layer group·K + index
    forward: Forward = Forward()
    step_keys: StepKeys = StepKeys()
    # Its config.json's own keys: the switches written as words (`words`), read from the file (given H and A;
    # a ConfigError names a key and its rule) and written for its config class, with any keys of its own
    words: tuple[str, ...] = ()
    read_words: Callable[[Mapping[str, Any], int, int], dict[str, Any]] | None = None
    write_words: Callable[[Any], dict[str, Any]] | None = None

    def hf_class(self, head: str) -> str:
        """The transformers class of `head`: BERT's with the prefix swapped, or the family's own name."""
        if head in self.own_classes:
            return self.prefix + self.own_classes[head]
        return HEADS[head].hf_class.replace("Bert", self.prefix, 1)

    @property
    def classes(self) -> dict[str, str]:
        return {self.hf_class(head): head for head in self.heads}
