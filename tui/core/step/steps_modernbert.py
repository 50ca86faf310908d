"""ModernBERT's step as data (`ModernBertModel` and its heads, transformers 5.25 models/modernbert), read as
`steps` reads BERT's code's, checked against torch's measurement of the real classes (compute_families.json)."""

from __future__ import annotations

from dataclasses import replace

from ..families.modernbert import MEAN_POOLING
from .kinds import (
    Act,
    Attention,
    CrossEntropy,
    Keep,
    Linear,
    Multiply,
    Norm,
    SpanLoss,
)
from .steps import (
    CLASSIFIER,
    CONTEXT,
    HELD,
    INPUT_IDS,
    LABEL_LOSS,
    Modules,
    Refusal,
    StepLayout,
    first_token,
    lm_head,
)

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
    Norm("attention norm", module="attn_norm", layer_input=True),
    Keep("Q/K/V input (attention norm output)", ("n", "H"), "stream", when=("!cast_inputs",)),
    Linear("query, key, value projection (Wqkv)", "n", "H", "H", 3, weight=None, names=("attn.Wqkv",)),
    Attention(dropout=False, fused_qkv=True, softmax32=True),
    Linear("attention output projection (Wo)", "n", "H", "H", weight=None, names=("attn.Wo",)),
    Norm("MLP norm", module="mlp_norm"),
    Linear("MLP up, gated (Wi)", "n", "H", "I", 2, input="MLP input (MLP norm output)", size="stream", weight=None,
           copy="MLP input (a 16-bit copy)", names=("mlp.Wi",)),
    Act("GELU input: a view of Wi's whole output", ("2", "n", "I")),
    Multiply("GELU output (the gate's factor)", ("n", "I")),
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
        *(() if first else (Norm("attention norm", module="attn_norm", layer_input=True),)),
        Keep("Q/K/V input (a 16-bit copy)", ("n", "H"), when=("cast_inputs",), for_weights=("attn.Wqkv",)),
        Linear("query, key, value projection (Wqkv)", "n", "H", "H", 3, weight=None, names=("attn.Wqkv",),
               reads=qkv_input, x="stream", layer_input=first),
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
    return (MODERNBERT_FINAL, *dense, Act("head GELU input", (rows, "H")),
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

MODERNBERT = StepLayout(MODERNBERT_EMBEDDINGS, MODERNBERT_LAYER, MODERNBERT_HEADS,
                        # the rotary embeddings' inv_freq and original_inv_freq (d/2 each), one a layer type (global,
                        # and local where there are 2 layers or more: layer i is global when i % 3 == 0)
                        buffers=lambda config, weight: 2 * (1 + (config.num_hidden_layers > 1))
                        * (config.hidden_size // config.num_attention_heads // 2) * weight,
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
                                          % 2 else None)))
