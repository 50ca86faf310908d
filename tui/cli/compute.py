"""`bert-tui compute`: FLOPs and memory of a training step or an inference forward."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..core import ConfigError
from ..plain import printable, say
from .common import (
    Parser,
    UsageError,
    add_lora,
    add_model,
    add_overrides,
    add_source,
    as_typed,
    method_flags,
    method_refusal,
    method_with,
    progress,
    resolve,
)

SLOW_FITS = ("working out what fits: the CUDA caching allocator replayed over the step, card by card (deep "
             "models take seconds)")
SLOW_STEP = "working out the step, layer by layer (deep models take seconds)"
NOTICE_AFTER = 1.0  # seconds: a compute that takes longer says what it is doing (where a person watches)


@contextmanager
def slow_notice(message: str) -> Iterator[None]:
    """`message` on stderr (`progress`: a terminal only) if the block is still running after `NOTICE_AFTER`."""
    timer = threading.Timer(NOTICE_AFTER, progress, (message,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def build_parser() -> Parser:
    from ..core.step.layouts import STEPS
    from ..core.step.workload import (
        ATTENTIONS,
        DEVICES,
        LOOPS,
        MODES,
        OPTIMIZERS,
        PRECISIONS,
    )
    from ..formats.params import FORMATS

    parser = Parser(
        prog="bert-tui compute",
        description="FLOPs and memory of a training step (or an inference forward) at a batch and sequence length, "
        "exact to torch's own measurements of transformers' classes: FLOPs as torch's FlopCounterMode counts them "
        "(2 per multiply-accumulate, matrix products only), the activations autograd saves for backward, weights, "
        "gradients and optimizer states, the step's peak (the most the GPU holds at once, phase by phase), and what "
        "fits common GPU sizes: the largest batch whose run never runs out of memory, the CUDA caching allocator "
        "replayed over the step's own allocation order (where that order is not derived yet, under a fine-tuning "
        "method say, or with --device cpu: the largest whose peak fits), and whether the step's own batch runs on "
        "each. "
        "A training step is the class's forward with labels (its own loss), the backward and one optimizer step; "
        "for BertModel, which has no loss, the loss is the sum of its outputs. "
        f"Modelled for {', '.join(STEPS)}; another model type is refused by name.",
        epilog="examples:\n  bert-tui compute bert-large-uncased --batch 32 --seq 512 --precision amp-bf16 "
        "--gpu-memory 24GiB\n  bert-tui compute --preset bert-base-uncased --head sequence-classification "
        "--batch 32 --seq 128 --format json\n  bert-tui compute google-bert/bert-base-uncased --batch 8 --seq 512 "
        "--checkpointing"
        "\n  bert-tui compute deberta-v3-base --head sequence-classification --batch 8 --seq 512 "
        "--precision amp-bf16"
        "\n  bert-tui compute roberta-base --head sequence-classification --lora-r 8 --lora-targets query,value "
        "--precision amp-bf16\n  bert-tui compute bert-base-uncased --head mlm --freeze-embeddings "
        "--freeze-layers 6\n\n"
        "With a fine-tuning method (--lora-*, --freeze-*, or a PEFT adapter as MODEL: a folder or a Hub id) the "
        "step is the "
        "method's, measured against peft and torch for every family modelled: what trains, what each frozen or "
        "adapted module keeps, the adapters' FLOPs. IA3, DoRA, LoRA on embeddings and "
        "checkpointing with a method are refused by name (bert-tui count counts their parameters).",
    )
    add_model(parser)
    add_source(parser, checkpoint=False)
    add_overrides(parser)
    add_lora(parser)
    group = parser.add_argument_group("workload")
    group.add_argument("--batch", metavar="B", help="b: sequences per step (examples, for multiple choice); default 32")
    group.add_argument("--seq", metavar="S", help="s: tokens per sequence (at most max_position_embeddings); default 128")
    group.add_argument("--mode", choices=MODES, default="train", help="a training step (default) or an inference forward")
    group.add_argument("--precision", choices=PRECISIONS, default="fp32",
                       help="fp32/bf16/fp16: the model in that dtype; amp-bf16/amp-fp16: float32 weights under "
                       "autocast (mixed precision; AdamW then keeps float32 master weights and moments)")
    group.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                       help="adamw (two moments per parameter), sgd (no state) or sgd-momentum (one buffer)")
    group.add_argument("--loop", choices=LOOPS, default="course",
                       help="what the training loop keeps alive, for the peak and what fits: course (default: the "
                       "loop of the transformers course and accelerate's examples, out = model(**batch); "
                       "out.loss.backward(); opt.step() with nothing deleted, keeps the outputs, an LM head's b·s·V "
                       "logits, through the backward, the step and the next step's forward), hand-written (the same "
                       "with `del out` at the end of each step) or trainer (transformers' Trainer keeps only the "
                       "loss); with --mode inference, course keeps each forward's outputs (a causal LM's key/value "
                       "cache too) until the next forward returns, the other two let them go before it")
    group.add_argument("--checkpointing", action="store_true",
                       help="activation checkpointing of every encoder layer (recomputed in the backward)")
    group.add_argument("--attention", choices=ATTENTIONS, default="sdpa",
                       help="attention implementation: sdpa (default, as transformers builds these classes; fused "
                       "kernels on CUDA) or eager (the math path: softmax over b·A·s² scores)")
    group.add_argument("--padding-mask", action="store_true", help="the batch carries a padding attention mask")
    group.add_argument("--device", choices=DEVICES, default="cuda",
                       help="whose conventions where they differ: cuda (1-byte dropout masks, float32 LayerNorm "
                       "statistics, sdpa's fused kernels; measured on an H200) or cpu (what the CPU oracle measures); default cuda")
    group.add_argument("--choices", metavar="C", help="multiple-choice only: answers per example (default 4)")
    group.add_argument("--gpu-memory", metavar="SIZE", help="one more memory size for the fits table (a card, or a cap under "
                       "set_per_process_memory_fraction): 24GiB, 80GB, 24 (GiB)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown (default: table)")
    parser.add_argument("--brief", action="store_true",
                        help="with the table: the answer (whether the batch runs, the largest that does, the peak) and "
                        "what fits, without the FLOPs' and memory's details")
    return parser


DEFAULT_WORKLOAD = {"batch": 32, "seq": 128, "choices": 4}  # as the explorer's Compute pane opens


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    from ..core.config import parse_int
    from ..core.count.families import build_tree
    from ..core.step.compute import compute, fits_replayed
    from ..core.step.method import method_of
    from ..core.step.workload import Workload
    from ..core.units import parse_size, size_reading
    from ..formats.compute import (
        compute_csv,
        compute_data,
        compute_markdown,
        compute_text,
    )

    flagged = method_flags(args)
    refused = None if flagged is None else flagged.step_refusal()
    if flagged is not None and refused is not None:  # (before a source is read: the method alone decides it)
        raise UsageError(f"{method_refusal(refused, flagged)} (bert-tui count)")
    selection = resolve(args)
    how = method_with(flagged, selection)
    refused = None if how is None else how.step_refusal()
    if how is not None and refused is not None:
        raise UsageError(f"the adapter folder holds {how.name}: {refused.rule} (bert-tui count)")
    gpu_memory = None
    if args.gpu_memory is not None:
        try:
            gpu_memory = parse_size(args.gpu_memory)
        except ValueError as error:
            raise UsageError(f"--gpu-memory {args.gpu_memory!r}: must be {error}") from None
    try:
        sizes = {name: parse_int(name, str(DEFAULT_WORKLOAD[name]) if getattr(args, name) is None else getattr(args, name))
                 for name in ("batch", "seq", "choices")}
        workload = Workload(**sizes, mode=args.mode, precision=args.precision, optimizer=args.optimizer or "adamw",
                            checkpointing=args.checkpointing, attention=args.attention, loop=args.loop,
                            padding_mask=args.padding_mask, device=args.device)
        try:
            method = None if how is None else method_of(build_tree(selection.config), selection.config, how)
        except ConfigError as error:  # (named as the user wrote the method: its flag, or the adapter's key)
            raise UsageError(method_refusal(error, how, selection.method)) from None
        with slow_notice(SLOW_FITS if fits_replayed(selection.config, workload, method) else SLOW_STEP):
            result = compute(selection.config, workload, gpu_memory, method=method)
            full = None if method is None else compute(selection.config, workload, gpu_memory)  # beside it
    except ConfigError as error:  # a config file's own key is named as the file names it, not as an option
        if error.field in dict(selection.config.step_keys):
            raise UsageError(f"{error.field} {error.value}: {error.rule}") from None
        raise UsageError(f"{as_typed(error.field, error.value)}: {error.rule}") from None
    notes = list(selection.notes)
    defaulted = [f"--{name} {DEFAULT_WORKLOAD[name]}" for name in ("batch", "seq") if getattr(args, name) is None]
    if defaulted:
        notes.append(f"{' and '.join(defaulted)} (the explorer's defaults): --batch and --seq choose others")
    if args.choices is not None and selection.config.head != "multiple-choice":  # (said, not ignored in silence)
        notes.append(f"--choices {args.choices}: answers per example of a multiple-choice head; "
                     f"{selection.config.hf_class} has none, so it changes nothing")
    if args.optimizer is not None and not workload.train:
        notes.append(f"--optimizer {args.optimizer}: an inference forward runs no optimizer, so it changes nothing")
    if args.brief and args.format != "table":
        notes.append(f"--brief shortens the table; --format {args.format} is printed whole")
    reading = None if args.gpu_memory is None else size_reading(args.gpu_memory)
    if reading:  # (a card's box says GB; its memory is GiB)
        notes.append(f"--gpu-memory {reading}")
    for note in notes:
        print(say(f"bert-tui: note: {printable(note)}"), file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(json.dumps(compute_data(result, gpu_memory, full), indent=2, ensure_ascii=False) + "\n")
    elif args.format == "csv":
        sys.stdout.write(compute_csv(result))
    elif args.format == "markdown":
        sys.stdout.write(compute_markdown(result, selection.title, full))
    else:
        sys.stdout.write(compute_text(result, selection.title, full, brief=args.brief))
    return 0

