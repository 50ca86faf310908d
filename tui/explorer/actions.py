"""Every action of the explorer's main screen, declared once: its key, what it runs, its label in the key bar,
its palette entry and its row in the help. The screen's bindings, the palette's commands, the key bar's order
and the help screen are generated from this table (a new action is one row here and its `action_` method).

Rows without a `run` are help rows only (keys Textual or a widget handles: Tab, the tree's arrows, typing).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Action:
    key: str  # Textual's key name ("f2", "a"); "" for a help row only
    run: str  # the action string ("show_pane('form')"); "" for a help row only
    label: str = ""  # the key bar's
    title: str = ""  # the palette's entry ("" for none)
    summary: str = ""  # the palette's line under it
    help: tuple[str, str] | None = None  # the help screen's row (key as said, what it does)
    priority: bool = False  # acts as the key arrives (see MainScreen)
    bar_rank: int | None = None  # where the key bar keeps it when it is narrow (lower first); None: after those
    target: str = "screen"  # "screen", or "tree": the palette runs it on the tree
    where: str = "screen"  # "screen": bound here; "app" or "tree": bound there (help and palette only)


ACTIONS: tuple[Action, ...] = (
    Action("f1", "app.help", title="Help", summary="Every key (F1, ? outside inputs)",
           help=("F1, ?", "this help (? outside inputs)"), where="app"),
    Action("", "", help=("ctrl+p", "command palette: every preset and action")),
    Action("", "", help=("Tab, shift+Tab", "next / previous field or pane")),
    Action("f2", "show_pane('form')", "Config", "Show the config form", "Focus the form (F2)", priority=True,
           help=("F2 / F3 / F4", "config form / parameter tree / totals (tabs below 120 columns)")),
    Action("f3", "show_pane('tree')", "Tree", "Show the parameter tree", "Focus the tree (F3)", priority=True),
    Action("f4", "show_pane('totals')", "Totals", "Show the totals", "Focus the totals (F4)", priority=True),
    Action("f5", "show_pane('compute')", "Compute", "Show compute and memory",
           "FLOPs, memory and what fits for a workload (F5)", priority=True,
           help=("F5", "compute and memory of a training step: batch, sequence, precision, what fits")),
    Action("", "", help=("← →", "switch tabs when the tab bar has focus")),
    Action("", "", help=("↑ ↓, Enter, Space", "move in the tree, open or close a node")),
    Action("e", "expand_all", title="Expand all", summary="Open every node of the tree (e in the tree)",
           target="tree", where="tree", help=("e / c / z", "expand / collapse the whole tree; zoom it to the "
                                              "whole screen and back (in the tree)")),
    Action("c", "collapse_all", title="Collapse all", summary="Close every node of the tree (c in the tree)",
           target="tree", where="tree"),
    Action("z", "zoom", title="Zoom the tree",
           summary="The tree fills the screen, every column shown; again to restore (z in the tree)",
           target="tree", where="tree"),
    Action("a", "audit", "Audit", "Audit a claimed count", "Which conventions give a published figure (a)",
           help=("a", "audit a claimed count: which conventions reproduce it (outside inputs)"), bar_rank=2),
    Action("b", "toggle_baseline", "Pin", "Pin or unpin the baseline", "Show deltas against the current count (b)",
           help=("b", "pin the current count as a baseline, or unpin it: deltas in the totals and tree"),
           bar_rank=3),
    Action("x", "export", "Export", "Export the breakdown", "Write JSON, CSV or Markdown (x)",
           help=("x", "export the breakdown to JSON, CSV or Markdown (asks before overwriting)"), bar_rank=4),
    Action("o", "open", "Open", "Open a model",
           "A Hub id (ORG/NAME), config.json, model folder, .safetensors or PEFT adapter folder (o)",
           help=("o", "open a Hub id, config.json, folder or checkpoint; differing tensors are marked ✗"),
           bar_rank=5),
    Action("s", "save_preset", "Save", "Save as a user preset", "Write the current config to your presets folder (s)",
           help=("s", "save the current config as a user preset (asks before overwriting)"), bar_rank=6),
    Action("", "", help=("type digits", "edit a field; the count updates at every key")),
    Action("ctrl+q", "app.quit", help=("ctrl+q, q", "quit (q outside inputs)"), where="app"),
)
# The App's own keys the key bar ranks first.
BAR_FIRST = ("quit", "help")


def bindings() -> list[Binding | tuple[str, str] | tuple[str, str, str]]:
    """The main screen's bindings (typed as Textual's `BINDINGS`)."""
    return [Binding(a.key, a.run, a.label, priority=a.priority) for a in ACTIONS if a.where == "screen" and a.run]


def help_rows() -> list[tuple[str, str]]:
    return [a.help for a in ACTIONS if a.help is not None]


def palette() -> list[Action]:
    """The palette's entries, in the table's order."""
    return [a for a in ACTIONS if a.title]


def bar_order() -> tuple[str, ...]:
    """The actions the key bar keeps first where it is narrow."""
    ranked = sorted((a for a in ACTIONS if a.bar_rank is not None), key=lambda a: a.bar_rank or 0)
    return (*BAR_FIRST, *(a.run for a in ranked))
