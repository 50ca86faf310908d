"""Each family's training step as data: the modules its embeddings, one encoder layer, the pooler and each head
run, in order, read from transformers' modeling files (5.25: models/bert, roberta, xlm_roberta, camembert,
distilbert, electra) and checked against torch's measurement of the real classes (tests/fixtures/compute.json,
written by tests/fixtures/generate_compute.py). The engine is `tui.core.kinds`; `tui.core.compute` sums it.

Facts a condition may name (`Step.facts`): `amp`, `cast_inputs` (autocast over a float32 stream: every Linear
casts its input), `fused` (sdpa's CUDA kernels), `layer_input` (a layer's input is saved by the layer: not when
checkpointing recomputes it), `pooler_holds` (the pooler keeps the whole last hidden state, so a head reading it
saves nothing more), `regression` (one label: MSE), `project` (ELECTRA's E ≠ H). Sizes: the embeddings' are
`residual`, the encoder's and the heads' `stream` (the same, but where a 16-bit projection feeds the encoder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .kinds import Attention, CrossEntropy, Drop, Keep, Linear, Module, Norm, Regression, ShiftedLabels, SpanLoss

Modules = tuple[Module, ...]

# Embeddings -----------------------------------------------------------------------------------------------------
INPUT_IDS = Keep("input ids (word embedding lookup)", ("n",), 8)
EMBEDDINGS_NORM = (Norm("LayerNorm", size="residual"), Drop("dropout mask", ("n", "H"), "residual"))
BERT_EMBEDDINGS: Modules = (INPUT_IDS, Keep("token type ids (one row, broadcast)", ("s",), 8), *EMBEDDINGS_NORM)
# RoBERTa counts positions from the padding index (a new tensor of ids) and gathers the token types by them.
ROBERTA_EMBEDDINGS: Modules = (INPUT_IDS, Keep("token type ids (gathered by position)", ("n",), 8),
                               Keep("position ids (counted from the padding index)", ("n",), 8), *EMBEDDINGS_NORM)
DISTILBERT_EMBEDDINGS: Modules = (INPUT_IDS, *EMBEDDINGS_NORM)
# ELECTRA: BERT's embeddings E wide, projected to H when E ≠ H.
ELECTRA_EMBEDDINGS: Modules = (
    INPUT_IDS, Keep("token type ids (one row, broadcast)", ("s",), 8),
    Norm("LayerNorm", width="E", size="residual"), Drop("dropout mask", ("n", "E"), "residual"),
    Linear("embedding projection E → H", "n", "E", "H", input="projection input (the embeddings)", size="residual",
           weight="16-bit copy of the projection weight", when=("project",)),
)

# One encoder layer ----------------------------------------------------------------------------------------------
AMP_LAYER_COPIES: Modules = (
    Keep("Q/K/V inputs (a 16-bit copy for each)", ("n", "H"), coef=3, when=("cast_inputs",)),
    Keep("16-bit copies of the Linear weights", ("H", "H"), coef=4, when=("amp",)),
    Keep("16-bit copies of the FFN weights", ("H", "I"), coef=2, when=("amp",)),
)
ATTENTION: Modules = (
    Keep("layer input (Q/K/V projections)", ("n", "H"), "stream", when=("!cast_inputs", "layer_input")),
    Linear("query, key, value projections", "n", "H", "H", 3, weight=None),
    Attention(),
    Linear("attention output projection", "n", "H", "H", weight=None),
)
ADD_AND_NORM = (Drop("attention output dropout mask", ("n", "H")), Norm("attention LayerNorm"))
FFN: Modules = (
    Linear("feed-forward up (intermediate)", "n", "H", "I", input="FFN input (attention LayerNorm output)",
           weight=None),
    Keep("GELU input", ("n", "I")),
    Linear("feed-forward down (output)", "n", "I", "H", input="FFN down input (GELU output)", weight=None),
    Drop("output dropout mask", ("n", "H")),
    Norm("output LayerNorm"),
)
BERT_LAYER: Modules = (*AMP_LAYER_COPIES, *ATTENTION, *ADD_AND_NORM, *FFN)
# DistilBERT adds the attention's output to its input with no dropout between.
DISTILBERT_LAYER: Modules = (*AMP_LAYER_COPIES, *ATTENTION, Norm("attention LayerNorm"), *FFN)

# ALBERT: no dropout in its embeddings and encoder (p = 0), the E → H mapping always runs, its FFN's activation is
# `gelu_new` (the tanh form, built of elementwise ops that keep four tensors the size of its input).
GELU_NEW = "GELU (tanh form): its input and three intermediates"
# Autocast casts a weight once per forward (its cache): a stored layer run L/G times keeps one set of copies.
ALBERT_STORED: Modules = (
    Keep("16-bit copies of the Linear weights (one set per stored layer)", ("S", "H", "H"), coef=4, when=("amp",)),
    Keep("16-bit copies of the FFN weights (one set per stored layer)", ("S", "H", "I"), coef=2, when=("amp",)),
)
ALBERT_LAYER: Modules = (
    AMP_LAYER_COPIES[0], *ATTENTION[:2], Attention(dropout=False), ATTENTION[3], Norm("attention LayerNorm"),
    Linear("feed-forward up (ffn)", "n", "H", "I", input="FFN input (attention LayerNorm output)", weight=None),
    Keep(GELU_NEW, ("n", "I"), coef=4),
    Linear("feed-forward down (ffn_output)", "n", "I", "H", input="FFN down input (GELU output)", weight=None),
    Norm("full-layer LayerNorm"),
)
ALBERT_EMBEDDINGS: Modules = (
    INPUT_IDS, Keep("token type ids (one row, broadcast)", ("s",), 8), Norm("LayerNorm", width="E", size="residual"),
    Linear("embedding mapping E → H", "n", "E", "H", input="mapping input (the embeddings)", size="residual",
           weight="16-bit copy of the mapping weight"),
)

# The pooler and the heads ---------------------------------------------------------------------------------------
FIRST_TOKEN = (  # a Linear over the [CLS] token: its view keeps the whole last hidden state (a copy under autocast)
    Keep("[CLS] hidden state (16-bit copy)", ("b'", "H"), when=("cast_inputs",)),
    Keep("16-bit copy of the dense weight", ("H", "H"), when=("amp",)),
    Keep("last hidden state (kept whole by the [CLS] view)", ("n", "H"), "stream", when=("!cast_inputs",)),
)
POOLER: Modules = (Linear("pooler dense", "b'", "H", "H", weight=None), *FIRST_TOKEN, Keep("tanh output", ("b'", "H")))


def lm_head(width: str = "H", causal: bool = False, gelu: Keep | None = None) -> Modules:
    """BERT's LM head: dense H → `width`, GELU, LayerNorm, the decoder (CPU autocast runs that LayerNorm on the
    16-bit input with float32 statistics; CUDA autocast casts it up), the loss over V."""
    return (
        Linear("LM transform dense", "n", "H", width, input="LM transform input (last hidden state)",
               size="stream", held="pooler_holds"),
        gelu or Keep("LM transform GELU input", ("n", width)),
        Norm("LM transform LayerNorm", width=width, size="cast_norm"),
        Linear("LM decoder", "n", width, "V", input="LM decoder input", size="stream"),
        # The causal-LM loss upcasts the logits to float32 before its cross-entropy.
        CrossEntropy(("n",), "V", upcast=causal),
        *((ShiftedLabels(),) if causal else ()),
    )


NSP: Modules = (Linear("next-sentence classifier", "b'", "H", "2"), CrossEntropy(("b",), "2", "next-sentence "))
LABEL_LOSS: Modules = (Regression(when=("regression",)), CrossEntropy(("b",), "N", when=("!regression",)))
BERT_CLASSIFIER: Modules = (Drop("dropout mask", ("b'", "H")),
                            Linear("classifier", "b'", "H", "N", input="classifier input"), *LABEL_LOSS)
CHOICE: Modules = (Drop("dropout mask", ("b'", "H")),
                   Linear("choice classifier", "b'", "H", "1", input="classifier input"),
                   CrossEntropy(("b",), "C"))
TOKENS: Modules = (Drop("dropout mask", ("n", "H"), "stream"),
                   Linear("classifier", "n", "H", "N", input="classifier input", size="stream"),
                   CrossEntropy(("n",), "N"))
SPANS: Modules = (Linear("start/end classifier", "n", "H", "2", input="last hidden state", size="stream",
                         held="pooler_holds"), SpanLoss())


def classification_head(activation: Keep) -> Modules:
    """RoBERTa's and ELECTRA's `ClassificationHead`: dropout on the [CLS] token, dense, an activation, dropout,
    `out_proj`."""
    return (
        Drop("dropout mask ([CLS] token)", ("b'", "H"), "stream"),
        Linear("classification dense", "b'", "H", "H", input="dense input", size="stream"),
        activation,
        Drop("dropout mask", ("b'", "H")),
        Linear("classification out_proj", "b'", "H", "N", input="out_proj input"),
        *LABEL_LOSS,
    )


@dataclass(frozen=True, slots=True)
class StepLayout:
    """A family's step: its embeddings, one encoder layer, the pooler, and each head class's modules."""

    embeddings: Modules
    layer: Modules
    heads: Mapping[str, Modules]
    pooler: Modules = POOLER
    stored: Modules = ()  # what a stored layer keeps once however often it runs (ALBERT's), × S


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
    *FIRST_TOKEN[:2], Keep("last hidden state (kept whole by the first token's view)", ("n", "H"), "stream",
                           when=("!cast_inputs",)),
    Linear("pre_classifier", "b'", "H", "H", weight=None),
    Keep("ReLU output", ("b'", "H")),
    Drop("dropout mask", ("b'", "H")),
)
DISTILBERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head(),
    "sequence-classification": (*DISTILBERT_CLASSIFIER, Linear("classifier", "b'", "H", "N", input="classifier input"),
                                *LABEL_LOSS),
    "multiple-choice": (*DISTILBERT_CLASSIFIER, Linear("choice classifier", "b'", "H", "1", input="classifier input"),
                        CrossEntropy(("b",), "C")),
    "token-classification": TOKENS,
    "question-answering": (Drop("dropout mask", ("n", "H"), "stream"),
                           Linear("start/end classifier", "n", "H", "2", input="classifier input", size="stream"),
                           SpanLoss()),
}
# ELECTRA: the generator's LM head is E wide; the discriminator scores every token (binary cross-entropy).
ELECTRA_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head("E"),
    "causal-lm": lm_head("E", causal=True),
    "pretraining": (
        Linear("discriminator dense", "n", "H", "H", input="discriminator input (last hidden state)",
               size="stream"),
        Keep("discriminator GELU input", ("n", "H")),
        Linear("discriminator prediction", "n", "H", "1", input="prediction input (GELU output)"),
        Keep("logits (binary cross-entropy input)", ("n",), "loss"),
        Keep("labels as float32", ("n",), 4),
    ),
    "sequence-classification": classification_head(Keep("GELU input", ("b'", "H"))),
    "token-classification": TOKENS,
    "question-answering": SPANS,
    "multiple-choice": (
        Linear("sequence summary", "b'", "H", "H", weight=None), *FIRST_TOKEN,
        Keep("summary GELU input", ("b'", "H")),
        Drop("dropout mask", ("b'", "H")),
        Linear("choice classifier", "b'", "H", "1", input="classifier input"),
        CrossEntropy(("b",), "C"),
    ),
}

ALBERT_HEADS: dict[str, Modules] = {
    "none": (),
    "mlm": lm_head("E", gelu=Keep(f"LM transform {GELU_NEW}", ("n", "E"), coef=4)),
    "pretraining": (*lm_head("E", gelu=Keep(f"LM transform {GELU_NEW}", ("n", "E"), coef=4)),
                    Drop("sentence-order dropout mask", ("b'", "H")),
                    Linear("sentence-order classifier", "b'", "H", "N", input="classifier input"),
                    CrossEntropy(("b",), "N", "sentence-order ")),
    **{head: BERT_HEADS[head] for head in ("sequence-classification", "token-classification", "question-answering",
                                           "multiple-choice")},
}

STEPS: dict[str, StepLayout] = {
    "bert": StepLayout(BERT_EMBEDDINGS, BERT_LAYER, BERT_HEADS),
    "roberta": StepLayout(ROBERTA_EMBEDDINGS, BERT_LAYER, ROBERTA_HEADS),
    "xlm-roberta": StepLayout(ROBERTA_EMBEDDINGS, BERT_LAYER, ROBERTA_HEADS),
    "camembert": StepLayout(ROBERTA_EMBEDDINGS, BERT_LAYER, ROBERTA_HEADS),
    "distilbert": StepLayout(DISTILBERT_EMBEDDINGS, DISTILBERT_LAYER, DISTILBERT_HEADS),
    "electra": StepLayout(ELECTRA_EMBEDDINGS, BERT_LAYER, ELECTRA_HEADS),
    "albert": StepLayout(ALBERT_EMBEDDINGS, ALBERT_LAYER, ALBERT_HEADS, stored=ALBERT_STORED),
}
