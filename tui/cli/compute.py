"""`bert-tui compute`: FLOPs and memory of a training step or an inference forward."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

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
    from ..core.step.workload import WORKLOAD
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
        "With a fine-tuning method (--lora-*, --ia3*, --freeze-*, or a PEFT adapter as MODEL: a folder or a Hub "
        "id) the step is the method's, measured against peft and torch for every family modelled: what trains, "
        "what each frozen or adapted module keeps, the adapters' FLOPs; what fits is the caching allocator "
        "replayed over the method's own allocation order. With --checkpointing the word embeddings' output "
        "requires a gradient (transformers' enable_input_require_grads): every layer runs its backward. LoRA on "
        "embeddings but the word embeddings is refused by name (bert-tui count counts its parameters).",
    )
    add_model(parser)
    add_source(parser, checkpoint=False)
    add_overrides(parser)
    add_lora(parser)
    group = parser.add_argument_group("workload")
    for setting in WORKLOAD.values():  # (each said once, as the Compute pane and the JSON say it)
        said = f"{setting.help}; default {setting.default}" if not setting.switch else setting.help
        if setting.switch:
            group.add_argument(setting.flag, action="store_true", default=None, help=said)
        elif setting.allowed:
            group.add_argument(setting.flag, choices=setting.allowed, default=None, help=said)
        else:
            group.add_argument(setting.flag, metavar=setting.metavar, help=said)
    group.add_argument("--gpu-memory", metavar="SIZE", help="one more memory size for the fits table (a card, or a cap under "
                       "set_per_process_memory_fraction): 24GiB, 80GB, 24 (GiB)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown (default: table)")
    parser.add_argument("--brief", action="store_true",
                        help="with the table: the answer (whether the batch runs, the largest that does, the peak) and "
                        "what fits, without the FLOPs' and memory's details")
    return parser


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    from ..core.count.families import build_tree
    from ..core.step.compute import compute, fits_replayed
    from ..core.step.method import method_of
    from ..core.step.workload import WORKLOAD, Workload
    from ..core.units import parse_size, short_flops, size_reading
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
        workload = Workload.from_settings({name: getattr(args, name) for name in WORKLOAD
                                           if getattr(args, name) is not None})
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
    defaulted = [f"--{name} {WORKLOAD[name].default}" for name in ("batch", "seq") if getattr(args, name) is None]
    if defaulted:
        notes.append(f"{' and '.join(defaulted)} (the explorer's defaults): --batch and --seq choose others")
    if args.choices is not None and selection.config.head != "multiple-choice":  # (said, not ignored in silence)
        notes.append(f"--choices {args.choices}: answers per example of a multiple-choice head; "
                     f"{selection.config.hf_class} has none, so it changes nothing")
    if args.optimizer is not None and not workload.train:
        notes.append(f"--optimizer {args.optimizer}: an inference forward runs no optimizer, so it changes nothing")
    if workload.checkpointing and method is not None and not method.layers_backward:
        plain = compute(selection.config, replace(workload, checkpointing=False), method=method, fits=False)
        notes.append(f"--checkpointing with nothing in the layers trained: transformers makes the embeddings' output "
                     f"require a gradient for it, so every layer runs its backward and is recomputed "
                     f"({short_flops(result.flops_step)} a step; without --checkpointing "
                     f"{short_flops(plain.flops_step)})")
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

