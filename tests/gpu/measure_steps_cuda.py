"""Measure real CUDA training steps of transformers' BERT classes: writes tests/fixtures/gpu/h200-steps.json's layout.

A GPU machine only; never run by CI or the tests (which run it only up to its first CUDA call). With the project
installed with the `verify` extra on a machine with a CUDA GPU:

    python tests/gpu/measure_steps_cuda.py OUT.json              # every part (minutes on an H200)
    python tests/gpu/measure_steps_cuda.py OUT.json held_out     # some parts only

It writes one JSON object with the fixture's keys:
- `meta`: device, total_memory_bytes, torch, transformers, sdp_backends_enabled.
- `steps`: the common hand-written loop (`out = model(**batch); out.loss.backward(); opt.step();
  opt.zero_grad(set_to_none=True); del out`) twice, then the third step phase by phase as the case's `--loop`
  runs it (`trainer`: the outputs dropped after the forward, `after_forward_outputs_dropped`; `hand-written`: kept
  until after the step): `memory_allocated` (start, after_forward, peak_forward, after_forward_outputs_dropped,
  after_backward, peak_backward, peak_optimizer, end; inference: start, after_forward, peak_forward under
  no_grad), `peak` (the largest), each figure
  `torch.cuda.memory_allocated()` minus `allocated_before_case` (what was allocated when the case began);
  `includes_workspaces`: the case is the process's first, so its figures include the cuBLAS/cuBLASLt workspaces
  torch allocates at a thread's first matrix product and never frees; `step_seconds_median` (five steps, CUDA
  events); for training without checkpointing `layer0_saved` (every storage encoder layer 0 saves for backward,
  once, parameters not) and `saved_by_component` / `saved_total` over the whole model.
- `fits`: the largest batch whose three steps ran under `set_per_process_memory_fraction(cap / total)` (the cap is
  the case's `--gpu-memory`), by bisection from `bert-tui compute`'s answer, and the first that ran out of memory.
- `held_out` (not in the fixture yet): more steps, as `steps` are measured, that none of the peak's terms were
  written from: the peak's error out of sample.
- `lm_caps` (not in the fixture yet): language-model heads under a cap, as `fits` are measured, then the largest
  batch that ran once more with the allocator's history recorded: `at_largest` (allocated and reserved peaks)
  and a `torch.cuda.memory` snapshot in OUT.snapshots/ — what tests/fixtures/allocation.json replays from runs
  recorded on a CPU, to be checked on the card (a short run: `python tests/gpu/measure_steps_cuda.py o.json
  lm_caps`).
- `replay_caps` (not in the fixture yet): measured as `lm_caps`, on runs whose fits come from the derived
  allocation order's replay (a batch whose fourth step runs out in the replay; ModernBERT's mask padding at
  s = 72; DeBERTa in float32; cuDNN's attention in bf16; autocast in bf16 and fp16, DeBERTa's too; ModernBERT's
  padding masks; SGD with momentum; the course's loop): `bert-tui compute`'s answer is the replay's.
- `method_caps` (not in the fixture yet): measured as `lm_caps`, under a fine-tuning method (LoRA with peft's
  `get_peft_model`, or parts frozen with `requires_grad_(False)`, as `tui.reference.measure.apply_method` applies
  them, on the host before the move to the card; the optimizer over what trains): `bert-tui compute`'s answer is
  the replay of the method's own allocation order (tests/fixtures/allocation_order.json checks it against peft's
  model with CUDA faked), to be checked on the card.
- `histories` (not in the fixture): some `steps` again, the third step with the allocator's history recorded
  (`torch.cuda.memory._record_memory_history`): a snapshot each in OUT.snapshots/ and `trace_ends`, where each
  phase ends in its trace, for `tests/fixtures/allocation/history.py` to diff against the derived allocation
  order block by block (a short run: `python tests/gpu/measure_steps_cuda.py o.json histories`).
- `saved_and_flops`: bytes saved for backward by component and dtype, the recomputation peak with checkpointing,
  optimizer state bytes on the GPU and FlopCounterMode's forward and backward with the real CUDA kernels.

The fixture as committed was measured on an NVIDIA H200 (torch 2.11.0+cu130, transformers 5.17.0), the 27 `STEPS`
in one process and the 8 `ODD_STEPS` (odd sequence lengths) in a second (each case's baseline is recorded, so one
process or two give the same figures); the fits and the saved-and-FLOP counts in passes of their own.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.cli import main as cli_main  # noqa: E402
from tui.core.config import BertConfig  # noqa: E402
from tui.core.step.workload import Workload  # noqa: E402

B, L = "bert-base-uncased", "bert-large-uncased"
SC, MLM = "sequence-classification", "mlm"
PARTS = ("steps", "fits", "saved_and_flops", "held_out", "lm_caps", "replay_caps", "method_caps", "histories")


def argv(model: str, head: str, b: int, s: int, precision: str, attention: str, *extra: str) -> list[str]:
    """A case's `bert-tui compute` arguments, as the fixture records them."""
    return [model, "--head", head, "--batch", str(b), "--seq", str(s), "--precision", precision, "--attention",
            attention, "--device", "cuda", *extra]


def trainer(*args: Any) -> list[str]:
    """A step measured as transformers' Trainer runs it (only the loss survives the forward); inference as it is."""
    case = argv(*args)
    return case if "--mode" in case else [*case, "--loop", "trainer"]


STEPS = [
    ("b-sc-8x512-fp32-eager", trainer(B, SC, 8, 512, "fp32", "eager")),
    ("b-sc-8x512-fp32-sdpa", trainer(B, SC, 8, 512, "fp32", "sdpa")),
    ("b-sc-8x512-ampbf16-eager", trainer(B, SC, 8, 512, "amp-bf16", "eager")),
    ("b-sc-8x512-ampbf16-sdpa", trainer(B, SC, 8, 512, "amp-bf16", "sdpa")),
    ("b-sc-8x512-ampbf16-sdpa-pad", trainer(B, SC, 8, 512, "amp-bf16", "sdpa", "--padding-mask")),
    ("b-sc-8x512-ampbf16-eager-pad", trainer(B, SC, 8, 512, "amp-bf16", "eager", "--padding-mask")),
    ("b-sc-8x512-ampfp16-eager-pad", trainer(B, SC, 8, 512, "amp-fp16", "eager", "--padding-mask")),
    ("b-sc-8x512-bf16-eager", trainer(B, SC, 8, 512, "bf16", "eager")),
    ("b-sc-8x512-bf16-sdpa", trainer(B, SC, 8, 512, "bf16", "sdpa")),
    ("b-sc-8x512-fp16-sdpa-pad", trainer(B, SC, 8, 512, "fp16", "sdpa", "--padding-mask")),
    ("b-sc-8x512-ampbf16-eager-ckpt", trainer(B, SC, 8, 512, "amp-bf16", "eager", "--checkpointing")),
    ("b-sc-8x512-ampbf16-sdpa-ckpt", trainer(B, SC, 8, 512, "amp-bf16", "sdpa", "--checkpointing")),
    ("b-mlm-32x128-ampbf16-sdpa", trainer(B, MLM, 32, 128, "amp-bf16", "sdpa")),
    ("b-mlm-32x128-ampfp16-eager-pad", trainer(B, MLM, 32, 128, "amp-fp16", "eager", "--padding-mask")),
    ("b-pre-32x128-ampbf16-sdpa", trainer(B, "pretraining", 32, 128, "amp-bf16", "sdpa")),
    ("b-clm-8x512-ampbf16-eager", trainer(B, "causal-lm", 8, 512, "amp-bf16", "eager")),
    ("b-clm-8x512-ampbf16-sdpa", trainer(B, "causal-lm", 8, 512, "amp-bf16", "sdpa")),
    ("b-tok-16x256-fp32-sdpa", trainer(B, "token-classification", 16, 256, "fp32", "sdpa", "--num-labels", "9")),
    ("b-qa-16x384-fp16-eager-sgdm", trainer(B, "question-answering", 16, 384, "fp16", "eager", "--optimizer",
                                         "sgd-momentum")),
    ("b-mc-4x128-ampbf16-sdpa", trainer(B, "multiple-choice", 4, 128, "amp-bf16", "sdpa")),
    ("b-none-64x512-bf16-sdpa-inf", trainer(B, "none", 64, 512, "bf16", "sdpa", "--mode", "inference")),
    ("b-sc-64x128-fp32-eager-inf", trainer(B, SC, 64, 128, "fp32", "eager", "--mode", "inference")),
    ("b-sc-32x128-fp32-eager-sgd", trainer(B, SC, 32, 128, "fp32", "eager", "--optimizer", "sgd")),
    ("l-sc-16x512-ampbf16-eager", trainer(L, SC, 16, 512, "amp-bf16", "eager")),
    ("l-sc-16x512-ampbf16-sdpa", trainer(L, SC, 16, 512, "amp-bf16", "sdpa")),
    ("l-mlm-32x128-ampbf16-sdpa", trainer(L, MLM, 32, 128, "amp-bf16", "sdpa")),
    ("l-sc-16x512-ampbf16-sdpa-ckpt", trainer(L, SC, 16, 512, "amp-bf16", "sdpa", "--checkpointing")),
]
ODD_STEPS = [  # a second process: odd sequence lengths (the kernels' padding), measured after the first set
    ("b-sc-8x77-ampbf16-sdpa", trainer(B, SC, 8, 77, "amp-bf16", "sdpa")),
    ("b-sc-8x77-fp32-sdpa", trainer(B, SC, 8, 77, "fp32", "sdpa")),
    ("b-sc-8x77-ampbf16-sdpa-pad", trainer(B, SC, 8, 77, "amp-bf16", "sdpa", "--padding-mask")),
    ("b-sc-8x77-ampbf16-eager", trainer(B, SC, 8, 77, "amp-bf16", "eager")),
    ("b-tok-12x200-ampfp16-sdpa", trainer(B, "token-classification", 12, 200, "amp-fp16", "sdpa", "--num-labels", "9")),
    ("b-mlm-24x200-ampbf16-sdpa-pad", trainer(B, MLM, 24, 200, "amp-bf16", "sdpa", "--padding-mask")),
    ("b-mlm-64x128-fp32-eager-inf", trainer(B, MLM, 64, 128, "fp32", "eager", "--mode", "inference")),
    ("l-mlm-16x200-ampbf16-sdpa-ckpt", trainer(L, MLM, 16, 200, "amp-bf16", "sdpa", "--checkpointing")),
]
FITS = [  # the cap is --gpu-memory; --batch 1 is where the bisection's prediction is read
    ("l-sc-512-ampbf16-eager-24", argv(L, SC, 1, 512, "amp-bf16", "eager", "--gpu-memory", "24GiB")),
    ("l-sc-512-ampbf16-sdpa-24", argv(L, SC, 1, 512, "amp-bf16", "sdpa", "--gpu-memory", "24GiB")),
    ("l-sc-512-ampbf16-sdpa-80", argv(L, SC, 1, 512, "amp-bf16", "sdpa", "--gpu-memory", "80GiB")),
    ("b-sc-128-fp32-eager-16", argv(B, SC, 1, 128, "fp32", "eager", "--gpu-memory", "16GiB")),
    ("b-sc-128-fp32-sdpa-16", argv(B, SC, 1, 128, "fp32", "sdpa", "--gpu-memory", "16GiB")),
    ("b-sc-512-ampbf16-sdpa-ckpt-16", argv(B, SC, 1, 512, "amp-bf16", "sdpa", "--gpu-memory", "16GiB",
                                           "--checkpointing")),
    ("b-sc-512-ampbf16-eager-24", argv(B, SC, 1, 512, "amp-bf16", "eager", "--gpu-memory", "24GiB")),
    ("l-sc-128-ampbf16-sdpa-16", argv(L, SC, 1, 128, "amp-bf16", "sdpa", "--gpu-memory", "16GiB")),
]
SAVED_AND_FLOPS = [
    ("base-seqcls-fp32", argv(B, SC, 8, 512, "fp32", "eager")),
    ("base-seqcls-ampbf16", argv(B, SC, 8, 512, "amp-bf16", "eager")),
    ("base-seqcls-ampbf16-sdpa", argv(B, SC, 8, 512, "amp-bf16", "sdpa")),
    ("base-seqcls-ampbf16-sdpa-pad", argv(B, SC, 8, 512, "amp-bf16", "sdpa", "--padding-mask")),
    ("base-seqcls-bf16-sdpa", argv(B, SC, 8, 512, "bf16", "sdpa")),
    ("base-mlm-ampfp16-pad", argv(B, MLM, 32, 128, "amp-fp16", "eager", "--padding-mask")),
    ("base-seqcls-ampbf16-ckpt", argv(B, SC, 8, 512, "amp-bf16", "eager", "--checkpointing")),
    ("base-causal-ampbf16", argv(B, "causal-lm", 8, 512, "amp-bf16", "eager")),
    ("base-qa-fp16-sgdm", argv(B, "question-answering", 16, 384, "fp16", "eager", "--optimizer", "sgd-momentum")),
    ("base-none-infer-bf16-sdpa", argv(B, "none", 64, 512, "bf16", "sdpa", "--mode", "inference")),
    ("large-seqcls-ampbf16", argv(L, SC, 32, 512, "amp-bf16", "eager")),
    ("large-seqcls-ampbf16-sdpa", argv(L, SC, 32, 512, "amp-bf16", "sdpa")),
    ("large-mlm-ampbf16-sdpa", argv(L, MLM, 32, 128, "amp-bf16", "sdpa")),
]
HELD_OUT = [  # steps none of the peak's terms were written from (measured as `steps` are), for the error out of sample
    ("h-b-nsp-16x256-ampbf16-sdpa", argv(B, "next-sentence", 16, 256, "amp-bf16", "sdpa")),
    ("h-l-tok-8x384-bf16-eager", argv(L, "token-classification", 8, 384, "bf16", "eager", "--num-labels", "5")),
    ("h-b-clm-16x256-fp32-sdpa-pad", argv(B, "causal-lm", 16, 256, "fp32", "sdpa", "--padding-mask")),
    ("h-l-qa-24x384-ampfp16-sdpa-ckpt", argv(L, "question-answering", 24, 384, "amp-fp16", "sdpa", "--checkpointing")),
    ("h-m-sc-64x128-fp32-sdpa-sgdm", argv("bert-medium", SC, 64, 128, "fp32", "sdpa", "--optimizer", "sgd-momentum")),
    ("h-b-mlm-48x512-ampbf16-sdpa-inf", argv(B, MLM, 48, 512, "amp-bf16", "sdpa", "--mode", "inference")),
]
R = "roberta-base"


def cap(model: str, head: str, s: int, precision: str, attention: str, size: str, *extra: str) -> list[str]:
    """A cap's case: `--batch 1` (where the search reads the prediction) under `--gpu-memory SIZE`."""
    return argv(model, head, 1, s, precision, attention, "--gpu-memory", size, *extra)


# Language-model heads under a cap (b·s·V logits, kept through the backward by the hand-written loop): what
# tests/fixtures/allocation.json replays from runs recorded on a CPU (tests/fixtures/generate_allocation.py reads
# this list), to be checked on a real card: not in the GPU fixture yet.
LM_CAPS = [
    ("b-mlm-512-ampbf16-sdpa-24", cap(B, MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("b-mlm-512-ampbf16-sdpa-24-trainer", cap(B, MLM, 512, "amp-bf16", "sdpa", "24GiB", "--loop", "trainer")),
    ("b-clm-512-ampbf16-sdpa-24", cap(B, "causal-lm", 512, "amp-bf16", "sdpa", "24GiB")),
    ("b-mlm-128-fp32-eager-16", cap(B, MLM, 128, "fp32", "eager", "16GiB")),
    ("b-pre-128-ampbf16-sdpa-16", cap(B, "pretraining", 128, "amp-bf16", "sdpa", "16GiB")),
    ("l-mlm-128-ampbf16-sdpa-80", cap(L, MLM, 128, "amp-bf16", "sdpa", "80GiB")),
    ("r-mlm-512-ampbf16-sdpa-24", cap(R, MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("r-clm-256-bf16-sdpa-16", cap(R, "causal-lm", 256, "bf16", "sdpa", "16GiB")),
    ("d-mlm-512-ampbf16-sdpa-24", cap("distilbert-base-uncased", MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("e-mlm-512-ampbf16-sdpa-24", cap("electra-base-generator", MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("deb-mlm-512-ampbf16-eager-24", cap("deberta-v3-base", MLM, 512, "amp-bf16", "eager", "24GiB")),
    ("mod-mlm-512-ampbf16-sdpa-24", cap("ModernBERT-base", MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("mp-mlm-512-ampbf16-sdpa-24", cap("all-mpnet-base-v2", MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("al-mlm-512-ampbf16-sdpa-24", cap("albert-base-v2", MLM, 512, "amp-bf16", "sdpa", "24GiB")),
]
REPLAY_CAPS = [  # fits from the derived order's replay (every family in float32 and 16 bits): measured as lm_caps
    # the fourth step that ran out in the replay; ModernBERT's float bias padded to 8 columns (fake tensors) or 16
    # (the peak rule, from an H200) at s = 72; DeBERTa in float32; cuDNN's attention in 16 bits
    ("e-mlm-128-fp32-eager-16", cap("electra-base-generator", MLM, 128, "fp32", "eager", "16GiB")),
    ("mod-mlm-72-fp32-sdpa-16", cap("ModernBERT-base", MLM, 72, "fp32", "sdpa", "16GiB")),
    ("deb-mlm-512-fp32-eager-24", cap("deberta-v3-base", MLM, 512, "fp32", "eager", "24GiB")),
    ("b-mlm-512-bf16-sdpa-24", cap(B, MLM, 512, "bf16", "sdpa", "24GiB")),
    ("mod-mlm-1024-bf16-sdpa-24", cap("ModernBERT-base", MLM, 1024, "bf16", "sdpa", "24GiB")),
    # autocast: every Linear's 16-bit copies, the cache's frees as the forward leaves autocast
    ("b-mlm-512-ampbf16-sdpa-24", cap(B, MLM, 512, "amp-bf16", "sdpa", "24GiB")),
    ("r-mlm-128-ampfp16-eager-16", cap(R, MLM, 128, "amp-fp16", "eager", "16GiB")),
    # DeBERTa under autocast; ModernBERT given a padding mask (both masks made); SGD with momentum
    ("deb-mlm-512-ampfp16-eager-24", cap("deberta-v3-base", MLM, 512, "amp-fp16", "eager", "24GiB")),
    ("mod-mlm-512-pad-ampbf16-sdpa-24", cap("ModernBERT-base", MLM, 512, "amp-bf16", "sdpa", "24GiB",
                                            "--padding-mask")),
    ("b-mlm-512-sgdm-fp32-sdpa-24", cap(B, MLM, 512, "fp32", "sdpa", "24GiB", "--optimizer", "sgd-momentum")),
    # the course's loop: each step's logits held through the next step's forward
    ("b-mlm-512-ampbf16-sdpa-24-course", cap(B, MLM, 512, "amp-bf16", "sdpa", "24GiB", "--loop", "course")),
    ("mod-mlm-512-ampbf16-sdpa-24-course", cap("ModernBERT-base", MLM, 512, "amp-bf16", "sdpa", "24GiB", "--loop",
                                               "course")),
    # inference forwards (eval, no_grad), replayed forward after forward: the peak rule's answers ran out on every
    # recorded run, 0.5 to 33 % above (tests/fixtures/allocation.json `inference_caps`, the same cases)
    ("b-mlm-512-fp32-sdpa-24-inf", cap(B, MLM, 512, "fp32", "sdpa", "24GiB", "--mode", "inference", "--loop",
                                       "course")),
    ("b-mlm-128-fp32-eager-16-inf-hand", cap(B, MLM, 128, "fp32", "eager", "16GiB", "--mode", "inference", "--loop",
                                             "hand-written")),
    ("b-clm-512-bf16-eager-24-inf", cap(B, "causal-lm", 512, "bf16", "eager", "24GiB", "--mode", "inference",
                                        "--loop", "course")),
    # checkpointing (non-reentrant, transformers' default), replayed with its recomputation: the peak rule claimed
    # less than the recorded runs reach (tests/fixtures/allocation.json `checkpointing_caps`, the same cases)
    ("b-mlm-512-fp32-sdpa-ckpt-24", cap(B, MLM, 512, "fp32", "sdpa", "24GiB", "--checkpointing", "--loop", "course")),
    ("b-clm-128-fp32-eager-ckpt-16", cap(B, "causal-lm", 128, "fp32", "eager", "16GiB", "--checkpointing", "--loop",
                                         "course")),
]
METHOD_CAPS = [  # fits under a fine-tuning method, from the replay of its own order: measured as lm_caps
    ("b-sc-128-ampbf16-sdpa-lora8-16", cap(B, SC, 128, "amp-bf16", "sdpa", "16GiB", "--lora-r", "8")),
    ("b-mlm-512-ampbf16-sdpa-lora8-24", cap(B, MLM, 512, "amp-bf16", "sdpa", "24GiB", "--lora-r", "8")),
    ("r-sc-256-bf16-sdpa-lora16-all-16", cap(R, SC, 256, "bf16", "sdpa", "16GiB", "--lora-r", "16", "--lora-targets",
                                             "all-linear", "--lora-dropout", "0.1")),
    ("b-sc-512-fp32-eager-lora8-24", cap(B, SC, 512, "fp32", "eager", "24GiB", "--lora-r", "8")),
    ("deb-sc-256-ampbf16-eager-lora8-24", cap("deberta-v3-base", "token-classification", 256, "amp-bf16", "eager",
                                              "24GiB", "--lora-r", "8")),
    ("b-mlm-512-ampbf16-sdpa-freeze-emb-l6-24", cap(B, MLM, 512, "amp-bf16", "sdpa", "24GiB", "--freeze-embeddings",
                                                   "--freeze-layers", "6")),
    ("b-sc-512-fp32-sdpa-freeze-body-16", cap(B, SC, 512, "fp32", "sdpa", "16GiB", "--freeze-body")),
    ("b-sc-256-ampbf16-sdpa-dora8-16", cap(B, SC, 256, "amp-bf16", "sdpa", "16GiB", "--lora-r", "8", "--dora")),
    ("r-tok-256-bf16-sdpa-ia3-16", cap(R, "token-classification", 256, "bf16", "sdpa", "16GiB", "--ia3")),
    # DoRA in float32 where a projection meets the residual as it is: the replay is refused (the gradient there
    # sums out of place, which fake tensors cannot show); the card's boundary settles the derived order
    ("d-mlm-512-fp32-sdpa-dora8-24", cap("distilbert-base-uncased", MLM, 512, "fp32", "sdpa", "24GiB", "--lora-r",
                                         "8", "--lora-targets", "q_lin,v_lin", "--dora")),
    # checkpointing under a method: the word embeddings' output made a leaf that requires a gradient (transformers'
    # enable_input_require_grads), kept with its gradient; every layer recomputed
    ("b-sc-512-ampbf16-sdpa-ckpt-lora8-24", cap(B, SC, 512, "amp-bf16", "sdpa", "24GiB", "--lora-r", "8",
                                                "--checkpointing")),
    ("b-mlm-512-fp32-sdpa-ckpt-freeze-emb-24", cap(B, MLM, 512, "fp32", "sdpa", "24GiB", "--freeze-embeddings",
                                                   "--checkpointing")),
]
# The third step of some `steps` with the allocator's history recorded: where the derived allocation order's backward
# falls short of the GPU's (23.5 to 24.5 MiB in float32, about 52 MiB in 16 bits, wherever the backward peaks:
# tests/fixtures/allocation/phases.py), for tests/fixtures/allocation/history.py to diff event by event
HISTORIES = [(name, case) for name, case in STEPS + ODD_STEPS
             if name in ("b-sc-8x512-bf16-sdpa", "b-sc-8x512-bf16-eager", "b-sc-8x512-fp32-sdpa",
                         "b-sc-8x512-ampbf16-sdpa", "b-tok-12x200-ampfp16-sdpa")]
CASES = {"steps": STEPS + ODD_STEPS, "fits": FITS, "saved_and_flops": SAVED_AND_FLOPS, "held_out": HELD_OUT,
         "lm_caps": LM_CAPS, "replay_caps": REPLAY_CAPS, "method_caps": METHOD_CAPS, "histories": HISTORIES}


def method_of_argv(case_argv: list[str] | tuple[str, ...]) -> dict[str, Any] | None:
    """A case's fine-tuning method as `tui.reference.measure.apply_method` takes it, from its `--lora-*` and
    `--freeze-*` flags (None: full fine-tuning)."""
    args = list(case_argv)

    def value(flag: str) -> str | None:
        return args[args.index(flag) + 1] if flag in args else None

    if "--ia3" in args:
        return {"ia3": {}}
    if "--lora-r" in args:
        targets = value("--lora-targets")
        lora: dict[str, Any] = {"r": int(value("--lora-r") or 8), "lora_alpha": int(value("--lora-alpha") or 8),
                                "lora_dropout": float(value("--lora-dropout") or 0), "use_dora": "--dora" in args}
        if targets:
            lora["target_modules"] = targets if targets == "all-linear" else targets.split(",")
        return {"lora": lora}
    if any(flag.startswith("--freeze-") for flag in args):
        return {"freeze": {"embeddings": "--freeze-embeddings" in args, "body": "--freeze-body" in args,
                           "layers": int(value("--freeze-layers") or 0)}}
    return None


MEASURED_LOOP = "hand-written"  # the loop of every case that names none: the default when they were measured


def as_measured(case_argv: list[str] | tuple[str, ...]) -> list[str]:
    """A case's arguments with the loop it was measured with: the fixtures' cases that name no loop ran the
    hand-written loop (`del out` at each step's end; inference: each forward's outputs gone before the next),
    `bert-tui compute`'s default before the course's."""
    if "--loop" in case_argv:
        return list(case_argv)
    return [*case_argv, "--loop", MEASURED_LOOP]


def predicted(case_argv: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """What `bert-tui compute ARGV --format json` prints (the loop as measured: `as_measured`): the config and
    workload the case runs, and the answer."""
    case_argv = as_measured(case_argv)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if cli_main(["compute", *case_argv, "--format", "json"]) != 0:
            raise SystemExit(f"bert-tui compute {' '.join(case_argv)} failed")
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def objects(prediction: dict[str, Any]) -> tuple[BertConfig, Workload]:
    workload = {key: value for key, value in prediction["workload"].items() if key != "gpu_memory"}
    return BertConfig(**prediction["config"]), Workload(**workload)


_METHOD: dict[str, Any] = {}  # the case being measured's method (`method_of_argv`): what `run_phases` applies


def plan(parts: tuple[str, ...]) -> list[tuple[str, str, list[str], dict[str, Any]]]:
    """Every case of the parts asked, with its prediction: resolved before the GPU is touched."""
    return [(part, name, case_argv, predicted(case_argv)) for part in parts for name, case_argv in CASES[part]]


# ---- on the GPU ---------------------------------------------------------------------------------------------------

def _allocated() -> int:
    import torch

    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def _peak_since(reset: bool = False) -> int:
    import torch

    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return peak


def _clean() -> int:
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    return _allocated()


def _optimizer(model: Any, workload: Workload) -> Any:
    import torch

    params = [param for param in model.parameters() if param.requires_grad]  # (what trains)
    if workload.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-4)  # foreach on CUDA, as a user gets it
    return torch.optim.SGD(params, lr=1e-4, momentum=0.9 if workload.optimizer == "sgd-momentum" else 0)


def run_phases(config: BertConfig, workload: Workload, timing: bool = False,
               mark: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Two steps of the case's loop (the course's keeps each step's outputs and loss until the next step rebinds
    them; the others delete them), then the third phase by phase (absolute bytes). `mark(phase)` is called as the
    third step begins (`start`) and as each of its phases ends (`forward`, `backward`, `optimizer`)."""
    mark = mark or (lambda phase: None)
    import torch

    from tui.reference import measure as M

    method = _METHOD.get("now")
    # (under a method: built, wrapped and moved as the Trainer does, the adapters moved after their base layers)
    model = M.build_model(config, workload, "cpu", method).to("cuda") if method else \
        M.build_model(config, workload, "cuda")
    batch = M.inputs(config, workload, "cuda")
    train = workload.mode == "train"
    opt = _optimizer(model, workload) if train else None

    def forward() -> Any:
        grad = contextlib.nullcontext() if train else torch.no_grad()
        with grad, M._autocast(workload, "cuda"):
            return model(**batch)

    last: dict[str, Any] = {}  # the course's loop: the last step's outputs and loss, until this step rebinds them
    course = workload.loop == "course"

    def step() -> None:
        out = forward()
        last.pop("out", None)
        if opt is not None:
            loss = M.loss_of(out)
            last.pop("loss", None)
            loss.backward()
            if not course:
                del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
            if course:
                last["loss"] = loss
        if course:  # (inference too: `out` lives until the next forward returns)
            last["out"] = out
        del out

    for _ in range(2):
        step()
    memory: dict[str, int] = {"start": _allocated()}
    _peak_since(reset=True)
    mark("start")
    out = forward()
    last.pop("out", None)
    loss = M.loss_of(out) if opt is not None else None
    last.pop("loss", None)
    memory["after_forward"] = _allocated()
    memory["peak_forward"] = _peak_since(reset=True)
    mark("forward")
    if opt is not None:
        if workload.loop == "trainer":  # the outputs go before the backward; the hand-written loop keeps them
            del out
            memory["after_forward_outputs_dropped"] = _allocated()
        loss.backward()
        del loss
        memory["after_backward"] = _allocated()
        memory["peak_backward"] = _peak_since(reset=True)
        mark("backward")
        opt.step()
        memory["peak_optimizer"] = _peak_since(reset=True)
        mark("optimizer")
        opt.zero_grad(set_to_none=True)
    out = None
    if opt is not None:
        memory["end"] = _allocated()
    result: dict[str, Any] = {"memory_allocated": memory}
    if timing:
        times = []
        for _ in range(5):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            step()
            end.record()
            torch.cuda.synchronize()
            times.append(begin.elapsed_time(end) / 1000)
        result["step_seconds_median"] = statistics.median(times)
    return result


def saved_tensors(config: BertConfig, workload: Workload) -> dict[str, Any]:
    """Every storage the forward saves for backward (once; parameters and buffers not): layer 0's rows, and the
    bytes by component and by dtype. The backward then runs (a saved output held by its own node is a reference
    cycle gc cannot see: the graph must go before the next case), with the recomputation peak under checkpointing;
    then one optimizer step and the bytes of its states on the GPU."""
    import torch

    from tui.reference import measure as M

    method = _METHOD.get("now")
    # (under a method: built, wrapped and moved as the Trainer does, the adapters moved after their base layers)
    model = M.build_model(config, workload, "cpu", method).to("cuda") if method else \
        M.build_model(config, workload, "cuda")
    batch = M.inputs(config, workload, "cuda")
    fixed = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen: set[int] = set()
    alive: list[Any] = []
    rows: list[dict[str, Any]] = []
    by_component: dict[str, int] = {}
    by_dtype: dict[str, int] = {}
    with M._module_stack(model) as stack:
        def pack(tensor: Any) -> Any:
            storage = tensor.untyped_storage()
            if storage.data_ptr() in fixed or storage.data_ptr() in seen:
                return tensor
            seen.add(storage.data_ptr())
            alive.append(tensor)
            module, nbytes = stack[-1], storage.nbytes()
            component = M.component_of(module, config.body).split(".")[0]  # every layer's bytes under "layer"
            by_component[component] = by_component.get(component, 0) + nbytes
            by_dtype[str(tensor.dtype)] = by_dtype.get(str(tensor.dtype), 0) + nbytes
            if module.endswith(".layer.0") or ".layer.0." in module:
                rows.append({"module": module.split("layer.0")[-1].lstrip(".") or "layer", "shape": list(tensor.shape),
                             "dtype": str(tensor.dtype).removeprefix("torch."), "bytes": nbytes})
            return tensor

        grad = torch.enable_grad() if workload.mode == "train" else torch.no_grad()
        with grad, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), M._autocast(workload, "cuda"):
            out = model(**batch)
    result: dict[str, Any] = {"layer0_saved": rows, "saved_by_component": by_component,
                              "saved_total": sum(by_component.values()), "saved_by_dtype": by_dtype,
                              "recompute_peak_saved": 0, "optimizer_state_bytes_on_gpu": 0}
    if workload.mode == "train":
        result["recompute_peak_saved"] = M._backward(model, M.loss_of(out), workload.checkpointing, fixed | seen)
        opt = _optimizer(model, workload)
        opt.step()
        result["optimizer_state_bytes_on_gpu"] = sum(
            value.numel() * value.element_size() for state in opt.state.values() for value in state.values()
            if isinstance(value, torch.Tensor) and value.is_cuda)  # AdamW's `step` counters stay on the host
    return result


def measure_step(name: str, case_argv: list[str], prediction: dict[str, Any], first: bool) -> dict[str, Any]:
    config, workload = objects(prediction)
    before = _clean()
    measured = run_phases(config, workload, timing=True)
    memory = {key: value - before for key, value in measured["memory_allocated"].items()}
    case: dict[str, Any] = {"case": name, "argv": case_argv, "memory_allocated": memory,
                            "peak": max(value for key, value in memory.items() if key.startswith("peak")),
                            "allocated_before_case": before, "includes_workspaces": first,
                            "step_seconds_median": measured["step_seconds_median"], "layer0_saved": []}
    if workload.mode == "train" and not workload.checkpointing:
        _clean()
        saved = saved_tensors(config, workload)
        case.update(layer0_saved=saved["layer0_saved"], saved_by_component=saved["saved_by_component"],
                    saved_total=saved["saved_total"])
    _clean()
    return case


def measure_saved_and_flops(name: str, case_argv: list[str], prediction: dict[str, Any]) -> dict[str, Any]:
    from tui.reference import measure as M

    config, workload = objects(prediction)
    _clean()
    saved = saved_tensors(config, workload)
    _clean()
    forward, backward, _ = M.measure_flops(config, workload, "cuda")
    _clean()
    keys = ("saved_by_component", "saved_total", "saved_by_dtype", "recompute_peak_saved",
            "optimizer_state_bytes_on_gpu")
    return {"case": name, "argv": case_argv, **{key: saved[key] for key in keys},
            "flop_counter_forward": forward, "flop_counter_backward": backward}


def _runs(config: BertConfig, workload: Workload, cap: int, batch: int) -> bool:
    import torch

    _clean()
    torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(0).total_memory)
    try:
        run_phases(config, Workload(**{**workload.as_dict(), "batch": batch}))
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        _clean()
        torch.cuda.set_per_process_memory_fraction(1.0)


def measure_fit(name: str, case_argv: list[str], prediction: dict[str, Any]) -> dict[str, Any]:
    """The largest batch that ran under the cap and the first that ran out of memory, by bisection."""
    from tui.core.units import parse_size

    config, workload = objects(prediction)
    cap = parse_size(case_argv[case_argv.index("--gpu-memory") + 1])
    ran, out = 0, None
    probe = max(1, next(fit for fit in prediction["fits"] if fit["asked"])["max_batch"])
    while out is None:
        if _runs(config, workload, cap, probe):
            ran, probe = probe, probe * 3 // 2 + 1
        else:
            out = probe
    while out - ran > 1:
        middle = (ran + out) // 2
        if _runs(config, workload, cap, middle):
            ran = middle
        else:
            out = middle
    return {"case": name, "argv": case_argv, "largest_batch_that_ran": ran, "first_batch_out_of_memory": out}


def measure_lm_cap(name: str, case_argv: list[str], prediction: dict[str, Any], folder: Path) -> dict[str, Any]:
    """`measure_fit`, then the largest batch that ran once more with the allocator's history recorded: its
    allocated and reserved peaks (what `tui.core.step.allocator` replays) and a `torch.cuda.memory` snapshot
    (FOLDER/NAME.pickle, for https://pytorch.org/memory_viz), so a replay can be checked event by event."""
    import torch

    from tui.core.units import parse_size

    row = measure_fit(name, case_argv, prediction)
    config, workload = objects(prediction)
    size = parse_size(case_argv[case_argv.index("--gpu-memory") + 1])
    folder.mkdir(parents=True, exist_ok=True)
    before = _clean()
    torch.cuda.set_per_process_memory_fraction(size / torch.cuda.get_device_properties(0).total_memory)
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    try:
        run_phases(config, Workload(**{**workload.as_dict(), "batch": row["largest_batch_that_ran"]}))
        torch.cuda.memory._dump_snapshot(str(folder / f"{name}.pickle"))
        row["at_largest"] = {"allocated_before_case": before, "peak_allocated": torch.cuda.max_memory_allocated(),
                             "peak_reserved": torch.cuda.max_memory_reserved(),
                             "snapshot": f"{folder.name}/{name}.pickle"}
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
        _clean()
        torch.cuda.set_per_process_memory_fraction(1.0)
    return row


def measure_history(name: str, case_argv: list[str], prediction: dict[str, Any], folder: Path) -> dict[str, Any]:
    """`measure_step`'s third step with the allocator's history recorded from its start (two steps first, as
    measured): FOLDER/NAME.pickle (a `torch.cuda.memory` snapshot: every block the step allocates and frees, with
    its size and the stack that asked for it) and `trace_ends`, how many entries of its trace each phase's end
    (`forward`, `backward`, `optimizer`) had seen, beside the phase figures (less what the case began with)."""
    import torch

    config, workload = objects(prediction)
    folder.mkdir(parents=True, exist_ok=True)
    before = _clean()
    ends: dict[str, int] = {}

    def mark(phase: str) -> None:
        if phase == "start":
            torch.cuda.memory._record_memory_history(max_entries=1_000_000)
        else:
            torch.cuda.synchronize()
            ends[phase] = len(torch.cuda.memory._snapshot()["device_traces"][0])

    try:
        measured = run_phases(config, workload, mark=mark)
        torch.cuda.memory._dump_snapshot(str(folder / f"{name}.pickle"))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    memory = {key: value - before for key, value in measured["memory_allocated"].items()}
    _clean()
    return {"case": name, "argv": case_argv, "memory_allocated": memory, "allocated_before_case": before,
            "trace_ends": ends, "snapshot": f"{folder.name}/{name}.pickle"}


def meta() -> dict[str, Any]:
    import torch
    import transformers

    backends = {"flash": torch.backends.cuda.flash_sdp_enabled(),
                "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                "math": torch.backends.cuda.math_sdp_enabled(), "cudnn": torch.backends.cuda.cudnn_sdp_enabled()}
    return {"device": torch.cuda.get_device_name(0), "total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
            "torch": torch.__version__, "transformers": transformers.__version__, "sdp_backends_enabled": backends}


def main(args: list[str]) -> int:
    if not args or any(part not in PARTS for part in args[1:]):
        print(f"usage: measure_steps_cuda.py OUT.json [{' '.join(PARTS)}]", file=sys.stderr)
        return 2
    output, parts = Path(args[0]), tuple(args[1:]) or PARTS
    cases = plan(parts)
    print(f"{len(cases)} cases resolved ({', '.join(parts)})", file=sys.stderr)
    try:
        import torch
    except ImportError:
        print("needs torch with CUDA: pip install -e '.[verify]' on a machine with a CUDA GPU", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU: torch.cuda.is_available() is False here", file=sys.stderr)
        return 2
    document: dict[str, Any] = {"meta": meta(), **{part: [] for part in parts}}
    first = True
    for part, name, case_argv, prediction in cases:
        started = time.perf_counter()
        _METHOD["now"] = method_of_argv(case_argv)
        if part in ("steps", "held_out"):
            row = measure_step(name, case_argv, prediction, first)
            first = False
        elif part == "fits":
            row = measure_fit(name, case_argv, prediction)
        elif part in ("lm_caps", "replay_caps", "method_caps"):
            row = measure_lm_cap(name, case_argv, prediction, output.with_name(output.stem + ".snapshots"))
        elif part == "histories":
            row = measure_history(name, case_argv, prediction, output.with_name(output.stem + ".snapshots"))
        else:
            row = measure_saved_and_flops(name, case_argv, prediction)
        document[part].append(row)
        partial = output.with_name(output.name + ".partial")  # what ran so far survives a crash or a time-out
        partial.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        partial.replace(output)
        print(f"{part:16} {name:34} {time.perf_counter() - started:6.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
