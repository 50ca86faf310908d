"""The command palette: every preset as a command, and Textual's palette with guards against its crashes.

Imported when the palette first opens, not at start-up.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from textual import on
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.command import (
    CommandList,
    CommandPalette,
    DiscoveryHit,
    Hit,
    Hits,
    Provider,
)
from textual.markup import escape
from textual.widgets import Input

from ..plain import printable
from .dialogs import DismissOnce

if TYPE_CHECKING:
    from ..presets import Catalog


@runtime_checkable
class OpensPresets(Protocol):
    """What the preset commands need of the screen that shows the panes (the main screen; named here, not
    imported: it loads this module when the palette first opens, and a module that imports its importer makes a
    circle)."""

    catalog: Catalog

    def open_preset(self, name: str) -> None: ...


class PresetCommands(Provider):
    """Every preset in the command palette: 'preset: bert-large-uncased'."""

    def _opener(self) -> OpensPresets | None:
        """The screen that opens presets: the palette's own, or the one under the dialog it was opened over."""
        return next((s for s in reversed(self.app.screen_stack) if isinstance(s, OpensPresets)), None)

    async def discover(self) -> Hits:
        app = self._opener()
        if app is None:
            return
        for preset in app.catalog.presets.values():
            yield DiscoveryHit(f"preset: {preset.name}", partial(app.open_preset, preset.name), help=escape(printable(preset.title)))

    async def search(self, query: str) -> Hits:
        app = self._opener()
        if app is None:
            return
        matcher = self.matcher(query)
        for preset in app.catalog.presets.values():
            title = f"preset: {preset.name}"
            score = matcher.match(title)
            if score > 0:
                exact = 1.0 if preset.name == query.strip() else 0.0  # 'bert-large-uncased' before '...-cased'
                yield Hit(score + exact, matcher.highlight(title), partial(app.open_preset, preset.name), help=escape(printable(preset.title)))


class SafeCommandPalette(DismissOnce, CommandPalette):
    """Textual 8.2.8's palette with three guards, each against a way it ended the app:

    * it closes once (DismissOnce: a second Enter closed the screen below it);
    * page keys wait until its list has a size (PageDown before layout: KeyError in OptionList._move_page);
    * typing that arrives after it closed starts no search: Enter's action runs when the key has bubbled up,
      so in "a, Enter, r" from one read the `r` reaches the input first; its search then ran after the close
      and found no list (NoMatches in the search worker).
    """

    BINDINGS = [
        Binding("pagedown", "page(1)", "Next page", show=False),
        Binding("pageup", "page(-1)", "Previous page", show=False),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._palette_closed = False  # not `_closing`: Textual's message pump uses that name (it stops the pump)

    def dismiss(self, result: object = None) -> AwaitComplete:
        self._palette_closed = True
        return super().dismiss(result)

    @on(Input.Changed)
    def _no_search_after_close(self, event: Input.Changed) -> None:
        if self._palette_closed:
            event.stop()
            event.prevent_default()  # the palette's own handler (a search) does not run

    def action_page(self, direction: int) -> None:
        command_list = self.query_one(CommandList)
        if command_list.scrollable_content_region.height and command_list.option_count:
            if direction > 0:
                command_list.action_page_down()  # type: ignore[no-untyped-call]  # untyped upstream
            else:
                command_list.action_page_up()  # type: ignore[no-untyped-call]

