"""The command palette: every preset as a command, and Textual's palette with a guard on its page keys.

Imported when the palette first opens, not at start-up.
"""

from __future__ import annotations

from functools import partial

from textual.binding import Binding
from textual.command import CommandList, CommandPalette, DiscoveryHit, Hit, Hits, Provider

from .app import BertTuiApp
from .screens import DismissOnce


class PresetCommands(Provider):
    """Every preset in the command palette: 'preset: bert-large-uncased'."""

    async def discover(self) -> Hits:
        app = self.app
        assert isinstance(app, BertTuiApp)
        for preset in app.catalog.presets.values():
            yield DiscoveryHit(f"preset: {preset.name}", partial(app.open_preset, preset.name), help=preset.title)

    async def search(self, query: str) -> Hits:
        app = self.app
        assert isinstance(app, BertTuiApp)
        matcher = self.matcher(query)
        for preset in app.catalog.presets.values():
            title = f"preset: {preset.name}"
            score = matcher.match(title)
            if score > 0:
                exact = 1.0 if preset.name == query.strip() else 0.0  # 'bert-large-uncased' before '...-cased'
                yield Hit(score + exact, matcher.highlight(title), partial(app.open_preset, preset.name), help=preset.title)


class SafeCommandPalette(DismissOnce, CommandPalette):
    """Textual's palette, with page keys that wait until its list has a size: in Textual 8.2.8 PageDown on a
    list that has options but is not laid out yet raises KeyError (OptionList._move_page) and ends the app."""

    BINDINGS = [
        Binding("pagedown", "page(1)", "Next page", show=False),
        Binding("pageup", "page(-1)", "Previous page", show=False),
    ]

    def action_page(self, direction: int) -> None:
        command_list = self.query_one(CommandList)
        if command_list.scrollable_content_region.height and command_list.option_count:
            if direction > 0:
                command_list.action_page_down()  # type: ignore[no-untyped-call]  # untyped upstream
            else:
                command_list.action_page_up()  # type: ignore[no-untyped-call]

