"""The explorer's main screen: the config form, the parameter tree with its detail strip, the totals and the
Compute pane, and the messages between them.

State flows one way. The form reports a validated `BertConfig` (a keystroke's report handed over at once, so
one frame shows the keys and their count; the others posted); the screen holds it as its one reactive `config`,
asks the core for the tree, and hands that tree to the panes. When the form holds something the core refuses,
the panes keep the last valid count, marked stale. At 120 columns and more the panes stand side by side; below
that they become tabs under a summary line that always shows the total.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import DescendantFocus, Resize
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Static, Tab, Tabs, Tree
from textual.worker import get_current_worker

from ..core import BertConfig, ConfigError, ParamTree, build_tree, marginal_costs
from ..core.count.compare import Comparison, compare
from ..core.units import short_count
from ..plain import middle_ellipsis, printable
from ..presets import Catalog, load_catalog
from .actions import bindings, help_rows, palette
from .widgets.form import ConfigForm
from .widgets.keybar import KeyBar
from .widgets.panes import DetailPane, TotalsPane
from .widgets.param_tree import ParamTreeView, key_of
from .widgets.tabs_preview import TabsPreview

if TYPE_CHECKING:
    from textual.widget import AwaitMount

    from ..core.count.trained import Adapted, FineTuning, Trained
    from ..core.step.method import Method
    from ..core.step.result import Compute
    from ..core.step.workload import Workload
    from .dialogs import Opened
    from .widgets.compute import ComputePane

# The dialogs (audit, export, open, save) load when first opened: importing them (formats, audit, file I/O) at
# start-up would delay the first paint for screens most runs never open.

WIDE = 120  # columns from which the panes stand side by side (below, the tree would be too narrow for its counts)
TABS = [("Config", "form"), ("Tree", "tree"), ("Totals", "totals"), ("Compute", "compute")]
PANES = {"form": "#form", "tree": "#tree", "totals": "#totals-box", "compute": "#compute-box"}
CENTER = "#center"  # the tree's pane: the tree with its detail strip
KEY_ROWS = help_rows()  # the help screen's rows


WORKING_OUT = "working out the peak and what fits: the step's allocation order, replayed on every card…"


class MainScreen(Screen[None]):
    """The panes of one model: form → core → tree, detail, totals and compute."""

    AUTO_FOCUS = "#preset"
    # Zoomed (z: the tree maximized), the key bar stays: without it, at 80×24 nothing said how to leave
    ALLOW_IN_MAXIMIZED_VIEW = ".-textual-system,Footer,#keybar"
    # The pane keys act as they arrive (priority), like Tab: F5 then Tab and digits in one read reach the
    # Compute pane's fields. Under a dialog (another screen) they do nothing. (actions.py declares each.)
    BINDINGS = bindings()

    class FieldsReady(Message):
        """The form's fields have replaced their first-frame preview: keys typed meanwhile can be handled."""

    config: var[BertConfig | None] = var(None, always_update=True)
    stale = var(False)

    def __init__(self, catalog: Catalog, config: BertConfig, title: str, preset: str | None,
                 stored: list[tuple[str, tuple[int, ...]]] | None = None, adapter: FineTuning | None = None) -> None:
        super().__init__()
        self.adapter = adapter  # an opened PEFT adapter's method: the Compute pane offers it
        # (model, adapter, what peft makes of them): asked by the tree's marks and the totals alike
        self._adapted_for: tuple[ParamTree, FineTuning, Adapted | ConfigError] | None = None
        self._trained_for: tuple[ParamTree, object, Trained | None] | None = None  # (`_trained`'s last answer)
        self.catalog = catalog
        self._start = (config, preset)
        self._source_title = title
        self.model: ParamTree | None = None
        self.baseline: ParamTree | None = None  # pinned with `b`: deltas show against it until unpinned
        self.stored = stored  # an opened checkpoint's tensors
        self._pane = "form"  # the tab shown below 120 columns
        self.comparison: Comparison | None = None
        self.workload: Workload | None = None  # the Compute pane's last valid workload (set when it mounts)
        self._workload_error: ConfigError | None = None  # what the core refuses in the pane's fields
        self._compute_result: Compute | None = None
        self._compute_full: Compute | None = None  # under a method, the same step fully fine-tuned beside it
        self._compute_asked = 0  # the fields' edits so far
        self._compute_valid = 0  # the last of them the core was asked about: a worker's answer counts for it only
        self._compute_error: ConfigError | None = None  # the last edit's refusal, if it was refused
        self._gpu_memory: int | None = None  # the Compute pane's GPU size, if one is typed
        self._how: FineTuning | None = None  # the Compute pane's fine-tuning method (None: full)
        self._invalid: ConfigError | None = None  # what the form holds that the core refuses (while stale)
        self._compute_pane: ComputePane | None = None  # mounted on the first F5

    def compose(self) -> ComposeResult:
        # The layout's class is set before the widgets mount: set after, it would restyle every one of them.
        self.set_class(self.app.size.width < WIDE, "-narrow")
        yield Static("", id="summary")
        yield TabsPreview([label for label, _ in TABS], id="pane-tabs")  # the Tabs mount after the first frame
        with Horizontal(id="main"):
            yield ConfigForm(self.catalog.presets, self._start, take_edit=self._take_edit, id="form")
            with Vertical(id="center"):
                yield ParamTreeView(id="tree")
                yield DetailPane(id="detail")
            yield Vertical(id="compute-box")  # the Compute pane mounts here when first shown (F5)
            with VerticalScroll(id="totals-box"):
                yield TotalsPane(id="totals")
        yield KeyBar(id="keybar")

    def on_mount(self) -> None:
        config, preset = self._start
        self._load_form(config, preset)
        self._layout(self.app.size.width)
        self.call_after_refresh(self._build_form)  # after the first frame, which shows the form's preview

    async def _build_form(self) -> None:
        """Mount the form's fields and the pane tabs in place of their previews, in one frame, then handle the
        keys typed meanwhile (once the screen has laid them out: until then the focus chain lacks them)."""
        with self.app.batch_update():
            await self.query_one("#pane-tabs").remove()
            await self.mount(Tabs(*(Tab(label, id=f"tab-{pane}") for label, pane in TABS), id="pane-tabs"),
                             after=self.query_one("#summary"))
            await self.query_one(ConfigForm).build()
        self.post_message(self.FieldsReady())

    # State: the form's config → the core's tree → the panes.

    def _load_form(self, config: BertConfig, preset: str | None) -> None:
        report = self.query_one(ConfigForm).load(config, preset)
        if report is not None:  # the form's preview: its report comes back at once
            self._config_changed(report)

    def _take_edit(self, report: ConfigForm.Changed | ConfigForm.Invalid) -> None:
        """A keystroke's report, handed over by the form in the keystroke's own turn: the panes are updated
        before the field asks for its repaint, so the frame that shows the keys shows their count."""
        if isinstance(report, ConfigForm.Changed):
            self._config_changed(report)
        else:
            self._config_invalid(report)

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
        if config is None:
            return
        try:
            form = self.query_one(ConfigForm)  # the first match (a query's truth walks every widget)
        except NoMatches:  # the app is closing: a late report finds no panes
            return
        self.model = build_tree(config)
        self.comparison = compare(self.model, self.stored) if self.stored is not None else None
        form.show_costs(marginal_costs(config))
        tree = self.query_one(ParamTreeView)
        tree.set_marks(self._marks())
        tree.show(self.model)
        self._show_detail()
        self._show_totals()
        self._show_compute()

    def watch_stale(self) -> None:
        self._show_totals()
        self._show_compute()

    def _adapted(self) -> Adapted | ConfigError | None:
        """The open adapter on the model on screen, as peft builds it (or why it no longer fits the model)."""
        if self.adapter is None or self.model is None:
            return None
        known = self._adapted_for
        if known is not None and known[0] is self.model and known[1] is self.adapter:
            return known[2]  # the tree's marks and the totals both ask, once an edit
        try:
            made = self.adapter.trained(self.model, self.model.config).adapted
            adapted: Adapted | ConfigError = made if made is not None else ConfigError("adapter", None, "no adapter")
        except ConfigError as refused:
            adapted = refused
        self._adapted_for = (self.model, self.adapter, adapted)
        return adapted

    def _trained(self) -> Trained | None:
        """What trains under the method the explorer speaks of — the Compute pane's choice once it is open, else
        an opened adapter's — for the Totals pane and the export alike (None: full fine-tuning, or a method that
        no longer fits the model, whose refusal shows where it is chosen)."""
        from ..core.count.trained import Adapted, of_adapted, trained

        how = self._how if self._compute_pane is not None else self.adapter
        if how is None or self.model is None:
            return None
        if how is self.adapter and self.adapter is not None:
            adapted = self._adapted()
            return of_adapted(adapted, self.adapter) if isinstance(adapted, Adapted) else None
        known = self._trained_for
        if known is not None and known[0] is self.model and known[1] == how:
            return known[2]  # (asked at every edit: the walk of a deep model's adapters is done once a model)
        try:
            result: Trained | None = trained(self.model, self.model.config, how)
        except ConfigError:
            result = None
        self._trained_for = (self.model, how, result)
        return result

    def _show_totals(self) -> None:
        if self.model is None:
            return
        self.query_one(TotalsPane).show(self.model, self.stale, self.baseline, self._claims(), self.comparison,
                                        self._adapted(), self._trained())
        total = self.model.total
        summary = self.query_one("#summary", Static)
        mark = "   ⚠ stale" if self.stale else ""
        pinned = f"   Δ {total - self.baseline.total:+,} vs pinned" if self.baseline is not None else ""
        count = f"{total:,}"
        rest = f" ({short_count(total)}){pinned}{mark}"
        width = (summary.content_region.width or self.app.size.width - summary.styles.gutter.width) - 1
        name = self.model.config.hf_class
        room = width - len(name) - 6 - len(count) - len(rest)  # " · " and three spaces before the total
        title = middle_ellipsis(printable(self._source_title), room) if room >= 4 else ""
        head = f"{name} · {title}   " if title else f"{middle_ellipsis(name, width - len(count) - len(rest) - 3)}   "
        summary.update(Text.assemble(head, (count, "bold"), rest), layout=False)  # one line, always
        summary.set_class(self.stale, "-stale")

    # The Compute pane: its workload and the app's config → the core's Compute → the pane.

    # The pane and the compute core load on the first F5 (handlers by name: the classes are not imported here).

    def on_compute_pane_changed(self, event: ComputePane.Changed) -> None:
        self.workload, self._workload_error = event.workload, None
        how_before, self._gpu_memory, self._how = self._how, event.gpu_memory, event.how
        self._show_compute()
        if event.how != how_before:  # (the Totals pane's training memory is the method's)
            self._show_totals()

    def on_compute_pane_invalid(self, event: ComputePane.Invalid) -> None:
        self._workload_error = event.error
        self._show_compute()

    def _show_compute(self) -> None:
        """Ask the core for the workload on the current config. A refusal (a field the core refuses, a sequence
        longer than the positions, a model type not modelled) shows at the fields; the last valid result stays,
        marked stale and saying why, while it is this model's (another model's figures go). Where what fits is
        the caching allocator replayed on every card (tenths of a second), a worker asks, off the event loop."""
        pane = self._compute_pane
        if pane is None or self.model is None or self.workload is None:
            return
        from ..core.step.compute import compute, fits_replayed
        from ..core.step.method import method_of

        if not pane.query("#compute-error"):  # still composing its fields: `_mount_compute` shows it after
            return
        self._compute_asked += 1  # the fields' edits so far
        error = self._workload_error
        if error is None:
            try:
                how = self._how  # (a method whose step is not modelled is refused by its own rule)
                method = None if how is None else method_of(self.model, self.model.config, how)
                # (under a method, the full step beside it is replayed where the method's own is not)
                if fits_replayed(self.model.config, self.workload, None):
                    # FLOPs and memory at once (the step's terms: no replay), the peak and what fits when the
                    # worker answers
                    terms = compute(self.model.config, self.workload, tree=self.model, method=method, fits=False,
                                    derive=False)
                    full = None if method is None else compute(self.model.config, self.workload, tree=self.model,
                                                               fits=False, derive=False)
                    self._compute_valid, self._compute_error = self._compute_asked, None
                    self._compute_off_loop(self.model, self.workload, self._gpu_memory, self._compute_asked, method)
                    pane.show_error(None)  # (the fields are valid now: an earlier refusal's message goes)
                    pane.show(terms, full=full, pending=WORKING_OUT)
                    return
                self._compute_result = compute(self.model.config, self.workload, self._gpu_memory, tree=self.model,
                                               method=method)
                self._compute_full = None if method is None else compute(
                    self.model.config, self.workload, self._gpu_memory, tree=self.model)
            except ConfigError as refused:
                error = refused
        if error is None:
            self._compute_valid = self._compute_asked
        self._compute_error = error
        self._present_compute(error)

    @work(thread=True, exclusive=True, group="compute")
    def _compute_off_loop(self, model: ParamTree, workload: Workload, gpu_memory: int | None, asked: int,
                          method: Method | None) -> None:
        """The step (under `method`, and the same step fully fine-tuned beside it), where a replay of the caching
        allocator works out what fits: tenths of a second, seconds for deep models."""
        from ..core.step.allocations import Cancelled, cancellable
        from ..core.step.compute import compute

        worker = get_current_worker()
        full: Compute | None = None
        try:
            with cancellable(lambda: worker.is_cancelled):  # (a later edit's worker cancels this one: it stops
                result: Compute | None = compute(model.config, workload, gpu_memory, tree=model,  # at its next
                                                 method=method)  # replay instead of finishing the search for
                if method is not None:  # figures no one will see)
                    full = compute(model.config, workload, gpu_memory, tree=model)
            error = None
        except Cancelled:
            return
        except ConfigError as refused:
            result, error = None, refused
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._computed, asked, result, full, error)

    def _computed(self, asked: int, result: Compute | None, full: Compute | None, error: ConfigError | None) -> None:
        """A worker's answer: shown if it answers the last valid workload (a refused edit since then keeps its
        message, the answer becoming the last valid result it shows)."""
        if asked != self._compute_valid or self._compute_pane is None:
            return  # a later valid workload's answer is on its way
        if result is not None:
            self._compute_result, self._compute_full = result, full
        if asked == self._compute_asked:
            self._compute_error = error
        self._present_compute(self._compute_error)

    def _present_compute(self, error: ConfigError | None) -> None:
        """The pane shows the error (or none) and the last result: the fields' own, or stale saying why."""
        pane = self._compute_pane
        if pane is None or self.model is None:
            return
        pane.show_error(error)
        result, full = self._compute_result, self._compute_full
        if result is not None and error is not None and result.config != self.model.config:
            result = self._compute_result = self._compute_full = None  # another model's figures: gone
        if result is None:
            pane.clear()
        elif error is not None:
            w = result.workload
            pane.show(result, f"showing the last valid workload, batch {w.batch:,} × sequence {w.seq:,}", full)
        elif self.stale:
            pane.show(result, f"the form holds a refused value: showing {result.config.hf_class} as last counted",
                      full)
        else:
            pane.show(result, full=full)

    def _mount_compute(self) -> AwaitMount | None:
        """The Compute pane is composed the first time it is shown: start-up pays nothing for it."""
        if self._compute_pane is not None:
            return None
        from ..core.step.workload import Workload
        from .widgets.compute import ComputePane

        self.workload = self.workload or Workload.from_settings({})  # (the settings' defaults)
        self.call_after_refresh(self._show_compute)
        self._compute_pane = ComputePane(self.workload, self.adapter, id="compute")
        return self.query_one("#compute-box").mount(self._compute_pane)

    @on(Tree.NodeHighlighted, "#tree")
    def _highlighted(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        tree = self.query_one(ParamTreeView)
        cursor = tree.cursor_node
        node = tree.node_for(cursor.data) if cursor is not None and cursor.data is not None else None
        note = tree.mark_for(cursor.data) if cursor is not None and cursor.data is not None else None
        if self.model is not None:
            missing = None
            if self.baseline is not None and node is not None:  # what the pinned model has here and this lacks
                from ..core.count.diff import gone

                missing = gone(self.model, node.name, self.baseline)
            self.query_one(DetailPane).show(node, self.model, note, missing)

    # Actions.

    def open_preset(self, name: str) -> None:
        preset = self.catalog.presets.get(name)
        if preset is None:
            self.notify(f"unknown preset {name!r}", severity="error")
            return
        self.stored = None  # another model: an opened checkpoint's comparison ends with its own
        self._load_form(preset.config, preset.name)

    def _marks(self) -> dict[str, str]:
        """Tree keys with a note: where an open adapter puts its tensors and what trains under it; whose tensor
        the opened checkpoint stores differently, with what it stores."""
        marks = self._adapter_marks()
        result = self.comparison
        if result is None:
            return marks
        marks.update((key_of(name), "✗ not in the file") for name in result.missing)
        marks.update((key_of(name), f"✗ file has {list(stored)}") for name, _, stored in result.mismatched)
        return marks

    def _adapter_marks(self) -> dict[str, str]:
        """peft's tensors beside the weight of the module they adapt (`+ LoRA A [8, 768], B [768, 8]`), and the
        model's own tensors that train under the adapter (a bias, a module saved whole as a trained copy)."""
        adapted = self._adapted()
        if adapted is None or isinstance(adapted, ConfigError):
            return {}
        from ..core.count.lora import PREFIX

        marks: dict[str, str] = {}
        added: dict[str, list[str]] = {}
        for param in adapted.params:
            name = param.name.removeprefix(PREFIX)
            if param.role in ("base", "original", "copy"):
                if param.trainable:
                    own = name.replace(".base_layer.", ".").replace(".modules_to_save.default.", ".")
                    marks[key_of(own)] = "trains" + (" (a trained copy)" if param.role == "copy" else "")
                continue
            module, _, tensor = name.partition(f".{param.role}")
            added.setdefault(module, []).append(f"{param.role.removeprefix('lora_')} {list(param.shape)}")
        for module, tensors in added.items():
            marks[key_of(f"{module}.weight")] = "frozen + " + ", ".join(tensors)
        return marks

    def _claims(self) -> list[tuple[str, str, str]]:
        """(value, scope, source) of the counts published for the preset on screen, if it is one."""
        preset = self.catalog.presets.get(self._source_title)
        return [(c.value, c.scope, c.source) for c in preset.claims] if preset else []

    def action_audit(self) -> None:
        from .dialogs import AuditScreen

        if self.model is not None and not isinstance(self.app.screen, AuditScreen):
            self.app.push_screen(AuditScreen(self.model.config, self._source_title, self._claims()))

    def action_toggle_baseline(self) -> None:
        """Pin the current count as the baseline (deltas in the totals and the tree), or unpin it."""
        self.baseline = None if self.baseline is not None else self.model
        self.query_one(ParamTreeView).set_baseline(self.baseline)
        self._show_totals()
        self._show_detail()
        self.notify("baseline pinned: b unpins it" if self.baseline else "baseline unpinned", timeout=3)

    def action_export(self) -> None:
        from .dialogs import ExportScreen

        if self.model is None or isinstance(self.app.screen, ExportScreen) or self._refuse_stale("exported"):
            return
        suggestion = f"{self._source_title.replace(' (edited)', '-edited')}.json"
        self.app.push_screen(ExportScreen(self.model, self._source_title, suggestion, self._trained()), self._exported)

    def _exported(self, path: Path | None) -> None:
        if path is not None:
            self.notify(f"wrote {path}", timeout=4)

    def action_open(self) -> None:
        from .dialogs import OpenScreen

        if not isinstance(self.app.screen, OpenScreen):
            self.app.push_screen(OpenScreen(), self._opened)

    def _opened(self, opened: Opened | None) -> None:
        if opened is None:
            return
        source, checkpoint = opened
        self.stored = [(t.name, t.shape) for t in checkpoint.tensors] if checkpoint is not None else None
        self._source_title = source.name
        self.adapter = source.method
        if self._compute_pane is not None:
            self._compute_pane.offer_adapter(source.method)
        self._load_form(source.config, None)
        for note in source.notes:
            self.notify(note, timeout=6)

    def action_save_preset(self) -> None:
        from ..presets import suggest_preset_name
        from .dialogs import SavePresetScreen

        if self.model is None or isinstance(self.app.screen, SavePresetScreen) or self._refuse_stale("saved"):
            return
        builtin = {name for name, p in self.catalog.presets.items() if p.builtin}
        suggestion = suggest_preset_name(self._source_title)
        self.app.push_screen(SavePresetScreen(self.model.config, suggestion, builtin), self._saved)

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

    async def action_show_pane(self, pane: str) -> None:
        """Bring a pane forward (a tab below 120 columns) and focus it, at once: the keys after F2–F5 in one
        read (Tab, digits) reach the pane's fields in order. The Compute pane's first showing waits for its
        mount. Under a dialog or the palette they do nothing, as before they were priority keys."""
        if self.app.screen is not self:
            return
        if pane == "compute":
            mounting = self._mount_compute()
            if mounting is not None:
                await mounting
        self.query_one(Tabs).active = f"tab-{pane}"
        self._choose(pane)  # now, not when TabActivated arrives: a hidden field cannot take the focus
        self.set_focus(self.query_one({"form": "#preset", "compute": "#batch"}.get(pane, PANES[pane])))

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        """A field that takes the focus is brought into view once the frame is laid out: F5 focused the batch
        scrolled out of sight (keys then changed it off screen), shift+Tab walked through fields unseen. (Focus
        scrolls at once, before a pane just shown has its layout.)"""
        self.call_after_refresh(event.widget.scroll_visible, animate=False)

    @on(Tabs.TabActivated, "#pane-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        self._choose((event.tab.id or "tab-form").removeprefix("tab-"))

    def _choose(self, pane: str) -> None:
        if self.app.size.width >= WIDE and pane == "form" and self._pane == "compute":
            pane = self._pane  # side by side the form is always shown: F2 keeps the Compute pane beside it
        self._pane = pane
        self._layout(self.app.size.width)

    def on_resize(self, event: Resize) -> None:
        self._layout(event.size.width)
        self._show_totals()  # the summary shortens the source's name to keep the total

    def _layout(self, width: int) -> None:
        """Side by side from 120 columns; below, only the active tab's pane. Display is set on the three
        panes directly: a class on the screen would restyle every widget at each tab switch."""
        narrow = width < WIDE
        self.set_class(narrow, "-narrow")
        if self._pane == "compute":
            self._mount_compute()
        for name, selector in PANES.items():
            if narrow:
                shown = name == self._pane
            else:  # side by side: the Compute pane stands where the tree and totals do while it is chosen
                computing = self._pane == "compute"
                shown = name == "form" or (name == "compute") == computing
            self.query_one(CENTER if name == "tree" else selector).display = shown

    def system_commands(self) -> Iterable[SystemCommand]:
        """The palette's actions (the App adds them to Textual's own), from the table in actions.py."""
        tree = self.query_one(ParamTreeView)
        for action in palette():
            if action.run.startswith("app."):
                yield SystemCommand(action.title, action.summary, partial(self.app.run_action,
                                                                           action.run.removeprefix("app.")))
            else:
                target = tree if action.target == "tree" else self
                yield SystemCommand(action.title, action.summary, partial(target.run_action, action.run))
