"""The read-only panes: the totals (with groups and memory) and the detail of the highlighted node.

Both are `Static`s updated in place with `show(...)`; every number they print comes from the core.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ...core import (
    ADAM_CONVENTION,
    LAYER_SYMBOLS,
    Module,
    Node,
    Param,
    ParamTree,
    closed_form,
    memory_bytes,
    per_layer,
    training_bytes,
)
from ...core.config import ConfigError
from ...core.count.compare import Comparison
from ...core.count.totals import layer_sharing
from ...core.count.trained import Adapted, Trained
from ...core.units import short_bytes, short_count
from ...plain import plain

BAR_WIDTH = 8


def share_bar(part: int, total: int, width: int = BAR_WIDTH) -> str:
    """A bar of eighth-blocks: exact to 1/(8·width) of the total."""
    if not total:
        return ""
    eighths = round(8 * width * part / total)
    full, rest = divmod(eighths, 8)
    return "█" * full + ("" if not rest else " ▏▎▍▌▋▊▉"[rest])


class TotalsPane(Static):
    """Exact total, short form, one row per group with its share, memory per dtype and for training."""

    def show(self, model: ParamTree, stale: bool, baseline: ParamTree | None = None,
             claims: list[tuple[str, str, str]] | None = None, comparison: Comparison | None = None,
             adapted: Adapted | ConfigError | None = None, trained: Trained | None = None) -> None:
        """`trained`: what trains under the fine-tuning method the explorer shows (None: everything)."""
        self.set_class(stale, "-stale")
        parts = [self._render_totals(model, stale, baseline, trained)]
        if adapted is not None:
            parts.append(self._render_adapter(adapted))
        if comparison is not None:
            parts.append(self._render_checkpoint(comparison))
        if claims:
            parts.append(Text("\npublished (a audits)", style="bold"))
            parts += [plain(f"{value} ({scope}): {source}", style="dim") for value, scope, source in claims]
        lines = self.content_size.height
        self.update(Group(*parts), layout=False)  # a layout of the whole screen costs more than the rest of an edit
        width = self.content_size.width
        if width and self.get_content_height(self.content_size, self.screen.size, width) != lines:
            self.refresh(layout=True)  # more or fewer lines: the scroll around it follows

    @staticmethod
    def _render_adapter(adapted: Adapted | ConfigError) -> RenderableType:
        """The open PEFT adapter on this model, as peft counts it: what trains and what stays frozen."""
        if isinstance(adapted, ConfigError):
            return Group(Text("\nadapter", style="bold"), plain(f"⚠ {adapted.field} {adapted.value}: {adapted.rule}"))
        share = 100 * adapted.trainable / adapted.total if adapted.total else 0.0
        return Group(Text("\nadapter (peft)", style="bold"),
                     Text(f"trains {adapted.trainable:,}  {share:.2f} %"),
                     Text(f"frozen {adapted.frozen:,} of {adapted.total:,}", style="dim"))

    @staticmethod
    def _render_checkpoint(result: Comparison) -> RenderableType:
        lines = [Text("\ncheckpoint", style="bold"), Text(f"holds {result.held:,}")]
        if result.clean and result.held == result.expected:
            lines.append(Text("✓ matches the config", style="bold"))
        else:
            lines.append(Text(f"✗ {len(result.missing)} missing, {len(result.unexpected)} unexpected, "
                              f"{len(result.mismatched)} other shapes", style="bold"))
        if result.tied_stored:
            lines.append(Text(f"{len(result.tied_stored)} tied stored twice (counted once)", style="dim"))
        return Group(*lines)

    def _render_totals(self, model: ParamTree, stale: bool, baseline: ParamTree | None,
                       trained: Trained | None = None) -> RenderableType:
        total = model.total
        heading = Text.assemble((f"{total:,}", "bold"), f"  {short_count(total)}")
        if baseline is not None:
            heading.append(f"\nΔ {total - baseline.total:+,} vs pinned {baseline.total:,}", style="bold")
        status = Text("⚠ stale: last valid count, fix the form", style="bold reverse") if stale else Text(model.config.hf_class, style="dim")
        groups = Table.grid(padding=(0, 1))
        groups.add_column()
        groups.add_column(justify="right")
        groups.add_column()
        pinned = baseline.groups() if baseline is not None else None
        for group, n in model.groups().items():
            delta = n - pinned.get(group, 0) if pinned is not None else 0
            third = ("+" if delta >= 0 else "-") + short_count(abs(delta)) if pinned is not None else share_bar(n, total)
            groups.add_row(group, f"{n:,}", third)
        memory = Table.grid(padding=(0, 1))
        memory.add_column()
        memory.add_column(justify="right")
        for dtype, n in memory_bytes(total).items():
            memory.add_row(dtype, short_bytes(n))
        if trained is None:
            memory.add_row("Adam train", short_bytes(training_bytes(total)))
            note = Text("train = " + ADAM_CONVENTION.split(":")[0] + "; no activations (F5 adds them)", style="dim")
        else:  # (the method's: the Compute pane's choice, or an opened adapter)
            memory.add_row("Adam train", short_bytes(trained.training_bytes))
            note = Text(f"train = {trained.label}: trains {trained.trainable:,} of {trained.total:,}; "
                        f"{trained.convention}; no activations (F5 adds them)", style="dim")
        sharing = layer_sharing(model.config, total)
        shared = [Text(""), Text("layers", style="bold"), Text(sharing.text)] if sharing is not None else []
        return Group(heading, status, Text(""), groups, *shared, Text(""), Text("weights", style="bold"), memory, note)


class DetailPane(Static):
    """Everything about the highlighted node: HF name, shape, count, formulas, head split, ties, share."""

    def show(self, node: Node | None, model: ParamTree, note: str | None = None,
             gone: list[tuple[str, int]] | None = None) -> None:
        """`note`: what the tree marks beside the tensor (an open adapter's, a checkpoint's), said under its name:
        at 80 columns the tree's line has no room for it. `gone`: modules the pinned baseline has here and this
        model lacks (`diff.gone`): the node's change is its children's and theirs."""
        if node is None:
            self.update(Text("Highlight a node in the tree.", style="dim"), layout=False)
            return
        described = self._describe(node, model)
        extra = [plain(note.strip(), style="italic")] if note else []
        if gone:
            names = gone[0][0] if len(gone) == 1 else f"{gone[0][0]} … {gone[-1][0].rsplit('.', 1)[-1]} ({len(gone)})"
            extra.append(Text(f"not in this model, pinned has: {names}, {-sum(n for _, n in gone):+,}",
                              style="italic"))
        if extra:
            lines = list(described.renderables) if isinstance(described, Group) else [described]
            described = Group(lines[0], *extra, *lines[1:])
        self.update(described, layout=False)  # the strip's height is fixed (app.tcss)

    def _describe(self, node: Node, model: ParamTree) -> RenderableType:
        share = f"{100 * node.count / model.total:.2f}% of {model.total:,}" if model.total else ""
        if isinstance(node, Module):
            return self._module(node, model, share)
        return self._param(node, share)

    @staticmethod
    def _param(param: Param, share: str) -> RenderableType:
        lines = [
            Text(param.name, style="bold"),
            Text.assemble(("shape ", "dim"), str(list(param.shape)), ("  kind ", "dim"), param.kind),
            Text.assemble(("count ", "dim"), (f"{param.count:,}", "bold"), ("  ", ""), (share, "dim")),
            Text.assemble(("formula ", "dim"), param.formula),
        ]
        if param.head_split:
            lines.append(Text.assemble(("per head ", "dim"), param.head_split))
        if param.tied_to:
            lines.append(Text(f"tied to {param.tied_to}: stored once, adds 0 ({param.numel:,} shared)", style="italic"))
        return Group(*lines)

    @staticmethod
    def _module(module: Module, model: ParamTree, share: str) -> RenderableType:
        title = module.name or module.title
        lines = [
            Text(title, style="bold"),
            Text.assemble(("count ", "dim"), (f"{module.count:,}", "bold"), ("  ", ""), (share, "dim")),
            Text.assemble(("tensors ", "dim"), f"{module.tensors:,}", ("  tied ", "dim"), str(module.tied)),
        ]
        if module.name == "":
            lines.append(Text.assemble(("formula ", "dim"), " + ".join(t.symbols for t in closed_form(model.config))))
        elif module.name.removeprefix("bert.").startswith("encoder.layer."):
            lines.append(Text.assemble(("formula ", "dim"), f"{LAYER_SYMBOLS} = {per_layer(model.config):,} a layer"))
        return Group(*lines)
