"""Each family's layout as data: what transformers' classes register, in order, read from their modeling
files (transformers 5.24: models/bert, roberta, xlm_roberta, camembert, distilbert, albert, electra, mpnet,
modernbert, deberta_v2)
and checked against them (tests/fixtures/generate.py). The engine is `layout.build`.

A family gives its base model (`base`) and, per head, the class's parts in registration order: `BODY`
stands for the base model under the class's body attribute (`bert.`, `roberta.`). What a config means
for the family — its symbols' values and its facts — is `symbols_and_facts`, the only per-family code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..config import FAMILIES, FLAG_FIELDS, LM_HEADS, BertConfig
from ..poly import Poly, add, value
from .layout import (
    B,
    M,
    P,
    Spec,
    Stack,
    bare,
    build,
    embedding,
    formula,
    layer_norm,
    linear,
    render,
)
from .tree import GROUPS, ParamTree, group_of

BODY = M("<body>", ())  # placeholder in a class's parts: the base model under the body attribute

WORD = ("word", "tie")  # the word embeddings and the LM decoder's weight: one tensor while tied
LM_BIAS = ("lm-bias", None)  # the LM head's own bias: always the tensor
DECODER_BIAS = ("lm-bias", "tie")  # the decoder's bias: the head's bias while tied

DROPOUT = B("dropout")  # the modules without parameters (`B`): what peft's target names can match beside the tree


def _attention(name: str, when: str | None = None) -> M:
    """BertAttention: Q/K/V, then the output projection and its LayerNorm (a cross-attention's K and V read the
    encoder's states, H wide in transformers 5.x)."""
    return M(name, (
        M("self", (*(linear(part, "H", "H", heads=True) for part in ("query", "key", "value")), DROPOUT)),
        M("output", (linear("dense", "H", "H"), layer_norm("LayerNorm"), DROPOUT)),
    ), when=when)


BERT_LAYER = M("layer", (
    _attention("attention"),
    _attention("crossattention", when="add_cross_attention"),
    M("intermediate", (linear("dense", "I", "H"), B("intermediate_act_fn"))),
    M("output", (linear("dense", "H", "I"), layer_norm("LayerNorm"), DROPOUT)),
))
ENCODER = M("encoder", (Stack("layer", "L", BERT_LAYER),))
POOLER = M("pooler", (linear("dense", "H", "H"), B("activation")), when="pooler")
DECODER = M("decoder", (P("weight", ("V", "H"), "weight", share=WORD), P("bias", ("V",), "bias", share=DECODER_BIAS)))

BERT_BASE: tuple[Spec, ...] = (
    M("embeddings", (
        embedding("word_embeddings", "V", share=WORD),
        embedding("position_embeddings", "P"),
        embedding("token_type_embeddings", "T"),
        layer_norm("LayerNorm"),
        DROPOUT,
    )),
    ENCODER,
    POOLER,
)
BERT_PREDICTIONS = M("predictions", (
    P("bias", ("V",), "bias", share=LM_BIAS),
    M("transform", (linear("dense", "H", "H"), B("transform_act_fn"), layer_norm("LayerNorm"))),
    DECODER,
))
NSP = linear("seq_relationship", "2", "H")
BERT_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    "mlm": (BODY, M("cls", (BERT_PREDICTIONS,))),
    "causal-lm": (BODY, M("cls", (BERT_PREDICTIONS,))),
    "pretraining": (BODY, M("cls", (BERT_PREDICTIONS, NSP))),
    "next-sentence": (BODY, M("cls", (NSP,))),
    "sequence-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "token-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "question-answering": (BODY, linear("qa_outputs", "N", "H")),
    "multiple-choice": (BODY, DROPOUT, linear("classifier", "1", "H")),
}

# RobertaEmbeddings registers its position table last; the LM head is `lm_head` with the bias first.
ROBERTA_BASE: tuple[Spec, ...] = (
    M("embeddings", (
        embedding("word_embeddings", "V", share=WORD),
        embedding("token_type_embeddings", "T"),
        layer_norm("LayerNorm"),
        DROPOUT,
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
    "sequence-classification": M("classifier", (linear("dense", "H", "H"), DROPOUT, linear("out_proj", "N", "H"))),
    "token-classification": linear("classifier", "N", "H"),
    "question-answering": linear("qa_outputs", "N", "H"),
    "multiple-choice": linear("classifier", "1", "H"),
}
ROBERTA_DROPOUT = ("token-classification", "multiple-choice")  # the class's own dropout beside the head
ROBERTA_CLASSES = {"none": (), **{head: (BODY, *((DROPOUT,) if head in ROBERTA_DROPOUT else ()), spec)
                                  for head, spec in ROBERTA_HEADS.items()}}
# XLM-RoBERTa's and CamemBERT's generated classes assign the head before the body: it registers first
# (and so owns the tied word embeddings).
HEAD_FIRST_CLASSES = {"none": (), **{head: (spec, BODY, *((DROPOUT,) if head in ROBERTA_DROPOUT else ()))
                                     for head, spec in ROBERTA_HEADS.items()}}


# DistilBERT: `transformer.layer.N`, no token types, no pooler; sinusoidal positions still register a table.
DISTILBERT_LAYER = M("layer", (
    M("attention", (DROPOUT, *(linear(part, "H", "H", heads=True) for part in ("q_lin", "k_lin", "v_lin")),
                    linear("out_lin", "H", "H"))),
    layer_norm("sa_layer_norm"),
    M("ffn", (DROPOUT, linear("lin1", "I", "H"), linear("lin2", "H", "I"), B("activation"))),
    layer_norm("output_layer_norm"),
))
DISTILBERT_BASE: tuple[Spec, ...] = (
    M("embeddings", (embedding("word_embeddings", "V", share=WORD), embedding("position_embeddings", "P"),
                     layer_norm("LayerNorm"), DROPOUT)),
    M("transformer", (Stack("layer", "L", DISTILBERT_LAYER),)),
)
DISTILBERT_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    "mlm": (B("activation"), BODY, linear("vocab_transform", "H", "H"), layer_norm("vocab_layer_norm"),
            M("vocab_projector", (P("weight", ("V", "H"), "weight", share=WORD), P("bias", ("V",), "bias"))),
            B("mlm_loss_fct")),
    "sequence-classification": (BODY, linear("pre_classifier", "H", "H"), linear("classifier", "N", "H"), DROPOUT),
    "token-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "question-answering": (BODY, linear("qa_outputs", "N", "H"), DROPOUT),
    "multiple-choice": (BODY, linear("pre_classifier", "H", "H"), linear("classifier", "1", "H"), DROPOUT),
}

# ALBERT: embeddings of width E mapped to H in the encoder; G groups of K layers stored, run L times.
ALBERT_LAYER = M("layer", (
    layer_norm("full_layer_layer_norm"),
    M("attention", (*(linear(part, "H", "H", heads=True) for part in ("query", "key", "value")),
                    B("attention_dropout"), B("output_dropout"), linear("dense", "H", "H"), layer_norm("LayerNorm"))),
    linear("ffn", "I", "H"),
    linear("ffn_output", "H", "I"),
    B("activation"),
    DROPOUT,
))
ALBERT_BASE: tuple[Spec, ...] = (
    M("embeddings", (embedding("word_embeddings", "V", "E", share=WORD), embedding("position_embeddings", "P", "E"),
                     embedding("token_type_embeddings", "T", "E"), layer_norm("LayerNorm", "E"), DROPOUT)),
    M("encoder", (linear("embedding_hidden_mapping_in", "H", "E"),
                  Stack("albert_layer_groups", "G", M("group", (Stack("albert_layers", "K", ALBERT_LAYER),))))),
    linear("pooler", "H", "H", when="pooler"),
    B("pooler_activation", when="pooler"),
)
E_DECODER = M("decoder", (P("weight", ("V", "E"), "weight", share=WORD), P("bias", ("V",), "bias", share=DECODER_BIAS)))
ALBERT_PREDICTIONS = M("predictions", (
    P("bias", ("V",), "bias", share=LM_BIAS), layer_norm("LayerNorm", "E"), linear("dense", "E", "H"), E_DECODER,
    B("activation"),
))
ALBERT_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    "pretraining": (BODY, ALBERT_PREDICTIONS, M("sop_classifier", (DROPOUT, linear("classifier", "N", "H")))),
    "mlm": (BODY, ALBERT_PREDICTIONS),
    "sequence-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "token-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "question-answering": (BODY, linear("qa_outputs", "N", "H")),
    "multiple-choice": (BODY, DROPOUT, linear("classifier", "1", "H")),
}

# ELECTRA: BERT's encoder; embeddings of width E, projected to H only when E ≠ H; no pooler.
ELECTRA_BASE: tuple[Spec, ...] = (
    M("embeddings", (embedding("word_embeddings", "V", "E", share=WORD), embedding("position_embeddings", "P", "E"),
                     embedding("token_type_embeddings", "T", "E"), layer_norm("LayerNorm", "E"), DROPOUT)),
    linear("embeddings_project", "H", "E", when="project"),
    ENCODER,
)
ELECTRA_GENERATOR = (
    M("generator_predictions", (B("activation"), layer_norm("LayerNorm", "E"), linear("dense", "E", "H"))),
    M("generator_lm_head", (P("weight", ("V", "E"), "weight", share=WORD), P("bias", ("V",), "bias"))),
)
ELECTRA_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    "pretraining": (BODY, M("discriminator_predictions", (linear("dense", "H", "H"), B("activation"),
                                                         linear("dense_prediction", "1", "H")))),
    "mlm": (BODY, *ELECTRA_GENERATOR),
    "causal-lm": (BODY, *ELECTRA_GENERATOR),
    "sequence-classification": (BODY, M("classifier", (linear("dense", "H", "H"), B("activation"), DROPOUT,
                                                       linear("out_proj", "N", "H")))),
    "token-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "question-answering": (BODY, linear("qa_outputs", "N", "H")),
    "multiple-choice": (BODY, M("sequence_summary", (linear("summary", "H", "H"), B("activation"),
                                                     B("first_dropout"), B("last_dropout"))),
                        linear("classifier", "1", "H")),
}

# MPNet: `attention.attn.q/k/v/o`, one relative attention bias (R buckets × A heads) after the layers.
MPNET_LAYER = M("layer", (
    M("attention", (M("attn", (*(linear(part, "H", "H", heads=True) for part in ("q", "k", "v")),
                               linear("o", "H", "H"), DROPOUT)),
                    layer_norm("LayerNorm"), DROPOUT)),
    M("intermediate", (linear("dense", "I", "H"), B("intermediate_act_fn"))),
    M("output", (linear("dense", "H", "I"), layer_norm("LayerNorm"), DROPOUT)),
))
MPNET_BASE: tuple[Spec, ...] = (
    M("embeddings", (embedding("word_embeddings", "V", share=WORD), embedding("position_embeddings", "P"),
                     layer_norm("LayerNorm"), DROPOUT)),
    M("encoder", (Stack("layer", "L", MPNET_LAYER), embedding("relative_attention_bias", "R", "A"))),
    POOLER,
)
MPNET_CLASSES = {"none": (), **{head: (BODY, *((DROPOUT,) if head in ROBERTA_DROPOUT else ()), spec)
                                for head, spec in ROBERTA_HEADS.items() if head != "causal-lm"}}


# ModernBERT: `model.`; fused Q/K/V (3H × H) and a gated MLP (2I × H); no positions table (rotary), no token
# types, no pooler; the first layer has no attention norm; biases and norm biases by the config's flags.
def _mb_linear(name: str, out_dim: str, in_dim: str, bias: str) -> M:
    return M(name, (P("weight", (out_dim, in_dim), "weight"), P("bias", (out_dim,), "bias", when=bias)))


def _mb_norm(name: str, when: str | None = None) -> M:
    return M(name, (P("weight", ("H",), "norm"), P("bias", ("H",), "norm", when="norm_bias")), when)


MODERNBERT_LAYER = M("layer", (
    _mb_norm("attn_norm", when="!first"),
    B("attn_norm", when="first"),  # an Identity
    M("attn", (_mb_linear("Wqkv", "3H", "H", "attention_bias"), _mb_linear("Wo", "H", "H", "attention_bias"),
               B("out_drop"))),
    _mb_norm("mlp_norm"),
    M("mlp", (_mb_linear("Wi", "2I", "H", "mlp_bias"), B("act"), B("drop"), _mb_linear("Wo", "H", "I", "mlp_bias"))),
))
MODERNBERT_BASE: tuple[Spec, ...] = (
    M("embeddings", (embedding("tok_embeddings", "V", share=WORD), _mb_norm("norm"), B("drop"))),
    Stack("layers", "L", MODERNBERT_LAYER),
    _mb_norm("final_norm"),
    B("rotary_emb"),
)
MODERNBERT_HEAD = M("head", (_mb_linear("dense", "H", "H", "classifier_bias"), B("act"), _mb_norm("norm")))
MODERNBERT_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    "mlm": (BODY, MODERNBERT_HEAD, M("decoder", (P("weight", ("V", "H"), "weight", share=WORD),
                                                 P("bias", ("V",), "bias", when="decoder_bias")))),
    **{head: (BODY, MODERNBERT_HEAD, B("drop"), linear("classifier", "N", "H"))
       for head in ("sequence-classification", "token-classification", "question-answering")},
    "multiple-choice": (BODY, MODERNBERT_HEAD, B("drop"), linear("classifier", "1", "H")),
}


# DeBERTa-v2/v3: `deberta.`; embeddings of width E (projected to H without a bias when E ≠ H), the absolute
# position table only while position_biased_input, token types only when T > 0; disentangled attention
# (query_proj/key_proj/value_proj, and pos_key_proj/pos_query_proj unless the keys are shared); the relative
# position embeddings (2D × H), their LayerNorm and the convolution are the encoder's own, after its layers.
DEBERTA_LAYER = M("layer", (
    M("attention", (
        M("self", (*(linear(part, "H", "H", heads=True) for part in ("query_proj", "key_proj", "value_proj")),
                   B("pos_dropout", when="relative_attention"),
                   linear("pos_key_proj", "H", "H", when="pos_key_proj"),
                   linear("pos_query_proj", "H", "H", when="pos_query_proj"), DROPOUT)),
        M("output", (linear("dense", "H", "H"), layer_norm("LayerNorm"), DROPOUT)),
    )),
    M("intermediate", (linear("dense", "I", "H"), B("intermediate_act_fn"))),
    M("output", (linear("dense", "H", "I"), layer_norm("LayerNorm"), DROPOUT)),
))
DEBERTA_BASE: tuple[Spec, ...] = (
    M("embeddings", (
        embedding("word_embeddings", "V", "E", share=WORD),
        embedding("position_embeddings", "P", "E", when="position_biased_input"),
        embedding("token_type_embeddings", "T", "E", when="token_types"),
        M("embed_proj", (P("weight", ("H", "E"), "weight"),), when="project"),
        layer_norm("LayerNorm"),
        DROPOUT,
    )),
    M("encoder", (
        Stack("layer", "L", DEBERTA_LAYER),
        embedding("rel_embeddings", "2D", when="relative_attention"),
        layer_norm("LayerNorm", when="norm_rel_ebd"),
        M("conv", (M("conv", (P("weight", ("H", "H", "C"), "weight"), P("bias", ("H",), "bias"))),
                   layer_norm("LayerNorm"), DROPOUT), when="conv"),
    )),
)
DEBERTA_POOLER = M("pooler", (linear("dense", "H", "H"), DROPOUT), when="pooler")  # ContextPooler
DEBERTA_CLASSES: dict[str, tuple[Spec, ...]] = {
    "none": (),
    # `legacy`: BERT's head on width E with the decoder tied; otherwise `lm_predictions`, which multiplies by
    # the word embeddings and registers no decoder at all.
    "mlm": (BODY,
            M("cls", (M("predictions", (P("bias", ("V",), "bias", share=LM_BIAS),
                                        M("transform", (linear("dense", "E", "H"), B("transform_act_fn"),
                                                        layer_norm("LayerNorm", "E"))),
                                        E_DECODER)),), when="legacy"),
            M("lm_predictions", (M("lm_head", (P("bias", ("V",), "bias"), linear("dense", "H", "H"),
                                               B("transform_act_fn"), layer_norm("LayerNorm"))),), when="!legacy")),
    "sequence-classification": (BODY, DEBERTA_POOLER, linear("classifier", "N", "H"), DROPOUT),
    "token-classification": (BODY, DROPOUT, linear("classifier", "N", "H")),
    "question-answering": (BODY, linear("qa_outputs", "N", "H")),
    "multiple-choice": (BODY, DEBERTA_POOLER, linear("classifier", "1", "H"), DROPOUT),
}


@dataclass(frozen=True, slots=True)
class Layout:
    """One family's layout: the base model and each head class's parts."""

    base: tuple[Spec, ...]
    classes: Mapping[str, tuple[Spec, ...]]


# Each family's layout, by its record's name (`tui.core.families`).
LAYOUTS: dict[str, Layout] = {
    "bert": Layout(BERT_BASE, BERT_CLASSES),
    "roberta": Layout(ROBERTA_BASE, ROBERTA_CLASSES),
    "xlm-roberta": Layout(ROBERTA_BASE, HEAD_FIRST_CLASSES),
    "camembert": Layout(ROBERTA_BASE, HEAD_FIRST_CLASSES),
    "distilbert": Layout(DISTILBERT_BASE, DISTILBERT_CLASSES),
    "albert": Layout(ALBERT_BASE, ALBERT_CLASSES),
    "electra": Layout(ELECTRA_BASE, ELECTRA_CLASSES),
    "mpnet": Layout(MPNET_BASE, MPNET_CLASSES),
    "modernbert": Layout(MODERNBERT_BASE, MODERNBERT_CLASSES),
    "deberta-v2": Layout(DEBERTA_BASE, DEBERTA_CLASSES),
}


def symbols_and_facts(config: BertConfig) -> tuple[dict[str, int], dict[str, bool]]:
    """The values of the layout's symbols and its facts: the pooler as the class builds it, the LM decoder
    tied to the word embeddings unless the config unties it, ELECTRA's and DeBERTa's projection where E ≠ H,
    the flags, and DeBERTa's position projections (relative attention, keys not shared, by pos_att_type)."""
    c = config
    separate_positions = c.relative_attention and not c.share_att_key
    facts = {"pooler": c.has_pooler, "tie": c.head in LM_HEADS and c.tie_word_embeddings,
             "project": c.embedding_width != c.hidden_size, "token_types": c.type_vocab_size > 0,
             "conv": c.conv_kernel_size > 0, "pos_key_proj": separate_positions and c.pos_att_c2p,
             "pos_query_proj": separate_positions and c.pos_att_p2c,
             **{flag: getattr(c, flag) for flag in FLAG_FIELDS}}
    return c.symbol_values(), facts


def parts_of(config: BertConfig) -> tuple[Spec, ...]:
    """The class's parts, the base model put under its body attribute (none for the base model itself)."""
    family = LAYOUTS[config.model_type]
    parts = family.classes[config.head]
    if not parts:
        return family.base
    return tuple(M(config.body, family.base) if part is BODY else part for part in parts)


def bare_modules(config: BertConfig) -> list[str]:
    """The modules of `config.hf_class` that hold no parameter (dropouts, activations, Identity, rotary tables),
    full names as `named_modules()` gives them: a target name can match one, and peft cannot adapt it."""
    values, facts = symbols_and_facts(config)
    return bare(parts_of(config), values, facts)


def build_tree(config: BertConfig) -> ParamTree:
    """The parameter tree of `config.hf_class` built from `config`."""
    values, facts = symbols_and_facts(config)
    return ParamTree(config, build(config.hf_class, parts_of(config), values, facts))


def derived_closed_form(config: BertConfig) -> list[tuple[str, str, int]]:
    """(group, formula, value) per totals group, read from the family's layout: a stack's layers appear as
    `L·(…)` (ALBERT's stored layers as `G·K·(…)`)."""
    values, facts = symbols_and_facts(config)
    grouped: dict[str, dict[tuple[str, ...], Poly]] = {}
    for name, multiplier, poly in formula(parts_of(config), facts):
        pieces = grouped.setdefault(group_of(name), {})
        pieces[multiplier] = add(pieces.get(multiplier, {}), poly)
    terms = []
    for group in sorted(grouped, key=GROUPS.index):
        texts, total = [], 0
        for multiplier, poly in grouped[group].items():
            inner = render(poly)
            factor = 1
            for symbol in multiplier:  # `(L − 1)`: every layer but the first
                factor *= values[symbol[1:-5]] - 1 if symbol.endswith(" − 1)") else values[symbol]
            total += factor * value(poly, values)
            if multiplier:
                inner = f"({inner})" if len(poly) > 1 else inner
                inner = "·".join((*multiplier, inner))
            texts.append(inner)
        terms.append((group, " + ".join(texts), total))
    return terms


def role_name(name: str, config: BertConfig) -> str:
    """`name` (without its body prefix) as BERT names the same role (`bert-tui diff`), by the family's record:
    DistilBERT's `transformer.layer.3.attention.q_lin.weight` is `encoder.layer.3.attention.self.query.weight`;
    a stored layer of a group (ALBERT's g, k) is layer g·K + k."""
    family = FAMILIES[config.model_type]
    if family.grouped_layers:
        name = re.sub(family.grouped_layers,
                      lambda m: f"encoder.layer.{int(m[1]) * config.inner_group_num + int(m[2])}.", name)
    for pattern, words in family.roles:
        name = re.sub(pattern, words, name)
    return name
