"""The explorer: a config form, the parameter tree with a detail strip, and the totals.

State flows one way. The form posts a validated `BertConfig`; the app holds it as its one reactive `config`,
asks the core for the tree, and hands that tree to the panes. When the form holds something the core refuses,
the panes keep the last valid count, marked stale. At 120 columns and more the three panes stand side by
side; below that they become tabs under a summary line that always shows the total.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual import events
from textual.events import Event, Resize
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import OptionList, Static, Tab, Tabs, Tree

from ..core import BertConfig, ConfigError, ParamTree, build_tree, marginal_costs
from ..core.compare import Comparison, compare
from ..core.units import short_count
from ..plain import middle_ellipsis, printable
from ..presets import Catalog, load_catalog
from .widgets.form import ConfigForm
from .widgets.keybar import KeyBar
from .widgets.panes import DetailPane, TotalsPane
from .widgets.param_tree import ParamTreeView
from .widgets.param_tree import key_of
from .widgets.tabs_preview import TabsPreview

if TYPE_CHECKING:
    from textual.actions import ActionParseResult
    from textual.command import CommandListItem, Provider
    from textual.dom import DOMNode
    from textual.notifications import SeverityLevel
    from textual.widget import AwaitMount

    from ..core.compute import Compute, Workload
    from .dialogs import Opened
    from .widgets.compute import ComputePane

# What has been created so far (Textual's and bert-tui's modules, classes, functions) lives as long as the
# process: frozen, it is no longer walked by the garbage collector at every collection while the explorer
# starts (a full collection cost ~30 ms before the first frame, two thirds of the collector's time then).
gc.freeze()

# The screens (audit, export, open, save, help) and the palette load when first opened: importing them
# (formats, audit, file I/O) at start-up would delay the first paint for screens most runs never open.

WIDE = 120  # columns from which the panes stand side by side (below, the tree would be too narrow for its counts)
TABS = [("Config", "form"), ("Tree", "tree"), ("Totals", "totals"), ("Compute", "compute")]
PANES = {"form": "#form", "tree": "#tree", "totals": "#totals-box", "compute": "#compute-box"}
CENTER = "#center"  # the tree's pane: the tree with its detail strip


def _preset_commands() -> type[Provider]:
    """The palette's preset provider, imported when the palette first opens (start-up stays lighter)."""
    from .commands import PresetCommands

    return PresetCommands


class BertTuiApp(App[None]):
    """bert-tui's explorer."""

    CSS_PATH = "app.tcss"
    TITLE = "bert-tui"
    COMMANDS = App.COMMANDS | {_preset_commands}
    AUTO_FOCUS = "#preset"
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
        # The pane keys act as they arrive (priority), like Tab: F5 then Tab and digits in one read reach the
        # Compute pane's fields; in a dialog they do nothing.
        Binding("f2", "show_pane('form')", "Config", priority=True),
        Binding("f3", "show_pane('tree')", "Tree", priority=True),
        Binding("f4", "show_pane('totals')", "Totals", priority=True),
        Binding("f5", "show_pane('compute')", "Compute", priority=True),
        Binding("a", "audit", "Audit"),
        Binding("b", "toggle_baseline", "Pin"),
        Binding("x", "export", "Export"),
        Binding("o", "open", "Open"),
        Binding("s", "save_preset", "Save"),
        Binding("q", "quit", "Quit", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        # Tab moves the focus as the key arrives, not once it has bubbled back up from the focused widget:
        # keys that come in one read (a paste, a buffered SSH link) after a Tab reach the next field.
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True),
    ]

    config: var[BertConfig | None] = var(None, always_update=True)
    stale = var(False)

    def __init__(self, catalog: Catalog, config: BertConfig, title: str, preset: str | None) -> None:
        super().__init__()
        self.catalog = catalog
        self._start = (config, preset)
        self._source_title = title
        self.model: ParamTree | None = None
        self.baseline: ParamTree | None = None  # pinned with `b`: deltas show against it until unpinned
        self.stored: list[tuple[str, tuple[int, ...]]] | None = None  # an opened checkpoint's tensors
        self._pane = "form"  # the tab shown below 120 columns
        self.comparison: Comparison | None = None
        self._waiting_keys: list[events.Key] | None = []  # keys typed before the explorer is ready (None: ready)
        self.workload: Workload | None = None  # the Compute pane's last valid workload (set when it mounts)
        self._workload_error: ConfigError | None = None  # what the core refuses in the pane's fields
        self._compute_result: Compute | None = None
        self._gpu_memory: int | None = None  # the Compute pane's GPU size, if one is typed
        self._collector_paused = False  # the garbage collector is paused while the explorer starts
        self._invalid: ConfigError | None = None  # what the form holds that the core refuses (while stale)

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
        objects that all live on, and the collections they set off (gen 0 and 1 alone, ~30 ms before the first
        frame) find nothing to free. It resumes once the explorer is ready, or when it closes."""
        if gc.isenabled():
            gc.disable()
            self._collector_paused = True

    def _resume_collector(self) -> None:
        if self._collector_paused:
            self._collector_paused = False
            gc.enable()

    def on_unmount(self) -> None:
        self._resume_collector()

    def compose(self) -> ComposeResult:
        # The layout's class is set before the widgets mount: set after, it would restyle every one of them.
        self.screen.set_class(self.size.width < WIDE, "-narrow")
        yield Static("", id="summary")
        yield TabsPreview([label for label, _ in TABS], id="pane-tabs")  # the Tabs mount after the first frame
        with Horizontal(id="main"):
            yield ConfigForm(self.catalog.presets, self._start, id="form")
            with Vertical(id="center"):
                yield ParamTreeView(id="tree")
                yield DetailPane(id="detail")
            yield Vertical(id="compute-box")  # the Compute pane mounts here when first shown (F5)
            with VerticalScroll(id="totals-box"):
                yield TotalsPane(id="totals")
        yield KeyBar(id="keybar")

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        config, preset = self._start
        self._load_form(config, preset)
        self._layout(self.size.width)
        self.call_after_refresh(self._build_form)  # after the first frame, which shows the form's preview

    async def _build_form(self) -> None:
        """Mount the form's fields and the pane tabs in place of their previews, in one frame, then handle the
        keys typed meanwhile (once the screen has laid them out: until then the focus chain lacks them)."""
        base = self.screen_stack[0]  # the explorer's screen (code may have opened a palette over it already)
        with self.batch_update():
            await base.query_one("#pane-tabs").remove()
            await base.mount(Tabs(*(Tab(label, id=f"tab-{pane}") for label, pane in TABS), id="pane-tabs"),
                             after=base.query_one("#summary"))
            await base.query_one(ConfigForm).build()
        self._resume_collector()
        self.call_after_refresh(self._release_keys)

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

    # State: the form's config → the core's tree → the panes.

    def _load_form(self, config: BertConfig, preset: str | None) -> None:
        report = self.query_one(ConfigForm).load(config, preset)
        if report is not None:  # the form's preview: its report comes back at once
            self._config_changed(report)

    @on(ConfigForm.Changed)
    def _config_changed(self, event: ConfigForm.Changed) -> None:
        if event.preset:
            self._source_title = event.preset
        elif event.edited:
            self._source_title = f"{self._source_title.removesuffix(' (edited)')} (edited)"
        self.stale = False
        self.config = event.config

    @on(ConfigForm.Invalid)
    def _config_invalid(self, event: ConfigForm.Invalid) -> None:
        self._invalid = event.error
        self.stale = True

    def _refuse_stale(self, action: str) -> bool:
        """Export and save write what the form shows: while a field holds a refused value, say so and do nothing
        (the panes show the last valid count, not the form)."""
        if not self.stale or self._invalid is None:
            return False
        error = self._invalid
        self.notify(f"nothing {action}: {error.field} {error.value} {error.rule}; the panes show the last valid "
                    "count (stale) until it is fixed", severity="warning", timeout=6)
        return True

    @on(ConfigForm.PresetSelected)
    def _preset_selected(self, event: ConfigForm.PresetSelected) -> None:
        self.open_preset(event.name)

    def watch_config(self, config: BertConfig | None) -> None:
        if config is None or not self.query(ConfigForm):  # the app is closing: a late report finds no panes
            return
        self.model = build_tree(config)
        self.comparison = compare(self.model, self.stored) if self.stored is not None else None
        self.query_one(ConfigForm).show_costs(marginal_costs(config))
        tree = self.query_one(ParamTreeView)
        tree.set_marks(self._marks())
        tree.show(self.model)
        self._show_detail()
        self._show_totals()
        self._show_compute()

    def watch_stale(self) -> None:
        self._show_totals()
        self._show_compute()

    def _show_totals(self) -> None:
        if self.model is None:
            return
        self.query_one(TotalsPane).show(self.model, self.stale, self.baseline, self._claims(), self.comparison)
        total = self.model.total
        summary = self.query_one("#summary", Static)
        mark = "   ⚠ stale" if self.stale else ""
        pinned = f"   Δ {total - self.baseline.total:+,} vs pinned" if self.baseline is not None else ""
        count = f"{total:,}"
        rest = f" ({short_count(total)}){pinned}{mark}"
        width = (summary.content_region.width or self.size.width - summary.styles.gutter.width) - 1
        name = self.model.config.hf_class
        room = width - len(name) - 6 - len(count) - len(rest)  # " · " and three spaces before the total
        title = middle_ellipsis(printable(self._source_title), room) if room >= 4 else ""
        head = f"{name} · {title}   " if title else f"{middle_ellipsis(name, width - len(count) - len(rest) - 3)}   "
        summary.update(Text.assemble(head, (count, "bold"), rest))
        summary.set_class(self.stale, "-stale")

    # The Compute pane: its workload and the app's config → the core's Compute → the pane.

    # The pane and the compute core load on the first F5 (handlers by name: the classes are not imported here).

    def on_compute_pane_changed(self, event: ComputePane.Changed) -> None:
        self.workload, self._workload_error = event.workload, None
        self._gpu_memory = event.gpu_memory
        self._show_compute()

    def on_compute_pane_invalid(self, event: ComputePane.Invalid) -> None:
        self._workload_error = event.error
        self._show_compute()

    def _show_compute(self) -> None:
        """Ask the core for the workload on the current config. A refusal (a field the core refuses, a sequence
        longer than the positions, a model type not modelled) shows at the fields; the last valid result stays,
        marked stale, as the other panes do."""
        found = self.query("#compute")
        if not found or self.model is None or self.workload is None:
            return
        from ..core.compute import compute

        pane = cast("ComputePane", found.first())
        if not pane.query("#compute-error"):  # still composing its fields: `_mount_compute` shows it after
            return
        error = self._workload_error
        if error is None:
            try:
                self._compute_result = compute(self.model.config, self.workload, self._gpu_memory, tree=self.model)
            except ConfigError as refused:
                error = refused
        pane.show_error(error)
        if self._compute_result is not None:
            pane.show(self._compute_result, stale=error is not None or self.stale)

    def _mount_compute(self) -> AwaitMount | None:
        """The Compute pane is composed the first time it is shown: start-up pays nothing for it."""
        if self.query("#compute"):
            return None
        from ..core.compute import Workload
        from .widgets.compute import ComputePane

        self.workload = self.workload or Workload(batch=32, seq=128)
        self.call_after_refresh(self._show_compute)
        return self.query_one("#compute-box").mount(ComputePane(self.workload, id="compute"))

    @on(Tree.NodeHighlighted, "#tree")
    def _highlighted(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        tree = self.query_one(ParamTreeView)
        cursor = tree.cursor_node
        node = tree.node_for(cursor.data) if cursor is not None and cursor.data is not None else None
        if self.model is not None:
            self.query_one(DetailPane).show(node, self.model)

    # Actions.

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

    def open_preset(self, name: str) -> None:
        preset = self.catalog.presets.get(name)
        if preset is None:
            self.notify(f"unknown preset {name!r}", severity="error")
            return
        self.stored = None  # another model: an opened checkpoint's comparison ends with its own
        self._load_form(preset.config, preset.name)

    def _marks(self) -> dict[str, str]:
        """Tree keys whose tensor the opened checkpoint stores differently, with what it stores."""
        result = self.comparison
        if result is None:
            return {}
        marks = {key_of(name): "✗ not in the file" for name in result.missing}
        marks.update((key_of(name), f"✗ file has {list(stored)}") for name, _, stored in result.mismatched)
        return marks

    def _claims(self) -> list[tuple[str, str, str]]:
        """(value, scope, source) of the counts published for the preset on screen, if it is one."""
        preset = self.catalog.presets.get(self._source_title)
        return [(c.value, c.scope, c.source) for c in preset.claims] if preset else []

    def action_audit(self) -> None:
        from .dialogs import AuditScreen

        if self.model is not None and not isinstance(self.screen, AuditScreen):
            self.push_screen(AuditScreen(self.model.config, self._source_title, self._claims()))

    def action_toggle_baseline(self) -> None:
        """Pin the current count as the baseline (deltas in the totals and the tree), or unpin it."""
        self.baseline = None if self.baseline is not None else self.model
        self.query_one(ParamTreeView).set_baseline(self.baseline)
        self._show_totals()
        self.notify("baseline pinned: b unpins it" if self.baseline else "baseline unpinned", timeout=3)

    def action_export(self) -> None:
        from .dialogs import ExportScreen

        if self.model is None or isinstance(self.screen, ExportScreen) or self._refuse_stale("exported"):
            return
        suggestion = f"{self._source_title.replace(' (edited)', '-edited')}.json"
        self.push_screen(ExportScreen(self.model, self._source_title, suggestion), self._exported)

    def _exported(self, path: Path | None) -> None:
        if path is not None:
            self.notify(f"wrote {path}", timeout=4)

    def action_open(self) -> None:
        from .dialogs import OpenScreen

        if not isinstance(self.screen, OpenScreen):
            self.push_screen(OpenScreen(), self._opened)

    def _opened(self, opened: Opened | None) -> None:
        if opened is None:
            return
        source, checkpoint = opened
        self.stored = [(t.name, t.shape) for t in checkpoint.tensors] if checkpoint is not None else None
        self._source_title = source.name
        self._load_form(source.config, None)
        for note in source.notes:
            self.notify(note, timeout=6)

    def action_save_preset(self) -> None:
        from .dialogs import SavePresetScreen

        if self.model is None or isinstance(self.screen, SavePresetScreen) or self._refuse_stale("saved"):
            return
        builtin = {name for name, p in self.catalog.presets.items() if p.builtin}
        suggestion = self._source_title.replace(" (edited)", "-edited").replace("/", "-").replace(" ", "-")
        self.push_screen(SavePresetScreen(self.model.config, suggestion[:64], builtin), self._saved)

    def _saved(self, name: str | None) -> None:
        if name is None:
            return
        self.catalog = load_catalog()
        form = self.query_one(ConfigForm)
        form.add_preset(name)
        self._source_title = name
        form.select_preset(name)
        self._show_totals()
        self.notify(f"saved preset {name}: in the selector and the palette now", timeout=4)

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
            self.push_screen(HelpScreen(self._key_rows()))

    async def action_show_pane(self, pane: str) -> None:
        """Bring a pane forward (a tab below 120 columns) and focus it, at once: the keys after F2–F5 in one
        read (Tab, digits) reach the pane's fields in order. The Compute pane's first showing waits for its
        mount. Under a dialog or the palette they do nothing, as before they were priority keys."""
        if self.screen is not self.screen_stack[0]:
            return
        if pane == "compute":
            mounting = self._mount_compute()
            if mounting is not None:
                await mounting
        self.query_one(Tabs).active = f"tab-{pane}"
        self._choose(pane)  # now, not when TabActivated arrives: a hidden field cannot take the focus
        self.screen.set_focus(self.query_one({"form": "#preset", "compute": "#batch"}.get(pane, PANES[pane])))

    @on(Tabs.TabActivated, "#pane-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        self._choose((event.tab.id or "tab-form").removeprefix("tab-"))

    def _choose(self, pane: str) -> None:
        if self.size.width >= WIDE and pane == "form" and self._pane == "compute":
            pane = self._pane  # side by side the form is always shown: F2 keeps the Compute pane beside it
        self._pane = pane
        self._layout(self.size.width)

    def on_resize(self, event: Resize) -> None:
        self._layout(event.size.width)
        self._show_totals()  # the summary shortens the source's name to keep the total

    def _layout(self, width: int) -> None:
        """Side by side from 120 columns; below, only the active tab's pane. Display is set on the three
        panes directly: a class on the screen would restyle every widget at each tab switch."""
        narrow = width < WIDE
        self.screen.set_class(narrow, "-narrow")
        if self._pane == "compute":
            self._mount_compute()
        for name, selector in PANES.items():
            if narrow:
                shown = name == self._pane
            else:  # side by side: the Compute pane stands where the tree and totals do while it is chosen
                computing = self._pane == "compute"
                shown = name == "form" or (name == "compute") == computing
            self.query_one(CENTER if name == "tree" else selector).display = shown

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Show the config form", "Focus the form (F2)", partial(self.action_show_pane, "form"))
        yield SystemCommand("Show the parameter tree", "Focus the tree (F3)", partial(self.action_show_pane, "tree"))
        yield SystemCommand("Show the totals", "Focus the totals (F4)", partial(self.action_show_pane, "totals"))
        yield SystemCommand("Show compute and memory", "FLOPs, memory and what fits for a workload (F5)",
                            partial(self.action_show_pane, "compute"))
        tree = self.query_one(ParamTreeView)
        yield SystemCommand("Expand all", "Open every node of the tree (e in the tree)", tree.action_expand_all)
        yield SystemCommand("Collapse all", "Close every node of the tree (c in the tree)", tree.action_collapse_all)
        yield SystemCommand("Audit a claimed count", "Which conventions give a published figure (a)", self.action_audit)
        yield SystemCommand("Pin or unpin the baseline", "Show deltas against the current count (b)", self.action_toggle_baseline)
        yield SystemCommand("Export the breakdown", "Write JSON, CSV or Markdown (x)", self.action_export)
        yield SystemCommand("Open a model", "A Hub id (ORG/NAME), config.json, model folder or .safetensors (o)", self.action_open)
        yield SystemCommand("Save as a user preset", "Write the current config to your presets folder (s)", self.action_save_preset)
        yield SystemCommand("Help", "Every key (F1, ? outside inputs)", self.action_help)

    def _key_rows(self) -> list[tuple[str, str]]:
        return [
            ("F1, ?", "this help (? outside inputs)"),
            ("ctrl+p", "command palette: every preset and action"),
            ("Tab, shift+Tab", "next / previous field or pane"),
            ("F2 / F3 / F4", "config form / parameter tree / totals (tabs below 120 columns)"),
            ("F5", "compute and memory of a training step: batch, sequence, precision, what fits"),
            ("← →", "switch tabs when the tab bar has focus"),
            ("↑ ↓, Enter, Space", "move in the tree, open or close a node"),
            ("e / c", "expand / collapse the whole tree (in the tree)"),
            ("a", "audit a claimed count: which conventions reproduce it (outside inputs)"),
            ("b", "pin the current count as a baseline, or unpin it: deltas in the totals and tree"),
            ("x", "export the breakdown to JSON, CSV or Markdown (asks before overwriting)"),
            ("o", "open a Hub id, config.json, folder or checkpoint; differing tensors are marked ✗"),
            ("s", "save the current config as a user preset (asks before overwriting)"),
            ("type digits", "edit a field; the count updates at every key"),
            ("ctrl+q, q", "quit (q outside inputs)"),
        ]


def make_app(catalog: Catalog, config: BertConfig | None = None, *, title: str | None = None, preset: str | None = None) -> BertTuiApp:
    """The explorer for `config` (default: the catalog's default preset); shared by the CLI and the tests."""
    if config is None:
        from ..presets import DEFAULT_PRESET

        found = catalog.get(DEFAULT_PRESET)
        config, title, preset = found.config, found.name, found.name
    return BertTuiApp(catalog, config, title or preset or "custom", preset)


__all__ = ["BertTuiApp", "make_app"]
