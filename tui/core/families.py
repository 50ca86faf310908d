"""Each family's layout as data: what transformers' classes register, in order, read from their modeling
files (transformers 5.24: models/bert, roberta, xlm_roberta, camembert). The engine is `layout.build`.

A family gives its base model (`base`) and, per head, the class's parts in registration order: `BODY`
stands for the base model under the class's body attribute (`bert.`, `roberta.`). What a config means
for the family — its symbols' values and its facts — is `symbols_and_facts`, the only per-family code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import LM_HEADS, MODEL_TYPES, BertConfig
from .layout import M, P, Spec, Stack, build, embedding, layer_norm, linear
from .tree import ParamTree

BODY = M("<body>", ())  # placeholder in a class's parts: the base model under the body attribute

WORD = ("word", "tie")  # the word embeddings and the LM decoder's weight: one tensor while tied
LM_BIAS = ("lm-bias", None)  # the LM head's own bias: always the tensor
DECODER_BIAS = ("lm-bias", "tie")  # the decoder's bias: the head's bias while tied

BERT_LAYER = M("layer", (
    M("attention", (
        M("self", tuple(linear(part, "H", "H", heads=True) for part in ("query", "key", "value"))),
        M("output", (linear("dense", "H", "H"), layer_norm("LayerNorm"))),
    )),
    M("intermediate", (linear("dense", "I", "H"),)),
    M("output", (linear("dense", "H", "I"), layer_norm("LayerNorm"))),
))
ENCODER = M("encoder", (Stack("layer", "L", BERT_LAYER),))
POOLER = M("pooler", (linear("dense", "H", "H"),), when="pooler")
DECODER = M("decoder", (P("weight", ("V", "H"), "weight", share=WORD), P("bias", ("V",), "bias", share=DECODER_BIAS)))

BERT_BASE: tuple[Spec, ...] = (
    M("embeddings", (
        embedding("word_embeddings", "V", share=WORD),
        embedding("position_embeddings", "P"),
        embedding("token_type_embeddings", "T"),
        layer_norm("LayerNorm"),
    )),
    ENCODER,
    POOLER,
)
BERT_PREDICTIONS = M("predictions", (
    P("bias", ("V",), "bias", share=LM_BIAS),
    M("transform", (linear("dense", "H", "H"), layer_norm("LayerNorm"))),
    DECODER,
))
NSP = linear("seq_relationship", "2", "H")
BERT_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    "mlm": (BODY, M("cls", (BERT_PREDICTIONS,))),
    "causal-lm": (BODY, M("cls", (BERT_PREDICTIONS,))),
    "pretraining": (BODY, M("cls", (BERT_PREDICTIONS, NSP))),
    "next-sentence": (BODY, M("cls", (NSP,))),
    "sequence-classification": (BODY, linear("classifier", "N", "H")),
    "token-classification": (BODY, linear("classifier", "N", "H")),
    "question-answering": (BODY, linear("qa_outputs", "N", "H")),
    "multiple-choice": (BODY, linear("classifier", "1", "H")),
}

# RobertaEmbeddings registers its position table last; the LM head is `lm_head` with the bias first.
ROBERTA_BASE: tuple[Spec, ...] = (
    M("embeddings", (
        embedding("word_embeddings", "V", share=WORD),
        embedding("token_type_embeddings", "T"),
        layer_norm("LayerNorm"),
        embedding("position_embeddings", "P"),
    )),
    ENCODER,
    POOLER,
)
ROBERTA_LM = M("lm_head", (
    P("bias", ("V",), "bias", share=LM_BIAS), linear("dense", "H", "H"), layer_norm("layer_norm"), DECODER,
))
ROBERTA_HEADS: dict[str, Spec] = {
    "mlm": ROBERTA_LM,
    "causal-lm": ROBERTA_LM,
    "sequence-classification": M("classifier", (linear("dense", "H", "H"), linear("out_proj", "N", "H"))),
    "token-classification": linear("classifier", "N", "H"),
    "question-answering": linear("qa_outputs", "N", "H"),
    "multiple-choice": linear("classifier", "1", "H"),
}
ROBERTA_CLASSES = {"none": (), **{head: (BODY, spec) for head, spec in ROBERTA_HEADS.items()}}
# XLM-RoBERTa's and CamemBERT's generated classes assign the head before the body: it registers first
# (and so owns the tied word embeddings).
HEAD_FIRST_CLASSES = {"none": (), **{head: (spec, BODY) for head, spec in ROBERTA_HEADS.items()}}


@dataclass(frozen=True, slots=True)
class Family:
    """One family's layout: the base model and each head class's parts."""

    base: tuple[Spec, ...]
    classes: Mapping[str, tuple[Spec, ...]]


FAMILIES: dict[str, Family] = {
    "bert": Family(BERT_BASE, BERT_CLASSES),
    "roberta": Family(ROBERTA_BASE, ROBERTA_CLASSES),
    "xlm-roberta": Family(ROBERTA_BASE, HEAD_FIRST_CLASSES),
    "camembert": Family(ROBERTA_BASE, HEAD_FIRST_CLASSES),
}
BODY_NAMES = tuple(sorted({body for _prefix, body in MODEL_TYPES.values()}))


def symbols_and_facts(config: BertConfig) -> tuple[dict[str, int], dict[str, bool]]:
    """The values of the layout's symbols and its facts: the pooler as the class builds it, and the LM
    decoder tied to the word embeddings unless the config unties it."""
    facts = {"pooler": config.has_pooler, "tie": config.head in LM_HEADS and config.tie_word_embeddings}
    return config.symbol_values(), facts


def parts_of(config: BertConfig) -> tuple[Spec, ...]:
    """The class's parts, the base model put under its body attribute (none for the base model itself)."""
    family = FAMILIES[config.model_type]
    parts = family.classes[config.head]
    if not parts:
        return family.base
    return tuple(M(config.body, family.base) if part is BODY else part for part in parts)


def build_tree(config: BertConfig) -> ParamTree:
    """The parameter tree of `config.hf_class` built from `config`."""
    values, facts = symbols_and_facts(config)
    return ParamTree(config, build(config.hf_class, parts_of(config), values, facts))
