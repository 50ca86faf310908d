"""Each family's training step as data: the modules its embeddings, one encoder layer, the pooler and each head
run, in order, read from transformers' modeling files (5.25: models/bert, roberta, xlm_roberta, camembert,
distilbert, electra, albert, mpnet, deberta_v2) and checked against torch's measurement of the real classes
(tests/fixtures/compute.json and compute_families.json, written by tests/fixtures/generate_compute.py). The
engine is `tui.core.step.kinds`; `tui.core.step.compute` sums it.

Facts a condition may name (`Step.facts`): `amp`, `cast_inputs` (autocast over a float32 stream: every Linear casts
its input), `cuda_autocast` (autocast with CUDA's op lists), `fused` (sdpa's CUDA kernels), `layer_input` (a layer's
input is saved by the layer: not when checkpointing recomputes it), `pooler_holds` (the pooler keeps the whole last
hidden state, so a head reading it saves nothing more), `regression` (one label: MSE), `project` (an embedding
projection runs), `token_types`, and DeBERTa's `relative`, `c2p`, `p2c`, `share`, `norm_rel`,
`pos_key`/`pos_query`/`pos_proj` (which position projections run). Sizes: the embeddings' are `residual`, the
encoder's and the heads' `stream` (the same, but where a 16-bit projection feeds the encoder).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ..config import MEAN_POOLING, BertConfig
from .kinds import (
    Attention,
    Branch,
    CrossEntropy,
    Drop,
    Flows,
    Keep,
    Linear,
    Lookup,
    Module,
    Norm,
    Product,
    Projection,
    Regression,
    ShiftedLabels,
    SpanLoss,
)
from .workload import Workload

Modules = tuple[Module, ...]

# Embeddings -----------------------------------------------------------------------------------------------------
INPUT_IDS = Lookup("word_embeddings", "input ids (word embedding lookup)", ("n",))
EMBEDDINGS_NORM = (Norm("LayerNorm", size="residual", module="LayerNorm"),
                   Drop("dropout mask", ("n", "H"), "residual"))
# BERT's positions are a slice of a buffer (nothing new to keep).
BERT_EMBEDDINGS: Modules = (INPUT_IDS, Lookup("token_type_embeddings", "token type ids (one row, broadcast)", ("s",)),
                            Lookup("position_embeddings"), *EMBEDDINGS_NORM)
# RoBERTa counts positions from the padding index (a new tensor of ids) and gathers the token types by them.
ROBERTA_EMBEDDINGS: Modules = (INPUT_IDS, Lookup("token_type_embeddings", "token type ids (gathered by position)",
                                                 ("n",)),
                               Lookup("position_embeddings", "position ids (counted from the padding index)", ("n",)),
                               *EMBEDDINGS_NORM)
DISTILBERT_EMBEDDINGS: Modules = (INPUT_IDS, Lookup("position_embeddings"), *EMBEDDINGS_NORM)
# MPNet: RoBERTa's positions without token types, and the encoder's relative position buckets (one s × s table
# of ids, looked up in `relative_attention_bias` once for every layer).
MPNET_EMBEDDINGS: Modules = (INPUT_IDS, ROBERTA_EMBEDDINGS[2], *EMBEDDINGS_NORM,
                             Lookup("../encoder.relative_attention_bias", "relative position buckets (s × s ids)",
                                    ("s", "s"), feeds="scores"))
# ELECTRA: BERT's embeddings E wide, projected to H when E ≠ H.
ELECTRA_EMBEDDINGS: Modules = (
    INPUT_IDS, Lookup("token_type_embeddings", "token type ids (one row, broadcast)", ("s",)),
    Lookup("position_embeddings"),
    Norm("LayerNorm", width="E", size="residual", module="LayerNorm"), Drop("dropout mask", ("n", "E"), "residual"),
    Linear("embedding projection E → H", "n", "E", "H", input="projection input (the embeddings)", size="residual",
           weight="16-bit copy of the projection weight", when=("project",), names=("../embeddings_project",)),
)

# One encoder layer ----------------------------------------------------------------------------------------------
QKV = ("attention.self.query", "attention.self.key", "attention.self.value")
OUT, UP, DOWN = "attention.output.dense", "intermediate.dense", "output.dense"
AMP_LAYER_COPIES: Modules = (
    Keep("Q/K/V inputs (a 16-bit copy for each)", ("n", "H"), coef=3, when=("cast_inputs",), for_weights=QKV,
         each=True),
    Keep("16-bit copies of the Linear weights", ("H", "H"), coef=4, when=("amp",), copies_of=(*QKV, OUT)),
    Keep("16-bit copies of the FFN weights", ("H", "I"), coef=2, when=("amp",), copies_of=(UP, DOWN)),
)
# Under CUDA autocast an embedding projection hands layer 0 16-bit states: its Q/K/V keep that one tensor as it
# is, not a 16-bit copy each (a method's walk; the full step subtracts the difference: `compute.saved_terms`).
PROJECTED_INPUT = Keep("layer 0 reads the projection's 16-bit output (one tensor for Q/K/V)", ("n", "H"),
                       when=("cast_inputs",), for_weights=QKV)
LAYER_INPUT = "layer input (Q/K/V projections)"
CONTEXT = "attention context (output projection input)"
ATTENTION: Modules = (
    Keep(LAYER_INPUT, ("n", "H"), "stream", when=("!cast_inputs", "layer_input"), for_weights=QKV),
    Linear("query, key, value projections", "n", "H", "H", 3, weight=None, names=QKV, reads=LAYER_INPUT,
           x="stream"),
    Attention(),
    Linear("attention output projection", "n", "H", "H", weight=None, names=(OUT,), reads=CONTEXT),
)
ADD_AND_NORM = (Drop("attention output dropout mask", ("n", "H")),
                Norm("attention LayerNorm", module="attention.output.LayerNorm"))
FFN: Modules = (
    Linear("feed-forward up (intermediate)", "n", "H", "I", input="FFN input (attention LayerNorm output)",
           weight=None, names=(UP,), x="stream"),
    Keep("GELU input", ("n", "I")),
    Linear("feed-forward down (output)", "n", "I", "H", input="FFN down input (GELU output)", weight=None,
           names=(DOWN,)),
    Drop("output dropout mask", ("n", "H")),
    Norm("output LayerNorm", module="output.LayerNorm"),
)
BERT_LAYER: Modules = (*AMP_LAYER_COPIES, *ATTENTION, *ADD_AND_NORM, *FFN)
# DistilBERT adds the attention's output to its input with no dropout between.
DISTILBERT_LAYER: Modules = (*AMP_LAYER_COPIES, *ATTENTION,
                              Norm("attention LayerNorm", module="attention.output.LayerNorm"), *FFN)
DISTILBERT_NAMES = {  # its modules, where the layer's constants name BERT's; its LM head's
    QKV[0]: "attention.q_lin", QKV[1]: "attention.k_lin", QKV[2]: "attention.v_lin", OUT: "attention.out_lin",
    "attention.output.LayerNorm": "sa_layer_norm", UP: "ffn.lin1", DOWN: "ffn.lin2",
    "output.LayerNorm": "output_layer_norm", "cls.predictions.transform.dense": "vocab_transform",
    "cls.predictions.transform.LayerNorm": "vocab_layer_norm", "cls.predictions.decoder": "vocab_projector"}

# ALBERT: no dropout in its embeddings and encoder (p = 0), the E → H mapping always runs, its FFN's activation is
# `gelu_new` (the tanh form, built of elementwise ops that keep four tensors the size of its input).
GELU_NEW = "gelu_new: its input and 3 intermediates"


def gelu_new(prefix: str, width: str) -> Modules:
    """What `gelu_new` saves over n × `width`: on the CPU four tensors in the compute dtype; under CUDA autocast,
    whose float32 list holds `pow`, its input cast up for the cube and the float32 results downstream of it."""
    return (Keep(f"{prefix}{GELU_NEW}", ("n", width), coef=4, when=("!cuda_autocast",)),
            Keep(f"{prefix}gelu_new: its input in float32 (pow), tanh and 1 + tanh", ("n", width), 4, coef=3,
                 when=("cuda_autocast",)),
            Keep(f"{prefix}gelu_new: half its input", ("n", width), when=("cuda_autocast",)))
# Autocast casts a weight once per forward (its cache): a stored layer run L/G times keeps one set of copies.
ALBERT_STORED: Modules = (
    Keep("16-bit copies of the Linear weights (one set per stored layer)", ("S", "H", "H"), coef=4, when=("amp",)),
    Keep("16-bit copies of the FFN weights (one set per stored layer)", ("S", "H", "I"), coef=2, when=("amp",)),
)
ALBERT_LAYER: Modules = (
    AMP_LAYER_COPIES[0], *ATTENTION[:2], Attention(dropout=False), ATTENTION[3],
    Norm("attention LayerNorm", module="attention.output.LayerNorm"),
    Linear("feed-forward up (ffn)", "n", "H", "I", input="FFN input (attention LayerNorm output)", weight=None,
           names=(UP,), x="stream"),
    *gelu_new("", "I"),
    Linear("feed-forward down (ffn_output)", "n", "I", "H", input="FFN down input (GELU output)", weight=None,
           names=(DOWN,)),
    Norm("full-layer LayerNorm", module="output.LayerNorm"),
)
# Under a method, each run of a stored layer: autocast casts a weight that trains once a forward (its cache keeps
# leaves that require a gradient), a frozen one at every run.
ALBERT_RUN: Modules = (*AMP_LAYER_COPIES[1:], *ALBERT_LAYER)
ALBERT_NAMES = {QKV[0]: "attention.query", QKV[1]: "attention.key", QKV[2]: "attention.value", OUT: "attention.dense",
                "attention.output.LayerNorm": "attention.LayerNorm", UP: "ffn", DOWN: "ffn_output",
                "output.LayerNorm": "full_layer_layer_norm", "pooler.dense": "pooler",
                "cls.predictions.transform.dense": "predictions.dense",
                "cls.predictions.transform.LayerNorm": "predictions.LayerNorm",
                "cls.predictions.decoder": "predictions.decoder"}
ALBERT_EMBEDDINGS: Modules = (
    INPUT_IDS, Lookup("token_type_embeddings", "token type ids (one row, broadcast)", ("s",)),
    Lookup("position_embeddings"), Norm("LayerNorm", width="E", size="residual", module="LayerNorm"),
    Linear("embedding mapping E → H", "n", "E", "H", input="mapping input (the embeddings)", size="residual",
           weight="16-bit copy of the mapping weight", names=("../encoder.embedding_hidden_mapping_in",)),
)

# The pooler and the heads ---------------------------------------------------------------------------------------
HELD = "pooler_holds"  # the last hidden state, kept whole by the pooler's [CLS] view
POOLED = "pooled output (tanh)"  # the pooler's output: its tanh keeps it, and a Linear reading it


def first_token(module: str = "") -> Modules:
    """A Linear over the [CLS] token (`module`): its view keeps the whole last hidden state (a copy under
    autocast)."""
    names = (module,) if module else ()
    return (Keep("[CLS] hidden state (16-bit copy)", ("b'", "H"), when=("cast_inputs",), for_weights=names),
            Keep("16-bit copy of the dense weight", ("H", "H"), when=("amp",), copies_of=names),
            Keep("last hidden state (kept whole by the [CLS] view)", ("n", "H"), "stream", when=("!cast_inputs",),
                 for_weights=names, storage=HELD))


FIRST_TOKEN = first_token()
POOLER: Modules = (Linear("pooler dense", "b'", "H", "H", weight=None, names=("pooler.dense",), held=HELD,
                          x="stream"),
                   *first_token("pooler.dense"), Keep("tanh output", ("b'", "H"), storage=POOLED))


def lm_head(width: str = "H", causal: bool = False, gelu: Modules = ()) -> Modules:
    """BERT's LM head: dense H → `width`, GELU, LayerNorm, the decoder (CPU autocast runs that LayerNorm on the
    16-bit input with float32 statistics; CUDA autocast casts it up), the loss over V."""
    return (
        Branch("encoder"),
        Linear("LM transform dense", "n", "H", width, input="LM transform input (last hidden state)",
               size="stream", held=HELD, names=("cls.predictions.transform.dense|lm_head.dense",)),
        *(gelu or (Keep("LM transform GELU input", ("n", width)),)),
        Norm("LM transform LayerNorm", width=width, size="cast_norm",
             module="cls.predictions.transform.LayerNorm|lm_head.layer_norm"),
        Linear("LM decoder", "n", width, "V", input="LM decoder input", size="stream",
               names=("cls.predictions.decoder|lm_head.decoder",)),
        # The causal-LM loss upcasts the logits to float32 before its cross-entropy.
        CrossEntropy(("n",), "V", upcast=causal),
        *((ShiftedLabels(),) if causal else ()),
    )


NSP: Modules = (Branch("pooler"),
                Linear("next-sentence classifier", "b'", "H", "2", names=("cls.seq_relationship",), reads=POOLED,
                       held=POOLED),
                CrossEntropy(("b",), "2", "next-sentence "))
LABEL_LOSS: Modules = (Regression(when=("regression",)), CrossEntropy(("b",), "N", when=("!regression",)))
CLASSIFIER = ("classifier",)
BERT_CLASSIFIER: Modules = (Drop("dropout mask", ("b'", "H")),
                            Linear("classifier", "b'", "H", "N", input="classifier input", names=CLASSIFIER),
                            *LABEL_LOSS)
CHOICE: Modules = (Drop("dropout mask", ("b'", "H")),
                   Linear("choice classifier", "b'", "H", "1", input="classifier input", names=CLASSIFIER),
                   CrossEntropy(("b",), "c"))
TOKENS: Modules = (Drop("dropout mask", ("n", "H"), "stream"),
                   Linear("classifier", "n", "H", "N", input="classifier input", size="stream", names=CLASSIFIER),
                   CrossEntropy(("n",), "N"))
SPANS: Modules = (Linear("start/end classifier", "n", "H", "2", input="last hidden state", size="stream",
                         held=HELD, names=("qa_outputs",)), SpanLoss())


def classification_head(activation: Keep) -> Modules:
    """RoBERTa's and ELECTRA's `ClassificationHead`: dropout on the [CLS] token, dense, an activation, dropout,
    `out_proj`."""
    return (
        Drop("dropout mask ([CLS] token)", ("b'", "H"), "stream"),
        Linear("classification dense", "b'", "H", "H", input="dense input", size="stream",
               names=("classifier.dense",)),
        activation,
        Drop("dropout mask", ("b'", "H")),
        Linear("classification out_proj", "b'", "H", "N", input="out_proj input", names=("classifier.out_proj",)),
        *LABEL_LOSS,
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A case the family's step is not modelled for (or its class cannot run): `check` gives the offending value
    of `field`, or None."""

    field: str
    rule: str
    check: Callable[[BertConfig, Workload], object]


@dataclass(frozen=True, slots=True)
class Unused:
    """Parameters built but reached by no gradient while the facts `when` hold: `Π factors` elements in
    `tensors` tensors (no gradient, no optimizer state)."""

    when: tuple[str, ...]
    factors: tuple[str, ...]
    tensors: int
    module: str = ""  # the module they are (under the body), for a method: what trains there gets no gradient


@dataclass(frozen=True, slots=True)
class StepLayout:
    """A family's step: its embeddings, one encoder layer, the pooler, and each head class's modules, and the
    facts that are its own (each read from its modeling file, each measured)."""

    embeddings: Modules
    layer: Modules
    heads: Mapping[str, Modules]
    pooler: Modules = POOLER
    stored: Modules = ()  # what a stored layer keeps once however often it runs (ALBERT's), × S
    first: Modules = ()  # how layer 0 differs from the others (ModernBERT's: no attention norm)
    rotary: Modules = ()  # rotary tables, once per layer type
    local: Modules = ()  # what only the local (sliding-window) layers keep
    layer_types: bool = False  # global attention every 3rd layer, sliding-window (local) between (ModernBERT)
    rotary_one: Modules = ()  # the recomputed layer's share of `rotary`, `local` and `first`
    local_one: Modules = ()
    first_recompute: Modules = ()
    checkpoint_mask: bool = True  # the 4-D mask becomes a checkpoint input kept once (not ModernBERT's)
    measured_on_gpu: bool = False  # its CUDA conventions and the peak's transients measured on an H200 (BERT)
    projection: str = ""  # an embedding projection to H: "always" (ALBERT's mapping), "E≠H" (ELECTRA, DeBERTa)
    mask_after_projection: bool = False  # the mask takes the projected states' dtype (ELECTRA)
    reserved_positions: int = 0  # position ids count from the padding index + 1 (RoBERTa's, MPNet's)
    eager_only: bool = False  # transformers has no sdpa for it: the math path whatever is asked
    boolean_mask: bool = False  # a boolean mask always (made when none is given): the scores keep their dtype
    shared_layers: bool = False  # G groups of K stored layers, run L·K times (ALBERT)
    no_checkpointing: str = ""  # why transformers refuses checkpointing it
    refusals: tuple[Refusal, ...] = ()
    # config.json settings (`BertConfig.step_keys`) the step models, and the heads they matter to (ModernBERT's
    # mean pooling); elsewhere the setting changes nothing and is no reason to refuse
    modelled_keys: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    unused: tuple[Unused, ...] = ()  # parameters it builds and its step leaves without a gradient
    # Where its modules are, for a fine-tuning method's walk (`flow`): the encoder layers' container, and the
    # family's name for each module the shared constants name as BERT does (DistilBERT's `attention.q_lin`).
    layer_prefix: str = "encoder.layer"
    names: Mapping[str, str] = field(default_factory=dict)
    run: Modules = ()  # a run of a stored layer under a method, where `stored` keeps what it keeps once (ALBERT's)
    walks: tuple[Modules, ...] = ()  # under a method: layer 0, a global layer, a local layer (ModernBERT's)


BERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head(),
    "causal-lm": lm_head(causal=True),
    "pretraining": (*lm_head(), *NSP),
    "next-sentence": NSP,
    "sequence-classification": BERT_CLASSIFIER,
    "token-classification": TOKENS,
    "question-answering": SPANS,
    "multiple-choice": CHOICE,
}
ROBERTA_HEADS: dict[str, Modules] = {
    **{head: BERT_HEADS[head] for head in ("none", "mlm", "causal-lm", "token-classification",
                                           "question-answering", "multiple-choice")},
    "sequence-classification": classification_head(Keep("tanh output", ("b'", "H"))),
}
# DistilBERT's classifiers: `pre_classifier` on the first token, ReLU, dropout, the classifier.
DISTILBERT_CLASSIFIER: Modules = (
    *first_token("pre_classifier")[:2],
    Keep("last hidden state (kept whole by the first token's view)", ("n", "H"), "stream", when=("!cast_inputs",),
         for_weights=("pre_classifier",), storage=HELD),
    Linear("pre_classifier", "b'", "H", "H", weight=None, names=("pre_classifier",), x="stream", held=HELD),
    Keep("ReLU output", ("b'", "H")),
    Drop("dropout mask", ("b'", "H")),
)
DISTILBERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head(),
    "sequence-classification": (*DISTILBERT_CLASSIFIER, Linear("classifier", "b'", "H", "N", input="classifier input",
                                                               names=CLASSIFIER), *LABEL_LOSS),
    "multiple-choice": (*DISTILBERT_CLASSIFIER, Linear("choice classifier", "b'", "H", "1", input="classifier input",
                                                       names=CLASSIFIER), CrossEntropy(("b",), "c")),
    "token-classification": TOKENS,
    "question-answering": (Drop("dropout mask", ("n", "H"), "stream"),
                           Linear("start/end classifier", "n", "H", "2", input="classifier input", size="stream",
                                  names=("qa_outputs",)), SpanLoss()),
}
# ELECTRA: the generator's LM head is E wide; the discriminator scores every token (binary cross-entropy).
SUMMARY = "sequence_summary.summary"
ELECTRA_NAMES = {"cls.predictions.transform.dense": "generator_predictions.dense",
                 "cls.predictions.transform.LayerNorm": "generator_predictions.LayerNorm",
                 "cls.predictions.decoder": "generator_lm_head"}
ELECTRA_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head("E"),
    "causal-lm": lm_head("E", causal=True),
    "pretraining": (
        Linear("discriminator dense", "n", "H", "H", input="discriminator input (last hidden state)",
               size="stream", names=("discriminator_predictions.dense",)),
        Keep("discriminator GELU input", ("n", "H")),
        Linear("discriminator prediction", "n", "H", "1", input="prediction input (GELU output)",
               names=("discriminator_predictions.dense_prediction",)),
        Keep("logits (binary cross-entropy input)", ("n",), "loss"),
        Keep("labels as float32", ("n",), 4),
    ),
    "sequence-classification": classification_head(Keep("GELU input", ("b'", "H"))),
    "token-classification": TOKENS,
    "question-answering": SPANS,
    "multiple-choice": (
        Linear("sequence summary", "b'", "H", "H", weight=None, names=(SUMMARY,), x="stream", held=HELD),
        *first_token(SUMMARY),
        Keep("summary GELU input", ("b'", "H")),
        Drop("dropout mask", ("b'", "H")),
        Linear("choice classifier", "b'", "H", "1", input="classifier input", names=CLASSIFIER),
        CrossEntropy(("b",), "c"),
    ),
}

ALBERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head("E", gelu=gelu_new("LM transform ", "E")),
    "pretraining": (*lm_head("E", gelu=gelu_new("LM transform ", "E")),
                    Branch("pooler"), Drop("sentence-order dropout mask", ("b'", "H")),
                    Linear("sentence-order classifier", "b'", "H", "N", input="classifier input",
                           names=("sop_classifier.classifier",)),
                    CrossEntropy(("b",), "N", "sentence-order ")),
    **{head: BERT_HEADS[head] for head in ("sequence-classification", "token-classification", "question-answering",
                                           "multiple-choice")},
}

# DeBERTa-v2/v3: embeddings (optionally with positions, token types, an E → H projection) multiplied by the mask;
# the relative embeddings' LayerNorm once per step; disentangled attention in every layer: content-to-content,
# content-to-position and position-to-content scores (each divided by a scale tensor it keeps), the relative
# embeddings projected by the layer (with the content key/query projections when keys are shared), repeated for
# every sequence, and gathered by relative position; a boolean mask per layer (the mask is always there).
DEBERTA_EMBEDDINGS: Modules = (
    INPUT_IDS,
    Lookup("token_type_embeddings", "token type ids (zeros)", ("n",), when=("token_types",)),
    Lookup("position_embeddings", when=("position_biased",)),
    Linear("embedding projection E → H", "n", "E", "H", input="projection input (the embeddings)", size="residual",
           weight="16-bit copy of the projection weight", when=("project",), names=("embed_proj",)),
    # after the projection: the encoder's stream (16-bit where a projection ran under autocast)
    Norm("LayerNorm", module="LayerNorm"),
    Keep("padding mask as a factor", ("n",), "stream"),
    Drop("dropout mask", ("n", "H"), "stream"),
    # The relative embeddings (the encoder's, once a step; every layer reads them): their flow, for a method's walk
    Lookup("../encoder.rel_embeddings", feeds="rel", when=("relative",)),
    Lookup("../encoder.LayerNorm", feeds="rel", when=("relative", "norm_rel")),
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
    Product("relative embeddings × key projection", ("2", "D", "H", "H"), when=("pos_key", "c2p")),
    Product("relative embeddings × query projection", ("2", "D", "H", "H"), when=("pos_query", "p2c")),
    # With shared keys both projections run, though a score type may not use one: no gradient reaches it.
    Product("relative embeddings × key projection (unused)", ("2", "D", "H", "H"), backward=False,
            when=("pos_key", "!c2p")),
    Product("relative embeddings × query projection (unused)", ("2", "D", "H", "H"), backward=False,
            when=("pos_query", "!p2c")),
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
                                  held=HELD), *first_token("../pooler.dense"), Keep("pooler GELU input", ("b'", "H")))
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

# ModernBERT: no dropout anywhere (p = 0), no biases to speak of; layer 0 has no attention norm (`first layer`);
# one Q/K/V projection whose output the kernels keep whole through v; rotary cos and sin computed once per layer
# type (`rotary tables`, Y types: global every 3rd layer, local between) and kept by every layer using them; the
# local layers' sliding-window mask reaches sdpa as a float bias per layer once s reaches the half window (64);
# a gated MLP (Wi's whole output kept by the GELU's view of its first half); eager softmax in float32.
MODERNBERT_EMBEDDINGS: Modules = (INPUT_IDS, Norm("embedding norm", size="residual", module="norm"))
MODERNBERT_ROTARY: Modules = (Keep("rotary cos and sin (once per layer type)", ("Y", "s", "d"), "residual", 2),)
MODERNBERT_FIRST: Modules = (  # layer 0: its input straight to Q/K/V (an Identity where the others normalise)
    Keep("layer 0 has no attention norm: its input", ("n", "H"), "stream", -1),
    Keep("layer 0 has no attention norm: its mean and rstd", ("n",), "stats", -2),
)
MODERNBERT_LOCAL: Modules = (  # the sliding-window mask of a local layer, where no padding mask already made one
    Keep("sliding-window mask as a float bias (each local layer)", ("Ll", "b'", "s", "s"),
         when=("window_mask", "!padded", "!rows16")),
    Keep("sliding-window mask as a float bias (each local layer)", ("Ll", "b'", "s", "s₁₆"),
         when=("window_mask", "!padded", "rows16")),
)
MODERNBERT_LAYER: Modules = (  # (its last five modules are a method's walk's too: `modernbert_walk`)
    Keep("Q/K/V input (a 16-bit copy)", ("n", "H"), when=("cast_inputs",)),
    Keep("16-bit copies of the attention weights", ("H", "H"), coef=4, when=("amp",)),
    Keep("16-bit copies of the MLP weights", ("H", "I"), coef=3, when=("amp",)),
    # The attention norm's input is the layer's (held while checkpointing recomputes the layer), its output Q/K/V's.
    Keep("attention norm input", ("n", "H"), "stream", when=("layer_input",)),
    Keep("attention norm mean and rstd", ("n",), "stats", 2),
    Keep("Q/K/V input (attention norm output)", ("n", "H"), "stream", when=("!cast_inputs",)),
    Linear("query, key, value projection (Wqkv)", "n", "H", "H", 3, weight=None),
    Attention(dropout=False, fused_qkv=True, softmax32=True),
    Linear("attention output projection (Wo)", "n", "H", "H", weight=None),
    Norm("MLP norm", module="mlp_norm"),
    Linear("MLP up, gated (Wi)", "n", "H", "I", 2, input="MLP input (MLP norm output)", size="stream", weight=None,
           copy="MLP input (a 16-bit copy)", names=("mlp.Wi",)),
    Keep("GELU input: a view of Wi's whole output", ("2", "n", "I")),
    Keep("GELU output (the gate's factor)", ("n", "I")),
    Linear("MLP down (Wo)", "n", "I", "H", input="MLP down input (gated product)", weight=None, recomputed=False,
           names=("mlp.Wo",)),
)
# While checkpointing recomputes one layer (its input held): its type's rotary table, a local layer's mask, and
# for a one-layer model layer 0's missing norm, where the input itself goes to Q/K/V (held).
MODERNBERT_ROTARY_ONE: Modules = (Keep("rotary cos and sin (the layer's type)", ("s", "d"), "residual", 2),)
MODERNBERT_LOCAL_ONE: Modules = (
    Keep("sliding-window mask as a float bias", ("b'", "s", "s"), when=("window_mask", "!padded", "!rows16")),
    Keep("sliding-window mask as a float bias", ("b'", "s", "s₁₆"), when=("window_mask", "!padded", "rows16")),
)
MODERNBERT_FIRST_RECOMPUTE: Modules = (
    Keep("layer 0 has no attention norm: Q/K/V read its (held) input", ("n", "H"), "stream", -1,
         when=("!cast_inputs",)),
    Keep("layer 0 has no attention norm: its mean and rstd", ("n",), "stats", -2),
)
MODERNBERT_FINAL = Norm("final norm", module="@final_norm")  # (@: under the body, where the heads are not)


def modernbert_walk(first: bool, local: bool) -> Modules:
    """One ModernBERT layer as a method's walk takes it, a module a step: layer 0 has no attention norm (Q/K/V read
    its input), a global layer's rotary table or a local layer's, and a local layer's sliding-window mask. The
    full step keeps these as sums over the layers instead (`MODERNBERT_LAYER`, `_ROTARY`, `_FIRST`, `_LOCAL`)."""
    qkv_input = "layer 0's input (Q/K/V)" if first else "Q/K/V input (attention norm output)"
    kind = "local" if local else "global"
    return (
        Keep("16-bit copies of Wqkv", ("H", "H"), coef=3, when=("amp",), copies_of=("attn.Wqkv",)),
        Keep("16-bit copy of the attention Wo", ("H", "H"), when=("amp",), copies_of=("attn.Wo",)),
        Keep("16-bit copies of Wi", ("H", "I"), coef=2, when=("amp",), copies_of=("mlp.Wi",)),
        Keep("16-bit copy of the MLP Wo", ("H", "I"), when=("amp",), copies_of=("mlp.Wo",)),
        *(() if first else (Norm("attention norm", module="attn_norm"),)),
        Keep("Q/K/V input (a 16-bit copy)", ("n", "H"), when=("cast_inputs",), for_weights=("attn.Wqkv",)),
        Linear("query, key, value projection (Wqkv)", "n", "H", "H", 3, weight=None, names=("attn.Wqkv",),
               reads=qkv_input, x="stream"),
        Keep(f"rotary cos and sin ({kind} layers)", ("s", "d"), "residual", 2, storage=f"rotary {kind}"),
        *(MODERNBERT_LOCAL_ONE if local else ()),
        Attention(dropout=False, fused_qkv=True, softmax32=True),
        Linear("attention output projection (Wo)", "n", "H", "H", weight=None, names=("attn.Wo",), reads=CONTEXT),
        *MODERNBERT_LAYER[-5:],
    )


def modernbert_head(rows: str, classes: str, loss: Modules, pooling: str) -> Modules:
    """ModernBERT's prediction head (dense, GELU, norm; no dropout) on the [CLS] token (`cls` pooling: a view,
    or for multiple choice gathered by index) or on every token, then its classifier and loss."""
    mean: Modules = (  # `classifier_pooling: mean`: the masked tokens' mean (a mask of ones when none is given)
        Keep("the mean's weights: the padding mask (int64 as given)", ("n",), 8, when=("mean_pooling", "mask_given")),
        Keep("the mean's weights: a mask of ones (bool)", ("n",), 1, when=("mean_pooling", "!mask_given")),
        Keep("tokens per sequence (the mean's divisor)", ("b'",), 8, when=("mean_pooling",)),
        Linear("head dense", "b'", "H", "H", input="mean of the tokens", size="stream", when=("mean_pooling",),
               names=HEAD_DENSE),
    )
    dense: Modules = {
        "view": (Linear("head dense", "b'", "H", "H", weight=None, when=("!mean_pooling",), names=HEAD_DENSE,
                        x="stream", held=HELD),
                 *(replace(keep, when=(*keep.when, "!mean_pooling")) for keep in first_token(HEAD_DENSE[0])), *mean),
        "index": (Keep("sequence indices", ("b'",), 8, when=("!mean_pooling",)),
                  Keep("[CLS] positions (the padding mask's argmax)", ("b'",), 8, when=("mask_given", "!mean_pooling")),
                  Linear("head dense", "b'", "H", "H", input="[CLS] tokens (gathered by index)", size="stream",
                         when=("!mean_pooling",), names=HEAD_DENSE), *mean),
        "tokens": (Linear("head dense", "n", "H", "H", input="head input (final norm output)", size="stream",
                          names=HEAD_DENSE),),
    }[pooling]
    return (MODERNBERT_FINAL, *dense, Keep("head GELU input", (rows, "H")),
            Norm("head norm", rows=rows, size="cast_norm", module="head.norm"),
            Linear("classifier", rows, "H", classes, input="classifier input (head norm output)", size="cast_norm",
                   names=CLASSIFIER),
            *loss)


HEAD_DENSE = ("head.dense",)
MODERNBERT_NAMES = {"word_embeddings": "tok_embeddings", "cls.predictions.transform.dense": "head.dense",
                    "cls.predictions.transform.LayerNorm": "head.norm", "cls.predictions.decoder": "decoder"}


MODERNBERT_HEADS: dict[str, Modules] = {
    "none": (MODERNBERT_FINAL,),
    # (the LM head reads the final norm's output: no Branch back to the encoder's)
    "mlm": (MODERNBERT_FINAL, *lm_head(causal=False)[1:-1], CrossEntropy(("n",), "V", upcast=True)),
    "sequence-classification": modernbert_head("b'", "N", LABEL_LOSS, "view"),
    "token-classification": modernbert_head("n", "N", (CrossEntropy(("n",), "N"),), "tokens"),
    "question-answering": modernbert_head("n", "2", (SpanLoss(),), "tokens"),
    "multiple-choice": modernbert_head("b'", "1", (CrossEntropy(("b",), "c"),), "index"),
}

MPNET_NAMES = {QKV[0]: "attention.attn.q", QKV[1]: "attention.attn.k", QKV[2]: "attention.attn.v",
               OUT: "attention.attn.o", "attention.output.LayerNorm": "attention.LayerNorm"}
MPNET_HEADS: dict[str, Modules] = {head: ROBERTA_HEADS[head] for head in (
    "none", "mlm", "sequence-classification", "token-classification", "question-answering", "multiple-choice")}

ROBERTA = StepLayout(ROBERTA_EMBEDDINGS, BERT_LAYER, ROBERTA_HEADS, reserved_positions=2)
STEPS: dict[str, StepLayout] = {
    "bert": StepLayout(BERT_EMBEDDINGS, BERT_LAYER, BERT_HEADS, measured_on_gpu=True),
    "roberta": ROBERTA,
    "xlm-roberta": ROBERTA,
    "camembert": ROBERTA,
    "distilbert": StepLayout(DISTILBERT_EMBEDDINGS, DISTILBERT_LAYER, DISTILBERT_HEADS,
                             layer_prefix="transformer.layer", names=DISTILBERT_NAMES),
    "electra": StepLayout(ELECTRA_EMBEDDINGS, BERT_LAYER, ELECTRA_HEADS, projection="E≠H", mask_after_projection=True,
                          names=ELECTRA_NAMES,
                          refusals=(Refusal("padding_mask", "ElectraForPreTraining's loss keeps only the unpadded "
                                            "tokens (a count the config cannot tell): not modelled; run it without "
                                            "a padding mask",
                                            lambda c, w: w.padded and w.train and c.head == "pretraining" or None),)),
    "albert": StepLayout(ALBERT_EMBEDDINGS, ALBERT_LAYER, ALBERT_HEADS, stored=ALBERT_STORED, projection="always",
                         names=ALBERT_NAMES, run=ALBERT_RUN,
                         shared_layers=True, no_checkpointing="its layers are shared, run L times",
                         refusals=(Refusal("num_labels", "AlbertForPreTraining's sentence-order loss reads its scores"
                                           " two at a time (view(-1, 2)): a step runs with 2 only",
                                           lambda c, w: c.num_labels if c.head == "pretraining" and c.num_labels != 2
                                           and w.train else None),)),
    "mpnet": StepLayout(MPNET_EMBEDDINGS, BERT_LAYER, MPNET_HEADS, reserved_positions=2, eager_only=True,
                        names=MPNET_NAMES,
                        no_checkpointing="MPNet's layers are not checkpointable"),
    "modernbert": StepLayout(MODERNBERT_EMBEDDINGS, MODERNBERT_LAYER, MODERNBERT_HEADS, layer_prefix="layers",
                             names=MODERNBERT_NAMES, walks=(modernbert_walk(True, False), modernbert_walk(False, False),
                                                            modernbert_walk(False, True)),
                             first=MODERNBERT_FIRST, rotary=MODERNBERT_ROTARY, local=MODERNBERT_LOCAL,
                             layer_types=True, rotary_one=MODERNBERT_ROTARY_ONE, local_one=MODERNBERT_LOCAL_ONE,
                             first_recompute=MODERNBERT_FIRST_RECOMPUTE, checkpoint_mask=False,
                             modelled_keys={MEAN_POOLING: ("sequence-classification", "multiple-choice")},
                             refusals=(Refusal("padding_mask", "false: ModernBertForMultipleChoice's mean pooling "
                                               "needs an attention mask (transformers fails without one)",
                                               lambda c, w: False if c.head == "multiple-choice"
                                               and MEAN_POOLING in c.step_keys and not w.padding_mask else None),
                                       Refusal("hidden_size", "÷ num_attention_heads must be even for a step: the "
                                               "rotary embedding rotates pairs (transformers fails otherwise)",
                                               lambda c, w: c.hidden_size if c.hidden_size // c.num_attention_heads
                                               % 2 else None))),
    "deberta-v2": StepLayout(DEBERTA_EMBEDDINGS, DEBERTA_LAYER, DEBERTA_HEADS, pooler=DEBERTA_POOLER,
                             names=DEBERTA_NAMES, walks=(DEBERTA_WALK,),
                             projection="E≠H", eager_only=True, boolean_mask=True,
                             refusals=(Refusal("conv_kernel_size", "DeBERTa's convolution runs beside the first "
                                               "layer only: not modelled for compute yet (parameters are counted)",
                                               lambda c, w: c.conv_kernel_size or None),
                                       Refusal("position_buckets", "must not be 1 for a step: transformers divides "
                                               "by position_buckets // 2 (0 or at least 2)",
                                               lambda c, w: 1 if c.relative_attention and c.position_buckets == 1
                                               else None)),
                             # the relative embeddings' LayerNorm is built whenever norm_rel_ebd says so; with
                             # neither score type the relative embeddings reach no score
                             unused=(Unused(("norm_rel", "!relative"), ("2", "H"), 2, "encoder.LayerNorm"),
                                     Unused(("relative", "!c2p", "!p2c"), ("2", "D", "H"), 1,
                                            "encoder.rel_embeddings"),
                                     Unused(("relative", "!c2p", "!p2c", "norm_rel"), ("2", "H"), 2,
                                            "encoder.LayerNorm"))),
}
