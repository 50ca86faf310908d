"""The step's real peak: what the CUDA caching allocator holds at the worst moment of each phase, and what fits.

Where the step's allocation order is derived (`allocations.covers`), each phase's peak is that order's, replayed
through the caching allocator (`derived_phases`): the bytes held through the phase as the terms count them, and the
rest at its worst moment, every block as the allocator rounds it. Elsewhere (the CPU, a step not derived yet), the
peak rule below (`phases`), which also gives the fits table's first guesses.

The sum of weights, gradients, optimizer states and activations is not what a GPU runs out of: activations are freed
during the backward while gradients appear, and every phase has transients the saved tensors do not show (the
loss's logits, the scores before softmax, foreach AdamW's temporaries, the inference forward's live tensors). Each
phase here is the bytes held at its start plus its largest working set, as named terms:

- forward: weights, buffers, optimizer states and the batch; everything saved for backward; the outputs the model
  returns that nothing saved holds (an LM head's b·s·V logits); one hidden state in flight (and autocast's copies
  of the eager scores, the causal loss's float32 logits).
- backward: the same saved tensors, before they are released; one layer's weight gradients; the gradients of the
  FFN's intermediate activations; of q, k, v (a fused kernel) or the 16-bit scores (eager under autocast); the
  gradient of the LM loss's float32 log-probabilities; with checkpointing, one layer recomputed.
- optimizer step: weights, buffers, states and every gradient; foreach AdamW's temporaries (one tensor the size of
  the parameters).
- the course's loop (`out = model(**batch); out.loss.backward(); opt.step()`, nothing deleted: `Workload.loop`)
  keeps the outputs through the backward, the optimizer step and the next step's forward; the hand-written loop
  that ends each step with `del out`, through the backward and the step; the Trainer's keeps only the loss. A
  run's first steps hold less than the steady one (no optimizer states before the first `step()`, which creates
  them while the gradients are held): the steady step's peak covers every step of the run.
- inference: weights, buffers and the batch (under autocast, the 16-bit copies of every Linear's weight and bias
  it caches until the forward leaves it), plus the larger of one layer's live tensors and the LM head's logits
  and its input (the residual stream's element: float32 under autocast); a causal LM's key/value cache, which it
  returns; the course's loop, the last forward's outputs as well.
- a fine-tuning method (LoRA, frozen parts): the same rules over the method's terms (what its step saves, the
  gradients and states of what trains, one layer's trained parameters); a frozen body's backward runs through no
  layer (none of the layers' transients), unless checkpointing makes the word embeddings' output require a
  gradient, which then holds it (a leaf where its table does not train) and its gradient until the graph goes;
  a layer that saves nothing (frozen, before the first that trains) runs as an inference forward does (one
  layer's live tensors in the forward's working set). These rules were measured on full steps only; under a
  method they are checked against the derived allocation order (BERT-base, 32 × 128: −5 … +4 %, but MLM with
  checkpointing +7 … +11 %, as the full step's rule runs over there).

Measured against real training steps on an NVIDIA H200 (torch 2.11, transformers 5.17; tests/fixtures/gpu): every
peak within 3 % (tests/test_gpu.py). The transients were read off those measurements, phase by phase, where the
saved tensors (exact) left a remainder; they are upper-bound shaped (the worst moment, not an average).
"""

from __future__ import annotations

from collections.abc import Mapping

from .result import Compute, Phase

MiB = 1024**2
CUDA_CONTEXT = 512 * MiB  # a card's memory the allocator never gets: the CUDA context and its kernels' images
FRAGMENTATION = 0.03  # of what is left: segments rounded to 2 MiB and split blocks (an H200 ran out at 97.8 %)
HEADROOM = f"usable = (card − {CUDA_CONTEXT // MiB} MiB CUDA context) × {1 - FRAGMENTATION:.2f}"
HEADROOM_WHY = "allocator segments and fragmentation: an H200 ran out at ≥ 97.8 % of its cap"
HEADROOM_RULE = f"{HEADROOM} ({HEADROOM_WHY})"
HEADROOM_SHORT = f"(card − {CUDA_CONTEXT // MiB} MiB) × {1 - FRAGMENTATION:.2f}"  # where a line is narrow


def batch_label(result: Compute) -> str:
    """What the batch on the device holds, as a term's name: `the batch (ids, mask, labels)`."""
    parts = ["ids"]
    if result.workload.padding_mask:
        parts.append("mask")
    if result.workload.train and result.config.head != "none":
        parts.append("labels")
    return f"the batch ({', '.join(parts)})"


def inputs_bytes(result: Compute) -> int:
    """The batch on the device: int64 token ids, the padding mask and the labels."""
    v, head = result.values, result.config.head
    tokens = v["n"] * 8
    if not result.workload.train:
        labels = 0
    elif head in ("mlm", "pretraining", "causal-lm", "token-classification"):
        # (the pre-training heads' sentence labels, b of them; ELECTRA's discriminator has one label a token only)
        sentences = head == "pretraining" and not result.config.family.forward.discriminator
        labels = tokens + (v["b"] * 8 if sentences else 0)
    elif head == "question-answering":
        labels = 2 * v["b"] * 8
    elif head == "none":
        labels = 0
    else:
        labels = v["b"] * 8
    return tokens + labels + (tokens if result.workload.padding_mask else 0)


def phases(result: Compute) -> tuple[Phase, ...]:
    """The phases of `result`'s step (one, the forward, for inference)."""
    if not result.workload.train:
        return (_inference(result),)
    return _forward(result), _backward(result), _optimizer(result)


# The rest of a derived phase's peak, beyond what it holds throughout: what its worst moment has besides.
DERIVED_REST = {
    "forward": "saved tensors, outputs and temporaries then",
    "backward": "saved tensors, gradients and temporaries then",
    "optimizer": "its temporaries and what the loop keeps then",
}
INFERENCE_REST = "live tensors and outputs then"


def derived_phases(result: Compute, peaks: Mapping[str, int]) -> tuple[Phase, ...]:
    """The phases of `result`'s step as its derived allocation order reaches them (`allocations.phase_peaks`: the
    allocated peak of each phase of the settled step, without the cuBLAS workspaces): what the phase holds
    throughout, term by term (weights, buffers, optimizer states, the batch; autocast's cached copies in an
    inference forward; the gradients in the optimizer's step), and the rest of the order's peak, which also holds
    the allocator's rounding of every block."""
    made = []
    for name in ("forward", "backward", "optimizer"):
        if name not in peaks:
            continue
        held = _base(result)
        if name == "optimizer":
            held.append(("gradients", result.gradients))
        if not result.workload.train and result.linear_copies:
            held.append(("autocast's 16-bit copies of the Linear weights", result.linear_copies))
        rest = INFERENCE_REST if not result.workload.train else DERIVED_REST[name]
        made.append(Phase(name, tuple(held), ((rest, peaks[name] - sum(n for _, n in held)),)))
    return tuple(made)


def _base(result: Compute) -> list[tuple[str, int]]:
    held = [("weights", result.weights), ("buffers", result.buffers)]
    if result.optimizer:
        held.append(("optimizer states", result.optimizer))
    held.append((batch_label(result), inputs_bytes(result)))
    return held


def _sizes(result: Compute) -> tuple[int, int, int, int, int]:
    """n, H, I, V and the scores' elements b'·A·s²."""
    v = result.values
    return v["n"], v["H"], v["I"], v["V"], v["b'"] * v["A"] * v["s"] * v["s"]


OUTPUTS = "the outputs it returns (logits)"
KEPT = "the outputs the loop keeps (out.logits)"
LAST = "the last step's outputs (until this forward)"


def outputs_bytes(result: Compute) -> int:
    """The tensors a training forward returns besides the loss that no saved tensor holds: the head's logits in the
    compute dtype (an LM head's n·V; question answering's start and end; the pre-training heads' second logits), or
    the base model's last hidden state where the pooler's saved slice does not keep it. A loss that saves its input
    (MSE for one label, ELECTRA's replaced-token BCE) holds it."""
    v, c, config = result.values, result.conventions, result.config
    n, head = v["n"], config.head
    if head in ("mlm", "causal-lm"):
        tensors = [n * v["V"]]
    elif head == "pretraining":
        if config.family.forward.discriminator:  # the replaced-token discriminator's BCE saves its logits
            return 0
        tensors = [n * v["V"], v["b"] * (v["N"] if config.family.forward.sentence_order else 2)]
    elif head == "token-classification":
        tensors = [n * v["N"]]
    elif head == "question-answering":
        tensors = [n, n]
    elif head == "sequence-classification":
        tensors = [] if v["N"] == 1 else [v["b"] * v["N"]]
    elif head == "multiple-choice":
        tensors = [v["b'"]]
    elif head == "next-sentence":
        tensors = [v["b"] * 2]
    else:  # the base model: its loss here is the sum of its outputs, which saves nothing
        held_by_pooler = config.has_pooler and not (result.workload.amp and c.stream != c.compute)
        return 0 if held_by_pooler else n * v["H"] * c.stream
    return sum(tensors) * c.compute  # (the allocator rounds each to 512 bytes: not modelled here)


LEAF = "the word embeddings' output, a leaf (checkpointing)"


def _leaf(result: Compute, gradient: bool = False) -> list[tuple[str, int]]:
    """Checkpointing under a method whose word table does not train: its lookup's output, which transformers'
    `enable_input_require_grads` makes a leaf, held until the step's graph goes (`gradient`: and the gradient it
    was given at the backward's end: the optimizer's step, in the loops that keep the graph past it)."""
    nbytes = result.input_leaf_bytes
    if not nbytes:
        return []
    return [(LEAF, nbytes), (f"{LEAF}'s gradient", nbytes)] if gradient else [(LEAF, nbytes)]


def _kept(result: Compute) -> list[tuple[str, int]]:
    """What the loop keeps alive past the forward: `out`, unless the Trainer's loop dropped it."""
    kept = outputs_bytes(result) if result.workload.loop in ("hand-written", "course") else 0
    return [(KEPT, kept)] if kept else []


def stranded(result: Compute) -> int:
    """Reserved bytes beyond the allocated peak that a training run with an LM head keeps: the caching allocator
    (`tui.core.step.allocator`) hands a freed float32 logits block (b·s·V floats) to smaller tensors by best fit,
    so its segment can never be given back and the next such block needs a new one. One such segment, n·V·4
    bytes, bounds what the replay of recorded runs found stranded (tests/fixtures/allocation.json); other heads
    strand what the headroom rule's 3 % covers."""
    if not (result.workload.train and _lm(result)):
        return 0
    return result.values["n"] * result.values["V"] * 4


def _lm(result: Compute) -> bool:
    """A head with b·s·V logits: masked or causal LM, and BERT's and ALBERT's pre-training (not ELECTRA's: its
    discriminator's logits are one per token)."""
    return result.config.lm_decoder


def _forward(result: Compute) -> Phase:
    c, amp = result.conventions, result.workload.amp
    n, h, _, vocab, scores = _sizes(result)
    held = [*_base(result), ("saved for backward", result.activations), *_leaf(result)]
    if outputs_bytes(result):
        held.append((OUTPUTS, outputs_bytes(result)))
        if result.workload.loop == "course":
            held.append((LAST, outputs_bytes(result)))
    transient = [("one hidden state in flight", n * h * c.residual)]
    if _unsaved_layer(result):  # (a layer that saves nothing runs as an inference forward does)
        transient = [_layer_live(result)]
    if amp and not c.fused:
        transient.append(("the scores in 16 bits and autocast's float32 copy", scores * (c.compute + 4)))
    if result.config.head == "causal-lm":
        transient.append(("the causal loss's float32 logits", n * vocab * 4))
    return Phase("forward", tuple(held), tuple(transient))


def _backward(result: Compute) -> Phase:
    c, amp = result.conventions, result.workload.amp
    n, h, i, vocab, scores = _sizes(result)
    held = [*_base(result), ("saved for backward", result.activations), *_leaf(result)]
    if result.workload.checkpointing:
        held.append(("one layer recomputed", result.recompute_peak))
    held += _kept(result)
    grads = c.weight + (c.compute if amp else 0)  # under autocast a 16-bit gradient comes first, then the float32
    transient = []
    # (a frozen body: the head's backward alone, unless checkpointing makes the embeddings' output require a
    # gradient: then every layer runs its backward)
    if result.method is None or result.method.layers_backward or result.workload.checkpointing:
        transient += [("one layer's weight gradients", result.layer_parameters * grads),
                      ("gradients of the FFN's intermediate activations", 2 * n * i * c.compute)]
        if c.fused:
            transient.append(("gradients of q, k, v (fused kernel)", 3 * n * h * c.compute))
        elif amp:
            transient.append(("gradient of the 16-bit scores", scores * c.compute))
    if _lm(result):
        # The loss's backward: a float32 log-softmax (float32 logits, or a loss that casts them up first) holds
        # the gradients of its output and of its input at once; autocast's cross-entropy over 16-bit log-softmax
        # outputs holds one float32 gradient (then 16-bit ones); a 16-bit log-softmax, two 16-bit ones.
        if c.compute == 4 or result.loss_upcast:
            loss = ("gradients of the float32 log-probabilities and of the logits", 2 * n * vocab * 4)
        else:
            loss = ("gradient of the loss's log-probabilities", n * vocab * 4)
        transient.append(loss)
    return Phase("backward", tuple(held), tuple(transient))


def _optimizer(result: Compute) -> Phase:
    held = [*_base(result), ("gradients", result.gradients), *_kept(result)]
    if result.workload.loop != "trainer":  # (the Trainer's `del loss` let the graph go before the step)
        held += _leaf(result, gradient=True)
    transient = []
    if result.workload.optimizer == "adamw":
        transient.append(("foreach AdamW's temporaries (√v of every parameter)", result.gradients))
    return Phase("optimizer", tuple(held), tuple(transient))


def _layer_live(result: Compute) -> tuple[str, int]:
    """What one layer holds at once while it runs saving nothing (inference, or a frozen layer before the first
    that trains): its FFN's intermediate and GELU output, the hidden states around it, the eager scores."""
    c = result.conventions
    n, h, i, _, scores = _sizes(result)
    return "one layer's live tensors", n * (2 * i + 3 * h) * c.compute + (0 if c.fused else scores * c.softmax)


def _unsaved_layer(result: Compute) -> bool:
    """Under a method, whether some encoder layer saves nothing (it runs before the first that trains)."""
    if result.method is None:
        return False
    saved = result.activations_by_component()
    return any(not saved.get(f"layer.{index}") for index in range(result.layer_runs))


def _inference(result: Compute) -> Phase:
    c = result.conventions
    n, h, _, vocab, _ = _sizes(result)
    layer = _layer_live(result)[1]
    head = n * vocab * c.compute + 2 * n * h * c.residual if _lm(result) else 0
    live = ("the LM head's logits and input", head) if head > layer else ("one layer's live tensors", layer)
    held = _base(result)
    if result.linear_copies:
        held.append(("autocast's 16-bit copies of the Linear weights", result.linear_copies))
    cache = _key_value_cache(result)
    if cache:
        held.append(("the key/value cache it returns (use_cache)", cache))
    if result.workload.loop == "course":  # `out = model(**batch)` in a loop: the last forward's, until it returns
        held.append((LAST, returned_bytes(result)))
    return Phase("forward", tuple(held), (live,))


def _key_value_cache(result: Compute) -> int:
    """A causal LM's inference forward (no labels: `use_cache` stays on) returns every layer's keys and values,
    2·L·n·H elements, made as the layers run."""
    if result.config.head != "causal-lm" or result.workload.train:
        return 0
    return 2 * result.config.num_hidden_layers * result.values["n"] * result.values["H"] * result.conventions.compute


def returned_bytes(result: Compute) -> int:
    """What an inference forward returns (no labels, so no loss; nothing saved holds it): `outputs_bytes`'s
    tensors, and those a loss would have held in training (a regression's or ELECTRA's discriminator's logits,
    the bare model's last hidden state beside its pooler's output)."""
    v, c, config = result.values, result.conventions, result.config
    if config.head == "sequence-classification":
        return v["b"] * v["N"] * c.compute
    if config.head == "pretraining" and config.family.forward.discriminator:
        return v["n"] * c.compute
    if config.head == "none":
        return (v["n"] + (v["b"] if config.has_pooler else 0)) * v["H"] * c.stream
    return outputs_bytes(result) + _key_value_cache(result)


def usable(size: int) -> int:
    """What of a card of `size` bytes the allocator can hold at its peak (the headroom rule)."""
    return max(0, int((size - CUDA_CONTEXT) * (1 - FRAGMENTATION)))


def max_batch(peaks: dict[int, dict[str, int]], size: int, limit: int) -> int:
    """The largest b whose every phase peaks within `usable(size)`, from the phase peaks at b = 1, 2 and 3
    (each phase is affine in b from b = 2 on); 0 if batch 1 does not fit."""
    room = usable(size)
    if max(peaks[1].values()) > room:
        return 0
    best = limit
    for name, at_two in peaks[2].items():
        slope = peaks[3][name] - at_two
        if slope > 0:
            best = min(best, 2 + (room - at_two) // slope)
        elif at_two > room:
            best = 1
    return max(1, best)
