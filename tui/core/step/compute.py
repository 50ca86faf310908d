"""Compute and memory of a training step (or an inference forward) at a batch and sequence length, exact.

Everything is derived from the config and a `Workload`, in closed forms over the symbols (b, s, H, I, A, V, N,
C, L), and checked against torch's own measurements of transformers' classes (`tui/reference/measure.py`, fixtures in
tests/fixtures/compute.json). This module is the builder on top of the step room, over the workload and
conventions (`workload`), the modules' kinds (`kinds`), each family's step as data (`steps`), the symbols (`symbols`),
the result type (`result`) and the phases (`peak`). It sums:

- FLOPs in the convention of `torch.utils.flop_counter`: 2 per multiply-accumulate, matrix products only.
- Activations: the bytes of the tensors autograd saves for backward, one storage counted once, parameters not.
  Each saved tensor is a `Saved` term: which component, what it is, its element count as a product of symbols,
  and its element size under the workload's conventions (`Conventions`).
- Weights, gradients, optimizer states: bytes after one optimizer step.

A training step is the class's forward with labels (its own loss), the backward, one optimizer step. BertModel
has no loss: its step's loss is the sum of its outputs, which saves nothing and reaches every parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from math import prod

from ..config import BertConfig, ConfigError
from ..count.families import build_tree
from ..count.tree import ParamTree
from ..families.modernbert import MEAN_POOLING
from ..poly import Poly, of_terms, render
from . import allocations, flow, kinds
from .allocator import round_size
from .kinds import Flop, Module, Saved, Step
from .layouts import STEPS
from .method import Method
from .peak import derived_phases, max_batch, phases, stranded, usable
from .result import DOES_NOT_FIT, FITS, Compute, Fit
from .steps import AMP_LAYER_COPIES, PROJECTED_INPUT, StepLayout
from .symbols import (
    GLOBAL_EVERY,
    HALF_WINDOW,
    additive_mask,
    attention_run,
    config_facts,
    layer_types,
    projects,
    symbol_values,
)
from .workload import GIB, GPU_SIZES_GIB, MAX_BATCH, Conventions, Workload


def check(config: BertConfig, workload: Workload, method: Method | None = None) -> None:
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
    reserved = 2 if config.family.forward.positions_from_ids else 0
    if workload.seq > config.max_position_embeddings - reserved:
        rule = f"must be at most max_position_embeddings ({config.max_position_embeddings:,})"
        if reserved:
            rule += f" − {reserved} ({config.model_type} counts positions from its padding index + 1)"
        raise ConfigError("seq", workload.seq, rule)
    if config.head == "multiple-choice" and workload.choices < 1:
        raise ConfigError("choices", workload.choices, "must be at least 1")


def compute(config: BertConfig, workload: Workload, gpu_memory: int | None = None,
            tree: ParamTree | None = None, method: Method | None = None, fits: bool = True, derive: bool = True
            ) -> Compute:
    """FLOPs and bytes of `workload` on `config`; `gpu_memory` (bytes) adds a row to the fits table. The peak
    and its phases are the derived allocation order's where it is derived (`allocations.covers`), else the peak
    rule's. `tree`: the config's counted tree if the caller has it (the explorer does), so it is not built again.
    `method`: a fine-tuning method (LoRA, frozen parts: `tui.core.step.method`); None trains everything. `fits`
    False: without the fits table and its search (what a caller that reads neither need not wait for). `derive`
    False (with `fits` False): the peak rule's phases even where the order is derived, without running it (the
    explorer's figures at each keystroke, which leave the peak to its worker: seconds at a thousand layers)."""
    check(config, workload, method)
    if tree is None or tree.config != config:
        tree = build_tree(config)
    if method is None:
        layer = tree.groups().get("encoder", 0) // max(1, config.num_hidden_layers)
        parameters, tensors = tree.total, tree.root.tensors
    else:
        layer, parameters, tensors = method.layer_trainable(config), method.parameters, method.tensors
    copies = linear_copies(tree) if workload.amp and not workload.train else 0
    result = measure(config, workload, parameters, tensors, layer, method, copies)
    if (derive or fits) and fits_replayed(config, workload, method):  # the one peak: the derived order's
        peaks = allocations.phase_peaks(config, workload, method)
        result = _same_terms(result, replace(result, phases=derived_phases(result, peaks), derived=True))
    if not fits:
        return result
    sizes = [(float(g), g * GIB, False) for g in GPU_SIZES_GIB]
    if gpu_memory is not None:
        sizes.append((gpu_memory / GIB, gpu_memory, True))
    table = _fits(config, replace(workload, batch=1), parameters, tensors, layer, tuple(sizes), method, copies)
    if fits_replayed(config, workload, method):
        run = allocations.replayed(config, workload, workload.batch, method=method)
        result = _same_terms(result, replace(result, replayed=True, reserved=run.peak_pinned, stranded=run.stranded))
        # (the step's own batch, replayed on each card: not read off the table, since fragmentation is not monotone
        # in the batch: BERT-base classification at 128 tokens under amp-bf16 runs at 1,546 on 80 GiB and runs out
        # at 1,545 and 1,537; the run without a cap answers every card it never reserved more than)
        table = tuple(replace(fit, at_batch=allocations.verdict(config, workload, workload.batch,
                                                                usable(fit.bytes), run, method)) for fit in table)
    else:
        table = tuple(replace(fit, at_batch=FITS if workload.batch <= fit.max_batch else DOES_NOT_FIT)
                      for fit in table)
    return _same_terms(result, replace(result, fits=table))


@lru_cache(maxsize=32)
def _fits(config: BertConfig, workload: Workload, parameters: int, tensors: int, layer: int,
          sizes: tuple[tuple[float, int, bool], ...], method: Method | None = None, copies: int = 0
          ) -> tuple[Fit, ...]:
    """The fits table, which the batch does not change (`workload` at batch 1): kept for the next edit of the
    batch (the explorer asks at every keystroke)."""
    return fits(measure(config, workload, parameters, tensors, layer, method, copies), list(sizes))


def linear_copies(tree: ParamTree) -> int:
    """Bytes of the 16-bit copies autocast makes of every Linear's weight and bias (the tied decoder's too),
    each a block of its own: an inference forward's cache, held until the forward leaves autocast."""
    return sum(round_size(prod(param.shape) * 2) for param in tree.root.params() if param.kind in ("weight", "bias"))


def measure(config: BertConfig, workload: Workload, parameters: int, tensors: int, layer_parameters: int,
            method: Method | None = None, copies: int = 0) -> Compute:
    """The terms of `workload` on `config` (checked by `compute`), without the fits table; `copies`: autocast's
    cached 16-bit weights an inference forward holds (`linear_copies`)."""
    stream16 = workload.amp and projects(config) and workload.device == "cpu"
    # ELECTRA makes its mask from the projected (16-bit) states: the scores stay 16-bit; ALBERT from the embeddings.
    mask16 = stream16 and config.family.forward.mask_after_projection
    # The terms hold symbols, not the batch (but the causal-LM labels' view at batch 1 only): one set for b ≥ 2.
    conventions, flops, saved, recompute, upcast, leaf = _terms(
        config, replace(workload, batch=min(workload.batch, 2)), stream16, mask16, method)
    return _with_phases(Compute(config, workload, symbol_values(config, workload), flops, saved, recompute,
                                parameters, tensors, _layout(config).buffers(config, conventions.weight),
                                conventions,
                                layer_parameters, loss_upcast=upcast, method=method, linear_copies=copies,
                                input_leaf=leaf))


@lru_cache(maxsize=64)
def _terms(config: BertConfig, workload: Workload, stream16: bool, mask16: bool, method: Method | None = None
           ) -> tuple[Conventions, tuple[Flop, ...], tuple[Saved, ...], tuple[Saved, ...], bool, Saved | None]:
    """The step's terms (they hold symbols, not values): the same for the same config and workload, kept."""
    runs = attention_run(config, workload)
    conventions = Conventions.of(runs, additive_mask(config, runs) and not mask16)
    if stream16:
        conventions = replace(conventions, stream16=True)
    upcast = any(isinstance(module, kinds.CrossEntropy) and module.upcast and module.classes == "V"
                 for module in STEPS[config.model_type].heads.get(config.head, ()))
    if method is not None:
        walked = flow.walk(method_parts(config, workload), _step(config, workload, conventions), method,
                           _layout(config).names, config.body_prefix)
        if workload.checkpointing:
            saved, recompute = _checkpointed_method(config, workload, conventions, method, walked.saves)
        else:
            saved, recompute = tuple(walked.saves) if workload.train else (), ()
        return conventions, tuple(walked.flops), saved, recompute, upcast, walked.leaf
    saved = tuple(saved_terms(config, workload, conventions)) if workload.train else ()
    recompute = tuple(recompute_terms(config, workload, conventions)) if workload.checkpointing else ()
    return conventions, tuple(flop_terms(config, workload)), saved, recompute, upcast, None


def _checkpointed_method(config: BertConfig, workload: Workload, c: Conventions, method: Method,
                         saves: list[Saved]) -> tuple[tuple[Saved, ...], tuple[Saved, ...]]:
    """Checkpointing under a method: what the walk's components outside the layers save, and each layer's
    checkpoint inputs (as the full step's: layer 0 takes the mask and the first layer's terms); the recomputation
    keeps what the largest layer saves (walked with its input held: `layer_input` false). The walk flows from the
    word embeddings on (`Walk.lookup`: transformers' `enable_input_require_grads`), so every layer is recomputed."""
    layers = config.num_hidden_layers
    kept = [t for t in saves if not t.component.startswith("layer.")]
    for term in checkpoint_terms(config, workload, c):
        for index in range(layers) if term.component == "layer" else (0,):
            kept.append(replace(term, component=f"layer.{index}"))
    again = flow.walk(method_parts(config, workload), _step(config, workload, c, layer_input=False), method,
                      _layout(config).names, config.body_prefix)
    values = symbol_values(config, workload)
    per_layer = [[t for t in again.saves if t.component == f"layer.{index}"] for index in range(layers)]
    largest = max(per_layer, key=lambda terms: sum(t.nbytes(values) for t in terms))
    return tuple(kept), tuple(replace(t, component="layer") for t in largest)


def method_parts(config: BertConfig, workload: Workload) -> list[flow.Part]:
    """The components a step under a method walks, each layer apart (they train differently), with the prefix
    their modules' names have; layer 0 reads an embedding projection's 16-bit output under CUDA autocast."""
    layout = _layout(config)
    body = config.body_prefix
    parts: list[flow.Part] = [("embeddings", f"{body}embeddings.", layout.embeddings, "")]
    if config.family.forward.shared_layers:  # ALBERT: run i of L takes group i·G/L, whose K stored layers run in turn
        groups, inner = config.num_hidden_groups, config.inner_group_num
        parts += [(f"layer.{i * inner + k}", f"{body}encoder.albert_layer_groups.{g}.albert_layers.{k}.",
                   layout.run, f"layer.{i * inner + k}") for i in range(config.num_hidden_layers)
                  for g in (i * groups // config.num_hidden_layers,) for k in range(inner)]
    elif len(layout.walks) == 1:  # its own walk of a layer (DeBERTa's)
        parts += [(f"layer.{i}", f"{body}{config.family.layer_stack}.{i}.", layout.walks[0], "")
                  for i in range(config.num_hidden_layers)]
    elif layout.walks:  # ModernBERT: layer 0 without its attention norm; global every third layer, local between
        first, glob, local = layout.walks
        parts += [(f"layer.{i}", f"{body}{config.family.layer_stack}.{i}.",
                   first if i == 0 else glob if i % GLOBAL_EVERY == 0 else local, "" if i else "layer.0")
                  for i in range(config.num_hidden_layers)]
    else:
        parts += [(f"layer.{i}", f"{body}{config.family.layer_stack}.{i}.", layout.layer, "")
                  for i in range(config.num_hidden_layers)]
    if cuda_projection(config, workload):
        component, prefix, modules, run = parts[1]
        parts[1] = (component, prefix, tuple(PROJECTED_INPUT if m == AMP_LAYER_COPIES[0] else m for m in modules),
                    run or component)  # (not copied to the layers after it)
    if config.has_pooler:
        parts.append(("pooler", body, layout.pooler, ""))
    parts.append(("head", "", layout.heads[config.head], ""))
    return parts


def fits(result: Compute, sizes: list[tuple[float, int, bool]]) -> tuple[Fit, ...]:
    """The largest batch for each size. Where the step's allocation order is derived (`allocations.covers`):
    the largest whose run, replayed through the caching allocator until it settles, never runs out of the size's
    usable bytes (`peak.usable`). Elsewhere: the largest whose reserved peak (each phase's peak and the space the
    allocator strands) is within them; each is affine in b from b = 2 on, so three batches settle every size
    (and give the replay's search its first guess)."""
    peaks = {}
    for b in (1, 2, 3):
        other = at_batch(result, b)
        peaks[b] = {name: peak + other.stranded for name, peak in other.phase_peaks().items()}
    table = [Fit(gib, size, max_batch(peaks, size, MAX_BATCH), asked) for gib, size, asked in sizes]
    config, workload = result.config, result.workload
    if fits_replayed(config, workload, result.method):
        rooms: dict[int, int] = {}  # usable bytes → the peak rule's answer, the search's first guess
        for fit in table:
            rooms.setdefault(usable(fit.bytes), fit.max_batch)
        slope = max(peaks[3][name] - peaks[2][name] for name in peaks[2])
        answers = allocations.largest_batches(config, workload, rooms, MAX_BATCH, slope, result.method)
        table = [replace(fit, max_batch=answers[usable(fit.bytes)]) for fit in table]
    return tuple(table)


def fits_replayed(config: BertConfig, workload: Workload, method: Method | None) -> bool:
    """Whether the step's peak, its fits and its reserved peak come from its derived allocation order (replayed)."""
    return allocations.covers(config, workload, method) is None


def not_replayed(result: Compute) -> str | None:
    """Why a CUDA step's fits come from the peak rule, not the replay (None: replayed, or CPU conventions, where
    no caching allocator is modelled)."""
    if result.replayed or result.workload.device != "cuda":
        return None
    return allocations.covers(result.config, result.workload, result.method)


def at_batch(result: Compute, batch: int) -> Compute:
    """`result`'s workload at another batch (no fits table). The terms do not depend on the batch, only their
    values do, but on either side of one sequence (`Saved.batch_one`: the causal-LM labels' view, ModernBERT's
    eager attention keeping Wqkv's whole output): measured afresh across it."""
    workload = replace(result.workload, batch=batch)
    if (batch == 1) != (result.workload.batch == 1):
        return measure(result.config, workload, result.parameters, result.parameter_tensors, result.layer_parameters,
                       result.method, result.linear_copies)
    return _with_phases(_same_terms(result, replace(result, workload=workload, fits=(),
                                                    values=symbol_values(result.config, workload))))


def _same_terms(result: Compute, other: Compute) -> Compute:
    """`other`, built from `result`'s terms, given their split by b (a cached property, computed once)."""
    other.__dict__["_per_batch"] = result._per_batch
    return other


def _with_phases(result: Compute) -> Compute:
    """`result` with its phases (what the step holds at each phase's worst moment)."""
    return _same_terms(result, replace(result, phases=phases(result), stranded=stranded(result)))


def peak_at(config: BertConfig, workload: Workload, batch: int) -> int:
    """The step's reserved peak at another batch, computed afresh (what the fits table is checked against)."""
    return compute(config, replace(workload, batch=batch)).reserved_peak


# The step's terms, from the family's modules (`steps`, summed by the engine in `kinds`) ----------------------
def _step(config: BertConfig, workload: Workload, c: Conventions, layer_input: bool = True) -> Step:
    cast_inputs = workload.amp and c.stream != c.compute
    sliding = layer_types(config)["Ll"] > 0
    facts = {"amp": workload.amp, "cuda_autocast": workload.amp and workload.device == "cuda",
             "cast_inputs": cast_inputs, "fused": c.fused, "layer_input": layer_input,
             "pooler_holds": config.has_pooler and not cast_inputs, "padded": workload.padded,
             "mask_given": workload.padding_mask,
             "mean_pooling": MEAN_POOLING in config.step_keys,
             "window_mask": sliding and workload.attention == "sdpa" and workload.seq >= HALF_WINDOW,
             "rows16": c.fused and c.compute == 4,
             "one_sequence": workload.batch * (workload.choices if config.head == "multiple-choice" else 1) == 1,
             **config_facts(config)}
    return Step(workload, c, facts)


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
            yield from checkpoint_terms(config, workload, c)
        else:
            yield from kinds.saves(component, modules, step)
            if component == "layer" and cuda_projection(config, workload):
                yield Saved("first layer", "layer 0 reads the projection's 16-bit output: one input kept, not "
                            "three 16-bit copies", ("n", "H"), c.compute, -2)


def checkpoint_terms(config: BertConfig, workload: Workload, c: Conventions) -> Iterator[Saved]:
    """What checkpointed layers keep through the step: each its input (`layer`), the first's as the embedding
    projection hands it over, and the 4-D mask layer 0 keeps for them all."""
    yield Saved("layer", "layer input (checkpoint)", ("n", "H"), c.stream)
    if cuda_projection(config, workload):
        yield Saved("first layer", "layer 0's checkpointed input is the projection's 16-bit output", ("n", "H"), 2,
                    -1)
    if _layout(config).boolean_mask:  # always there: int64 as given, float32 as the model makes it
        yield Saved("attention mask", "4-D attention mask (checkpoint input)", ("b'", "s", "s"),
                    8 if workload.padding_mask else 4)
    elif _layout(config).checkpoint_mask and (workload.padded or (config.head == "causal-lm"
                                                                   and workload.attention == "eager")):
        mask16 = cuda_projection(config, workload) and config.family.forward.mask_after_projection
        yield Saved("attention mask", "4-D attention mask (checkpoint input)", ("b'", "s", "s"),
                    c.compute if mask16 and workload.attention == "eager" else _mask_size(workload, c))


def cuda_projection(config: BertConfig, workload: Workload) -> bool:
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
SYMBOL_ORDER = ("L", "K", "S", "Ll", "Y", "b", "b'", "c", "n", "A", "s", "s₁₆", "s₃₂", "d", "D", "H", "E", "I", "V",
                "N", "2", "1")  # the step's symbols, in the order its forms write them


def flops_form(result: Compute, component: str) -> Poly:
    """The forward FLOPs of one component (one layer for `layer`) as a polynomial."""
    return of_terms(((2 * t.coef, t.factors) for t in result.flop_terms if t.component == component), SYMBOL_ORDER)


def bytes_form(terms: Iterable[Saved], component: str | None = None) -> Poly:
    """Bytes of the saved tensors of one component (all when None) as a polynomial; layers not multiplied by L·K."""
    return of_terms(((t.coef * t.size, t.factors) for t in terms if component in (None, t.component)), SYMBOL_ORDER)


def layer_times(config: BertConfig) -> str:
    """How many times a layer's terms count, in symbols: `L`, or ALBERT's `L·K` (each of L runs a group of K)."""
    return "L·K" if config.family.forward.shared_layers else "L"


def closed_forms(result: Compute) -> dict[str, str]:
    """Every quantity of `result` in symbols, component by component (`layer` is one layer: × `layer_times` in
    totals)."""
    forms: dict[str, str] = {}
    times = layer_times(result.config)
    for component in dict.fromkeys(t.component for t in result.flop_terms):
        forms[f"flops.forward.{component}"] = render(flops_form(result, component))
    if result.workload.train and result.method is not None:
        forms["flops.backward"] = ("Σ forward product × the gradients it passes on (2: its input's and its "
                                   "weight's; 1: one of them; 0: neither, a frozen part before the first that trains)"
                                   + (" + the layers' forward (recompute)" if result.workload.checkpointing else "")
                                   + (" + ½ × attention products (fused backward)" if result.flops_rescore else ""))
    elif result.workload.train:
        forms["flops.backward"] = "".join((
            "2 × forward", " − 2 × unused products" if result.flops_unused else "",
            f" + {times} × layer forward (recompute)" if result.workload.checkpointing else "",
            f" + ½ × {times} × attention products (fused backward)" if result.flops_rescore else ""))
    for component in dict.fromkeys(t.component for t in result.saved_terms):
        forms[f"activations.{component}"] = render(bytes_form(result.saved_terms, component))
    if result.recompute_terms:
        forms["recompute"] = render(bytes_form(result.recompute_terms))
    return _layer_runs(forms) if result.method is not None else forms


def _layer_runs(forms: dict[str, str]) -> dict[str, str]:
    """Under a method each layer is a component: consecutive layers with the same form as one key
    (`activations.layer.1-11`: each of layers 1 to 11)."""
    merged: dict[str, str] = {}
    run: list[str] = []  # keys of consecutive layers with one form

    def close() -> None:
        if run:
            first, last = run[0], run[-1].rsplit(".", 1)[1]
            merged[first if len(run) == 1 else f"{first}-{last}"] = forms[first]
            run.clear()

    for key, form in forms.items():
        layer = re.fullmatch(r"(.*)\.layer\.(\d+)", key)
        if layer and run and run[0].rsplit(".layer.", 1)[0] == layer.group(1) and forms[run[0]] == form:
            run.append(key)
            continue
        close()
        if layer:
            run.append(key)
        else:
            merged[key] = form
    close()
    return merged
