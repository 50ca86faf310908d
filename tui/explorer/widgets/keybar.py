"""The key bar at the bottom: the keys that work where the focus is, rewritten in place when it moves.

Textual's `Footer` recomposes at every focus change (it unmounts and mounts one widget per key), which is felt
over SSH at every Tab (docs/performance.md). This bar keeps two `Static`s and rewrites a line of text instead,
reading the same public `Screen.active_bindings` the Footer reads.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import ActiveBinding
from textual.containers import Horizontal
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Static

from ..actions import bar_order

KEY = "bold $footer-key-foreground on $footer-key-background"
# Where the bar is too narrow for every key: the focused widget's own keys first, then these, then the rest
# (the pane keys: below 120 columns the tabs name the panes). What does not fit is left out whole, never cut.
PRIORITY = bar_order()


class KeyBar(Horizontal):
    """One line: every shown binding of the focused widget and its ancestors, then the palette key."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    KeyBar #keys { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    KeyBar #palette-key { width: auto; height: 1; border-left: vkey $foreground 20%; padding-left: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown = ("", "")  # (keys, palette key) as last written

    def compose(self) -> ComposeResult:
        yield Static("", id="keys")
        yield Static("", id="palette-key")

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def on_resize(self) -> None:
        self._bindings_changed(self.screen)  # another width fits other keys

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is not self.screen:
            return
        bindings = screen.active_bindings
        palette = bindings.get(self.app.COMMAND_PALETTE_BINDING)
        width = self.size.width - (cell_len(self.app.get_key_display(palette.binding)) + 11 if palette else 0)
        shown = (self.describe(bindings, width),
                 f"[{KEY}]{escape(self.app.get_key_display(palette.binding))}[/] palette" if palette else "")
        if shown == self._shown:  # most focus moves change nothing here: no repaint then
            return
        keys, palette_key = shown
        if keys != self._shown[0]:
            self.query_one("#keys", Static).update(keys)
        if palette_key != self._shown[1]:
            self.query_one("#palette-key", Static).update(palette_key)
        self._shown = shown

    def describe(self, bindings: Mapping[str, ActiveBinding], width: int | None = None) -> str:
        """Markup for the shown bindings, one per action (the first key bound to it), disabled ones dim; within
        `width` cells, the most useful whole (see PRIORITY), in their own order."""
        seen: set[str] = set()
        entries: list[tuple[int, tuple[int, int], str, int]] = []  # rank, place, markup, cells
        for order, (node, binding, enabled, _tooltip) in enumerate(bindings.values()):
            if not binding.show or binding.action in seen or binding.key == self.app.COMMAND_PALETTE_BINDING:
                continue
            seen.add(binding.action)
            key = self.app.get_key_display(binding)
            part = f"[{KEY}] {escape(key)} [/]{escape(binding.description)} "
            action = binding.action.removeprefix("app.")
            own = node is not self.app and node is not self.screen
            rank = 0 if own else 1 + (PRIORITY.index(action) if action in PRIORITY else len(PRIORITY))
            place = (0 if own else 1 if node is self.app else 2, order)  # the pane's keys, the app's, the screen's
            entries.append((rank, place, part if enabled else f"[dim]{part}[/]",
                            cell_len(f" {key} {binding.description} ")))
        room, chosen = (width if width is not None and width > 0 else 10**6), []
        for entry in sorted(entries):
            if entry[3] <= room:
                chosen.append(entry)
                room -= entry[3]
        return "".join(part for _, _, part, _ in sorted(chosen, key=lambda entry: entry[1]))
