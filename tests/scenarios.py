"""Screens worth looking at, shared by the snapshot tests and the screenshot script (one definition each)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input

from tui.explorer.app import BertTuiApp, make_app
from tui.presets import load_catalog

from .ready import until_ready

NARROW = (80, 24)
WIDE = (120, 40)
AUDIT_KEYS = ("a",)
PINNED_KEYS = ("b", "tab", "tab", *"1024", "tab", *"24", "tab", *"16", "f3", "down", "down", "enter")
# F5, then batch 8, sequence 512, precision amp-bf16 (the fourth choice), on bert-large.
COMPUTE_KEYS = ("f5", "ctrl+u", *"8", "tab", "ctrl+u", *"512", "tab", "tab", "enter", "down", "down", "down", "enter")
# then fine-tuning: LoRA (r 8 on query, value), seven fields further
LORA_KEYS = (*COMPUTE_KEYS, *["tab"] * 7, "enter", "down", "enter")
QUERY_LEAF_KEYS = ("f3", "down", "down", "enter", "down", "enter", "down", "enter", "down", "enter", "down")


async def settled(pilot: Pilot[Any]) -> None:
    """Until no worker runs (a superseded one's thread may still finish: its answer is not shown) and none has
    started by the next idle (a message still queued, a model just opened, can start one), then idle."""
    from textual.worker import WorkerState

    def running() -> bool:
        return any(worker.state in (WorkerState.PENDING, WorkerState.RUNNING) for worker in pilot.app.workers)

    for _ in range(3000):
        if not running():
            await pilot.pause()
            if not running():
                return
        await pilot.pause(0.01)
    await pilot.pause()


@dataclass(frozen=True)
class Scenario:
    name: str
    preset: str
    size: tuple[int, int]
    keys: tuple[str, ...] = ()
    about: str = ""
    title: str = ""  # a source's name in place of the preset's (a path, a Hub id)

    def app(self) -> BertTuiApp:
        catalog = load_catalog()
        return make_app(catalog, catalog.get(self.preset).config, title=self.title or self.preset,
                        preset=None if self.title else self.preset)

    def run_before(self) -> Callable[[Pilot[Any]], Awaitable[None]]:
        """Stop the cursor blinking, press the keys, drop the toasts, let animations end and the screen settle.

        Toasts time out after a few seconds: whether one is still on screen depends on how fast the keys
        went through (a loaded CI machine is slower), so they are cleared to keep the pictures deterministic.
        """

        async def run_before(pilot: Pilot[Any]) -> None:
            await until_ready(pilot)  # the form's fields are mounted right after the first frame
            for field in pilot.app.query(Input):
                field.cursor_blink = False
            for key in self.keys:  # a frame after each: a tab shown just now is laid out before its keys
                await pilot.press(key)
                await pilot.pause()
            for field in pilot.app.query(Input):  # and those mounted by the keys (the Compute pane's): a loaded
                field.cursor_blink = False  # machine caught one mid-blink
            pilot.app.clear_notifications()
            await settled(pilot)  # what fits, replayed in a worker, has landed
            await pilot.wait_for_scheduled_animations()  # the tabs' underline slides in: a loaded machine: mid-way
            await pilot.pause()

        return run_before


ALBERT_KEYS = ("f3", "down", "down", "enter", "down", "down", "down", "enter")  # encoder ▸ albert_layer_groups open
MODERNBERT_KEYS = ("f3", "down", "down", "enter", "down", "enter", "down", "down", "down", "down",
                   "enter")  # layers ▸ layers.0 and layers.1 open: the first has no attn_norm
SCREENSHOTS = [
    Scenario("explorer-wide", "bert-base-uncased", WIDE, QUERY_LEAF_KEYS,
             "120×40: form | tree with the detail of a query weight | totals"),
    Scenario("explorer-80x24", "bert-base-uncased", NARROW, (), "80×24 (SSH): the form tab, total always in view"),
    Scenario("tree-80x24", "example-40k", NARROW, ("f3", "down", "down", "enter", "down", "enter"),
             "80×24: the tree tab, layer.0 open"),
    Scenario("stale-invalid", "bert-base-uncased", WIDE, ("tab", "tab", "end", "1"),
             "H 7681 with 12 heads: inline message, last valid count marked stale"),
    Scenario("help", "bert-base-uncased", NARROW, ("f1",), "the help screen (F1 or ?)"),
    Scenario("audit", "example-40k", WIDE, AUDIT_KEYS, "a: the published 186,828,288 explained"),
    Scenario("pinned-diff", "bert-base-uncased", WIDE, PINNED_KEYS, "b pins bert-base; 24 layers and H 1024 show deltas"),
    Scenario("albert-wide", "albert-base-v2", WIDE, ALBERT_KEYS,
             "ALBERT-base: one layer stored, run 12 times (totals); the shared layer group in the tree"),
    Scenario("modernbert-wide", "ModernBERT-base", WIDE, MODERNBERT_KEYS,
             "ModernBERT-base: its fields and flags; the first layer without attn_norm"),
    Scenario("compute-80x24", "bert-large-uncased", NARROW, COMPUTE_KEYS,
             "F5: a bert-large training step at batch 8 × 512 in amp-bf16: FLOPs, memory, what fits"),
    Scenario("compute-wide", "bert-large-uncased", WIDE, COMPUTE_KEYS,
             "120×40: the Compute pane stands where the tree and totals do (F3 brings them back)"),
    Scenario("compute-lora-wide", "roberta-base", WIDE, LORA_KEYS,
             "the same step of roberta-base under LoRA r 8 on query and value: what trains, what it costs"),
]
