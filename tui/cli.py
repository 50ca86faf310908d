"""`bert-tui`: the command line. Textual is imported only when the explorer launches.

    bert-tui [SOURCE] [overrides]             the explorer (default preset: bert-base-uncased)
    bert-tui count [SOURCE] [overrides] [--head HEAD] [--num-labels N] [--no-pooler] [--format FORMAT]
    bert-tui compute [SOURCE] [overrides] [--batch B] [--seq S] [workload flags] [--format FORMAT]
    bert-tui presets [--format table|json]

Bad input exits 2 with one line on stderr naming the field, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from . import COMMANDS, __version__
from .core import HEADS, MODEL_TYPES, SIZE_FIELDS, BertConfig, ConfigError, build_tree
from .core.config import EXTRA_FIELDS
from .plain import plain, printable
from .presets import DEFAULT_PRESET, Catalog, load_catalog
from .sources import (
    LOAD_ERRORS,
    CheckpointReport,
    Source,
    check_checkpoint,
    compare_checkpoint,
    load_source,
    open_model,
    source_beside,
)

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3  # an optional extra is not installed

OVERRIDE_HELP = {
    "vocab_size": "V: rows of the word embedding (HF vocab_size)",
    "hidden_size": "H: width of every token vector (HF hidden_size); a multiple of the heads",
    "num_hidden_layers": "L: encoder layers (HF num_hidden_layers)",
    "num_attention_heads": "A: heads per layer (HF num_attention_heads); they split H and add no parameters",
    "intermediate_size": "I: feed-forward inner width (HF intermediate_size)",
    "max_position_embeddings": "P: rows of the position embedding (HF max_position_embeddings)",
    "type_vocab_size": "T: rows of the token-type embedding (HF type_vocab_size)",
    "embedding_size": "E: embedding width of ALBERT, ELECTRA and DeBERTa (HF embedding_size; default: the family's)",
    "num_hidden_groups": "G: ALBERT's layer groups stored (HF num_hidden_groups)",
    "inner_group_num": "K: ALBERT's layers stored per group (HF inner_group_num)",
    "relative_attention_num_buckets": "R: MPNet's relative attention buckets (HF relative_attention_num_buckets)",
    "position_buckets": "DeBERTa's relative position buckets: D, the span (0: none, HF's -1)",
    "max_relative_positions": "DeBERTa's relative span without buckets (0: P, HF's -1)",
    "conv_kernel_size": "C: DeBERTa-v2's convolution kernel beside the first layer (0: none)",
}
HEAD_HELP = "; ".join(f"{name} = {spec.hf_class}" for name, spec in HEADS.items())


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (and exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", nargs="?",
                        help="a Hugging Face Hub model id (ORG/NAME), a local config.json, model folder or checkpoint "
                        "(a path that exists wins over an id), or a preset name")


def _add_source(parser: argparse.ArgumentParser, checkpoint: bool = True) -> None:
    group = parser.add_argument_group("source (default: --preset bert-base-uncased)")
    group.add_argument("--revision", metavar="REV", help="with a Hub id: a branch, tag or commit (default: main)")
    group.add_argument("--offline", action="store_true",
                       help="with a Hub id: use only the Hugging Face cache, never the network (as HF_HUB_OFFLINE=1)")
    source = group.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME", help="a preset by name (see `bert-tui presets`)")
    source.add_argument("--preset-file", metavar="PATH", type=Path, help="a preset YAML file")
    source.add_argument("--config", metavar="PATH", type=Path,
                        help="a Hugging Face config.json, a model folder holding one, or a preset YAML file")
    if checkpoint:
        group.add_argument("--checkpoint", metavar="PATH", type=Path,
                           help="a .safetensors file, a model.safetensors.index.json or a model folder: read its "
                           "headers only, count what it holds and compare it with the config (beside it, given "
                           "with --config, or read back from the shapes)")


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("overrides (Hugging Face config keys; applied on top of the source)")
    for field in (*SIZE_FIELDS, *EXTRA_FIELDS):
        group.add_argument(flag(field), dest=field, metavar="N", help=OVERRIDE_HELP[field])
    group.add_argument("--head", choices=list(HEADS), help=f"the model class to count: {HEAD_HELP} (default: none)")
    group.add_argument("--num-labels", dest="num_labels", metavar="N",
                       help="N: outputs of the sequence-/token-classification and question-answering heads (default 2)")
    group.add_argument("--model-type", dest="model_type", choices=list(MODEL_TYPES),
                       help=f"the family: {', '.join(MODEL_TYPES)} (default: bert)")
    group.add_argument("--no-pooler", dest="pooler", action="store_false", default=None,
                       help="BertModel without its pooler (add_pooling_layer=False); other heads fix the pooler themselves")
    group.add_argument("--add-cross-attention", dest="add_cross_attention", action="store_true", default=None,
                       help="a decoder (is_decoder) with a cross-attention block in every layer, as bert2bert's: "
                       "bert, roberta, xlm-roberta, camembert and electra")


def build_parser() -> _Parser:
    parser = _Parser(
        prog="bert-tui",
        description="Every weight in BERT, counted and explained, exactly as Hugging Face transformers counts it. "
        "With no command, opens the explorer.",
        epilog="commands:\n  count     count one configuration (table, json, csv or markdown)\n"
        "  compute   FLOPs and memory of a training step at a batch and sequence length\n"
        "  presets   list the presets with their totals\n"
        "  audit     explain a published count (bert-tui audit 110M)\n"
        "  diff      compare two presets, preset files or config.json files\n"
        "  verify    cross-check against transformers (pip install 'bert-tui[verify]')\n\n"
        "examples:\n  bert-tui --preset bert-large-uncased\n"
        "  bert-tui count --preset example-40k --format json\n"
        "  bert-tui count --num-hidden-layers 6 --head mlm",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bert-tui {__version__}")
    _add_model(parser)
    _add_source(parser)
    _add_overrides(parser)
    return parser


def build_count_parser() -> _Parser:
    from .formats import FORMATS  # here: the explorer does not need the export formats

    parser = _Parser(
        prog="bert-tui count",
        description="Count the parameters of one BERT configuration, named and shaped as named_parameters() names them.",
        epilog="examples:\n  bert-tui count google-bert/bert-base-uncased\n"
        "  bert-tui count --preset bert-base-uncased --head mlm --format json\n"
        "  bert-tui count path/to/model --offline\n\n"
        "exit status: 0; 1 when a checkpoint differs from its config (as diff(1)); 2 on bad input",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_model(parser)
    _add_source(parser)
    _add_overrides(parser)
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (grouped by module), json (the full breakdown), csv or markdown (default: table)")
    return parser


def build_audit_parser() -> _Parser:
    from .core.audit import SCOPES
    from .formats import FORMATS

    parser = _Parser(
        prog="bert-tui audit",
        description="Explain a published parameter count: which counting conventions (biases or LayerNorm "
        "omitted, Q/K/V per head, pooler, pre-training heads, rounding, ...) reproduce it exactly. "
        "Exit 0 when one does, 1 when none does.",
        epilog="examples:\n  bert-tui audit 186828288 --preset example-40k\n  bert-tui audit 110M\n"
        "  bert-tui audit 7,113,216 --scope layer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("claim", metavar="CLAIMED", help="the published count: 186828288, 186,828,288, 110M or 0.11B")
    _add_model(parser)
    _add_source(parser, checkpoint=False)
    _add_overrides(parser)
    parser.add_argument("--scope", choices=SCOPES, default="model", help="the whole model (default) or one encoder layer")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (plain words), json, csv or markdown (one row per reading)")
    return parser


def build_diff_parser() -> _Parser:
    from .formats import FORMATS

    parser = _Parser(
        prog="bert-tui diff",
        description="Compare two configurations: total, per group and per parameter. A and B are preset names, "
        "preset files, HF config.json files, model folders or Hub model ids (ORG/NAME); overrides apply to B.",
        epilog="examples:\n  bert-tui diff bert-base-uncased bert-large-uncased\n"
        "  bert-tui diff google-bert/bert-base-uncased FacebookAI/roberta-base\n\n"
        "exit status: 0 when A and B have the same parameters, 1 when they differ (as diff(1)), 2 on bad input",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="A", help="a preset name, a preset YAML file, a config.json, a model folder or a Hub id")
    parser.add_argument("b", metavar="B", help="the same kinds as A (overrides apply to it)")
    parser.add_argument("--revision", metavar="REV", help="with Hub ids: the revision of both (default: main)")
    parser.add_argument("--offline", action="store_true", help="with Hub ids: the Hugging Face cache only")
    _add_overrides(parser)
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown")
    return parser


def build_verify_parser() -> _Parser:
    parser = _Parser(
        prog="bert-tui verify",
        description="Build the matching transformers class on the meta device (no weights, no download) and "
        "compare it with bert-tui parameter by parameter. Needs the verify extra: pip install 'bert-tui[verify]'. "
        "Exit 0 when they agree, 1 when they do not, 3 when torch or transformers is missing.",
    )
    _add_model(parser)
    _add_source(parser, checkpoint=False)
    _add_overrides(parser)
    return parser


def build_compute_parser() -> _Parser:
    from .core.compute import ATTENTIONS, DEVICES, MODES, OPTIMIZERS, PRECISIONS
    from .formats import FORMATS

    parser = _Parser(
        prog="bert-tui compute",
        description="FLOPs and memory of a training step (or an inference forward) at a batch and sequence length, "
        "exact to torch's own measurements of transformers' classes: FLOPs as torch's FlopCounterMode counts them "
        "(2 per multiply-accumulate, matrix products only), the activations autograd saves for backward, weights, "
        "gradients and optimizer states, the step's peak (the most the GPU holds at once, phase by phase) and the "
        "largest batch whose peak fits common GPU sizes. "
        "A training step is the class's forward with labels (its own loss), the backward and one optimizer step; "
        "for BertModel, which has no loss, the loss is the sum of its outputs.",
        epilog="examples:\n  bert-tui compute bert-large-uncased --batch 32 --seq 512 --precision amp-bf16 "
        "--gpu-memory 24GiB\n  bert-tui compute --preset bert-base-uncased --head sequence-classification "
        "--batch 32 --seq 128 --format json\n  bert-tui compute google-bert/bert-base-uncased --batch 8 --seq 512 "
        "--checkpointing",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_model(parser)
    _add_source(parser, checkpoint=False)
    _add_overrides(parser)
    group = parser.add_argument_group("workload")
    group.add_argument("--batch", metavar="B", help="b: sequences per step (examples, for multiple choice); default 32")
    group.add_argument("--seq", metavar="S", help="s: tokens per sequence (at most max_position_embeddings); default 128")
    group.add_argument("--mode", choices=MODES, default="train", help="a training step (default) or an inference forward")
    group.add_argument("--precision", choices=PRECISIONS, default="fp32",
                       help="fp32/bf16/fp16: the model in that dtype; amp-bf16/amp-fp16: float32 weights under "
                       "autocast (mixed precision; AdamW then keeps float32 master weights and moments)")
    group.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw",
                       help="adamw (two moments per parameter), sgd (no state) or sgd-momentum (one buffer)")
    group.add_argument("--checkpointing", action="store_true",
                       help="activation checkpointing of every encoder layer (recomputed in the backward)")
    group.add_argument("--attention", choices=ATTENTIONS, default="sdpa",
                       help="attention implementation: sdpa (default, as transformers builds these classes; fused "
                       "kernels on CUDA) or eager (the math path: softmax over b·A·s² scores)")
    group.add_argument("--padding-mask", action="store_true", help="the batch carries a padding attention mask")
    group.add_argument("--device", choices=DEVICES, default="cuda",
                       help="whose conventions where they differ: cuda (1-byte dropout masks, float32 LayerNorm "
                       "statistics, sdpa's fused kernels; measured on an H200) or cpu (what the CPU oracle measures); default cuda")
    group.add_argument("--choices", metavar="C", default="4", help="multiple-choice only: answers per example (default 4)")
    group.add_argument("--gpu-memory", metavar="SIZE", help="one more memory size for the fits table: 24GiB, 80GB, 24 (GiB)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown (default: table)")
    return parser


def build_presets_parser() -> _Parser:
    from .formats import FORMATS

    parser = _Parser(prog="bert-tui presets", description="List the presets (built-in and your own) with their totals.")
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown (default: table)")
    return parser


@dataclass(frozen=True)
class Selection:
    """What the user asked to count: the config, a title for it, notes, and a checkpoint's report."""

    config: BertConfig
    title: str
    notes: tuple[str, ...] = ()
    checkpoint: CheckpointReport | None = None


def resolve(args: argparse.Namespace) -> Selection:
    """Source, then overrides on top, then the checkpoint (if any) against the result."""
    checkpoint_path: Path | None = getattr(args, "checkpoint", None)
    model: str | None = getattr(args, "model", None)
    if model is not None and (args.preset is not None or args.preset_file is not None or args.config is not None):
        raise UsageError(f"MODEL {model!r} and --preset/--preset-file/--config name two sources: give one")
    if model is None and args.revision is not None:
        raise UsageError("--revision goes with a Hub model id (bert-tui count ORG/NAME --revision REV)")
    try:
        stored = None
        if model is not None:
            source, stored = open_model(model, revision=args.revision, offline=args.offline, progress=_progress)
        elif args.preset_file is not None:
            source = load_source(args.preset_file, "file")
        elif args.config is not None:
            source = load_source(args.config, "config")
        elif checkpoint_path is not None:
            source = source_beside(checkpoint_path)
        else:
            source = load_source(DEFAULT_PRESET if args.preset is None else args.preset, "name")
        selection = apply_overrides(args, source)
        if checkpoint_path is not None:
            report_ = check_checkpoint(checkpoint_path, selection.config)
        elif stored is not None:
            report_ = compare_checkpoint(stored, selection.config)
        else:
            return selection
    except LOAD_ERRORS as error:
        raise UsageError(str(error)) from None
    return Selection(selection.config, selection.title, selection.notes, report_)


def _progress(message: str) -> None:
    """What a slow step is doing (a Hub fetch), on stderr, only where a person watches it (a terminal)."""
    if sys.stderr.isatty():
        print(f"bert-tui: {printable(message)}", file=sys.stderr, flush=True)


def load(source: str, revision: str | None = None, offline: bool = False) -> Source:
    """A MODEL argument (path, Hub id or preset name) with its errors as usage errors (one line, exit 2)."""
    try:
        return open_model(source, revision=revision, offline=offline, progress=_progress)[0]
    except LOAD_ERRORS as error:
        raise UsageError(str(error)) from None


def apply_overrides(args: argparse.Namespace, source: Source) -> Selection:
    """The source's config with the command line's overrides on top; a refused value names its flag."""
    fields = (*SIZE_FIELDS, *EXTRA_FIELDS, "head", "num_labels", "pooler", "model_type", "add_cross_attention")
    overrides = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    try:
        config = BertConfig.from_mapping(overrides, base=source.config)
    except ConfigError as error:
        raise UsageError(f"{flag(error.field)} {error.value}: {error.rule}") from None
    edited = " (edited)" if any(f in overrides for f in (*SIZE_FIELDS, *EXTRA_FIELDS)) else ""
    notes = tuple(source.notes)
    if "num_labels" in overrides and not config.uses_num_labels:
        notes += (f"--num-labels {overrides['num_labels']} is unused: {config.hf_class} has no classifier "
                  "(--head chooses one)",)
    return Selection(config, source.name + edited, notes)


def run_count(argv: Sequence[str]) -> int:
    args = build_count_parser().parse_args(argv)
    return print_count(resolve(args), args.format)


def print_count(selection: Selection, fmt: str) -> int:
    """What `bert-tui count` prints for `selection` in format `fmt`."""
    from .formats import checkpoint_data, checkpoint_text, to_csv, to_json, to_markdown, to_table

    tree = build_tree(selection.config)
    for note in selection.notes:
        print(f"bert-tui: note: {printable(note)}", file=sys.stderr)
    ckpt = selection.checkpoint
    if fmt == "json":
        text = to_json(tree)
        if ckpt is not None:
            data = json.loads(text)
            data["checkpoint"] = checkpoint_data(ckpt.checkpoint, ckpt.comparison)
            text = json.dumps(data, indent=2) + "\n"
        sys.stdout.write(text)
    elif fmt == "table":
        from rich.console import Console

        if ckpt is not None:
            sys.stdout.write(checkpoint_text(ckpt.checkpoint, ckpt.comparison) + "\n")
        Console().print(to_table(tree, selection.title))
    else:
        if ckpt is not None:
            print("bert-tui: note: the checkpoint report is printed with --format table or json", file=sys.stderr)
        sys.stdout.write(to_csv(tree) if fmt == "csv" else to_markdown(tree, selection.title))
    return 1 if ckpt is not None and ckpt.comparison is not None and not ckpt.comparison.clean else 0


DEFAULT_WORKLOAD = {"batch": 32, "seq": 128, "choices": 4}  # as the explorer's Compute pane opens


def run_compute(argv: Sequence[str]) -> int:
    args = build_compute_parser().parse_args(argv)
    from .core.compute import Workload, compute
    from .core.config import parse_int
    from .core.units import parse_size
    from .formats_compute import compute_csv, compute_data, compute_markdown, compute_text

    selection = resolve(args)
    gpu_memory = None
    if args.gpu_memory is not None:
        try:
            gpu_memory = parse_size(args.gpu_memory)
        except ValueError as error:
            raise UsageError(f"--gpu-memory {args.gpu_memory!r}: must be {error}") from None
    try:
        sizes = {name: parse_int(name, str(DEFAULT_WORKLOAD[name]) if getattr(args, name) is None else getattr(args, name))
                 for name in ("batch", "seq", "choices")}
        workload = Workload(**sizes, mode=args.mode, precision=args.precision, optimizer=args.optimizer,
                            checkpointing=args.checkpointing, attention=args.attention,
                            padding_mask=args.padding_mask, device=args.device)
        result = compute(selection.config, workload, gpu_memory)
    except ConfigError as error:
        raise UsageError(f"{flag(error.field)} {error.value}: {error.rule}") from None
    notes = list(selection.notes)
    defaulted = [f"--{name} {DEFAULT_WORKLOAD[name]}" for name in ("batch", "seq") if getattr(args, name) is None]
    if defaulted:
        notes.append(f"{' and '.join(defaulted)} (the explorer's defaults): --batch and --seq choose others")
    for note in notes:
        print(f"bert-tui: note: {printable(note)}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(json.dumps(compute_data(result, gpu_memory), indent=2, ensure_ascii=False) + "\n")
    elif args.format == "csv":
        sys.stdout.write(compute_csv(result))
    elif args.format == "markdown":
        sys.stdout.write(compute_markdown(result, selection.title))
    else:
        sys.stdout.write(compute_text(result, selection.title))
    return 0


def run_audit(argv: Sequence[str]) -> int:
    from .core.audit import ClaimError, audit, parse_claim
    from .formats import audit_data, audit_text

    args = build_audit_parser().parse_args(argv)
    try:
        claim = parse_claim(args.claim)
    except ClaimError as error:
        raise UsageError(str(error)) from None
    selection = resolve(args)
    try:
        result = audit(claim, selection.config, args.scope)
    except ClaimError as error:
        raise UsageError(str(error)) from None
    data = audit_data(result, selection.config)
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif args.format in ("csv", "markdown"):
        from .core.audit import describe
        from .formats import rows_text

        found = list(result.matches) or ([result.nearest] if result.nearest else [])
        rows: list[dict[str, object]] = [
            {"claim": result.claim.text, "value": e.value, "rounded": e.rounded, "match": bool(result.matches),
             "conventions": "; ".join(describe(k, selection.config) for k in e.conventions)} for e in found]
        sys.stdout.write(rows_text(rows, args.format, f"claim {result.claim.text}: {selection.title}"))
    else:
        sys.stdout.write(audit_text(result, selection.config, selection.title))
    return 0 if result.matches else 1


def run_diff(argv: Sequence[str]) -> int:
    from .formats import diff_data, diff_text, rows_text

    args = build_diff_parser().parse_args(argv)
    from .core.diff import diff

    a = load(args.a, args.revision, args.offline)
    b = apply_overrides(args, load(args.b, args.revision, args.offline))
    result = diff(build_tree(a.config), build_tree(b.config))
    data = {"a": a.name, "b": b.title, **diff_data(result)}
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif args.format in ("csv", "markdown"):
        rows = [{"name": p["name"], "shape_a": p["shape_a"], "shape_b": p["shape_b"], "delta": p["delta"]}
                for p in data["parameters"]]  # type: ignore[attr-defined]
        sys.stdout.write(rows_text(rows, args.format, f"{a.name} → {b.title}: {result.delta:+,}"))
    else:
        sys.stdout.write(diff_text(result, a.name, b.title))
    return 1 if result.delta or result.params else 0


def run_verify(argv: Sequence[str]) -> int:
    args = build_verify_parser().parse_args(argv)
    selection = resolve(args)
    from .verify import ExtraMissing, verify

    try:
        result = verify(selection.config)
    except ExtraMissing as error:
        print(f"bert-tui verify: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(f"{result.hf_class} of {selection.title}, transformers {result.transformers_version} on the meta device:")
    if result.agrees:
        print(f"  agree: {len(result.ours)} parameters, same names, shapes and order; total {result.our_total:,}")
        return 0
    print(f"  DISAGREE: bert-tui {result.our_total:,}, transformers {result.their_total:,}")
    for line in result.disagreements():
        print(f"  {line}")
    return 1


def run_presets(argv: Sequence[str]) -> int:
    args = build_presets_parser().parse_args(argv)
    catalog = _catalog()
    rows: list[dict[str, Any]] = [
        {"name": p.name, "title": p.title, "total": build_tree(p.config).total, "expected_total": p.expected_total,
         "builtin": p.builtin, "path": str(p.path), "model_type": p.config.model_type,
         "config": {f: getattr(p.config, f) for f in p.config.fields}}
        for p in sorted(catalog.presets.values(), key=lambda p: (p.config.model_type != "bert", p.config.model_type, p.name.lower()))
    ]
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if args.format in ("csv", "markdown"):
        from .formats import rows_text

        flat = [{"name": r["name"], "family": r["model_type"], **r["config"], "total": r["total"],
                 "expected_total": r["expected_total"], "builtin": r["builtin"]} for r in rows]
        sys.stdout.write(rows_text(flat, args.format, "presets"))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="presets", title_justify="left")
    columns = ["name", "family", "V", "H", "L", "A", "total"]
    lines = []
    for row in rows:
        sizes = row["config"]
        cells = (sizes["vocab_size"], sizes["hidden_size"], sizes["num_hidden_layers"], sizes["num_attention_heads"])
        lines.append([row["name"] + ("" if row["builtin"] else " (user)"), row["model_type"], *(str(n) for n in cells),
                      f"{row['total']:,}"])
    widths = [max(len(column), *(len(line[i]) for line in lines)) for i, column in enumerate(columns)]
    if sum(widths) + 3 * len(widths) + 1 > console.width:  # names and numbers stay whole: the family goes first
        del columns[1], widths[1]
        lines = [[line[0], *line[2:]] for line in lines]
    for column in columns:
        table.add_column(column, justify="left" if column in ("name", "family") else "right", no_wrap=True)
    for line in lines:
        table.add_row(plain(line[0]), *line[1:])
    console.print(table)
    return 0


def _no_mistyped_command(model: str | None) -> None:
    """`bert-tui counts` is a command mistyped more likely than a model: say so before looking for a model."""
    import difflib

    if model is None or "/" in model or "." in model:
        return
    close = difflib.get_close_matches(model, COMMANDS, n=1, cutoff=0.75)
    if close and not Path(model).exists():
        raise UsageError(f"unknown command {model!r}; did you mean `bert-tui {close[0]}`? (commands: {', '.join(COMMANDS)})")


def terminal() -> tuple[bool, bool]:
    """Whether standard input and standard output are a terminal."""
    return sys.stdin.isatty(), sys.stdout.isatty()


def run_explorer(argv: Sequence[str]) -> int:
    """Open the explorer on the selected configuration (Textual is imported only here)."""
    args = build_parser().parse_args(argv)
    _no_mistyped_command(args.model)
    selection = resolve(args)
    keyboard, screen = terminal()
    if not screen:  # a pipe, a file, cron, CI: the explorer would paint escape codes into it
        return print_count(selection, "table")
    if not keyboard:
        raise UsageError("the explorer needs a terminal to read keys from (standard input is not one); "
                         "`bert-tui count` prints the same count without one")
    catalog = _catalog()
    over_ssh = bool(os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"))
    # Textual reads ESCDELAY (ms) at import: over a slow link an arrow key's escape sequence can arrive in
    # pieces, and a short delay turns the rest into typed text ("[D" in a field). Mouse reporting is off over
    # SSH for the same reason (its sequences are longer); the explorer needs no mouse. Both can be overridden.
    os.environ.setdefault("ESCDELAY", "250" if over_ssh else "100")
    mouse = os.environ.get("BERT_TUI_MOUSE", "0" if over_ssh else "1") == "1"
    from .app import make_app

    preset = selection.title if selection.title in catalog.presets else None
    app = make_app(catalog, selection.config, title=selection.title, preset=preset)
    if selection.checkpoint is not None:
        app.stored = [(t.name, t.shape) for t in selection.checkpoint.checkpoint.tensors]
    app.run(mouse=mouse)
    # The interpreter's last garbage collection walks every widget and cost ~0.17 s between quitting and the
    # shell prompt; nothing is left to finalise here (files are written and closed by then).
    gc.freeze()
    return app.return_code or 0  # 1 after a crash (Textual has restored the terminal and printed it)


def _catalog() -> Catalog:
    """Every preset; a broken preset file is a warning (the others still load), not a failure."""
    catalog = load_catalog()
    for error in catalog.errors:
        print(f"bert-tui: warning: skipped preset file {printable(str(error))}", file=sys.stderr)
    return catalog


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    runners = {"count": run_count, "compute": run_compute, "presets": run_presets, "audit": run_audit,
               "diff": run_diff, "verify": run_verify}
    command = argv[0] if argv and argv[0] in runners else None
    prog = f"bert-tui {command}" if command else "bert-tui"
    _tolerant_output()
    try:
        code = runners[command](argv[1:]) if command else run_explorer(argv)
        sys.stdout.flush()
        return code
    except UsageError as error:
        print(f"{prog}: error: {printable(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `bert-tui count | head`: the reader left; not an error of ours
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        if error.errno not in OUTPUT_ERRNOS:
            return _internal_error(prog, error)
        _silence_stdout()  # else the interpreter's last flush fails again, with a traceback
        print(f"{prog}: error: cannot write the output: {printable(error.strerror or str(error))}", file=sys.stderr)
        return EXIT_OUTPUT
    except Exception as error:  # the last line of defence: one line, never a traceback on a user's terminal
        return _internal_error(prog, error)


OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EBADF, errno.EDQUOT}  # EPIPE: BrokenPipeError above
EXIT_OUTPUT = 1
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug of bert-tui's, not bad input


def _internal_error(prog: str, error: BaseException) -> int:
    if os.environ.get("BERT_TUI_DEBUG"):
        import traceback

        traceback.print_exception(error)
    print(f"{prog}: internal error: {error.__class__.__name__}: {printable(str(error))[:300]} "
          "(a bug in bert-tui: please report it with the command line; BERT_TUI_DEBUG=1 shows the traceback)",
          file=sys.stderr)
    return EXIT_INTERNAL


def _tolerant_output() -> None:
    """Text that stdout's encoding cannot hold (PYTHONIOENCODING=ascii, a C locale) is written escaped."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass  # a stream that cannot change: its own errors setting stays


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that nothing is flushed at exit to a pipe that is gone or a full disk."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
