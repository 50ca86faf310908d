"""`bert-tui diff`: two configurations compared, in total, per group and per parameter."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from ..core import build_tree
from ..plain import prose
from .common import Parser, add_overrides, apply_overrides, load


def build_parser() -> Parser:
    from ..formats.params import FORMATS

    parser = Parser(
        prog="bert-tui diff",
        description="Compare two configurations: total, per group and per parameter. A and B are preset names, "
        "preset files, HF config.json files, model folders or Hub model ids (ORG/NAME); overrides apply to B.",
        epilog="examples:\n  bert-tui diff bert-base-uncased bert-large-uncased\n"
        "  bert-tui diff google-bert/bert-base-uncased FacebookAI/roberta-base\n\n"
        "exit status: 0 when A and B have the same parameters, 1 when they differ (as diff(1)), 2 on bad input",
    )
    parser.add_argument("a", metavar="A", help="a preset name, a preset YAML file, a config.json, a model folder or a Hub id")
    parser.add_argument("b", metavar="B", help="the same kinds as A (overrides apply to it)")
    parser.add_argument("--revision", metavar="REV", help="with Hub ids: the revision of both (default: main)")
    parser.add_argument("--offline", action="store_true", help="with Hub ids: the Hugging Face cache only")
    add_overrides(parser)
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown")
    return parser


def run(argv: Sequence[str]) -> int:
    from ..formats.params import diff_data, diff_text, rows_text

    args = build_parser().parse_args(argv)
    from ..core.count.diff import diff

    a = load(args.a, args.revision, args.offline)
    b = apply_overrides(args, load(args.b, args.revision, args.offline))
    result = diff(build_tree(a.config), build_tree(b.config))
    data = {"a": a.name, "b": b.title, "model_a": a.config.hf_class, "model_b": b.config.hf_class,
            **diff_data(result)}
    # (each side with its class: `diff X X --head mlm` compares BertModel with BertForMaskedLM of one config)
    title_a, title_b = f"{a.config.hf_class} · {a.name}", f"{b.config.hf_class} · {b.title}"
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif args.format in ("csv", "markdown"):
        rows = [{"name": p["name"], "shape_a": p["shape_a"], "shape_b": p["shape_b"], "delta": p["delta"]}
                for p in data["parameters"]]  # type: ignore[attr-defined]
        sys.stdout.write(rows_text(rows, args.format, f"{title_a} → {title_b}: {result.delta:+,}"))
    else:
        sys.stdout.write(prose(diff_text(result, title_a, title_b)))
    return 1 if result.delta or result.params else 0

