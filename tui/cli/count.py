"""`bert-tui count`: the parameters of one configuration, and a checkpoint against it."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core import ConfigError, build_tree
from ..core.count.adapter_file import AdapterComparison, compare_adapter
from ..core.count.trained import Adapted, FineTuning
from ..plain import printable, prose, say
from .common import (
    Parser,
    Selection,
    UsageError,
    add_lora,
    add_model,
    add_overrides,
    add_source,
    method_flags,
    method_refusal,
    method_with,
    resolve,
)


def build_parser() -> Parser:
    from ..formats.params import (
        FORMATS,  # here: the explorer does not need the export formats
    )

    parser = Parser(
        prog="bert-tui count",
        description="Count the parameters of one BERT configuration, named and shaped as named_parameters() names them.",
        epilog="examples:\n  bert-tui count google-bert/bert-base-uncased\n"
        "  bert-tui count --preset bert-base-uncased --head mlm --format json\n"
        "  bert-tui count path/to/model --offline\n"
        "  bert-tui count roberta-base --head sequence-classification --lora-r 8\n\n"
        "exit status: 0; 1 when a checkpoint differs from its config (as diff(1)); 2 on bad input",
    )
    add_model(parser)
    add_source(parser)
    add_overrides(parser)
    add_lora(parser)
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (grouped by module), json (the full breakdown), csv or markdown (default: table)")
    return parser


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    flagged = method_flags(args)
    selection = resolve(args)
    return print_count(selection, args.format, method_with(flagged, selection))


def print_count(selection: Selection, fmt: str, how: FineTuning | None = None) -> int:
    """What `bert-tui count` prints for `selection` in format `fmt` (under `how`: what trains, as it says)."""
    from ..formats.params import (
        adapter_file_data,
        adapter_text,
        checkpoint_data,
        checkpoint_text,
        lora_rows,
        lora_text,
        rows_text,
        to_csv,
        to_json,
        to_markdown,
        to_table,
    )

    tree = build_tree(selection.config)
    trained = None
    if how is not None:
        from ..core.count.trained import trained as trained_under

        try:
            trained = trained_under(tree, selection.config, how)
        except ConfigError as error:
            raise UsageError(method_refusal(error, how, selection.method)) from None
    adapted = None if trained is None else trained.adapted
    for note in selection.notes:
        print(say(f"bert-tui: note: {printable(note)}"), file=sys.stderr)
    ckpt = selection.checkpoint
    stored = None
    if adapted is not None and selection.adapter_weights is not None:
        stored = adapter_report(selection.adapter_weights, adapted)
    if fmt == "json":
        text = to_json(tree, trained)
        if ckpt is not None or stored is not None:  # one parse, one dump
            data = json.loads(text)
            if ckpt is not None:
                data["checkpoint"] = checkpoint_data(ckpt.checkpoint, ckpt.comparison)
            if stored is not None:
                data["adapter_file"] = adapter_file_data(*stored)
            text = json.dumps(data, indent=2) + "\n"
        sys.stdout.write(text)
    elif fmt == "table":
        from rich.console import Console

        if ckpt is not None:
            sys.stdout.write(prose(checkpoint_text(ckpt.checkpoint, ckpt.comparison)) + "\n")
        Console().print(to_table(tree, selection.title, trained))
        if adapted is not None and how is not None:
            sys.stdout.write(prose(lora_text(adapted, how)))
        if stored is not None:
            sys.stdout.write(prose(adapter_text(*stored)))
        if trained is not None and trained.frozen_names:
            share = 100 * trained.trainable / max(1, trained.total)
            sys.stdout.write(prose(f"parts frozen: trainable {trained.trainable:,} of {tree.total:,} ({share:.2f} %), "
                                   f"frozen {trained.frozen:,} in {len(trained.frozen_names)} tensors\n"))
    else:
        if ckpt is not None:
            print(say("bert-tui: note: the checkpoint report is printed with --format table or json"), file=sys.stderr)
        if adapted is not None and trained is not None:  # the peft model's tensors, each marked trainable or not
            sys.stdout.write(rows_text(lora_rows(adapted), fmt, f"{selection.title} with {trained.label}"))
        else:
            sys.stdout.write(to_csv(tree, trained) if fmt == "csv" else to_markdown(tree, selection.title, trained))
    differs = ckpt is not None and ckpt.comparison is not None and not ckpt.comparison.clean
    return 1 if differs or (stored is not None and not stored[1].clean) else 0


def adapter_report(path: Path, adapted: Adapted) -> tuple[Path, AdapterComparison]:
    """An adapter file's headers against the tensors its config predicts (a bad file: one line, exit 2)."""
    from ..io.hf_config import SourceError
    from ..io.safetensors import load_checkpoint

    try:
        stored = load_checkpoint(path)
    except SourceError as error:
        raise UsageError(str(error)) from None
    return path, compare_adapter(adapted, [(t.name, t.shape) for t in stored.tensors])

