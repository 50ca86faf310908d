"""ModernBERT (models/modernbert): rotary positions, fused Wqkv and gated MLP, biases and norms as switches, its
config's step keys modelled at their defaults."""

from __future__ import annotations

from typing import Any

from .record import Family, Forward, StepKeys

# The one config.json step setting compute models beyond the family's defaults: mean pooling.
MEAN_POOLING = ("classifier_pooling", "mean")
# Its keys that shape the step, at the values compute models (its config class's defaults).
STEP = {"hidden_activation": "gelu", "classifier_activation": "gelu", "classifier_pooling": "cls",
        "local_attention": 128, "global_attn_every_n_layers": 3, "embedding_dropout": 0.0,
        "attention_dropout": 0.0, "mlp_dropout": 0.0, "classifier_dropout": 0.0, "sparse_prediction": False}
SPECIAL_TOKENS = (("pad", 50283), ("eos", 50282), ("bos", 50281), ("cls", 50281), ("sep", 50282))


def write_words(config: Any) -> dict[str, Any]:
    """Its special token ids (50281–50283 must lie in the vocabulary to build; they change no parameter, so a small
    vocabulary takes its last row), and mean pooling where the config has it."""
    last = config.vocab_size - 1
    keys: dict[str, Any] = {f"{name}_token_id": min(default, last) for name, default in SPECIAL_TOKENS}
    if MEAN_POOLING in config.step_keys:
        keys[MEAN_POOLING[0]] = MEAN_POOLING[1]  # the one step key compute models (what the oracle must build)
    return keys


MODERNBERT = Family(
    "modernbert", "ModernBert", "model",
    {head: False for head in ("none", "mlm", "sequence-classification", "token-classification",
                              "question-answering", "multiple-choice")},
    lacks=("max_position_embeddings", "type_vocab_size"),
    switches=("norm_bias", "attention_bias", "mlp_bias", "classifier_bias", "decoder_bias"),
    defaults={"vocab_size": 50368, "intermediate_size": 1152, "num_hidden_layers": 22},
    layer_stack="layers",
    forward=Forward(layer="ModernBertEncoderLayer", reads_values=True),
    step_keys=StepKeys(exact=STEP),
    write_words=write_words,
)
