"""The config form: preset selector, one input per HF field, pooler switch, head and labels.

Every edit reads the whole form into one `BertConfig` (the core validates it) and reports `ConfigForm.Changed`
with it, or `ConfigForm.Invalid` with the core's `ConfigError`, whose message is shown at its field. A keystroke's
report is handed to `take_edit` at once (see `FieldInput`), every other one is posted. The form never counts
anything: the marginal costs beside the fields are handed to it by the app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Label, Select, Switch

from ...core import FAMILIES, SIZE_FIELDS, BertConfig, ConfigError, Marginal
from ...core.config import DEFAULT, EXTRA_FIELDS, FLAG_FIELDS
from ...plain import plain

if TYPE_CHECKING:
    from textual.widget import AwaitMount

from .field_input import FieldInput
from .form_errors import ErrorLines
from .form_fields import (
    INPUT_FIELDS,
    as_read,
    config_from_fields,
    cost_text,
    family_switched,
    field_value,
    flag_text,
    form_flags,
    head_choices,
    pooler_state,
    uses_labels,
)
from .form_preview import FormPreview
from .form_row import FieldRow


class ConfigForm(VerticalScroll):
    """The editable config. Focus order: preset, the seven sizes, pooler, head, labels."""

    can_focus = False  # every row is a focus stop of its own: the container would be one with nothing lit

    class Changed(Message):
        """The form holds a valid config; `edited` when a user's edit (not a load) made it so."""

        def __init__(self, config: BertConfig, preset: str | None, edited: bool) -> None:
            self.config = config
            self.preset = preset
            self.edited = edited
            super().__init__()

        def can_replace(self, message: Message) -> bool:
            """Posted reports (switches, selects: a keystroke's is handed over, see `FieldInput`) that queue up
            in a run: the screen handles the last of like reports only (Textual drops a queued message that the
            next one may replace)."""
            return (isinstance(message, ConfigForm.Changed) and message.preset == self.preset
                    and message.edited == self.edited)

    class Invalid(Message):
        """The form holds a value the core refuses (or an empty field)."""

        def __init__(self, error: ConfigError) -> None:
            self.error = error
            super().__init__()

    class PresetSelected(Message):
        def __init__(self, name: str) -> None:
            self.name = name
            super().__init__()

    def __init__(self, presets: Iterable[str], start: tuple[BertConfig, str | None] | None = None, *,
                 take_edit: Callable[[ConfigForm.Changed | ConfigForm.Invalid], object] | None = None,
                 id: str | None = None) -> None:
        """`take_edit`: who takes a keystroke's report in the keystroke's own turn (the screen showing the
        count); without it, that report is posted as the others are."""
        super().__init__(id=id)
        self._take_edit = take_edit or self.post_message
        self._start = start or (BertConfig(), None)  # what it is first loaded with: the preview draws it if it can
        self._base = BertConfig()  # the config last loaded: what the form has no field for comes from it
        self._preset_names = list(presets)
        self._user_pooler = True  # the switch's own value, restored when the head lets the user choose again
        self._errors = ErrorLines(self, self._mounted)
        self._loaded = False  # set once a config is in the fields
        # What the class selects hold as the form knows it: a select posts Changed as it mounts (with the value
        # it was built with), and that one is no edit.
        self._class_values = {"head": "none", "model_type": DEFAULT}
        self._fresh: set[str] = set()  # family fields mounted just now: their first Changed is not an edit
        self._family = DEFAULT  # the family whose head classes the head select lists
        self._built = False  # the fields are mounted (until then the preview stands in their place)
        self._costs: dict[str, str] = {}  # the last cost shown beside each field (the preview reads it too)
        self._previewed: tuple[BertConfig, str | None] | None = None  # reported by the preview, until `build` ends
        self._pending: tuple[BertConfig, str | None] | None = None  # loaded before the fields were mounted
        self._by_id: dict[str, Widget] | None = None  # the form's widgets by id (None: walk them again)

    def _ids(self) -> dict[str, Widget]:
        """The form's widgets by id, walked once after each mount: a query walks every widget, and reading the
        form and painting its costs would make sixty of them a keystroke."""
        if self._by_id is None:
            self._by_id = {}
            for node in self.walk_children(Widget):
                if node.id:
                    self._by_id.setdefault(node.id, node)  # the first in the DOM's order, as query_one finds it
        return self._by_id

    def _mounted(self, mounting: AwaitMount) -> AwaitMount:
        """Every mount goes through here: the index of ids is walked again, now and once the mounted rows have
        composed their children (until then a row's input is not found, as a query would not find it); the
        costs are painted then on the rows mounted now."""
        self._by_id = None
        self.call_after_refresh(self._mounted_rows)
        return mounting

    def _mounted_rows(self) -> None:
        self._forget_ids()
        if self._built:
            self._paint_costs()

    def _forget_ids(self) -> None:
        self._by_id = None

    def compose(self) -> ComposeResult:
        """Its first frame is the preview (one widget) where the preview draws the fields as they look; the
        fields are mounted by `build`, after that frame. Otherwise they are composed at once."""
        if FormPreview.draws(*self._start):
            yield FormPreview(self._costs, id="form-preview")
        else:
            self._built = True
            yield from self._fields(self._start[0])

    def _fields(self, config: BertConfig) -> list[Widget]:
        """The fields in focus order: preset, the sizes, pooler, head, model type, labels (shown for heads
        that take them); the class selects built holding `config`'s classes."""
        self._family = config.model_type
        self._class_values = {"head": config.head, "model_type": config.model_type}
        return [
            Label("preset", classes="field-label"),
            Select([(plain(name), name) for name in self._preset_names], allow_blank=True, prompt="(edited)",
                   id="preset", compact=True),
            *(FieldRow.number(field, "", self._typed) for field in SIZE_FIELDS),
            FieldRow.toggle("pooler", True),
            Label("head", classes="field-label"),
            Select(head_choices(config), allow_blank=False, value=config.head, id="head", compact=True),
            Label("model type", classes="field-label"),
            Select([(name, name) for name in FAMILIES], allow_blank=False, value=config.model_type, id="model_type",
                   compact=True),
            FieldRow.number("num_labels", "", self._typed),
        ]

    async def build(self) -> None:
        """Mount the fields in the preview's place, filled with what was loaded, in one frame: the screen
        looks the same before and after (a test holds it to that); the preset select takes the focus."""
        if self._built or not self.is_attached:  # built, or the app closed before its first frame
            return
        with self.app.batch_update():
            config, preset = self._pending or (self._base, None)
            await self._mounted(self.mount_all(self._fields(config)))
            self._built = True
            try:
                for mounting in self._fill(config, preset):
                    await mounting
            finally:
                self._previewed = None
            self._paint_costs()  # the rows mounted just now too (the next report would be a frame late)
            await self.query_one(FormPreview).remove()
            self._forget_ids()
            if self.screen.focused is None:
                self.screen.set_focus(self.query_one("#preset"))

    def load(self, config: BertConfig, preset: str | None) -> ConfigForm.Changed | None:
        """Fill every field from `config` (a preset was chosen), then report the result once. Before the fields
        are mounted the preview shows it, and the report is returned instead of posted: taken at once, the
        first frame has the count (a posted one would arrive frames later)."""
        self._base = config
        if not self._built:
            self._pending = (config, preset)
            shown = preset if preset in self._preset_names else None
            self.query_one(FormPreview).show(config, shown)
            self._previewed = (as_read(config), shown)
            return self.Changed(*self._previewed, False)
        self._fill(config, preset)
        return None

    def _fill(self, config: BertConfig, preset: str | None) -> list[AwaitMount]:
        """`load` on the mounted fields; the family rows it mounts (their mounts, to await)."""
        mounting = self._show_family(config)
        with self.prevent(Input.Changed, Switch.Changed, Select.Changed):
            self._put(config)
            self._user_pooler = config.pooler
            self.query_one("#model_type", Select).value = config.model_type
            self._class_values = {"head": config.head, "model_type": config.model_type}
            self._sync_pooler(config.head)
            self.query_one("#preset", Select).value = preset if preset in self._preset_names else Select.NULL
        self._loaded = True
        self.refresh_state(edited=False)
        return mounting

    _value = staticmethod(field_value)

    def _put(self, config: BertConfig) -> None:
        """`config`'s sizes, switches and head in the fields shown for its family (a row mounted just now holds
        its value already)."""
        for field in (*INPUT_FIELDS, *(f for f in EXTRA_FIELDS if f in config.fields)):
            if isinstance(found := self._ids().get(field), Input):
                found.value = str(self._value(config, field))
        for flag in form_flags(config.model_type):
            if isinstance(switch := self._ids().get(flag), Switch):
                switch.value = getattr(config, flag)
            self._describe_flag(flag, getattr(config, flag))
        self.query_one("#head", Select).value = config.head

    def _show_family(self, config: BertConfig, edited: bool = False) -> list[AwaitMount]:
        """Show the family's fields and nothing else: its own rows (mounted the first time a family needs
        them: most runs never do) after the seven, a size it lacks hidden. A row mounted now is read (and
        its cost shown) once it is in place: the form reports again then."""
        if config.model_type != self._family:  # the head choices named as the family's classes
            self._family = config.model_type
            head = self.query_one("#head", Select)
            with self.prevent(Select.Changed):
                current = head.value
                head.set_options(head_choices(config))
                head.value = "mlm" if current == "none" else "none"  # a change, so the shown label is redrawn
                head.value = current
        mounting: list[AwaitMount] = []
        fields = config.fields
        for field in SIZE_FIELDS:
            if (size_row := self._ids()[f"row-{field}"]).display != (field in fields):
                size_row.display = field in fields
        after = self._ids()["row-type_vocab_size"]  # (the index of ids, not a query: a query walks every widget)
        shown = {*fields, *form_flags(config.model_type)}
        for field in (*EXTRA_FIELDS, *FLAG_FIELDS):
            row = self._ids().get(f"row-{field}")
            if row is not None:
                row.display = field in shown
            elif field in shown:
                if field in FLAG_FIELDS:
                    value = getattr(config, field)
                    row = FieldRow.toggle(field, value, flag_text(field, value, self._costs))
                else:
                    row = FieldRow.number(field, str(self._value(config, field)), self._typed)
                    self._fresh.add(field)
                    self.call_after_refresh(self.refresh_state, edited)
                mounting.append(self._mounted(self.mount(row, after=after)))
            if row is not None and field in shown:
                after = row
        return mounting

    def _describe_flag(self, flag: str, value: bool) -> None:
        if isinstance(row := self._ids().get(f"row-{flag}"), FieldRow):
            row.show_cost(flag_text(flag, value, self._costs))

    def add_preset(self, name: str) -> None:
        if name not in self._preset_names:
            self._preset_names.append(name)
            with self.prevent(Select.Changed):
                self.query_one("#preset", Select).set_options([(plain(n), n) for n in self._preset_names])

    def select_preset(self, name: str) -> None:
        """Show `name` in the selector without reloading the fields (they hold that preset already)."""
        with self.prevent(Select.Changed):
            self.query_one("#preset", Select).value = name

    def show_costs(self, costs: Iterable[Marginal]) -> None:
        """Show the marginal cost of each field (computed by the core, handed in by the app)."""
        self._costs.clear()
        self._costs.update((marginal.field, cost_text(marginal)) for marginal in costs)
        if not self._built:
            self.query_one(FormPreview).refresh()
            return
        self._paint_costs()

    def _paint_costs(self) -> None:
        for field, text in self._costs.items():
            switch = self._ids().get(field) if field in FLAG_FIELDS else None
            if isinstance(switch, Switch):
                text = flag_text(field, switch.value, self._costs)
            if isinstance(row := self._ids().get(f"row-{field}"), FieldRow):
                row.show_cost(text)

    def _typed(self, field: FieldInput) -> None:
        """A size field's edit, handed over by the field in the keystroke's turn; its report goes to
        `take_edit` at once."""
        if field.id in self._fresh:
            self._fresh.discard(str(field.id))  # a row just mounted reports the value it was built with
            return
        self.refresh_state(report=self._take_edit)
        # The preset select says "(edited)" a frame after the count: its label lays out the screen, and the
        # frame with the count should not wait for that.
        self.call_after_refresh(self._mark_edited)

    @on(Switch.Changed)
    def _switched(self, event: Switch.Changed) -> None:
        event.stop()
        if event.switch.id == "pooler":
            self._user_pooler = event.value
            self._pooler_row().show_cost(pooler_state(self._model_type(), "none", event.value)[2])
        else:
            self._describe_flag(str(event.switch.id), event.value)
        self._mark_edited()
        self.refresh_state()

    @on(Select.Changed, "#head")
    @on(Select.Changed, "#model_type")
    def _class_changed(self, event: Select.Changed) -> None:
        event.stop()
        if not self._loaded or self._class_values.get(str(event.select.id)) == event.value:
            return
        self._class_values[str(event.select.id)] = str(event.value)
        if event.select.id == "head":
            self._sync_pooler(str(event.value))
        else:  # another family: what both have carried (as typed, where valid), the rest its defaults
            self._switch_family(str(event.value))
        self._mark_edited()
        self.refresh_state()

    def _switch_family(self, model_type: str) -> None:
        """Show `model_type`'s fields holding the core's `as_family` of what the form holds (the last loaded
        config where a field holds a refused value), and take that config as the one the fields stand over."""
        try:
            current = self.read(model_type=self._family)
        except ConfigError:  # a field holds a refused value: the last loaded config's stands
            current = self._base
        family = family_switched(current, model_type, self.query_one("#head", Select).value)
        self._base = family
        self._show_family(family, edited=True)
        with self.prevent(Input.Changed, Switch.Changed, Select.Changed):
            self._put(family)
            self._class_values["head"] = family.head
        self._sync_pooler(family.head)

    def _mark_edited(self) -> None:
        preset = self.query_one("#preset", Select)
        if preset.value != Select.NULL:  # once is enough: setting it again repaints the select at every key
            with self.prevent(Select.Changed):
                preset.value = Select.NULL

    def _model_type(self) -> str:
        value = self.query_one("#model_type", Select).value
        return value if isinstance(value, str) else DEFAULT

    def _sync_pooler(self, head: str) -> None:
        """The switch shows what the head class builds; it is the user's to set only for a base model that
        takes the choice (BertModel, AlbertModel, ...)."""
        value, fixed, text = pooler_state(self._model_type(), head, self._user_pooler)
        switch = self.query_one("#pooler", Switch)
        with self.prevent(Switch.Changed):
            switch.value = value
        switch.disabled = fixed
        self._pooler_row().show_cost(text)

    def _pooler_row(self) -> FieldRow:
        return self.query_one("#row-pooler", FieldRow)

    @on(Select.Changed, "#preset")
    def _preset_changed(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str):
            self.post_message(self.PresetSelected(event.value))

    def read(self, model_type: str | None = None) -> BertConfig:
        """The form as a config (as `model_type`'s, if given: the family it held before a switch); raises the
        core's `ConfigError` for the first field it refuses."""
        values: dict[str, object] = {}
        for field in (*INPUT_FIELDS, *EXTRA_FIELDS, *FLAG_FIELDS):  # the rows shown (a family's: once mounted)
            if isinstance(row := self._ids().get(f"row-{field}"), FieldRow) and row.display:
                values[field] = row.value()
        values.update(head=self.query_one("#head", Select).value,
                      model_type=model_type or self.query_one("#model_type", Select).value,
                      pooler=self.query_one("#pooler", Switch).value)
        return config_from_fields(values, self._base)

    def refresh_state(self, edited: bool = True,
                      report: Callable[[ConfigForm.Changed | ConfigForm.Invalid], object] | None = None) -> None:
        """Validate, show or clear the inline message, and tell the app (`report`, or posted)."""
        send = report or self.post_message
        head = self.query_one("#head", Select).value
        labels_row = self.query_one("#row-num_labels")
        labelled = isinstance(head, str) and uses_labels(self._model_type(), head)
        if labels_row.display != labelled:
            labels_row.display = labelled
        try:
            config = self.read()
        except ConfigError as error:
            self._errors.show(error)
            send(self.Invalid(error))
        else:
            self._errors.show(None)
            preset = None if edited else self.query_one("#preset", Select).value  # an edit ends the preset
            read = (config, preset if isinstance(preset, str) else None)
            if read != self._previewed:  # the fields mounted in place of the preview report nothing new
                send(self.Changed(*read, edited))
