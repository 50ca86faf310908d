"""Text renderings of a counted model for the CLI: json, csv, markdown and a rich table.

All four are views of the core's `report`/`ParamTree`; none computes a count. rich is imported only by the
table, so `--format json` starts without it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import (
    ADAM_CONVENTION,
    FAMILIES,
    BertConfig,
    Param,
    ParamTree,
    closed_form_symbols,
    config_dict,
    memory_bytes,
    per_layer,
    report,
    training_bytes,
)
from ..core.count.adapter_file import AdapterComparison
from ..core.count.totals import layer_sharing
from ..core.count.trained import Adapted, FineTuning, Trained, of_adapted
from ..core.count.tree import LayerStack, Module, strip_body
from ..core.units import short_bytes, short_count
from ..plain import printable

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ..core.count.audit import Audit, Explanation
    from ..core.count.compare import Comparison
    from ..core.count.diff import Diff
    from ..io.safetensors import Checkpoint

FORMATS = ("table", "json", "csv", "markdown")


def to_json(tree: ParamTree, trained: Trained | None = None) -> str:
    """The report, indented, with one line per parameter so that 200-line outputs stay greppable. `trainable`
    beside `total`: all of it in full fine-tuning; under a method (`trained`) what trains, its training bytes,
    and with a LoRA or IA3 adapter peft's two figures (the total then counts the adapters and the saved copies,
    as `get_nb_trainable_parameters` does) and the adapter's tensors; with parts frozen, which."""
    data: dict[str, Any] = {}
    adapted = None if trained is None else trained.adapted
    for key, value in report(tree).items():
        data[key] = value
        if key == "total":
            data["trainable"] = value if trained is None else trained.trainable
            if adapted is not None:
                data["total"] = adapted.total
                data["base_total"] = value
            if trained is not None:
                data["method"] = trained.label
            if trained is not None and trained.frozen_names:
                data["frozen"] = {"count": trained.frozen, "parameters": list(trained.frozen_names)}
        if key == "training_bytes" and trained is not None:
            data[key] = {"adam_mixed_precision": trained.training_bytes, "convention": trained.convention}
    how = None if trained is None else trained.how
    if adapted is not None and how is not None:
        data[how.kind] = lora_data(adapted, how)
    lines = []
    for key, value in data.items():
        if key in ("lora", "ia3"):
            text = json.dumps({k: v for k, v in value.items() if k != "peft_parameters"}, indent=2)[:-2]
            items = ",\n".join(f"      {json.dumps(item)}" for item in value["peft_parameters"])
            text = text.replace("\n", "\n  ") + f',\n    "peft_parameters": [\n{items}\n    ]\n  }}'
        elif key in ("parameters", "tied"):
            items = ",\n".join(f"    {json.dumps(item)}" for item in value)
            text = f"[\n{items}\n  ]" if value else "[]"
        else:
            text = json.dumps(value, indent=2).replace("\n", "\n  ")
        lines.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def to_csv(tree: ParamTree, trained: Trained | None = None) -> str:
    """One row per parameter in model order, tied ones included (count 0, `tied_to` set); with parts frozen, a
    `trainable` column (1 or 0)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    cold = None if trained is None or trained.adapted is not None else set(trained.frozen_names)
    writer.writerow(["name", "shape", "count", "kind", "group", "tied_to", "formula", *(["trainable"] if cold is not None
                                                                                        else [])])
    for p in tree.root.params():
        trains = [] if cold is None else [0 if (p.tied_to or p.name) in cold else 1]
        writer.writerow([p.name, "x".join(map(str, p.shape)), p.count, p.kind, p.group, p.tied_to or "", p.formula,
                         *trains])
    return out.getvalue()


def to_markdown(tree: ParamTree, title: str, trained: Trained | None = None) -> str:
    total = tree.total
    lines = [
        f"# {tree.config.hf_class}: {printable(title)}",
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
    if trained is None:
        lines += [f"| training (Adam) | {short_bytes(training_bytes(total))} |", "", f"Training: {ADAM_CONVENTION}.", ""]
    else:
        lines += [f"| training (Adam), {trained.label} | {short_bytes(trained.training_bytes)} |", "",
                  (f"Training: {trained.label}: trains {trained.trainable:,} of {trained.total:,}; "
                   f"{trained.convention}; activations not included."), ""]
        if trained.frozen_names:
            lines += ["Frozen: " + ", ".join(f"`{name}`" for name in trained.frozen_names), ""]
    return "\n".join(lines)


def to_table(tree: ParamTree, title: str, trained: Trained | None = None) -> RenderableType:
    """Grouped by module; one encoder layer stands for all (they are identical), readable at 80 columns."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    total = tree.total
    # The title is a line of its own: as the table's title it wrapped at the table's width, cutting a long path.
    heading = Text(f"{tree.config.hf_class} · {printable(title)}", style="italic", overflow="fold")
    table = Table(expand=False)
    table.add_column("parameter", overflow="fold", ratio=1)
    table.add_column("shape", no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    for section, rows in _sections(tree):
        table.add_row(Text(section, style="bold cyan"), "", "", end_section=False)
        for label, p in rows:
            count = Text("tied", style="dim") if p.tied_to else Text(f"{p.count:,}")
            table.add_row(Text(f"  {label}"), str(list(p.shape)), count)
    table.add_section()
    table.add_row(Text("total", style="bold"), Text(short_count(total)), Text(f"{total:,}", style="bold"))
    table.caption = f"= {closed_form_symbols(tree.config)}"
    table.caption_justify = "left"
    sharing = layer_sharing(tree.config, total)
    shared = [Text(f"layers: {sharing.text}")] if sharing is not None else []
    return Group(heading, table, *shared, _groups_table(tree), _memory_table(total, trained))


def _sections(tree: ParamTree) -> Iterator[tuple[str, list[tuple[str, Param]]]]:
    """(module heading, [(name below it, param)]): embeddings, one encoder layer for all, pooler, head."""
    sections: dict[str, list[tuple[str, Param]]] = {}
    body = tree.config.body_prefix
    for p in tree.root.params():
        name = strip_body(p.name)
        stacked = _STACKED.match(name)
        if stacked is not None:
            stack, index, rest = stacked.groups()
            found = tree.find(f"{body}{stack}")
            layers = found.children if isinstance(found, Module) and isinstance(found.children, LayerStack) else None
            n = len(layers) if layers else tree.config.num_hidden_layers
            first = 1 if layers and layers.distinct_first else 0  # ModernBERT's first layer differs: shown apart
            if index == "0" and first:
                heading = f"{stack}.0  (the first layer, {layers[0].count:,})" if layers else f"{stack}.0"
            elif index == str(first):
                each = layers[first].count if layers else per_layer(tree.config)
                heading = f"{stack}.{first} … {n - 1}  (× {n - first}, {each:,} each)"
            else:
                continue
        else:
            heading, rest = name.split(".", 1)
        sections.setdefault(heading, []).append((rest, p))
    yield from sections.items()


_STACKED = re.compile(r"^(.*?\b(?:layer|layers|albert_layer_groups))\.(\d+)\.(.*)$")


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


def _memory_table(total: int, trained: Trained | None = None) -> RenderableType:
    """Weights by dtype, and training by the count's convention: every parameter, or as `trained` says (the
    model as trained: an adapter's tensors included)."""
    from rich.table import Table

    if trained is not None:
        total = trained.total
        title = f"memory ({trained.label}: {trained.convention})"
        training = trained.training_bytes
    else:
        title, training = "memory (training: mixed-precision Adam, 16 B/param)", training_bytes(total)
    table = Table(title=title, title_justify="left")
    for dtype in memory_bytes(total):
        table.add_column(dtype, justify="right")
    table.add_column("training", justify="right")
    table.add_row(*(short_bytes(n) for n in memory_bytes(total).values()), short_bytes(training))
    return table


def _share(n: int, total: int) -> str:
    return f"{100 * n / total:.2f} %" if total else "-"


# Audit and diff: plain text (shared by the CLI and the explorer's screens) and JSON-ready data.


def audit_text(result: Audit, config: BertConfig, title: str, more: str = "--format json lists them",
               shown: int = 5) -> str:
    """Each explanation in plain words: the conventions, the figure they give, the parts they change."""
    what = "one encoder layer" if result.scope == "layer" else config.hf_class
    claim = result.claim
    precision = "" if claim.figures is None else f" (as written: {claim.figures} significant figures)"
    if result.reread:
        precision = (f" (written in full, but no convention gives it exactly: read at its {claim.figures} "
                     "significant figures, as a rounded figure)")
    lines = [f"Claim {printable(claim.text)}{precision} for {what} of {printable(title)}.",
             f"Exact count: {result.exact:,} (the claim is {claim.value - result.exact:+,} from it)."]
    if not result.matches:
        lines.append("No combination of the known conventions reproduces it.")
        if result.nearest is not None:
            lines.append(f"Nearest: {result.nearest.value:,} ({claim.value - result.nearest.value:+,} left unexplained), with:")
            lines += _explanation_lines(result.nearest, config)
        return "\n".join(lines) + "\n"
    count = len(result.matches)
    lines.append(f"{count} explanation{'s reproduce' if count > 1 else ' reproduces'} it, fewest assumptions first:")
    for number, explanation in enumerate(result.matches[:shown], 1):
        rounding = f", rounded to {explanation.rounded:,}" if explanation.rounded is not None else ""
        lines.append(f"{number}. {explanation.value:,}{rounding}")
        lines += _explanation_lines(explanation, config)
    if len(result.matches) > shown:
        lines.append(f"… and {len(result.matches) - shown} more with more assumptions ({more}).")
    return "\n".join(lines) + "\n"


def _explanation_lines(explanation: Explanation, config: BertConfig) -> list[str]:
    from ..core.count.audit import (  # (here: `count` never explains a published figure)
        describe,
        part_name,
    )

    if not explanation.conventions:
        return ["   - the exact count itself" + (", rounded" if explanation.rounded is not None else "")]
    lines = [f"   - {describe(key, config)}" for key in explanation.conventions]
    lines.append("     changes:")
    lines += [f"       {part_name(part, config)}  {delta:+,}" for part, delta in explanation.changes.items()]
    return lines


def audit_data(result: Audit, config: BertConfig) -> dict[str, object]:
    from ..core.count.audit import describe

    def explanation(e: Explanation) -> dict[str, object]:
        return {"conventions": [{"key": k, "says": describe(k, config)} for k in e.conventions],
                "value": e.value, "rounded": e.rounded, "changes": e.changes}

    return {
        "claim": result.claim.text, "claimed": result.claim.value, "significant_figures": result.claim.figures,
        "read_at_significant_figures": result.reread,
        "scope": result.scope, "model": config.hf_class, "config": config_dict(config), "exact": result.exact,
        "matches": [explanation(e) for e in result.matches],
        "nearest": explanation(result.nearest) if result.nearest else None,
    }


def diff_text(result: Diff, title_a: str, title_b: str) -> str:
    lines = [f"A: {printable(title_a)}  {result.total_a:,}", f"B: {printable(title_b)}  {result.total_b:,}",
             f"B − A: {result.delta:+,} ({_ratio(result.total_b, result.total_a)})", "", "group           A               B               B − A"]
    for group, (a, b) in result.groups.items():
        lines.append(f"{group:<12} {a:>15,} {b:>15,} {b - a:>+18,}")
    rows = result.rows()
    renamed = [kind for kind in dict.fromkeys(result.families) if FAMILIES[kind].roles]
    if renamed and result.families[0] != result.families[1]:
        lines += ["", f"matched by role: {' and '.join(renamed)} names read as BERT's"]
    lines += ["", f"parameters that differ ({len(result.params)}):" if rows else "no parameter differs in shape"]
    for row in rows:
        times = f" × {row.times}" if row.times > 1 else ""
        lines.append(f"  {row.name}  {_shape(row.shape_a)} → {_shape(row.shape_b)}{times}  {row.delta:+,}")
    return "\n".join(lines) + "\n"


def diff_data(result: Diff) -> dict[str, object]:
    return {
        "total_a": result.total_a, "total_b": result.total_b, "delta": result.delta,
        "groups": {g: {"a": a, "b": b, "delta": b - a} for g, (a, b) in result.groups.items()},
        "parameters": [{"name": p.name, "shape_a": list(p.shape_a) if p.shape_a else None,
                        "shape_b": list(p.shape_b) if p.shape_b else None, "delta": p.delta} for p in result.params],
    }


def _shape(shape: tuple[int, ...] | None) -> str:
    return "absent" if shape is None else str(list(shape))


def _ratio(b: int, a: int) -> str:
    return f"× {b / a:.3f}" if a else "A is empty"


def checkpoint_text(checkpoint: Checkpoint, comparison: Comparison) -> str:
    """What the file holds, and how it compares with the config. Names from the file are made printable:
    a tensor name holding escape sequences or newlines must not reach the terminal as it is."""
    files = f"{len(checkpoint.files)} file{'s' if len(checkpoint.files) > 1 else ''}"
    by_dtype = checkpoint.dtypes()
    stored = sum(by_dtype.values())
    dtypes = next(iter(by_dtype)) if len(by_dtype) == 1 else ", ".join(f"{d} {n:,}" for d, n in by_dtype.items())
    held = f"{len(checkpoint.tensors)} tensors holding {comparison.held:,} parameters"
    if stored == comparison.held:
        summary = f"{held}, stored as {dtypes}"
    else:  # a tied tensor stored anyway, a tensor in two shards: stored twice, a parameter once
        summary = f"{held} ({stored:,} stored as {dtypes}: a tensor stored twice counts once)"
    lines = [f"checkpoint {printable(checkpoint.path)}: {files}, {short_bytes(checkpoint.bytes_on_disk)} on disk",
             f"  {summary}"]
    if checkpoint.duplicates:
        lines.append(f"  stored in more than one shard, counted once: {_names(checkpoint.duplicates)}")
    if comparison.tied_stored:
        lines.append(f"  tied tensors stored anyway, counted once: {_names(comparison.tied_stored)}")
    if comparison.legacy_names:
        lines.append(f"  {comparison.legacy_names} legacy LayerNorm names (gamma/beta) read as weight/bias")
    if comparison.clean and comparison.held == comparison.expected:
        lines.append(f"  matches the config: every tensor present with its shape ({comparison.expected:,})")
        return "\n".join(lines) + "\n"
    lines.append(f"  differs from the config, which predicts {comparison.expected:,} ({comparison.held - comparison.expected:+,}):")
    lines += [f"    missing     {printable(name)}" for name in comparison.missing]
    lines += [f"    unexpected  {printable(name)} {list(shape)}" for name, shape in comparison.unexpected]
    lines += [f"    shape       {printable(name)}: config {list(a)}, file {list(b)}" for name, a, b in comparison.mismatched]
    return "\n".join(lines) + "\n"


def _names(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(printable(name) for name in names)


def checkpoint_data(checkpoint: Checkpoint, comparison: Comparison) -> dict[str, object]:
    return {
        "path": checkpoint.path, "files": list(checkpoint.files), "duplicates": list(checkpoint.duplicates),
        "bytes_on_disk": checkpoint.bytes_on_disk, "tensors": len(checkpoint.tensors), "held": comparison.held,
        "dtypes": checkpoint.dtypes(), "expected": comparison.expected, "clean": comparison.clean,
        "missing": list(comparison.missing), "unexpected": [[n, list(s)] for n, s in comparison.unexpected],
        "mismatched": [[n, list(a), list(b)] for n, a, b in comparison.mismatched],
        "tied_stored": list(comparison.tied_stored), "legacy_names": comparison.legacy_names,
    }


def rows_text(rows: list[dict[str, object]], fmt: str, title: str) -> str:
    """Rows of plain values as CSV (a header, one line a row) or a Markdown table under `title`."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()

    def cell(value: object) -> str:
        return printable(str(value)).replace("|", "\\|")

    lines = [f"## {printable(title)}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def lora_data(adapted: Adapted, how: FineTuning) -> dict[str, Any]:
    """The adapter as peft builds it: its settings, the modules adapted and saved, and every tensor of the peft
    model (name, shape, trainable)."""
    settings = how.settings()
    ranks = {"ranks": {name: rank for name, rank in adapted.ranks.items() if rank != settings["r"]}} if (
        "r" in settings) else {}
    return {**settings, "task_type": adapted.task_type,
            "target_modules": sorted({name.rsplit(".", 1)[-1] for name in adapted.targets}),
            "adapted": list(adapted.targets), "modules_to_save": list(adapted.saved), **ranks,
            "trainable": adapted.trainable, "frozen": adapted.frozen,
            "training_bytes": of_adapted(adapted, how).training_bytes,
            "peft_parameters": [[p.name, list(p.shape), p.trainable] for p in adapted.params]}


def lora_text(adapted: Adapted, lora: FineTuning) -> str:
    """What a person reads: peft's two figures, and what was adapted (folded by layer) and saved."""
    share = 100 * adapted.trainable / adapted.total if adapted.total else 0.0
    settings = lora.settings()
    said = (f"LoRA as peft builds it (r = {settings['r']}, bias = {settings['bias']}"
            f"{', DoRA' if settings['use_dora'] else ''}, task type {adapted.task_type or 'none'}):") if (
        "r" in settings) else f"{lora.name} as peft builds it (task type {adapted.task_type or 'none'}):"
    lines = [said,
             f"  trainable params: {adapted.trainable:,} || all params: {adapted.total:,} || trainable%: "
             f"{share:.4f}"]
    folded: dict[str, int] = {}
    for name in adapted.targets:
        key = _fold(name)
        folded[key] = folded.get(key, 0) + 1
    trained: dict[str, int] = {}
    for p in adapted.params:
        if p.role in ("lora_A", "lora_B", "magnitude", "ia3"):
            key = _fold(re.split(r"\.(?:lora_|ia3_)", p.name.removeprefix("base_model.model."), maxsplit=1)[0])
            trained[key] = trained.get(key, 0) + p.numel
    lines.append(f"  adapted ({len(adapted.targets)} modules):")
    lines += [f"    {key}{f' × {n}' if n > 1 else ''}: +{trained.get(key, 0):,}" for key, n in folded.items()]
    if adapted.saved:
        copies = sum(p.numel for p in adapted.params if p.role == "copy")
        lines.append(f"  saved whole, a trained copy beside the frozen original (+{copies:,}): "
                     f"{', '.join(adapted.saved)}")
    if settings.get("bias", "none") != "none":
        biases = sum(p.numel for p in adapted.params if p.trainable and p.role == "base")
        lines.append(f"  biases trained ({settings['bias']}): {biases:,}")
    method = of_adapted(adapted, lora)
    lines.append(f"  training memory ({method.convention}, no activations): {short_bytes(method.training_bytes)}")
    return "\n".join(lines) + "\n"


def lora_rows(adapted: Adapted) -> list[dict[str, object]]:
    return [{"name": p.name, "shape": "x".join(map(str, p.shape)), "count": p.numel, "trainable": p.trainable,
             "role": p.role} for p in adapted.params]


def _fold(name: str) -> str:
    """`bert.encoder.layer.3.attention.self.query` → `bert.encoder.layer.*.attention.self.query`."""
    return re.sub(r"\.\d+\.", ".*.", name)


def adapter_text(path: Path, comparison: AdapterComparison) -> str:
    """An adapter file against its config: what it holds, and what differs."""
    lines = [f"adapter file {printable(str(path))}: {comparison.held:,} parameters"]
    if comparison.clean:
        lines.append(f"  matches the adapter's config: every trained tensor present with its shape "
                     f"({comparison.expected:,})")
        return "\n".join(lines) + "\n"
    lines.append(f"  differs from the adapter's config, which predicts {comparison.expected:,}:")
    lines += [f"    missing     {printable(name)}" for name in comparison.missing]
    lines += [f"    unexpected  {printable(name)} {list(shape)}" for name, shape in comparison.unexpected]
    lines += [f"    shape       {printable(name)}: config {list(a)}, file {list(b)}"
              for name, a, b in comparison.mismatched]
    return "\n".join(lines) + "\n"


def adapter_file_data(path: Path, comparison: AdapterComparison) -> dict[str, Any]:
    return {"path": str(path), "held": comparison.held, "expected": comparison.expected, "clean": comparison.clean,
            "missing": list(comparison.missing),
            "unexpected": [[name, list(shape)] for name, shape in comparison.unexpected],
            "mismatched": [[name, list(a), list(b)] for name, a, b in comparison.mismatched]}
