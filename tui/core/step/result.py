"""The step's result: a workload's FLOPs and bytes on a config, summed from its terms, with its phases and fits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..config import BertConfig
from .kinds import Flop, Saved
from .method import Method
from .symbols import per_b, symbol_values, unused
from .workload import Conventions, Workload


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase of the step: what it holds from its start, and its working set, term by term (bytes)."""

    name: str
    held: tuple[tuple[str, int], ...]
    transient: tuple[tuple[str, int], ...]

    @property
    def peak(self) -> int:
        return sum(n for _, n in self.held) + sum(n for _, n in self.transient)


# What a batch does on a card (`Fit.at_batch`): replayed (`allocations.verdict`), it runs, runs out, or is not
# proven to run (it never runs out, never settles, and has no segment of its largest handed-on block to spare);
# by the peak rule, it fits or does not.
RUNS, RUNS_OUT, UNPROVEN, FITS, DOES_NOT_FIT = "runs", "runs out", "not proven to run", "fits", "does not fit"


@dataclass(frozen=True, slots=True)
class Fit:
    gib: float
    bytes: int
    max_batch: int  # 0: not even one example fits
    asked: bool = False  # the size the user gave (--gpu-memory), not one of the common ones
    # What the step's own batch does on the card (`compute.compute`): replayed, RUNS, RUNS_OUT or UNPROVEN
    # (`allocations.verdict`: it can fail below `max_batch`, fragmentation not being monotone in the batch); by
    # the peak rule, FITS or DOES_NOT_FIT (batch ≤ max_batch). None: not asked.
    at_batch: str | None = None

    @property
    def runs_at_batch(self) -> bool:
        """Whether the step's own batch runs (or, by the peak rule, fits) on the card."""
        return self.at_batch in (RUNS, FITS)


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
    phases: tuple[Phase, ...] = ()  # the step's phases, each with its peak (`tui.core.step.peak`)
    # Whether the phases' peaks are the derived allocation order's (`allocations.phase_peaks`, where it is derived:
    # `peak.derived_phases`); False: the peak rule's (`peak.phases`)
    derived: bool = False
    stranded: int = 0  # reserved beyond the allocated peak: free space the caching allocator cannot give back
    loss_upcast: bool = False  # the head's loss casts its n·V logits to float32 first (a causal LM's, ModernBERT's)
    linear_copies: int = 0  # inference under autocast: the 16-bit weight copies its cache holds through the forward
    fits: tuple[Fit, ...] = field(default=())
    method: Method | None = None  # a fine-tuning method: what trains (None: everything)
    # The caching allocator replayed over the step's own allocation order (`tui.core.step.allocations`, where
    # it is derived): what a cap must let it reserve over the loop's steps until they settle, and the fits by that
    # replay.
    replayed: bool = False
    reserved: int = 0
    # checkpointing under a method whose word table does not train: its lookup's output, a leaf that requires a
    # gradient (transformers' `enable_input_require_grads`), held with that gradient until the graph goes
    input_leaf: Saved | None = None

    # FLOPs -------------------------------------------------------------------------------------------------
    def flops_by_component(self) -> dict[str, int]:
        return dict(self._flops)

    @cached_property
    def _flops(self) -> dict[str, int]:
        return _by_component(self.flop_terms, self.values, _flops)

    @property
    def layer_runs(self) -> int:
        """How many times an encoder layer runs: L·K (K: ALBERT's layers per group, 1 elsewhere)."""
        return self.values["L"] * self.values["K"]

    @property
    def layer_component(self) -> str:
        """The component "one layer" shows: `layer` (every layer alike), or under a method, whose layers are
        components of their own, the last (it trains whatever the first ones freeze)."""
        return "layer" if self.method is None else f"layer.{self.layer_runs - 1}"

    def layer_flops(self) -> dict[str, int]:
        """One encoder layer's forward FLOPs, product by product (Q/K/V, scores, context, output, FFN)."""
        return _summed((t.what, t.flops(self.values)) for t in self.flop_terms if t.component == self.layer_component)

    def layer_activations(self) -> dict[str, int]:
        """What one encoder layer saves for backward, tensor by tensor (bytes)."""
        return _summed((t.what, t.nbytes(self.values)) for t in self.saved_terms
                       if t.component == self.layer_component)

    @cached_property
    def flops_forward(self) -> int:
        return sum(self._flops.values())

    @property
    def flops_backward(self) -> int:
        """Twice the forward (a gradient for each operand of every product), plus the checkpointing recompute and
        what a fused attention's backward recomputes."""
        if not self.workload.train:
            return 0
        return self._flops_gradients + self.flops_recompute + self.flops_rescore

    @cached_property
    def _flops_gradients(self) -> int:
        """One product the size of a forward product for each operand whose gradient the backward computes: two,
        but for products no gradient reaches and, under a method, operands that do not train."""
        return sum(_times(t, self.values) * t.backward_products * t.flops(self.values) for t in self.flop_terms)

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
        return sum(_times(t, self.values) * t.flops(self.values) for t in self.flop_terms
                   if t.attention and t.grads) // 2

    @property
    def flops_recompute(self) -> int:
        """One forward of every layer, but what checkpointing's early stop never reruns (a layer's last product
        when nothing after it saves a tensor: ModernBERT's)."""
        if not self.workload.checkpointing:
            return 0
        skipped = _by_component((t for t in self.flop_terms if not t.recomputed), self.values, _flops)
        return sum(flops - skipped.get(component, 0) for component, flops in self._flops.items()
                   if component == "layer" or component.startswith("layer."))  # (a method's: layer by layer)

    @property
    def flops_step(self) -> int:
        return self.flops_forward + self.flops_backward

    @property
    def rule_of_thumb(self) -> int:
        """The `6 × parameters × tokens` estimate (2 forward + 4 backward per parameter and token)."""
        return self.rule_factor * self.parameters * self.values["n"]

    @property
    def rule_factor(self) -> int:
        """FLOPs a parameter and token in the rule of thumb: 6 for a training step, 2 for an inference forward."""
        return 6 if self.workload.train else 2

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
        per_batch = _by_component((t for t in self.saved_terms if per_b(t)), one, _nbytes)
        fixed = _by_component((t for t in self.saved_terms if not per_b(t)), one, _nbytes)
        recompute = [0, 0]
        for term in self.recompute_terms:
            recompute[0 if per_b(term) else 1] += term.nbytes(one)
        return (per_batch, fixed), (recompute[0], recompute[1])

    @cached_property
    def saved_bytes(self) -> tuple[tuple[Saved, int], ...]:
        """Each saved tensor with its bytes in this step (× L·K for a layer's)."""
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

    @property
    def input_leaf_bytes(self) -> int:
        """The word embeddings' output held as a leaf under checkpointing (`input_leaf`; its gradient as much)."""
        return 0 if self.input_leaf is None else self.input_leaf.nbytes(self.values)

    @cached_property
    def weights(self) -> int:
        """The parameters' bytes (a method's adapters in float32: peft keeps them so)."""
        adapters = self.method.adapters if self.method else 0
        return (self.parameters - adapters) * self.conventions.weight + adapters * 4

    @cached_property
    def trained(self) -> tuple[int, int]:
        """(elements, tensors) of the parameters that get a gradient (and optimizer state)."""
        if self.method is not None:
            return self.method.reached
        elements, tensors = unused(self.config)
        return self.parameters - elements, self.parameter_tensors - tensors

    @cached_property
    def gradients(self) -> int:
        if not self.workload.train:
            return 0
        adapters = self.method.adapters if self.method else 0
        return (self.trained[0] - adapters) * self.conventions.weight + adapters * 4

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

    @property
    def peak(self) -> int:
        """The most the allocator holds during the step: the largest of its phases' peaks."""
        return max(phase.peak for phase in self.phases)

    @property
    def peak_model(self) -> str:
        """Which model gave the peak: "derived" (the derived allocation order's) or "peak rule"."""
        return "derived" if self.derived else "peak rule"

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda phase: phase.peak).name

    def phase_peaks(self) -> dict[str, int]:
        return {phase.name: phase.peak for phase in self.phases}

    @property
    def reserved_peak(self) -> int:
        """What a cap must let the allocator reserve: replayed, the most it holds in segments partly in use over
        steps until they settle (cuBLAS workspaces included): never less than the allocated peak, which is the same
        order's (`derived`); else the allocated peak and the space it strands."""
        return max(self.reserved, self.peak) if self.replayed else self.peak + self.stranded

    def memory(self) -> dict[str, int]:
        return {"weights": self.weights, "buffers": self.buffers, "gradients": self.gradients,
                "optimizer": self.optimizer, "activations": self.activations,
                "recompute": self.recompute_peak, "total": self.total, "peak": self.peak,
                "reserved_peak": self.reserved_peak}


def _summed(rows: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Rows by name, the same name's summed (a method's walk names a product once for each module it runs)."""
    totals: dict[str, int] = {}
    for what, n in rows:
        totals[what] = totals.get(what, 0) + n
    return totals


def _times(term: Flop | Saved, values: dict[str, int]) -> int:
    """How many times a term counts in the step: L·K for a layer's, once for any other component's."""
    return values["L"] * values["K"] if term.component == "layer" else 1


def _by_component(terms: Iterable[Any], values: dict[str, int], measure: Any) -> dict[str, int]:
    totals: dict[str, int] = {}
    for term in terms:
        totals[term.component] = totals.get(term.component, 0) + _times(term, values) * measure(term, values)
    return totals


def _flops(term: Flop, values: dict[str, int]) -> int:
    return term.flops(values)


def _nbytes(term: Saved, values: dict[str, int]) -> int:
    return term.nbytes(values)
