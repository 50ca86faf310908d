"""The explorer's App: what is global — its keys (help, quit, Tab, the palette), start-up (the first frame,
keys typed before the fields exist, the garbage collector), notifications and the palettes. The panes and their
messages live in the main screen (`main_screen.MainScreen`); dialogs are screens of their own (`dialogs`)."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.events import Event
from textual.screen import Screen
from textual.widgets import OptionList

from ..core import BertConfig
from ..plain import printable
from ..presets import Catalog
from .main_screen import KEY_ROWS, MainScreen

if TYPE_CHECKING:
    from textual.actions import ActionParseResult
    from textual.command import CommandListItem, Provider
    from textual.dom import DOMNode
    from textual.notifications import SeverityLevel
    from textual.widget import AwaitMount

    from ..core.count.trained import FineTuning

# What has been created so far (Textual's and bert-tui's modules, classes, functions) lives as long as the
# process: frozen, the garbage collector no longer walks it at every collection while the explorer starts
# (docs/performance.md).
gc.freeze()


def _preset_commands() -> type[Provider]:
    """The palette's preset provider, imported when the palette first opens (start-up stays lighter)."""
    from .commands import PresetCommands

    return PresetCommands


class BertTuiApp(App[None]):
    """bert-tui's explorer."""

    CSS_PATH = "app.tcss"
    TITLE = "bert-tui"
    COMMANDS = App.COMMANDS | {_preset_commands}
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
        Binding("q", "quit", "Quit", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        # Tab moves the focus as the key arrives, not once it has bubbled back up from the focused widget:
        # keys that come in one read (a paste, a buffered SSH link) after a Tab reach the next field.
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True),
    ]

    def __init__(self, catalog: Catalog, config: BertConfig, title: str, preset: str | None,
                 stored: list[tuple[str, tuple[int, ...]]] | None = None, adapter: FineTuning | None = None) -> None:
        super().__init__()
        self._main = MainScreen(catalog, config, title, preset, stored, adapter)
        self._waiting_keys: list[events.Key] | None = []  # keys typed before the explorer is ready (None: ready)
        self._collector_paused = False  # the garbage collector is paused while the explorer starts
        self.notice: str | None = None  # an error to show once the fields are up (`make_app`)

    @property
    def main(self) -> MainScreen:
        """The main screen: the panes of the model on screen."""
        return self._main

    def get_default_screen(self) -> Screen[Any]:
        return self._main

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Notifications here carry data (paths, preset names, notes from files): shown as written, never
        read as markup, whatever the caller passes."""
        super().notify(printable(message), title=printable(title), severity=severity, timeout=timeout, markup=False)

    def action_help_quit(self) -> None:
        """ctrl+c does not quit (it copies in an input): say how to, in plain words (Textual's own message is markup,
        which `notify` here shows as written)."""
        self.notify("ctrl+q quits (q too, outside inputs)", title="Do you want to quit?")

    def on_load(self) -> None:
        """Pause the garbage collector until the fields are mounted: start-up allocates tens of thousands of
        objects that all live on, and the collections they set off find nothing to free. It resumes once the
        explorer is ready, or when it closes."""
        if gc.isenabled():
            gc.disable()
            self._collector_paused = True

    def _resume_collector(self) -> None:
        if self._collector_paused:
            self._collector_paused = False
            gc.enable()

    def on_unmount(self) -> None:
        self._resume_collector()

    def on_mount(self) -> None:
        self.theme = "textual-dark"

    @on(MainScreen.FieldsReady)
    def _fields_ready(self) -> None:
        self._resume_collector()
        self.call_after_refresh(self._release_keys)
        if self.notice is not None:  # (what could not be opened: said until the user dismisses it)
            self.notify(self.notice, title="could not open", severity="error", timeout=30)

    async def on_event(self, event: Event) -> None:
        """Keys typed while the explorer starts (a fast typist, a buffered SSH link) wait until the form's
        fields are mounted and focused, then are handled in the order they came: before that, Tab found no
        focus and digits no field, and `Tab End ctrl+u 40000` typed at launch was lost or applied half-way."""
        if self._waiting_keys is not None and isinstance(event, events.Key) and not event.is_forwarded:
            self._waiting_keys.append(event)
            return
        await super().on_event(event)

    @property
    def ready(self) -> bool:
        """Whether the explorer takes keys as they come: its form's fields are mounted and the keys typed while
        it started have been handled (tests and scripts wait for this, not for a pause of some length)."""
        return self._waiting_keys is None

    async def _release_keys(self) -> None:
        """Handle the keys typed while the explorer started, in order (Tab moves the focus at once: it is a
        priority binding, so the keys after it reach the field it moved to)."""
        waiting, self._waiting_keys = self._waiting_keys or [], None
        for event in waiting:
            await super().on_event(event)

    async def run_action(self, action: str | ActionParseResult, default_namespace: DOMNode | None = None,
                         namespaces: Mapping[str, DOMNode] | None = None) -> bool:
        """Drop a page key bound to an option list that has no size (a select's dropdown that closed while the
        key was on its way: Enter, Tab, PageDown in one read). Textual 8.2.8's OptionList._move_page raises
        KeyError there and the app ends. Bindings run when the key has bubbled back to the App, so the check is
        made here, when the action runs, not when the key arrives."""
        if (action in ("page_up", "page_down") and isinstance(default_namespace, OptionList)
                and not default_namespace.scrollable_content_region.height):
            return True
        return await super().run_action(action, default_namespace, namespaces)

    def action_command_palette(self) -> None:
        from textual.command import CommandPalette

        from .commands import SafeCommandPalette

        if self.use_command_palette and not CommandPalette.is_open(self):  # type: ignore[arg-type]  # typed App[object] upstream
            self.push_screen(SafeCommandPalette(id="--command-palette"))

    # Textual's own palettes (the theme picker, command lists) as the guarded palette: two quick Enters in a
    # plain CommandPalette close it twice and pop the screen below (ScreenStackError; found by the monkey).

    def search_themes(self) -> None:
        from textual.theme import ThemeProvider

        from .commands import SafeCommandPalette

        self.push_screen(SafeCommandPalette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def search_commands(self, commands: Sequence[CommandListItem], placeholder: str = "Search for commands…") -> AwaitMount:
        from textual.command import SimpleProvider

        from .commands import SafeCommandPalette

        provider = SimpleProvider(self.screen, list(commands))  # an instance, as Textual's own search_commands passes
        return self.push_screen(SafeCommandPalette(providers=[provider], placeholder=placeholder))

    def action_help(self) -> None:
        from .dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(KEY_ROWS))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if screen is self._main:
            yield from self._main.system_commands()


def make_app(catalog: Catalog, config: BertConfig | None = None, *, title: str | None = None, preset: str | None = None,
             stored: list[tuple[str, tuple[int, ...]]] | None = None, adapter: FineTuning | None = None,
             notice: str | None = None) -> BertTuiApp:
    """The explorer for `config` (default: the catalog's default preset); shared by the CLI and the tests.
    `adapter`: a PEFT adapter's method (an adapter folder opened), which the Compute pane offers; `notice`: an
    error to show once the explorer is up (the model asked for could not be read)."""
    if config is None:
        from ..presets import DEFAULT_PRESET

        found = catalog.get(DEFAULT_PRESET)
        config, title, preset = found.config, found.name, found.name
    app = BertTuiApp(catalog, config, title or preset or "custom", preset, stored, adapter)
    app.notice = notice
    return app


__all__ = ["BertTuiApp", "make_app"]
