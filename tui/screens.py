"""Screens over the explorer: the help screen listing every key."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    """Every key of the explorer; any of Escape, F1, ? or q closes it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("f1", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self._key_rows = rows

    def compose(self) -> ComposeResult:
        table = Table(title="bert-tui keys", title_justify="left", box=None, padding=(0, 2, 0, 0))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("does")
        for key, does in self._key_rows:
            table.add_row(key, does)
        with VerticalScroll(id="help-box"):
            yield Static(table)
            yield Static("Escape closes this help.", classes="dim")
