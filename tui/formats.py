"""Text renderings of a counted model for the CLI: json, csv, markdown and a rich table.

All four are views of the core's `report`/`ParamTree`; none computes a count. rich is imported only by the
table, so `--format json` starts without it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .core import ADAM_CONVENTION, Param, ParamTree, closed_form_symbols, memory_bytes, per_layer, report, training_bytes
from .core.units import short_bytes, short_count

if TYPE_CHECKING:
    from rich.console import RenderableType

FORMATS = ("table", "json", "csv", "markdown")


def to_json(tree: ParamTree) -> str:
    """The report, indented, with one line per parameter so that 200-line outputs stay greppable."""
    data = report(tree)
    lines = []
    for key, value in data.items():
        if key in ("parameters", "tied"):
            items = ",\n".join(f"    {json.dumps(item)}" for item in value)
            text = f"[\n{items}\n  ]" if value else "[]"
        else:
            text = json.dumps(value, indent=2).replace("\n", "\n  ")
        lines.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def to_csv(tree: ParamTree) -> str:
    """One row per parameter in model order, tied ones included (count 0, `tied_to` set)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "shape", "count", "kind", "group", "tied_to", "formula"])
    for p in tree.root.params():
        writer.writerow([p.name, "x".join(map(str, p.shape)), p.count, p.kind, p.group, p.tied_to or "", p.formula])
    return out.getvalue()


def to_markdown(tree: ParamTree, title: str) -> str:
    total = tree.total
    lines = [
        f"# {tree.config.hf_class}: {title}",
        "",
        f"**Total: {total:,}** ({short_count(total)}) = `{closed_form_symbols(tree.config)}`",
        "",
        "| group | parameters | share |",
        "|---|---:|---:|",
        *(f"| {group} | {n:,} | {_share(n, total)} |" for group, n in tree.groups().items()),
        "",
        "| parameter | shape | count | formula |",
        "|---|---|---:|---|",
    ]
    for p in tree.root.params():
        count = f"0 (tied to `{p.tied_to}`)" if p.tied_to else f"{p.count:,}"
        lines.append(f"| `{p.name}` | {list(p.shape)} | {count} | {p.formula} |")
    lines += ["", "| dtype | weights |", "|---|---:|"]
    lines += [f"| {dtype} | {short_bytes(n)} |" for dtype, n in memory_bytes(total).items()]
    lines += [f"| training (Adam) | {short_bytes(training_bytes(total))} |", "", f"Training: {ADAM_CONVENTION}.", ""]
    return "\n".join(lines)


def to_table(tree: ParamTree, title: str) -> RenderableType:
    """Grouped by module; one encoder layer stands for all (they are identical), readable at 80 columns."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    total = tree.total
    table = Table(title=f"{tree.config.hf_class} · {title}", title_justify="left", expand=False)
    table.add_column("parameter", overflow="fold", ratio=1)
    table.add_column("shape", no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    for section, rows in _sections(tree):
        table.add_row(Text(section, style="bold cyan"), "", "", end_section=False)
        for label, p in rows:
            count = Text("tied", style="dim") if p.tied_to else Text(f"{p.count:,}")
            table.add_row(f"  {label}", str(list(p.shape)), count)
    table.add_section()
    table.add_row(Text("total", style="bold"), Text(short_count(total)), Text(f"{total:,}", style="bold"))
    table.caption = f"= {closed_form_symbols(tree.config)}"
    table.caption_justify = "left"
    return Group(table, _groups_table(tree), _memory_table(total))


def _sections(tree: ParamTree) -> Iterator[tuple[str, list[tuple[str, Param]]]]:
    """(module heading, [(name below it, param)]): embeddings, one encoder layer for all, pooler, head."""
    layers = tree.config.num_hidden_layers
    sections: dict[str, list[tuple[str, Param]]] = {}
    for p in tree.root.params():
        name = p.name.removeprefix("bert.")
        if name.startswith("encoder.layer."):
            layer, rest = name.removeprefix("encoder.layer.").split(".", 1)
            if layer != "0":
                continue
            heading = f"encoder.layer.0 … {layers - 1}  (× {layers}, {per_layer(tree.config):,} each)"
        else:
            heading, rest = name.split(".", 1)
        sections.setdefault(heading, []).append((rest, p))
    yield from sections.items()


def _groups_table(tree: ParamTree) -> RenderableType:
    from rich.table import Table

    total = tree.total
    table = Table(title="groups", title_justify="left")
    table.add_column("group")
    table.add_column("parameters", justify="right")
    table.add_column("share", justify="right")
    for group, n in tree.groups().items():
        table.add_row(group, f"{n:,}", _share(n, total))
    return table


def _memory_table(total: int) -> RenderableType:
    from rich.table import Table

    table = Table(title="memory (training: mixed-precision Adam, 16 B/param)", title_justify="left")
    for dtype in memory_bytes(total):
        table.add_column(dtype, justify="right")
    table.add_column("training", justify="right")
    table.add_row(*(short_bytes(n) for n in memory_bytes(total).values()), short_bytes(training_bytes(total)))
    return table


def _share(n: int, total: int) -> str:
    return f"{100 * n / total:.2f} %" if total else "-"
