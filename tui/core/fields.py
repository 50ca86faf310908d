"""Each size field and each switch of a config, declared once.

A size field: its Hugging Face key, its symbol in the formulas, its label in the form, the unit its marginal cost
is said per, its `--flag` help, and the largest value accepted. A switch: its key and its label in the form (a family's
record says which it has). The form, the command line's overrides, the formulas and the config's checks read these
tables; what a switch adds is counted by the core (its marginal cost, as a size's)."""

from __future__ import annotations

from dataclasses import dataclass

# The largest size accepted. Tensor dimensions are int32-safe; layers are bounded so that a tree of every
# parameter stays small enough to build at once (16 parameters a layer).
MAX_SIZE = 2**31 - 1
MAX_LAYERS = 10_000


@dataclass(frozen=True)
class Field:
    name: str  # the Hugging Face config key
    symbol: str  # in the formulas ("" for none)
    label: str  # the form's
    unit: str  # what a marginal cost is per ("+768/token")
    help: str  # the command line's override help ("" where it has no flag)
    largest: int = MAX_SIZE


FIELDS: dict[str, Field] = {field.name: field for field in (
    Field("vocab_size", "V", "vocab", "token",
          "V: rows of the word embedding (HF vocab_size)"),
    Field("hidden_size", "H", "hidden", "H",
          "H: width of every token vector (HF hidden_size); a multiple of the heads"),
    Field("num_hidden_layers", "L", "layers", "layer",
          "L: encoder layers (HF num_hidden_layers)", largest=MAX_LAYERS),
    Field("num_attention_heads", "A", "heads", "",
          "A: heads per layer (HF num_attention_heads); they split H and add no parameters"),
    Field("intermediate_size", "I", "FFN", "unit",
          "I: feed-forward inner width (HF intermediate_size)"),
    Field("max_position_embeddings", "P", "positions", "position",
          "P: rows of the position embedding (HF max_position_embeddings)"),
    Field("type_vocab_size", "T", "types", "type",
          "T: rows of the token-type embedding (HF type_vocab_size)"),
    Field("num_labels", "N", "labels", "label",
          "N: outputs of the sequence-/token-classification and question-answering heads (default 2)"),
    Field("embedding_size", "E", "embedding", "E",
          "E: embedding width of ALBERT, ELECTRA and DeBERTa (HF embedding_size; default: the family's)"),
    Field("num_hidden_groups", "G", "groups", "group",
          "G: ALBERT's layer groups stored (HF num_hidden_groups)"),
    Field("inner_group_num", "K", "per group", "K",
          "K: ALBERT's layers stored per group (HF inner_group_num)"),
    Field("relative_attention_num_buckets", "R", "buckets", "bucket",
          "R: MPNet's relative attention buckets (HF relative_attention_num_buckets)"),
    Field("position_buckets", "", "pos buckets", "bucket",
          "DeBERTa's relative position buckets: D, the span (0: none, HF's -1)"),
    Field("max_relative_positions", "", "rel span", "position",
          "DeBERTa's relative span without buckets (0: P, HF's -1)"),
    Field("conv_kernel_size", "C", "conv kernel", "C",
          "C: DeBERTa-v2's convolution kernel beside the first layer (0: none)"),
)}


@dataclass(frozen=True)
class Switch:
    name: str  # the config key (a boolean)
    label: str  # the form's (the families that have it: their records' `switches`)


SWITCHES: dict[str, Switch] = {switch.name: switch for switch in (
    Switch("norm_bias", "norm bias"),  # ModernBERT's
    Switch("attention_bias", "attn bias"),
    Switch("mlp_bias", "MLP bias"),
    Switch("classifier_bias", "head bias"),
    Switch("decoder_bias", "LM bias"),
    Switch("relative_attention", "relative"),  # DeBERTa's
    Switch("share_att_key", "shared keys"),
    Switch("pos_att_c2p", "c2p"),
    Switch("pos_att_p2c", "p2c"),
    Switch("norm_rel_ebd", "rel norm"),
    Switch("position_biased_input", "abs pos"),
    Switch("legacy", "legacy MLM"),
    # the decoder of an encoder-decoder model (bert2bert, BertLMHeadModel with is_decoder): a cross-attention
    # block in every layer, in the families whose layers transformers builds with one
    Switch("add_cross_attention", "cross-attn"),
)}
