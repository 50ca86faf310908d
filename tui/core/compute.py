"""Compute and memory of a training step (or an inference forward) at a batch and sequence length, exact.

Everything is derived from the config and a `Workload`, in closed forms over the symbols (b, s, H, I, A, V, N,
C, L), and checked against torch's own measurements of transformers' classes (`tui/reference/measure.py`, fixtures in
tests/fixtures/compute.json):

- FLOPs in the convention of `torch.utils.flop_counter`: 2 per multiply-accumulate, matrix products only.
- Activations: the bytes of the tensors autograd saves for backward, one storage counted once, parameters not.
  Each saved tensor is a `Saved` term: which component, what it is, its element count as a product of symbols,
  and its element size under the workload's conventions (`Conventions`).
- Weights, gradients, optimizer states: bytes after one optimizer step.

A training step is the class's forward with labels (its own loss), the backward, one optimizer step. BertModel
has no loss: its step's loss is the sum of its outputs, which saves nothing and reaches every parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from math import prod
from typing import Any

from . import kinds
from .config import LM_HEADS, MEAN_POOLING, BertConfig, ConfigError
from .families import build_tree
from .kinds import Flop, Module, Saved, Step
from .steps import STEPS, StepLayout
from .tree import ParamTree

MODES = ("train", "inference")
PRECISIONS = ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16")
OPTIMIZERS = ("adamw", "sgd", "sgd-momentum")
ATTENTIONS = ("eager", "sdpa")
DEVICES = ("cpu", "cuda")
GPU_SIZES_GIB = (16, 24, 40, 48, 80, 141)
GIB = 1024**3
FLOP_CONVENTION = "torch.utils.flop_counter: 2 FLOPs per multiply-accumulate, matrix products only"
MAX_BATCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Workload:
    """What is run: batch `b` of sequences of length `s`, and every choice that changes FLOPs or bytes."""

    batch: int
    seq: int
    mode: str = "train"
    precision: str = "fp32"
    optimizer: str = "adamw"
    checkpointing: bool = False
    attention: str = "sdpa"  # as transformers builds these classes
    padding_mask: bool = False
    device: str = "cpu"
    choices: int = 2  # multiple-choice only: candidate answers per example (C)

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "choices"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
                raise ConfigError(name, value, f"must be a whole number between 1 and {MAX_BATCH:,}")
        for name, allowed in (("mode", MODES), ("precision", PRECISIONS), ("optimizer", OPTIMIZERS),
                              ("attention", ATTENTIONS), ("device", DEVICES)):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, getattr(self, name), f"must be one of: {', '.join(allowed)}")
        for name in ("checkpointing", "padding_mask"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "must be true or false")
        if self.checkpointing and self.mode != "train":
            raise ConfigError("checkpointing", True, "applies to training only (inference keeps no activations)")

    @property
    def train(self) -> bool:
        return self.mode == "train"

    @property
    def padded(self) -> bool:
        """Whether the mask pads anything: one token cannot be padded, and transformers drops an all-ones mask."""
        return self.padding_mask and self.seq > 1

    @property
    def amp(self) -> bool:
        return self.precision.startswith("amp-")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Conventions:
    """Element sizes in bytes where the precision and the device decide them."""

    weight: int  # parameters, their gradients and the optimizer's moments
    compute: int  # matrix products, attention, GELU: the 16-bit dtype under autocast
    residual: int  # the hidden states between layers and what LayerNorm takes (float32 under autocast)
    stats: int  # LayerNorm's saved mean and rstd
    heads: int  # queries, keys and values as the attention saves them
    softmax: int  # attention probabilities (CUDA autocast runs softmax in float32)
    loss: int  # the loss's log-probabilities (autocast runs cross-entropy in float32)
    bool_masks: bool  # dropout keeps a 1-byte mask (CUDA) instead of a noise tensor in its input's dtype (CPU)
    fused: bool = False  # sdpa runs a fused kernel (CUDA): no b·A·s² tensors; on CPU it takes the math path
    stream16: bool = False  # the encoder's stream is 16-bit under autocast: a 16-bit projection feeds it (CPU)

    @property
    def stream(self) -> int:
        """The encoder's hidden states between layers: the residual dtype, unless a projection under CPU
        autocast hands the encoder 16-bit states (CPU autocast's LayerNorm keeps its input's dtype)."""
        return self.compute if self.stream16 else self.residual

    @property
    def keeps_16bit_logits(self) -> bool:
        """CUDA autocast's cross-entropy keeps its 16-bit input logits besides the float32 log-probabilities
        (measured on an H200; the CPU does not)."""
        return self.loss != self.compute and self.bool_masks

    @property
    def cast_norm(self) -> int:
        """What a LayerNorm on a 16-bit activation saves as input: CUDA autocast casts it to float32, CPU autocast
        keeps it 16-bit (with float32 statistics)."""
        return 4 if self.residual != self.compute and self.bool_masks else self.compute

    def mask(self, of: int) -> int:
        """Bytes per element of a dropout mask whose input has `of` bytes per element."""
        return 1 if self.bool_masks else of

    @classmethod
    def of(cls, workload: Workload, masked: bool = False) -> Conventions:
        """`masked`: the attention adds a float32 mask, which under autocast makes the scores float32."""
        half = 2 if workload.precision != "fp32" else 4
        weight = 4 if workload.amp or workload.precision == "fp32" else 2
        residual = 4 if workload.amp else half
        cuda = workload.device == "cuda"
        stats = 4 if cuda else residual
        # sdpa's math path on CPU computes 16-bit attention in float32 (q, k, v cast up); on CUDA in 16 bits.
        # CUDA autocast runs eager softmax in float32; on CPU the scores become float32 only when a float32 mask
        # is added to them.
        heads = 4 if not cuda and workload.attention == "sdpa" else half
        if workload.attention == "sdpa":
            softmax = heads
        else:
            softmax = 4 if workload.amp and (cuda or masked) else half
        loss = 4 if workload.amp else half
        return cls(weight, half, residual, stats, heads, softmax, loss, cuda, cuda and workload.attention == "sdpa")

    def lines(self, workload: Workload) -> list[str]:
        """Every convention that changes bytes, named as the output shows it."""
        names = {1: "bool", 2: "bfloat16" if "bf16" in workload.precision else "float16", 4: "float32", 8: "int64"}
        lines = [FLOP_CONVENTION,
                 f"weights, gradients and optimizer moments in {names[self.weight]}",
                 f"activations of matrix products in {names[self.compute]}",
                 (f"LayerNorm inputs and the residual stream in {names[self.residual]}, "
                  f"its saved mean/rstd in {names[self.stats]}")]
        if self.bool_masks:
            lines.append("dropout masks: 1 byte per element (CUDA)")
        else:
            lines.append("dropout masks: a tensor in the input's dtype (CPU)")
        if workload.amp:
            lines.append("autocast keeps a 16-bit copy of every Linear weight for the backward")
            lines.append(f"autocast: softmax in {names[self.softmax]}, cross-entropy in float32")
        if self.fused:
            kernel = "memory-efficient" if self.compute == 4 else "cuDNN"
            lines.append(f"sdpa on CUDA: the fused {kernel} kernel; it keeps q, k, v, its output and a float32")
            lines.append("  log-sum-exp (no b·A·s² tensors); its backward recomputes the scores (2.5 × forward)")
        elif workload.attention == "sdpa":
            lines.append("sdpa on CPU: the math path (softmax and dropout over b·A·s² scores, as eager)")
        if workload.device == "cuda" and workload.optimizer == "adamw":
            lines.append("AdamW's step counters live on the host (torch's default), not on the GPU")
        if workload.train:
            lines.append("dropout p > 0 (BERT's default 0.1): every dropout keeps its mask")
        lines.append("peak: each phase's held bytes and working set, checked against an H200 (torch 2.11)")
        if self.stream16:
            lines.append("the embeddings' 16-bit projection makes the encoder's stream 16-bit (CPU autocast)")
        return lines

    def family_lines(self, config: BertConfig, workload: Workload) -> list[str]:
        """Where a family's figures rest on BERT's measurements rather than its own."""
        layout = STEPS[config.model_type]
        if layout.measured_on_gpu:
            return []
        lines = [f"{config.model_type}: FLOPs and saved tensors measured on its own classes (CPU); the CUDA "
                 "conventions and the peak's transients were measured on BERT (H200) and are applied the same way"]
        if _cuda_projection(config, workload):
            lines.append("under CUDA autocast the embedding projection's 16-bit output reaches layer 0 (its Q/K/V "
                         "keep it as it is), whose float32 LayerNorms restore the float32 stream: from CUDA "
                         "autocast's documented rules, not measured")
        if layout.eager_only:
            lines.append(f"{config.model_type} has no sdpa attention in transformers (it loads with eager): the "
                         "math path, whatever is asked, on CUDA too")
        return lines


@dataclass(frozen=True, slots=True)
class Fit:
    gib: float
    bytes: int
    max_batch: int  # 0: not even one example fits
    asked: bool = False  # the size the user gave (--gpu-memory), not one of the common ones


@dataclass(frozen=True)  # no slots: the sums below are cached on first use
class Compute:
    """A workload's FLOPs and bytes, by component, with the terms that produce them."""

    config: BertConfig
    workload: Workload
    values: dict[str, int]
    flop_terms: tuple[Flop, ...]
    saved_terms: tuple[Saved, ...]
    recompute_terms: tuple[Saved, ...]
    parameters: int
    parameter_tensors: int
    buffers: int
    conventions: Conventions
    layer_parameters: int = 0  # elements of one encoder layer (its weight gradients are a backward transient)
    fits: tuple[Fit, ...] = field(default=())

    def convention_lines(self) -> list[str]:
        """Every convention that changes bytes, and where the family's figures rest on BERT's measurements."""
        return self.conventions.lines(self.workload) + self.conventions.family_lines(self.config, self.workload)

    # FLOPs -------------------------------------------------------------------------------------------------
    def flops_by_component(self) -> dict[str, int]:
        return dict(self._flops)

    @cached_property
    def _flops(self) -> dict[str, int]:
        return _by_component(self.flop_terms, self.values, _flops)

    def layer_flops(self) -> dict[str, int]:
        """One encoder layer's forward FLOPs, product by product (Q/K/V, scores, context, output, FFN)."""
        return {t.what: t.flops(self.values) for t in self.flop_terms if t.component == "layer"}

    def layer_activations(self) -> dict[str, int]:
        """What one encoder layer saves for backward, tensor by tensor (bytes)."""
        return {t.what: t.nbytes(self.values) for t in self.saved_terms if t.component == "layer"}

    @cached_property
    def flops_forward(self) -> int:
        return sum(self._flops.values())

    @property
    def flops_backward(self) -> int:
        """Twice the forward (a gradient for each operand of every product), plus the checkpointing recompute and
        what a fused attention's backward recomputes."""
        if not self.workload.train:
            return 0
        return 2 * (self.flops_forward - self.flops_unused) + self.flops_recompute + self.flops_rescore

    @property
    def flops_unused(self) -> int:
        """Forward products whose result no gradient reaches (DeBERTa's shared-key position projection a score
        type it does not use): no backward for them."""
        return sum(_by_component((t for t in self.flop_terms if not t.backward), self.values, _flops).values())

    @property
    def flops_rescore(self) -> int:
        """A fused attention's backward recomputes the scores: FlopCounterMode counts it as 2.5 × the attention's
        forward products (Q·Kᵀ and P·V), half of them more than the math path's 2 ×."""
        if not (self.workload.train and self.conventions.fused):
            return 0
        return self.values["L"] * sum(t.flops(self.values) for t in self.flop_terms if t.attention) // 2

    @property
    def flops_recompute(self) -> int:
        """One forward of every layer, but what checkpointing's early stop never reruns (a layer's last product
        when nothing after it saves a tensor: ModernBERT's)."""
        if not self.workload.checkpointing:
            return 0
        skipped = _by_component((t for t in self.flop_terms if not t.recomputed), self.values, _flops)
        return self._flops.get("layer", 0) - skipped.get("layer", 0)

    @property
    def flops_step(self) -> int:
        return self.flops_forward + self.flops_backward

    @property
    def rule_of_thumb(self) -> int:
        """The `6 × parameters × tokens` estimate (2 forward + 4 backward per parameter and token)."""
        factor = 6 if self.workload.train else 2
        return factor * self.parameters * self.values["n"]

    # Memory ------------------------------------------------------------------------------------------------
    def activations_by_component(self) -> dict[str, int]:
        return dict(self._activations)

    @cached_property
    def _activations(self) -> dict[str, int]:
        if self.workload.batch > 1:  # linear in b (`_per_batch`): what the fits table's three batches reuse
            per_batch, fixed = self._per_batch[0]
            return {c: per_batch.get(c, 0) * self.workload.batch + fixed.get(c, 0) for c in {*per_batch, *fixed}}
        totals: dict[str, int] = {}
        for term, nbytes in self.saved_bytes:
            totals[term.component] = totals.get(term.component, 0) + nbytes
        return totals

    @cached_property
    def _per_batch(self) -> tuple[tuple[dict[str, int], dict[str, int]], tuple[int, int]]:
        """The saved bytes by component, and the recomputation's, as (per unit of b, fixed): every term is
        linear in b (one of b, b', n among its factors) or does not depend on it; the batch-1 labels' view is
        not in the terms at b > 1."""
        one = symbol_values(self.config, replace(self.workload, batch=1))
        per_batch = _by_component((t for t in self.saved_terms if _per_b(t)), one, _nbytes)
        fixed = _by_component((t for t in self.saved_terms if not _per_b(t)), one, _nbytes)
        recompute = [0, 0]
        for term in self.recompute_terms:
            recompute[0 if _per_b(term) else 1] += term.nbytes(one)
        return (per_batch, fixed), (recompute[0], recompute[1])

    @cached_property
    def saved_bytes(self) -> tuple[tuple[Saved, int], ...]:
        """Each saved tensor with its bytes in this step (× L for a layer's)."""
        return tuple((t, _times(t, self.values) * t.nbytes(self.values)) for t in self.saved_terms)

    @cached_property
    def activations(self) -> int:
        return sum(self._activations.values())

    @cached_property
    def recompute_peak(self) -> int:
        """Bytes one checkpointed layer saves again while the backward recomputes it."""
        if self.workload.batch > 1:
            per_batch, fixed = self._per_batch[1]
            return per_batch * self.workload.batch + fixed
        return sum(t.nbytes(self.values) for t in self.recompute_terms)

    @cached_property
    def weights(self) -> int:
        return self.parameters * self.conventions.weight

    @cached_property
    def trained(self) -> tuple[int, int]:
        """(elements, tensors) of the parameters that get a gradient (and optimizer state)."""
        elements, tensors = unused(self.config)
        return self.parameters - elements, self.parameter_tensors - tensors

    @cached_property
    def gradients(self) -> int:
        return self.trained[0] * self.conventions.weight if self.workload.train else 0

    @cached_property
    def optimizer(self) -> int:
        if not self.workload.train or self.workload.optimizer == "sgd":
            return 0
        if self.workload.optimizer == "sgd-momentum":
            return self.gradients
        steps = 0 if self.workload.device == "cuda" else 4 * self.trained[1]
        return 2 * self.gradients + steps

    @property
    def total(self) -> int:
        return (self.weights + self.buffers + self.gradients + self.optimizer + self.activations
                + self.recompute_peak)

    @cached_property
    def _peak(self) -> tuple[int, str]:
        from .peak import peak

        return peak(self)

    @property
    def peak(self) -> int:
        """The most the allocator holds during the step: the largest of its phases' peaks (`tui.core.peak`)."""
        return self._peak[0]

    @property
    def peak_phase(self) -> str:
        return self._peak[1]

    def memory(self) -> dict[str, int]:
        return {"weights": self.weights, "buffers": self.buffers, "gradients": self.gradients,
                "optimizer": self.optimizer, "activations": self.activations,
                "recompute": self.recompute_peak, "total": self.total, "peak": self.peak}


def _times(term: Flop | Saved, values: dict[str, int]) -> int:
    """How many times a term counts in the step: L for a layer's, once for any other component's."""
    return values["L"] if term.component == "layer" else 1


def _by_component(terms: Iterable[Any], values: dict[str, int], measure: Any) -> dict[str, int]:
    totals: dict[str, int] = {}
    for term in terms:
        totals[term.component] = totals.get(term.component, 0) + _times(term, values) * measure(term, values)
    return totals


def _flops(term: Flop, values: dict[str, int]) -> int:
    return term.flops(values)


def _nbytes(term: Saved, values: dict[str, int]) -> int:
    return term.nbytes(values)


def symbol_values(config: BertConfig, workload: Workload) -> dict[str, int]:
    """Values of the symbols: b' is the number of sequences (b·C for multiple choice), n = b'·s tokens."""
    sequences = workload.batch * (workload.choices if config.head == "multiple-choice" else 1)
    return {"b": workload.batch, "b'": sequences, "s": workload.seq, "n": sequences * workload.seq,
            "s₁₆": -(-workload.seq // 16) * 16, "s₃₂": -(-workload.seq // 32) * 32,
            "H": config.hidden_size, "E": config.embedding_width, "I": config.intermediate_size, "A": config.num_attention_heads,
            "V": config.vocab_size, "N": config.num_labels, "C": workload.choices, "L": layer_runs(config), "S": stored_layers(config), "D": config.relative_span,
            "d": config.hidden_size // config.num_attention_heads, **layer_types(config),
            "1": 1, "2": 2}


def attention_run(config: BertConfig, workload: Workload) -> Workload:
    """The workload as the attention runs it: the math path for a family transformers has no sdpa for."""
    layout = STEPS.get(config.model_type)
    if layout is not None and layout.eager_only and workload.attention != "eager":
        return replace(workload, attention="eager")
    return workload


def layer_runs(config: BertConfig) -> int:
    """L: how many times an encoder layer runs (ALBERT runs each of its G groups of K layers L/G times)."""
    return config.num_hidden_layers * (config.inner_group_num if STEPS[config.model_type].shared_layers else 1)


def stored_layers(config: BertConfig) -> int:
    """S: the encoder layers stored (ALBERT's G·K; every other family stores each layer it runs)."""
    if STEPS[config.model_type].shared_layers:
        return config.num_hidden_groups * config.inner_group_num
    return layer_runs(config)


GLOBAL_EVERY = 3  # ModernBERT's global_attn_every_n_layers (other values are refused through `step_keys`)
HALF_WINDOW = 64  # ModernBERT's local_attention // 2: from this length on, a local layer's mask is not all ones


def layer_types(config: BertConfig) -> dict[str, int]:
    """Ll, the local (sliding-window) layers, and Y, the layer types present (ModernBERT; elsewhere 0 and 1)."""
    if not STEPS[config.model_type].layer_types:
        return {"Ll": 0, "Y": 1}
    layers = config.num_hidden_layers
    local = layers - -(-layers // GLOBAL_EVERY)  # layer i is global when i % 3 == 0
    return {"Ll": local, "Y": 1 + (local > 0)}


def additive_mask(config: BertConfig, workload: Workload) -> bool:
    """Whether eager attention adds a float mask to its scores: a padding mask, or the causal mask of a decoder
    (a family that fills its scores through a boolean mask keeps their dtype)."""
    return (workload.attention == "eager" and (workload.padded or config.head == "causal-lm")
            and not STEPS[config.model_type].boolean_mask)


def check(config: BertConfig, workload: Workload) -> None:
    if config.model_type not in STEPS:
        raise ConfigError("model_type", config.model_type, "compute and memory are modelled for "
                          f"{', '.join(STEPS)} so far (parameters are counted for every family)")
    layout = STEPS[config.model_type]
    matters_to = {key: heads for (key, _), heads in layout.modelled_keys.items()}  # (a pooling key: pooling heads)
    for key, setting in config.step_keys:
        if (key, setting) in layout.modelled_keys or config.head not in matters_to.get(key, (config.head,)):
            continue
        raise ConfigError(key, setting, "changes what a training step saves and is not modelled: compute models the "
                          "family's default activation and whether each dropout is on (the parameters are counted)")
    for refusal in layout.refusals:
        value = refusal.check(config, workload)
        if value is not None:
            raise ConfigError(refusal.field, value, refusal.rule)
    if layout.no_checkpointing and workload.checkpointing:
        raise ConfigError("checkpointing", True, f"{config.model_type}'s classes do not support activation "
                          f"checkpointing (transformers refuses it: {layout.no_checkpointing})")
    if config.add_cross_attention:
        raise ConfigError("add_cross_attention", True, "compute and memory do not model a decoder's cross-attention "
                          "yet (it reads an encoder's states the step does not have); parameters are counted")
    # RoBERTa's positions count from its padding index (1) + 1: two rows of the table are never a position.
    reserved = layout.reserved_positions
    if workload.seq > config.max_position_embeddings - reserved:
        rule = f"must be at most max_position_embeddings ({config.max_position_embeddings:,})"
        if reserved:
            rule += f" − {reserved} ({config.model_type} counts positions from its padding index + 1)"
        raise ConfigError("seq", workload.seq, rule)
    if config.head == "multiple-choice" and workload.choices < 1:
        raise ConfigError("choices", workload.choices, "must be at least 1")


def compute(config: BertConfig, workload: Workload, gpu_memory: int | None = None,
            tree: ParamTree | None = None) -> Compute:
    """FLOPs and bytes of `workload` on `config`; `gpu_memory` (bytes) adds a row to the fits table. `tree`: the
    config's counted tree if the caller has it (the explorer does), so it is not built again."""
    check(config, workload)
    if tree is None or tree.config != config:
        tree = build_tree(config)
    layer = tree.groups().get("encoder", 0) // max(1, config.num_hidden_layers)
    result = measure(config, workload, tree.total, tree.root.tensors, layer)
    sizes = [(float(g), g * GIB, False) for g in GPU_SIZES_GIB]
    if gpu_memory is not None:
        sizes.append((gpu_memory / GIB, gpu_memory, True))
    return _same_terms(result, replace(result, fits=fits(result, sizes)))


def measure(config: BertConfig, workload: Workload, parameters: int, tensors: int, layer_parameters: int) -> Compute:
    """The terms of `workload` on `config` (checked by `compute`), without the fits table."""
    stream16 = workload.amp and projects(config) and workload.device == "cpu"
    # ELECTRA makes its mask from the projected (16-bit) states: the scores stay 16-bit; ALBERT from the embeddings.
    mask16 = stream16 and STEPS[config.model_type].mask_after_projection
    runs = attention_run(config, workload)
    conventions = Conventions.of(runs, additive_mask(config, runs) and not mask16)
    if stream16:
        conventions = replace(conventions, stream16=True)
    saved = tuple(saved_terms(config, workload, conventions)) if workload.train else ()
    recompute = tuple(recompute_terms(config, workload, conventions)) if workload.checkpointing else ()
    return Compute(config, workload, symbol_values(config, workload), tuple(flop_terms(config, workload)), saved,
                   recompute, parameters, tensors, 16 * config.max_position_embeddings, conventions,
                   layer_parameters)


def fits(result: Compute, sizes: list[tuple[float, int, bool]]) -> tuple[Fit, ...]:
    """The largest batch whose step peaks within each size (the headroom rule in `peak.usable`): each phase's
    peak is affine in b from b = 2 on, so three batches settle every size."""
    from .peak import max_batch, phase_peaks

    peaks = {b: phase_peaks(at_batch(result, b)) for b in (1, 2, 3)}
    return tuple(Fit(gib, size, max_batch(peaks, size, MAX_BATCH), asked) for gib, size, asked in sizes)


_BATCH_FACTORS = frozenset(("b", "b'", "n"))


def _per_b(term: Saved) -> bool:
    """Whether a saved term grows with the batch (one of b, b', n among its factors; else it is free of b)."""
    return bool(_BATCH_FACTORS.intersection(term.factors))


def at_batch(result: Compute, batch: int) -> Compute:
    """`result`'s workload at another batch (no fits table). The terms do not depend on the batch, only their
    values do (but the causal-LM labels' view, present at batch 1 only: measured afresh there)."""
    workload = replace(result.workload, batch=batch)
    if result.config.head == "causal-lm" and workload.train and (batch == 1) != (result.workload.batch == 1):
        return measure(result.config, workload, result.parameters, result.parameter_tensors, result.layer_parameters)
    return _same_terms(result, replace(result, workload=workload, values=symbol_values(result.config, workload),
                                       fits=()))


def _same_terms(result: Compute, other: Compute) -> Compute:
    """`other`, built from `result`'s terms, given their split by b (a cached property, computed once)."""
    other.__dict__["_per_batch"] = result._per_batch
    return other


def peak_at(config: BertConfig, workload: Workload, batch: int) -> int:
    """The step's peak at another batch, computed afresh (what the fits table is checked against)."""
    return compute(config, replace(workload, batch=batch)).peak


def unused(config: BertConfig) -> tuple[int, int]:
    """(elements, tensors) of parameters the forward never uses, so no gradient and no optimizer state.

    An untied LM head builds `cls.predictions.bias` and a decoder bias of its own; the forward uses the decoder's.
    A family may build parameters its step does not use (DeBERTa's relative embeddings and their LayerNorm
    without a score type that reads them: `StepLayout.unused`).
    """
    elements, tensors = 0, 0
    if config.head in LM_HEADS and not config.tie_word_embeddings:
        elements, tensors = config.vocab_size, 1
    facts, values = _facts(config), symbol_values(config, Workload(1, 1))
    for part in STEPS[config.model_type].unused:
        if kinds.holds(facts, part.when):
            elements, tensors = elements + prod(values[f] for f in part.factors), tensors + part.tensors
    return elements, tensors


# The step's terms, from the family's modules (`tui.core.steps`, summed by the engine in `tui.core.kinds`) -------
def _step(config: BertConfig, workload: Workload, c: Conventions, layer_input: bool = True) -> Step:
    cast_inputs = workload.amp and c.stream != c.compute
    sliding = layer_types(config)["Ll"] > 0
    facts = {"amp": workload.amp, "cast_inputs": cast_inputs, "fused": c.fused, "layer_input": layer_input,
             "pooler_holds": config.has_pooler and not cast_inputs, "padded": workload.padded,
             "mask_given": workload.padding_mask,
             "mean_pooling": MEAN_POOLING in config.step_keys,
             "window_mask": sliding and workload.attention == "sdpa" and workload.seq >= HALF_WINDOW,
             "rows16": c.fused and c.compute == 4, **_facts(config)}
    return Step(workload, c, facts)


def _facts(config: BertConfig) -> dict[str, bool]:
    """The config's facts the modules' conditions read (the workload's are `_step`'s)."""
    return {"regression": config.num_labels == 1, "project": projects(config),
             "token_types": config.type_vocab_size > 0, "relative": config.relative_attention,
             "c2p": config.pos_att_c2p, "p2c": config.pos_att_p2c, "share": config.share_att_key,
             "norm_rel": config.norm_rel_ebd,
             "pos_key": config.relative_attention and (config.share_att_key or config.pos_att_c2p),
             "pos_query": config.relative_attention and (config.share_att_key or config.pos_att_p2c),
             "pos_proj": config.relative_attention and (config.share_att_key or config.pos_att_c2p
                                                        or config.pos_att_p2c)}


def projects(config: BertConfig) -> bool:
    """Whether a projection maps the embeddings (E wide) to the encoder's H."""
    projection = STEPS[config.model_type].projection
    return projection == "always" or (projection == "E≠H" and config.embedding_width != config.hidden_size)


def _layout(config: BertConfig) -> StepLayout:
    return STEPS[config.model_type]


def _parts(config: BertConfig) -> tuple[tuple[str, tuple[Module, ...]], ...]:
    layout = _layout(config)
    pooler = layout.pooler if config.has_pooler else ()
    return ("embeddings", layout.embeddings), ("rotary tables", layout.rotary), ("stored layers", layout.stored), \
        ("layer", layout.layer), ("first layer", layout.first), ("local layers", layout.local), \
        ("pooler", pooler), ("head", layout.heads[config.head])


def flop_terms(config: BertConfig, workload: Workload | None = None) -> Iterator[Flop]:
    step = _step(config, workload or Workload(1, 1), Conventions.of(workload or Workload(1, 1)))
    for component, modules in _parts(config):
        yield from kinds.flops(component, modules, step)


def saved_terms(config: BertConfig, workload: Workload, c: Conventions) -> Iterator[Saved]:
    step = _step(config, workload, c)
    for component, modules in _parts(config):
        if workload.checkpointing and component in ("first layer", "local layers", "rotary tables"):
            continue  # inside the checkpointed layers: kept only while one is recomputed (`recompute_terms`)
        if component == "layer" and workload.checkpointing:
            yield Saved("layer", "layer input (checkpoint)", ("n", "H"), c.stream)
            if _cuda_projection(config, workload):
                yield Saved("first layer", "layer 0's checkpointed input is the projection's 16-bit output",
                            ("n", "H"), 2, -1)
            if _layout(config).boolean_mask:  # always there: int64 as given, float32 as the model makes it
                yield Saved("attention mask", "4-D attention mask (checkpoint input)", ("b'", "s", "s"),
                            8 if workload.padding_mask else 4)
            elif _layout(config).checkpoint_mask and (workload.padded or (config.head == "causal-lm"
                                                                           and workload.attention == "eager")):
                mask16 = _cuda_projection(config, workload) and _layout(config).mask_after_projection
                yield Saved("attention mask", "4-D attention mask (checkpoint input)", ("b'", "s", "s"),
                            c.compute if mask16 and workload.attention == "eager" else _mask_size(workload, c))
        else:
            yield from kinds.saves(component, modules, step)
            if component == "layer" and _cuda_projection(config, workload):
                yield Saved("first layer", "layer 0 reads the projection's 16-bit output: one input kept, not "
                            "three 16-bit copies", ("n", "H"), c.compute, -2)


def _cuda_projection(config: BertConfig, workload: Workload) -> bool:
    """An embedding projection under CUDA autocast: it hands layer 0 16-bit states, which layer 0's Q/K/V
    projections keep as they are, and whose LayerNorms (float32 under CUDA autocast) turn the stream back to
    float32 for every later layer (CPU autocast keeps the whole stream 16-bit: `Conventions.stream16`)."""
    return workload.amp and workload.device == "cuda" and projects(config) and workload.train


def recompute_terms(config: BertConfig, workload: Workload, c: Conventions) -> Iterator[Saved]:
    """What the largest layer saves again while the backward recomputes it (its input is held). With layer
    types (ModernBERT): its rotary table too, a local layer's mask where there is one, and layer 0 alone has no
    attention norm."""
    layout, step = _layout(config), _step(config, workload, c, layer_input=False)
    yield from kinds.saves("layer", layout.layer, step)
    if layout.layer_types:
        yield from kinds.saves("layer", layout.rotary_one, step)
        if layer_types(config)["Ll"] > 0:
            yield from kinds.saves("layer", layout.local_one, step)
        else:
            yield from kinds.saves("layer", layout.first_recompute, step)


def _mask_size(workload: Workload, c: Conventions) -> int:
    """The 4-D mask a checkpointed layer keeps: boolean (sdpa), or additive in the dtype of the encoder's stream
    (eager: float32 under autocast, unless a 16-bit projection feeds the encoder)."""
    return 1 if workload.attention == "sdpa" else c.stream


# Closed forms ------------------------------------------------------------------------------------------------
SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
SYMBOL_ORDER = ("L", "S", "Ll", "Y", "b", "b'", "C", "n", "A", "s", "s₁₆", "s₃₂", "d", "D", "H", "E", "I", "V", "N",
                "2", "1")


def polynomial(terms: Iterable[tuple[int, tuple[str, ...]]]) -> dict[tuple[tuple[str, int], ...], int]:
    """Sum `coefficient × Π factors` terms into a polynomial: monomial (symbol, power)... → coefficient."""
    result: dict[tuple[tuple[str, int], ...], int] = {}
    for coefficient, factors in terms:
        numbers = prod(int(f) for f in factors if f.isdigit())
        powers: dict[str, int] = {}
        for symbol in factors:
            if not symbol.isdigit():
                powers[symbol] = powers.get(symbol, 0) + 1
        key = tuple(sorted(powers.items(), key=lambda item: SYMBOL_ORDER.index(item[0])))
        result[key] = result.get(key, 0) + coefficient * numbers
    return {key: value for key, value in result.items() if value}


def render(poly: dict[tuple[tuple[str, int], ...], int]) -> str:
    """`40·n·H + 8·n·I + 12·b'·A·s²`: a polynomial as the output shows it."""
    text = ""
    for monomial, coefficient in poly.items():
        symbols = "·".join(s + (str(p).translate(SUPERSCRIPTS) if p > 1 else "") for s, p in monomial)
        size = abs(coefficient)
        part = f"{size}" if not symbols else (symbols if size == 1 else f"{size}·{symbols}")
        sign = " − " if coefficient < 0 else " + "
        text = (text + sign + part) if text else ("−" + part if coefficient < 0 else part)
    return text or "0"


def evaluate(poly: dict[tuple[tuple[str, int], ...], int], values: dict[str, int]) -> int:
    return sum(c * prod(values[s] ** p for s, p in monomial) for monomial, c in poly.items())


def flops_form(result: Compute, component: str) -> dict[tuple[tuple[str, int], ...], int]:
    """The forward FLOPs of one component (one layer for `layer`) as a polynomial."""
    return polynomial((2 * t.coef, t.factors) for t in result.flop_terms if t.component == component)


def bytes_form(terms: Iterable[Saved], component: str | None = None) -> dict[tuple[tuple[str, int], ...], int]:
    """Bytes of the saved tensors of one component (all when None) as a polynomial; layers not multiplied by L."""
    return polynomial((t.coef * t.size, t.factors) for t in terms if component in (None, t.component))


def closed_forms(result: Compute) -> dict[str, str]:
    """Every quantity of `result` in symbols, component by component (`layer` is one layer: × L in totals)."""
    forms: dict[str, str] = {}
    for component in dict.fromkeys(t.component for t in result.flop_terms):
        forms[f"flops.forward.{component}"] = render(flops_form(result, component))
    forms["flops.backward"] = "".join((
        "2 × forward", " − 2 × unused products" if result.flops_unused else "",
        " + L × layer forward (recompute)" if result.workload.checkpointing else "",
        " + ½ × L × attention products (fused backward)" if result.flops_rescore else ""))
    for component in dict.fromkeys(t.component for t in result.saved_terms):
        forms[f"activations.{component}"] = render(bytes_form(result.saved_terms, component))
    if result.recompute_terms:
        forms["recompute"] = render(bytes_form(result.recompute_terms))
    return forms
