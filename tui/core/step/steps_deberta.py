"""DeBERTa-v2/v3's step as data (`DebertaV2Model` and its heads, transformers 5.25 models/deberta_v2), read as
`steps` reads BERT's code's, checked against torch's measurement of the real classes (compute_families.json)."""

from __future__ import annotations

from dataclasses import replace

from .kinds import (
    Act,
    Attention,
    CrossEntropy,
    Drop,
    Flows,
    Keep,
    Linear,
    Lookup,
    Norm,
    Product,
    Projection,
    Regression,
)
from .steps import (
    ADD_AND_NORM,
    AMP_LAYER_COPIES,
    ATTENTION,
    CHOICE,
    CLASSIFIER,
    FFN,
    HELD,
    INPUT_IDS,
    QKV,
    SPANS,
    TOKENS,
    Modules,
    Refusal,
    StepLayout,
    Unused,
    first_token,
    lm_head,
)

# DeBERTa-v2/v3: embeddings (optionally with positions, token types, an E → H projection) multiplied by the mask;
# the relative embeddings' LayerNorm once per step; disentangled attention in every layer: content-to-content,
# content-to-position and position-to-content scores (each divided by a scale tensor it keeps), the relative
# embeddings projected by the layer (with the content key/query projections when keys are shared), repeated for
# every sequence, and gathered by relative position; a boolean mask per layer (the mask is always there).
DEBERTA_EMBEDDINGS: Modules = (
    INPUT_IDS,
    Lookup("position_embeddings", when=("position_biased",)),
    Lookup("token_type_embeddings", "token type ids (zeros)", ("n",), when=("token_types",)),
    Linear("embedding projection E → H", "n", "E", "H", input="projection input (the embeddings)", size="residual",
           weight="16-bit copy of the projection weight", when=("project",), names=("embed_proj",)),
    # after the projection: the encoder's stream (16-bit where a projection ran under autocast)
    Norm("LayerNorm", module="LayerNorm"),
    Keep("padding mask as a factor", ("n",), "stream"),
    Drop("dropout mask", ("n", "H"), "stream"),
    # The relative embeddings (the encoder's, once a step; every layer reads them): their flow, for a method's walk
    Lookup("../encoder.rel_embeddings", feeds="rel", when=("relative",), op=""),
    Lookup("../encoder.LayerNorm", feeds="rel", when=("relative", "norm_rel"), op="norm"),
    # The relative embeddings' LayerNorm normalises the parameter itself: only its statistics are new.
    Keep("relative embeddings' LayerNorm mean and rstd", ("2", "D"), "stats", 2, when=("relative", "norm_rel"),
         if_flows=("rel",)),
)
_SCALE = Keep("a scale (a 0-d tensor)", ("1",), "heads")
DEBERTA_ATTENTION: Modules = (
    *AMP_LAYER_COPIES[:1],
    Keep("16-bit copies of the Linear weights", ("H", "H"), coef=4, when=("amp",)),
    Keep("16-bit copies of the position projections' weights", ("H", "H"), when=("amp", "relative", "!share", "c2p")),
    Keep("16-bit copies of the position projections' weights", ("H", "H"), when=("amp", "relative", "!share", "p2c")),
    Keep("16-bit copies of the FFN weights", ("H", "I"), coef=2, when=("amp",)),
    ATTENTION[0], ATTENTION[1],
    _SCALE,
    Keep("keys scaled, transposed (Kᵀ/scale)", ("n", "H"), "heads"),
    Keep("queries (split into heads)", ("n", "H"), "heads"),
    Drop("relative embeddings' dropout mask", ("2", "D", "H"), "residual", when=("relative",)),
    Keep("relative embeddings (the position projections' input)", ("2", "D", "H"), "residual",
         when=("pos_proj", "!amp")),
    Keep("relative embeddings (a 16-bit copy for the key projection)", ("2", "D", "H"), when=("pos_key", "amp")),
    Keep("relative embeddings (a 16-bit copy for the query projection)", ("2", "D", "H"),
         when=("pos_query", "amp")),
    Product("relative embeddings × key projection", ("2", "D", "H", "H"), when=("pos_key", "c2p"), op="linear"),
    Product("relative embeddings × query projection", ("2", "D", "H", "H"), when=("pos_query", "p2c"), op="linear"),
    # With shared keys both projections run, though a score type may not use one: no gradient reaches it.
    Product("relative embeddings × key projection (unused)", ("2", "D", "H", "H"), backward=False,
            when=("pos_key", "!c2p"), op="linear"),
    Product("relative embeddings × query projection (unused)", ("2", "D", "H", "H"), backward=False,
            when=("pos_query", "!p2c"), op="linear"),
    Product("content-to-position scores", ("b'", "s", "2", "D", "H"), when=("relative", "c2p")),
    Keep("position keys (repeated for every sequence)", ("b'", "2", "D", "H"), when=("relative", "c2p")),
    Keep("content-to-position gather index (s × s)", ("s", "s"), 8, when=("relative", "c2p")),
    Keep("content-to-position scores (gathered)", ("b'", "A", "s", "2", "D"), when=("relative", "c2p")),
    Keep("a scale (a 0-d tensor)", ("1",), "heads", when=("relative", "c2p")),
    Product("position-to-content scores", ("b'", "s", "2", "D", "H"), when=("relative", "p2c")),
    Keep("position queries (repeated for every sequence)", ("b'", "2", "D", "H"), when=("relative", "p2c")),
    Keep("keys (split into heads)", ("n", "H"), "heads", when=("relative", "p2c")),
    Keep("position-to-content gather index (s × s)", ("s", "s"), 8, when=("relative", "p2c")),
    Keep("position-to-content scores (gathered)", ("b'", "A", "s", "2", "D"), when=("relative", "p2c")),
    Keep("a scale (a 0-d tensor)", ("1",), "heads", when=("relative", "p2c")),
    Keep("attention mask (boolean, every layer)", ("b'", "s", "s"), 1),
    Attention(values_only=True),
    ATTENTION[3],
)
DEBERTA_LAYER: Modules = (*DEBERTA_ATTENTION, *ADD_AND_NORM, *FFN)
# A method's walk of one layer: the same tensors, each kept when the operand it serves needs a gradient (q, k, v;
# `pk`/`pq` the position keys/queries; `c2p`/`p2c` the scores of each type; `scores` the sum), and the position
# projections as Linears over the relative embeddings (LoRA on a shared key projection runs there too).
_REL_KEY, _REL_QUERY = "relative embeddings (a 16-bit copy for the key projection)", \
    "relative embeddings (a 16-bit copy for the query projection)"
DEBERTA_WALK: Modules = (
    *AMP_LAYER_COPIES, ATTENTION[0], ATTENTION[1], Flows(),
    Projection("relative embeddings × key projection", (QKV[1],), "pk", _REL_KEY, when=("pos_key", "share", "c2p")),
    Projection("relative embeddings × key projection (unused)", (QKV[1],), "pk", _REL_KEY, used=False,
               when=("pos_key", "share", "!c2p")),
    Projection("relative embeddings × query projection", (QKV[0],), "pq", _REL_QUERY,
               when=("pos_query", "share", "p2c")),
    Projection("relative embeddings × query projection (unused)", (QKV[0],), "pq", _REL_QUERY, used=False,
               when=("pos_query", "share", "!p2c")),
    Projection("relative embeddings × key projection", ("attention.self.pos_key_proj",), "pk", _REL_KEY,
               when=("relative", "!share", "c2p")),
    Projection("relative embeddings × query projection", ("attention.self.pos_query_proj",), "pq", _REL_QUERY,
               when=("relative", "!share", "p2c")),
    replace(_SCALE, if_flows=("k",)),
    Keep("keys scaled, transposed (Kᵀ/scale)", ("n", "H"), "heads", if_flows=("q",)),
    Keep("queries (split into heads)", ("n", "H"), "heads", if_flows=("k", "c2p_pk")),
    Product("content-to-position scores", ("b'", "s", "2", "D", "H"), when=("relative", "c2p"), grads_of=("q", "pk")),
    Keep("position keys (repeated for every sequence)", ("b'", "2", "D", "H"), when=("relative", "c2p"),
         if_flows=("q",)),
    Keep("content-to-position gather index (s × s)", ("s", "s"), 8, when=("relative", "c2p"), if_flows=("c2p",)),
    Keep("content-to-position scores (gathered)", ("b'", "A", "s", "2", "D"), when=("relative", "c2p"),
         if_flows=("c2p",)),
    Keep("a scale (a 0-d tensor)", ("1",), "heads", when=("relative", "c2p"), if_flows=("c2p",)),
    Product("position-to-content scores", ("b'", "s", "2", "D", "H"), when=("relative", "p2c"), grads_of=("k", "pq")),
    Keep("position queries (repeated for every sequence)", ("b'", "2", "D", "H"), when=("relative", "p2c"),
         if_flows=("k",)),
    Keep("keys (split into heads)", ("n", "H"), "heads", when=("relative", "p2c"), if_flows=("pq",)),
    Keep("position-to-content gather index (s × s)", ("s", "s"), 8, when=("relative", "p2c"), if_flows=("p2c",)),
    Keep("position-to-content scores (gathered)", ("b'", "A", "s", "2", "D"), when=("relative", "p2c"),
         if_flows=("p2c",)),
    Keep("a scale (a 0-d tensor)", ("1",), "heads", when=("relative", "p2c"), if_flows=("p2c",)),
    Keep("attention mask (boolean, every layer)", ("b'", "s", "s"), 1, if_flows=("scores",)),
    Attention(values_only=True), ATTENTION[3], *ADD_AND_NORM, *FFN,
)
DEBERTA_NAMES = {QKV[0]: "attention.self.query_proj", QKV[1]: "attention.self.key_proj",
                 QKV[2]: "attention.self.value_proj"}
# (its ContextPooler sits beside the body, not under it)
DEBERTA_POOLER: Modules = (Linear("pooler dense", "b'", "H", "H", weight=None, names=("../pooler.dense",), x="stream",
                                  held=HELD), *first_token("../pooler.dense"), Act("pooler GELU input", ("b'", "H")))
DEBERTA_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head("E"),
    "sequence-classification": (
        Drop("dropout mask", ("b'", "H")),
        Linear("classifier", "b'", "H", "N", input="classifier input", names=CLASSIFIER),
        Regression(when=("regression",)),
        Keep("labelled rows' index", ("b",), 8, when=("!regression",)),
        Keep("logits (gathered by labelled row)", ("b", "N"), when=("!regression",)),
        CrossEntropy(("b",), "N", upcast=True, when=("!regression",)),
    ),
    "token-classification": TOKENS,
    "question-answering": SPANS,
    "multiple-choice": CHOICE,
}

DEBERTA = StepLayout(DEBERTA_EMBEDDINGS, DEBERTA_LAYER, DEBERTA_HEADS, pooler=DEBERTA_POOLER,
                     names=DEBERTA_NAMES, walks=(DEBERTA_WALK,),
                     buffers=lambda config, weight: 8 * config.max_position_embeddings,  # position_ids only
                     boolean_mask=True,
                     refusals=(Refusal("conv_kernel_size", "DeBERTa's convolution runs beside the first "
                                       "layer only: not modelled for compute yet (parameters are counted)",
                                       lambda c, w: c.conv_kernel_size or None),
                               Refusal("position_buckets", "must not be 1 for a step: transformers divides "
                                       "by position_buckets // 2 (0 or at least 2)",
                                       lambda c, w: 1 if c.relative_attention and c.position_buckets == 1
                                       else None),
                               Refusal("embedding_size", "must equal hidden_size for the masked LM's step with "
                                       "legacy: false: its head multiplies the H-wide states by the E-wide word "
                                       "table, which transformers cannot run (legacy: true projects H → E first)",
                                       lambda c, w: c.embedding_size if c.head == "mlm" and not c.legacy
                                       and c.embedding_size != c.hidden_size else None)),
                     # the relative embeddings' LayerNorm is built whenever norm_rel_ebd says so; with
                     # neither score type the relative embeddings reach no score
                     unused=(Unused(("norm_rel", "!relative"), ("2", "H"), 2, "encoder.LayerNorm"),
                             Unused(("relative", "!c2p", "!p2c"), ("2", "D", "H"), 1,
                                    "encoder.rel_embeddings"),
                             Unused(("relative", "!c2p", "!p2c", "norm_rel"), ("2", "H"), 2,
                                    "encoder.LayerNorm")))
