"""Renderings of a workload's compute and memory (`tui.core.step.result.Compute`): json-ready data, text, csv, markdown.

Views only: every number is the core's. The text is plain (no markup), for terminals and pipes alike.
"""

from __future__ import annotations

import csv
import io
import textwrap
from typing import Any

from ..core import config_dict
from ..core.config import BertConfig
from ..core.step.compute import closed_forms, cuda_projection, layer_times, not_replayed
from ..core.step.layouts import STEPS
from ..core.step.peak import HEADROOM, HEADROOM_RULE, HEADROOM_WHY
from ..core.step.result import UNPROVEN, Compute, Fit
from ..core.step.workload import FLOP_CONVENTION, MAX_BATCH, Workload
from ..core.units import short_bytes, short_flops
from ..plain import printable

WIDTH = 80  # the text fits an 80-column terminal
COMPONENT_ORDER = ("embeddings", "rotary tables", "stored layers", "layer", "first layer", "local layers",
                   "attention mask", "pooler", "head")
MEMORY_KINDS = ("weights", "buffers", "gradients", "optimizer", "activations", "recompute")


def workload_data(result: Compute, gpu_memory: int | None) -> dict[str, Any]:
    return {**result.workload.as_dict(), "gpu_memory": gpu_memory}


def compute_data(result: Compute, gpu_memory: int | None = None, full: Compute | None = None) -> dict[str, Any]:
    """The JSON contract of `bert-tui compute`: integers for FLOPs and bytes (`full`: under a method, the same
    step fully fine-tuned, beside it)."""
    rule = result.rule_of_thumb
    beside = {} if full is None else {"full_fine_tuning": {
        "trainable": full.trained[0], "flops_step": full.flops_step, "peak": full.peak,
        "fits": [{"gib": round(fit.gib, 3), "max_batch": fit.max_batch, "runs_at_batch": fit.runs_at_batch,
                  "at_batch": fit.at_batch} for fit in full.fits]}}
    return {
        "model": result.config.hf_class,
        "config": config_dict(result.config),
        "workload": workload_data(result, gpu_memory),
        "tokens": result.values["n"],
        "parameters": result.parameters,
        **({"trainable": result.method.trainable, "method": result.method.label} if result.method else {}),
        "flops": {"forward": result.flops_forward, "backward": result.flops_backward, "step": result.flops_step,
                  "recompute": result.flops_recompute, "forward_by_component": _ordered(result.flops_by_component()),
                  "forward_one_layer": result.layer_flops(),
                  "convention": FLOP_CONVENTION,
                  "rule_of_thumb": {"formula": f"{result.rule_factor} × parameters × tokens",
                                    "flops": rule, "difference": rule - result.flops_step}},
        "memory_bytes": result.memory(),
        "peak_phase": result.peak_phase,
        "peak_model": result.peak_model,
        "phases": {phase.name: {"peak": phase.peak, "held": dict(phase.held), "transient": dict(phase.transient)}
                   for phase in result.phases},
        "activations_by_component": _ordered(result.activations_by_component()),
        "activations_one_layer": result.layer_activations(),
        "fits": [{"gib": round(fit.gib, 3), "bytes": fit.bytes, "max_batch": fit.max_batch, "asked": fit.asked,
                  "runs_at_batch": fit.runs_at_batch, "at_batch": fit.at_batch} for fit in result.fits],
        "fits_note": f"{fits_basis(result)}: {HEADROOM_RULE}"
                     + (f"; {replayed_says(result.workload)}" if result.replayed else ""),
        "fits_allocator": {"model": "replayed" if result.replayed else "peak rule",
                           "stranded": result.stranded, "loop": result.workload.loop,
                           **({"not_replayed": why} if (why := not_replayed(result)) else {})},
        "conventions": convention_lines(result),
        "closed_forms": closed_forms(result),
        **beside,
    }


def convention_lines(result: Compute) -> list[str]:
    """Every convention that changes bytes in the step shown (and only those), and where the family's figures rest
    on BERT's measurements."""
    return (_workload_lines(result) + _method_lines(result)
            + _family_lines(result.config, result.workload, result.derived))


def _method_lines(result: Compute) -> list[str]:
    """What a fine-tuning method changes in the step, as peft and torch run it (measured on CPU: the FLOPs and
    the saved tensors; the peak is its own derived order's where that is derived, else the full step's rules)."""
    method = result.method
    if method is None:
        return []
    lines = [f"{method.label}: a frozen Linear keeps nothing for its weight's gradient, and no gradient flows "
             "into the parts before the first that trains (they keep nothing and run no backward); measured "
             "against peft and torch (CPU)"]
    if result.workload.checkpointing:
        lines.append("checkpointing makes the word embeddings' output require a gradient (transformers' "
                     "enable_input_require_grads): every layer runs its backward, and is recomputed for it")
    if method.adapters:
        if result.conventions.weight != 4 or result.workload.amp:
            lines.append("peft keeps the adapters in float32 (autocast_adapter_dtype): 4 bytes an element for "
                         "their weights, gradients and optimizer moments; lora_A reads a float32 copy of a "
                         "16-bit input")
        if method.dropout:
            lines.append("lora_dropout > 0: each adapted module keeps a dropout mask and the dropped copy of "
                         "its input for lora_A")
    if result.workload.train and result.replayed:
        lines.append("the peak and what fits are the caching allocator replayed over the method's own allocation "
                     "order (frozen parts out of autograd's graph, the adapters' ops as peft runs them), checked "
                     "event by event against peft's model with CUDA faked; not yet on a GPU")
    elif result.workload.train:
        lines.append("the peak and what fits follow the full step's rules over the method's terms (a frozen "
                     "body's backward runs no layer); not yet checked on a GPU")
    return lines


def _dropout_masks(result: Compute) -> bool:
    """Whether the step keeps any dropout mask (ALBERT's and ModernBERT's defaults have no dropout)."""
    return any("dropout mask" in term.what for term in result.saved_terms)


def _workload_lines(result: Compute) -> list[str]:
    """The conventions named as the output shows them, each only where it changes this step's bytes."""
    c, workload = result.conventions, result.workload
    names = {1: "bool", 2: "bfloat16" if "bf16" in workload.precision else "float16", 4: "float32", 8: "int64"}
    train = workload.train
    weights = "weights, gradients and optimizer moments" if train else "weights"
    stats = f", its saved mean/rstd in {names[c.stats]}" if train else ""
    lines = [FLOP_CONVENTION, f"{weights} in {names[c.weight]}",
             f"activations of matrix products in {names[c.compute]}",
             f"LayerNorm inputs and the residual stream in {names[c.residual]}{stats}"]
    if train and _dropout_masks(result):
        where = "1 byte per element (CUDA)" if c.bool_masks else "a tensor in the input's dtype (CPU)"
        lines.append(f"dropout p > 0 (the family's default): every dropout keeps its mask, {where}")
    elif train:
        lines.append(f"no dropout ({result.config.model_type}'s default is p = 0): no mask kept")
    if workload.amp:
        if train:
            lines.append("autocast keeps a 16-bit copy of every Linear weight for the backward")
        loss = ", cross-entropy in float32" if train and result.config.head != "none" else ""
        lines.append(f"autocast: softmax in {names[c.softmax]}{loss}")
    if c.fused:
        kernel = "memory-efficient" if c.compute == 4 else "cuDNN"
        keeps = ("it keeps q, k, v, its output and a float32 log-sum-exp (no b·A·s² tensors), and its backward "
                 "recomputes the scores (2.5 × forward)") if train else "no b·A·s² tensors"
        lines.append(f"sdpa on CUDA: the fused {kernel} kernel; {keeps}")
    elif workload.attention == "sdpa" and not c.bool_masks:
        lines.append("sdpa on CPU: the math path (softmax and dropout over b·A·s² scores, as eager)")
    if train and workload.device == "cuda" and workload.optimizer == "adamw":
        lines.append("AdamW's step counters live on the host (torch's default), not on the GPU")
    if loop_says(workload):
        lines.append(loop_says(workload))
    lines.append(PEAK_DERIVED if result.derived else PEAK_RULE)
    if c.stream16:
        lines.append("the embeddings' 16-bit projection makes the encoder's stream 16-bit (CPU autocast)")
    return lines


PEAK_DERIVED = ("peak: the step's allocation order, derived op by op (checked event by event against transformers "
                "run with CUDA faked), replayed through the caching allocator; its allocated peak, cuBLAS's "
                "workspaces out, within 3 % of an H200's (torch 2.11) on 33 of 35 steps, 4.1 % on all")
PEAK_RULE = "peak: the peak rule, each phase's held bytes and working set, checked against an H200 (torch 2.11)"


def _family_lines(config: BertConfig, workload: Workload, derived: bool = False) -> list[str]:
    """Where a family's figures rest on BERT's measurements rather than its own (`derived`: its peak is its own
    derived order's, not the rule read off BERT's)."""
    layout = STEPS[config.model_type]
    if layout.measured_on_gpu:
        return []
    transients = "" if derived else " and the peak's transients"
    lines = [f"{config.model_type}: FLOPs and saved tensors measured on its own classes (CPU); the CUDA "
             f"conventions{transients} were measured on BERT (H200) and are applied the same way"]
    if cuda_projection(config, workload):
        lines.append("under CUDA autocast the embedding projection's 16-bit output reaches layer 0 (its Q/K/V "
                     "keep it as it is), whose float32 LayerNorms restore the float32 stream: from CUDA "
                     "autocast's documented rules, not measured")
    if config.family.forward.eager_only:
        lines.append(f"{config.model_type} has no sdpa attention in transformers (it loads with eager): the "
                     "math path, whatever is asked, on CUDA too")
    return lines


def _ordered(values: dict[str, int]) -> dict[str, int]:
    """Components in model order (under a method each layer is one: `layer.0`, `layer.1`, … where `layer` is)."""
    def place(key: str) -> tuple[int, int]:
        if key.startswith("layer."):
            return COMPONENT_ORDER.index("layer"), int(key.split(".")[1])
        return COMPONENT_ORDER.index(key), 0

    return {key: values[key] for key in sorted(values, key=place)}


def component_rows(result: Compute, values: dict[str, int]) -> list[tuple[str, int]]:
    """Components as the tables name them, in model order: the encoder's layers with how many run, and under a
    method consecutive layers with the same figure as one row (`layers 1–11 (11 ×)`, their sum)."""
    rows: list[tuple[str, int]] = []
    run: list[tuple[int, int]] = []  # (layer, figure) of consecutive layers with one figure

    def close() -> None:
        if run:
            first, last = run[0][0], run[-1][0]
            label = f"layer {first}" if first == last else f"layers {first}–{last} ({len(run)} ×)"
            rows.append((label, sum(n for _, n in run)))
            run.clear()

    for component, n in _ordered(values).items():
        if component.startswith("layer."):
            index = int(component.split(".")[1])
            if run and run[-1][1] != n:
                close()
            run.append((index, n))
            continue
        close()
        rows.append((_component_label(result, component), n))
    close()
    return rows


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f} %" if whole else "    -  "


def _bar(part: int, whole: int, width: int = 20) -> str:
    filled = round(width * part / whole) if whole else 0
    return "█" * filled + "·" * (width - filled)


def headline(result: Compute, title: str) -> str:
    w = result.workload
    what = "training step" if w.train else "inference forward"
    extras = [w.precision, w.attention]
    if w.train:
        extras += [w.optimizer, f"{w.loop} loop"]
    if w.checkpointing:
        extras.append("checkpointing")
    if w.padding_mask:
        extras.append("padding mask")
    if result.config.head == "multiple-choice":
        extras.append(f"{w.choices} choices")
    extras.append(f"{w.device} conventions")
    lines = [f"{result.config.hf_class} · {printable(title)}",
             f"{what} at batch {w.batch:,} × sequence {w.seq:,} ({result.values['n']:,} tokens)",
             *textwrap.wrap(", ".join(extras), WIDTH)]
    if result.method is not None:
        lines += textwrap.wrap(method_line(result), WIDTH)
    return "\n".join(lines)


def full_line(result: Compute, full: Compute, before_fits: str = ", ", peak: bool = True) -> str:
    """The same step fully fine-tuned, in one sentence, beside a method's: what trains, FLOPs, peak, what fits
    (where `full` has its fits table: a step computed without it is said without it; `before_fits`: what comes
    before that clause — the explorer's pane starts it on a line of its own, so that no wrap parts a size from its
    unit, as Rich wraps at any space; `peak` False: without the peak, which a worker is still deriving)."""
    said = f"full fine-tuning: trains {full.trained[0]:,}, {short_flops(full.flops_step)} a step"
    if peak:
        said += f", peak {short_bytes(full.peak)}"
    fit = next((fit for fit in full.fits if fit.asked), None) or next((f for f in full.fits if f.gib == 24), None)
    if fit is None:
        return said
    batch = "any batch" if fit.max_batch >= MAX_BATCH else f"batch ≤ {fit.max_batch:,}" if fit.max_batch else "nothing"
    return f"{said}{before_fits}{size_label(fit)} fits {batch}"


def method_line(result: Compute) -> str:
    """What a fine-tuning method trains, in one sentence ("" without one)."""
    method = result.method
    if method is None:
        return ""
    share = 100 * method.trainable / method.parameters if method.parameters else 0.0
    said = f"{share:.2f}" if share >= 0.01 else f"{share:.2g}"
    return f"{method.label}: trains {method.trainable:,} of {method.parameters:,} parameters ({said} %)"


def answer_lines(result: Compute, width: int | None = WIDTH) -> list[str]:
    """The answer before the details: on the size asked (`--gpu-memory`), whether the step's own batch runs and
    the largest that does; without one, what the batch does on every size; then the peak and the FLOPs
    (wrapped to `width`; None: a line each)."""
    lines = []
    asked = next((fit for fit in result.fits if fit.asked), None)
    batch = result.workload.batch
    if asked is not None:
        largest = ("any batch" if asked.max_batch >= MAX_BATCH else f"{asked.max_batch:,}" if asked.max_batch
                   else "none, not even 1")
        lines.append(f"on {size_label(asked)}: batch {batch:,} {asked.at_batch or ''}; the largest batch that "
                     f"{'runs' if result.replayed else 'fits'} there: {largest}")
    elif result.fits:
        lines += batch_says(result, "of the table below")[:1]
    held = f", reserved {short_bytes(result.reserved_peak)}" if result.replayed or result.stranded else ""
    lines.append(f"peak {short_bytes(result.peak)} at once{held}; {short_flops(result.flops_step)} "
                 f"{'a step' if result.workload.train else 'a forward'}")
    if width is None:
        return lines
    return [wrapped for line in lines for wrapped in textwrap.wrap(line, width, subsequent_indent="  ")]


def compute_text(result: Compute, title: str, full: Compute | None = None, brief: bool = False) -> str:
    """What `bert-tui compute` prints as a table (`full`: under a method, the step fully fine-tuned, beside):
    the answer first, then the details (`brief`: the answer and what fits, without the details)."""
    lines = [headline(result, title)]
    if full is not None:
        lines += textwrap.wrap(full_line(result, full), WIDTH)
    lines += ["", *answer_lines(result), ""]
    if brief:
        return "\n".join([*lines, *fits_lines(result, brief=True)]) + "\n"
    lines += flops_lines(result) + [""] + memory_lines(result) + [""] + fits_lines(result) + [""]
    lines += ["conventions:"] + [wrapped for line in convention_lines(result)
                                 for wrapped in textwrap.wrap(line, WIDTH, initial_indent="  ", subsequent_indent="    ")]
    lines += ["", f"closed forms (per layer where it says layer; × {layer_times(result.config)} in the totals):"]
    lines += [wrapped for key, form in closed_forms(result).items()
              for wrapped in textwrap.wrap(f"{key:<28} {form}", WIDTH, initial_indent="  ", subsequent_indent=" " * 31)]
    return "\n".join(lines) + "\n"


def flops_lines(result: Compute) -> list[str]:
    step = result.flops_step
    rows = [("forward", result.flops_forward)]
    if result.workload.train:
        rows.append(("backward", result.flops_backward))
    if result.workload.checkpointing:
        rows.append(("  of which recompute", result.flops_recompute))
    rows.append(("step" if result.workload.train else "total", step))
    lines = ["FLOPs (2 per multiply-accumulate, matrix products only: torch's FlopCounterMode)"]
    lines += [f"  {name:<22}{n:>26,}  {short_flops(n):>12}" for name, n in rows]
    by_component = _ordered(result.flops_by_component())
    forward = result.flops_forward
    lines.append("  forward by component:")
    for label, n in component_rows(result, by_component):
        lines.append(f"    {label:<20}{n:>26,}  {_pct(n, forward)}")
    layer = result.layer_flops()
    lines.append(f"  {one_layer(result)} ({sum(layer.values()):,}):")
    for what, n in layer.items():
        lines.append(f"    {what:<44}{n:>22,}")
    rule = result.rule_of_thumb
    diff = rule - step
    lines.append(f"  {f'{result.rule_factor} × params × tokens':<22}{rule:>26,}  {short_flops(rule):>12}")
    lines.append(f"    the rule of thumb {versus(diff, step)}")
    return lines


def one_layer(result: Compute) -> str:
    """How the tables name the layer they break down: any one, or under a method the last."""
    return "one layer" if result.method is None else f"the last layer, layer {result.layer_runs - 1}"


def _component_label(result: Compute, component: str) -> str:
    """A component as the tables name it: the encoder's layers with how many run."""
    return f"layers ({result.layer_runs} ×)" if component == "layer" else component


def versus(diff: int, exact: int) -> str:
    """How a rule of thumb stands against the exact count: 'overestimates by 2.4 %'."""
    if not exact:
        return "no exact count to compare"
    return f"{'over' if diff >= 0 else 'under'}estimates by {abs(100 * diff / exact):.1f} %"


def memory_lines(result: Compute) -> list[str]:
    memory = result.memory()
    total = memory["total"]
    lines = [f"memory for the {'step' if result.workload.train else 'forward'} (bytes)"]
    for kind in MEMORY_KINDS:
        if kind == "recompute" and not result.workload.checkpointing:
            continue
        n = memory[kind]
        label = "recompute (1 layer)" if kind == "recompute" else kind
        lines.append(f"  {label:<20}{n:>20,}  {short_bytes(n):>10}  {_bar(n, total, 10)} {_pct(n, total)}")
    lines.append(f"  {'sum of the above':<20}{total:>20,}  {short_bytes(total):>10}  not a bound on the peak")
    lines.append(f"  {'peak (at once)':<20}{result.peak:>20,}  {short_bytes(result.peak):>10}  in the {result.peak_phase}")
    if result.replayed:
        reserved = result.reserved_peak
        lines.append(f"  {'reserved at worst':<20}{reserved:>20,}  {short_bytes(reserved):>10}  {reserved_note(result)}")
    elif result.stranded:
        reserved = result.reserved_peak
        lines.append(f"  {'reserved at worst':<20}{reserved:>20,}  {short_bytes(reserved):>10}  with a split segment")
    lines += phase_lines(result)
    if result.workload.train:
        lines.append("  activations by component (saved for backward):")
        for label, n in component_rows(result, result.activations_by_component()):
            lines.append(f"    {label:<18}{n:>20,}  {short_bytes(n):>10}")
        layer = result.layer_activations()
        lines.append(f"  {one_layer(result)} saves ({short_bytes(sum(layer.values()))}):")
        figures = max([16, *(len(f"{n:,}") for n in layer.values())])  # (wider for a petabyte-scale layer:
        for what, n in layer.items():  # the labels give the figures their columns)
            lines += labelled(4, what, 64 - figures, f"{n:>{figures},}  {short_bytes(n):>10}")
    return lines


def labelled(indent: int, label: str, width: int, figures: str) -> list[str]:
    """A row whose label may be longer than its column: the label wrapped at word boundaries, the figures on its
    last line (never a label cut mid-word)."""
    parts = textwrap.wrap(label, width) or [""]
    rows = [" " * indent + part for part in parts[:-1]]
    return [*rows, " " * indent + f"{parts[-1]:<{width}}" + figures]


def phase_lines(result: Compute) -> list[str]:
    """Each phase's peak, and what it holds and works with, term by term."""
    how = "its derived allocation order" if result.derived else "the peak rule"
    lines = [f"  phases (held at each one's worst moment, by {how}):"]
    for phase in result.phases:
        mark = "  ← the peak" if phase.name == result.peak_phase else ""
        lines.append(f"    {phase.name:<18}{phase.peak:>20,}  {short_bytes(phase.peak):>10}{mark}")
        for what, n in (*phase.held, *phase.transient):
            if n:
                lines += labelled(6, what, 50, f"{short_bytes(n):>12}")
    return lines


COURSE_INFERENCE = "the course's loop: the last forward's outputs live until the next one returns"


def loop_says(workload: Workload) -> str:
    """What the loop keeps that the figures count ("" where nothing: an inference forward at a time)."""
    if workload.train:
        return LOOP_SAYS[workload.loop]
    return COURSE_INFERENCE if workload.loop == "course" else ""


LOOP_BRIEF = {"course": "the course's loop", "hand-written": "the loop with del out", "trainer": "the Trainer's loop"}
LOOP_SAYS = {"course": "the course's loop (nothing deleted): outputs live until the next forward",
             "hand-written": "the loop with del out: its outputs live through the backward and the step",
             "trainer": "the Trainer's loop: only the loss outlives the forward"}


def replayed_says(workload: Workload) -> str:
    """How the fits were replayed: over a training step's order, or an inference forward's."""
    run = "step" if workload.train else "forward"
    return (f"the CUDA caching allocator replayed over the {run}'s own allocation order, derived op by op, {run} "
            f"after {run} until a {run} leaves it as an earlier one did (every later {run} repeats one replayed; "
            f"where each {run} hands its outputs on and none comes back so by the 64th, the batch must not run out "
            f"and must keep a segment of its largest handed-on block to spare)")


def rule_says(result: Compute) -> str:
    """Why a CUDA step's fits are the peak rule's, and what that costs ("" where they are replayed or on CPU)."""
    why = not_replayed(result)
    return (f"by the peak rule, not the caching allocator's replay: {why}; where a step is replayed, the rule "
            f"has claimed a few batches more than run" if why else "")


def reserved_note(result: Compute) -> str:
    """Beside a replayed step's reserved peak: what the replay strands."""
    return f"{short_bytes(result.stranded)} stranded"


def fits_basis(result: Compute) -> str:
    """What the fits table's batches are the largest of."""
    if result.replayed:
        return "largest batch whose run never runs out of memory"
    return f"largest batch whose {'reserved peak' if result.stranded else 'peak'} fits"


def fits_lines(result: Compute, brief: bool = False) -> list[str]:
    """The fits table with how it was found (`brief`: in one line, the table and what the step's batch does)."""
    w = result.workload
    if brief:
        how = (f"the caching allocator replayed over the {'step' if w.train else 'forward'}"
               if result.replayed else "the peak rule")
        lines = [f"{fits_basis(result)}, at sequence {w.seq:,}", *textwrap.wrap(
            f"({how}; {HEADROOM}; {LOOP_BRIEF[w.loop] if loop_says(w) else 'one forward at a time'}; without "
            "--brief: why)", WIDTH, initial_indent="  ", subsequent_indent="  ")]
    else:
        lines = [f"{fits_basis(result)}, at sequence {w.seq:,}:", f"  {HEADROOM}", f"  ({HEADROOM_WHY})"]
        said = replayed_says(w) if result.replayed else rule_says(result)
        lines += textwrap.wrap(said, WIDTH, initial_indent="  ", subsequent_indent="  ")
        if loop_says(w):
            lines.append(f"  {loop_says(w)}")
    for fit in result.fits:
        lines.append(f"  {size_label(fit):>10}  {fit_answer(fit)}" + ("  (--gpu-memory)" if fit.asked else ""))
    return lines + [wrapped for line in batch_says(result)
                    for wrapped in textwrap.wrap(line, WIDTH, initial_indent="  ", subsequent_indent="  ")]


def fit_answer(fit: Fit, short: bool = False) -> str:
    """A fits row's answer, the one way every face says it (`short`: where a table is narrow, the pane's)."""
    if fit.max_batch >= MAX_BATCH:
        return "any" if short else "fits at any batch"
    if not fit.max_batch:
        return "none" if short else "does not fit at batch 1"
    return f"≤ {fit.max_batch:,}" if short else f"batch ≤ {fit.max_batch:,}"


def size_label(fit: Fit) -> str:
    """A fits row's card as the tables name it: whole GiB, or its size in short bytes."""
    return f"{fit.gib:g} GiB" if fit.gib == int(fit.gib) else short_bytes(fit.bytes)


def _sizes(labels: list[str]) -> str:
    """Sizes in a sentence: "16, 24 and 40 GiB" where all are whole GiB, else each as it is named."""
    if all(label.endswith(" GiB") for label in labels):
        labels = [label.removesuffix(" GiB") for label in labels[:-1]] + labels[-1:]
    return " and ".join([", ".join(labels[:-1]), labels[-1]]) if len(labels) > 1 else labels[0]


def batch_says(result: Compute, where: str = "above") -> list[str]:
    """What the step's own batch does on each size of the fits table (`Fit.at_batch`), and why, where it does
    not run below a size's largest batch or is not proven to run (`where`: the table, from the line)."""
    if not result.fits:
        return []
    sizes: dict[str, str] = {}
    for fit in result.fits:
        sizes.setdefault(size_label(fit), fit.at_batch or "")
    answers = {answer: [size for size, said in sizes.items() if said == answer] for answer in sizes.values()}
    if len(answers) == 1:
        said = f"{next(iter(answers))} on every size {where}"
    else:
        said = "; ".join(f"{answer} on {_sizes(where)}" for answer, where in answers.items())
    lines = [f"this step's batch, {result.workload.batch:,}: {said}"]
    if UNPROVEN in answers:
        lines.append(f"({UNPROVEN}: its {'steps' if result.workload.train else 'forwards'} never ran out and never "
                     "came back to a state the replay had seen, and a segment of its largest handed-on block to "
                     "spare does not fit beside them)")
    below = {size_label(fit): fit.max_batch
             for fit in result.fits if not fit.runs_at_batch and result.workload.batch < fit.max_batch}
    if below:
        larger = ", ".join(f"{batch:,} on {size}" for size, batch in below.items())
        lines.append(f"(a larger batch runs: {larger}; the allocator's fragmentation is not monotone in the "
                     f"batch, and what fits is the largest batch that runs, not every batch below it)")
    return lines


def compute_csv(result: Compute) -> str:
    """quantity,value rows: the model and workload, FLOPs, bytes and fits, one per line (each key once: the size
    asked with --gpu-memory under `fits.gpu_memory.`, beside the table's cards)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["quantity", "value"])
    writer.writerow(["model", result.config.hf_class])
    if result.method is not None:
        writer.writerow(["method", result.method.label])
    for key, value in result.workload.as_dict().items():
        writer.writerow([f"workload.{key}", value])
    writer.writerow(["tokens", result.values["n"]])
    writer.writerow(["flops.forward", result.flops_forward])
    writer.writerow(["flops.backward", result.flops_backward])
    writer.writerow(["flops.step", result.flops_step])
    for component, n in _ordered(result.flops_by_component()).items():
        writer.writerow([f"flops.forward.{component}", n])
    for kind, n in result.memory().items():
        writer.writerow([f"memory_bytes.{kind}", n])
    writer.writerow(["peak_model", result.peak_model])
    for phase in result.phases:
        writer.writerow([f"phases.{phase.name}.peak", phase.peak])
    for component, n in _ordered(result.activations_by_component()).items():
        writer.writerow([f"activations.{component}", n])
    for fit in result.fits:
        key = "fits.gpu_memory" if fit.asked else f"fits.{fit.gib:g}GiB"
        if fit.asked:
            writer.writerow([f"{key}.bytes", fit.bytes])
        writer.writerow([f"{key}.max_batch", fit.max_batch])
        writer.writerow([f"{key}.runs_at_batch", int(bool(fit.runs_at_batch))])
        writer.writerow([f"{key}.at_batch", fit.at_batch])
    return out.getvalue()


def compute_markdown(result: Compute, title: str, full: Compute | None = None) -> str:
    head, rest = headline(result, title).split("\n", 1)
    if full is not None:
        rest += "\n" + full_line(result, full)
    lines = [f"## {head}", "", rest, "", "| FLOPs | value |", "|---|---:|"]
    lines += [f"| forward | {result.flops_forward:,} |", f"| backward | {result.flops_backward:,} |",
              f"| step | {result.flops_step:,} |",
              f"| {result.rule_factor} × params × tokens rule | {result.rule_of_thumb:,} |", "",
              "| memory | bytes | |", "|---|---:|---:|"]
    lines += [f"| {kind} | {n:,} | {short_bytes(n)} |" for kind, n in result.memory().items()]
    lines += ["", f"| GPU memory | largest batch | batch {result.workload.batch:,} |", "|---:|---:|:---|"]
    lines += [f"| {fit.gib:g} GiB | {fit.max_batch:,} | {fit.at_batch} |" for fit in result.fits]
    lines += ["", f"Peak: {result.peak:,} bytes ({short_bytes(result.peak)}), in the {result.peak_phase}. "
              f"{fits_basis(result).capitalize()}: {HEADROOM_RULE}"
              + (f"; {replayed_says(result.workload)}." if result.replayed else "."), ""]
    lines += [f"- {line}" for line in convention_lines(result)]
    return "\n".join(lines) + "\n"
