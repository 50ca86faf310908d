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
from dataclasses import dataclass, field

from ..config import BertConfig
from .kinds import (
    Act,
    Attention,
    BinaryCrossEntropy,
    Branch,
    CrossEntropy,
    Drop,
    Keep,
    Linear,
    Lookup,
    Module,
    Norm,
    Regression,
    ShiftedLabels,
    SpanLoss,
)
from .workload import Workload

Modules = tuple[Module, ...]

# Embeddings -----------------------------------------------------------------------------------------------------
WORDS = "word_embeddings"  # the input embeddings (`get_input_embeddings`), as BERT names them
INPUT_IDS = Lookup(WORDS, "input ids (word embedding lookup)", ("n",))
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
           x="stream", layer_input=True),
    Attention(),
    Linear("attention output projection", "n", "H", "H", weight=None, names=(OUT,), reads=CONTEXT),
)
ADD_AND_NORM = (Drop("attention output dropout mask", ("n", "H")),
                Norm("attention LayerNorm", module="attention.output.LayerNorm"))
FFN: Modules = (
    Linear("feed-forward up (intermediate)", "n", "H", "I", input="FFN input (attention LayerNorm output)",
           weight=None, names=(UP,), x="stream"),
    Act("GELU input", ("n", "I")),
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
    return (Act(f"{prefix}{GELU_NEW}", ("n", width), coef=4, when=("!cuda_autocast",)),
            Keep(f"{prefix}gelu_new: its input in float32 (pow), tanh and 1 + tanh", ("n", width), 4, coef=3,
                 when=("cuda_autocast",)),
            Act(f"{prefix}gelu_new: half its input", ("n", width), when=("cuda_autocast",)))  # (the op once)
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
                   *first_token("pooler.dense"), Act("tanh output", ("b'", "H"), storage=POOLED))


def lm_head(width: str = "H", causal: bool = False, gelu: Modules = ()) -> Modules:
    """BERT's LM head: dense H → `width`, GELU, LayerNorm, the decoder (CPU autocast runs that LayerNorm on the
    16-bit input with float32 statistics; CUDA autocast casts it up), the loss over V."""
    return (
        Branch("encoder"),
        Linear("LM transform dense", "n", "H", width, input="LM transform input (last hidden state)",
               size="stream", held=HELD, names=("cls.predictions.transform.dense|lm_head.dense",)),
        *(gelu or (Act("LM transform GELU input", ("n", width)),)),
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


def id_buffers(config: BertConfig, weight: int) -> int:
    """The buffers BERT's embeddings register: `position_ids`, and `token_type_ids` where the family has token
    types (P int64 each)."""
    return 8 * config.max_position_embeddings * (2 if config.family.forward.token_types else 1)


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
    boolean_mask: bool = False  # a boolean mask always (made when none is given): the scores keep their dtype
    no_checkpointing: str = ""  # why transformers refuses checkpointing it
    refusals: tuple[Refusal, ...] = ()
    # config.json settings (`BertConfig.step_keys`) the step models, and the heads they matter to (ModernBERT's
    # mean pooling); elsewhere the setting changes nothing and is no reason to refuse
    modelled_keys: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    unused: tuple[Unused, ...] = ()  # parameters it builds and its step leaves without a gradient
    # For a fine-tuning method's walk (`flow`): the family's name for each module the shared constants name as
    # BERT does (DistilBERT's `attention.q_lin`); the layers' container is its record's `layer_stack`.
    names: Mapping[str, str] = field(default_factory=dict)
    # the model's buffers (bytes; `weight`: the model's floating dtype, which `.to(dtype)` casts them to)
    buffers: Callable[[BertConfig, int], int] = id_buffers
    run: Modules = ()  # a run of a stored layer under a method, where `stored` keeps what it keeps once (ALBERT's)
    walks: tuple[Modules, ...] = ()  # under a method: layer 0, a global layer, a local layer (ModernBERT's)


BERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head(),
    "causal-lm": lm_head(causal=True),
    # (both logits first, then the two losses, as BertForPreTraining's forward computes them)
    "pretraining": (*lm_head()[:-1], *NSP[:-1], lm_head()[-1], NSP[-1]),
    "next-sentence": NSP,
    "sequence-classification": BERT_CLASSIFIER,
    "token-classification": TOKENS,
    "question-answering": SPANS,
    "multiple-choice": CHOICE,
}
ROBERTA_HEADS: dict[str, Modules] = {
    **{head: BERT_HEADS[head] for head in ("none", "mlm", "causal-lm", "token-classification",
                                           "question-answering", "multiple-choice")},
    "sequence-classification": classification_head(Act("tanh output", ("b'", "H"))),
}
# DistilBERT's classifiers: `pre_classifier` on the first token, ReLU, dropout, the classifier.
DISTILBERT_CLASSIFIER: Modules = (
    *first_token("pre_classifier")[:2],
    Keep("last hidden state (kept whole by the first token's view)", ("n", "H"), "stream", when=("!cast_inputs",),
         for_weights=("pre_classifier",), storage=HELD),
    Linear("pre_classifier", "b'", "H", "H", weight=None, names=("pre_classifier",), x="stream", held=HELD),
    Act("ReLU output", ("b'", "H")),
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
        Act("discriminator GELU input", ("n", "H")),
        Linear("discriminator prediction", "n", "H", "1", input="prediction input (GELU output)",
               names=("discriminator_predictions.dense_prediction",)),
        BinaryCrossEntropy(),
    ),
    "sequence-classification": classification_head(Act("GELU input", ("b'", "H"))),
    "token-classification": TOKENS,
    "question-answering": SPANS,
    "multiple-choice": (
        Linear("sequence summary", "b'", "H", "H", weight=None, names=(SUMMARY,), x="stream", held=HELD),
        *first_token(SUMMARY),
        Act("summary GELU input", ("b'", "H")),
        Drop("dropout mask", ("b'", "H")),
        Linear("choice classifier", "b'", "H", "1", input="classifier input", names=CLASSIFIER),
        CrossEntropy(("b",), "c"),
    ),
}

ALBERT_LM = lm_head("E", gelu=gelu_new("LM transform ", "E"))
ALBERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": ALBERT_LM,
    "pretraining": (*ALBERT_LM[:-1],  # (both logits, then the two losses)
                    Branch("pooler"), Drop("sentence-order dropout mask", ("b'", "H")),
                    Linear("sentence-order classifier", "b'", "H", "N", input="classifier input",
                           names=("sop_classifier.classifier",)),
                    ALBERT_LM[-1], CrossEntropy(("b",), "N", "sentence-order ")),
    **{head: BERT_HEADS[head] for head in ("sequence-classification", "token-classification", "question-answering",
                                           "multiple-choice")},
}

MPNET_NAMES = {QKV[0]: "attention.attn.q", QKV[1]: "attention.attn.k", QKV[2]: "attention.attn.v",
               OUT: "attention.attn.o", "attention.output.LayerNorm": "attention.LayerNorm"}
MPNET_HEADS: dict[str, Modules] = {head: ROBERTA_HEADS[head] for head in (
    "none", "mlm", "sequence-classification", "token-classification", "question-answering", "multiple-choice")}

# The families whose step is BERT's code's, or built like it (each family's layout by model type: `layouts.STEPS`)
ROBERTA = StepLayout(ROBERTA_EMBEDDINGS, BERT_LAYER, ROBERTA_HEADS)
BERT = StepLayout(BERT_EMBEDDINGS, BERT_LAYER, BERT_HEADS, measured_on_gpu=True)
DISTILBERT = StepLayout(DISTILBERT_EMBEDDINGS, DISTILBERT_LAYER, DISTILBERT_HEADS,
                        names=DISTILBERT_NAMES)
ELECTRA = StepLayout(ELECTRA_EMBEDDINGS, BERT_LAYER, ELECTRA_HEADS, names=ELECTRA_NAMES,
                     refusals=(Refusal("padding_mask", "ElectraForPreTraining's loss keeps only the unpadded tokens "
                                       "(a count the config cannot tell): not modelled; run it without a padding mask",
                                       lambda c, w: w.padding_mask and w.train and c.head == "pretraining" or None),))
ALBERT = StepLayout(ALBERT_EMBEDDINGS, ALBERT_LAYER, ALBERT_HEADS, stored=ALBERT_STORED, names=ALBERT_NAMES,
                    run=ALBERT_RUN, no_checkpointing="its layers are shared, run L times",
                    refusals=(Refusal("num_labels", "AlbertForPreTraining's sentence-order loss reads its scores two "
                                      "at a time (view(-1, 2)): a step runs with 2 only",
                                      lambda c, w: c.num_labels if c.head == "pretraining" and c.num_labels != 2
                                      and w.train else None),))
MPNET = StepLayout(MPNET_EMBEDDINGS, BERT_LAYER, MPNET_HEADS, names=MPNET_NAMES,
                   no_checkpointing="MPNet's layers are not checkpointable")
