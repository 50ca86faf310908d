"""`bert-tui presets`: the presets, built-in and the user's, with their totals."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from ..core import build_tree
from ..core.config import DEFAULT
from ..plain import plain
from .common import Parser, catalog_with_warnings


def build_parser() -> Parser:
    from ..formats.params import FORMATS

    parser = Parser(prog="bert-tui presets", description="List the presets (built-in and your own) with their totals.")
    parser.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown (default: table)")
    return parser


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    catalog = catalog_with_warnings()
    rows: list[dict[str, Any]] = [
        {"name": p.name, "title": p.title, "total": build_tree(p.config).total, "expected_total": p.expected_total,
         "builtin": p.builtin, "path": str(p.path), "model_type": p.config.model_type,
         "config": {f: getattr(p.config, f) for f in p.config.fields}}
        for p in sorted(catalog.presets.values(), key=lambda p: (p.config.model_type != DEFAULT, p.config.model_type, p.name.lower()))
    ]
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if args.format in ("csv", "markdown"):
        from ..formats.params import rows_text

        flat = [{"name": r["name"], "family": r["model_type"], **r["config"], "total": r["total"],
                 "expected_total": r["expected_total"], "builtin": r["builtin"]} for r in rows]
        sys.stdout.write(rows_text(flat, args.format, "presets"))
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

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
    # Names and numbers stay whole: where the family's column does not fit, each family heads its own section.
    sections = sum(widths) + 3 * len(widths) + 1 > console.width
    if sections:
        del columns[1]
    for column in columns:
        table.add_column(column, justify="left" if column in ("name", "family") else "right", no_wrap=True)
    family = None
    for line in lines:
        if sections and line[1] != family:
            if family is not None:
                table.add_section()
            family = line[1]
            table.add_row(Text(f"{family}:", style="bold"), *[""] * (len(columns) - 1))
        table.add_row(plain(line[0]), *(line[2:] if sections else line[1:]))
    console.print(table)
    return 0

