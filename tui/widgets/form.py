"""The config form: preset selector, one input per HF field, pooler switch, head and labels.

Every edit reads the whole form into one `BertConfig` (the core validates it) and posts `ConfigForm.Changed`
with it, or `ConfigForm.Invalid` with the core's `ConfigError`, whose message is shown at its field. The form
never counts anything: the marginal costs beside the fields are handed to it by the app.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, Static, Switch

from ..core import HEADS, MODEL_TYPES, SIZE_FIELDS, SYMBOLS, BertConfig, ConfigError, Marginal
from ..core.config import EXTRA_FIELDS, EXTRA_SYMBOLS, FAMILY_FLAGS, FAMILY_HEADS, FLAG_FIELDS, LABELLED_PRETRAINING
from ..core.units import short_count
from ..plain import plain

FIELD_LABELS = {
    "vocab_size": "vocab",
    "hidden_size": "hidden",
    "num_hidden_layers": "layers",
    "num_attention_heads": "heads",
    "intermediate_size": "FFN",
    "max_position_embeddings": "positions",
    "type_vocab_size": "types",
    "num_labels": "labels",
    "embedding_size": "embedding",
    "num_hidden_groups": "groups",
    "inner_group_num": "per group",
    "relative_attention_num_buckets": "buckets",
    "position_buckets": "pos buckets",
    "max_relative_positions": "rel span",
    "conv_kernel_size": "conv kernel",
}
COST_UNITS = {
    "vocab_size": "token",
    "hidden_size": "H",
    "num_hidden_layers": "layer",
    "num_attention_heads": "",
    "intermediate_size": "unit",
    "max_position_embeddings": "position",
    "type_vocab_size": "type",
    "num_labels": "label",
    "embedding_size": "E",
    "num_hidden_groups": "group",
    "inner_group_num": "K",
    "relative_attention_num_buckets": "bucket",
    "position_buckets": "bucket",
    "max_relative_positions": "position",
    "conv_kernel_size": "C",
}
INPUT_FIELDS = (*SIZE_FIELDS, "num_labels")
ALL_SYMBOLS = {**SYMBOLS, **EXTRA_SYMBOLS}
# fields with a message line of their own
ERROR_FIELDS = (*INPUT_FIELDS, *EXTRA_FIELDS, "pooler", "head", "model_type")


FLAG_LABELS = {"norm_bias": "norm bias", "attention_bias": "attn bias", "mlp_bias": "MLP bias",
               "classifier_bias": "head bias", "decoder_bias": "LM bias", "relative_attention": "relative",
               "share_att_key": "shared keys", "pos_att_c2p": "c2p", "pos_att_p2c": "p2c",
               "norm_rel_ebd": "rel norm", "position_biased_input": "abs pos", "legacy": "legacy MLM"}
FLAG_COSTS = {"norm_bias": "+H/norm", "attention_bias": "+4H/layer", "mlp_bias": "+2I + H/layer",
              "classifier_bias": "+H (head)", "decoder_bias": "+V (LM head)", "relative_attention": "+2D·H",
              "share_att_key": "no pos_*_proj", "pos_att_c2p": "+H² + H/layer unless keys shared",
              "pos_att_p2c": "+H² + H/layer unless keys shared",
              "norm_rel_ebd": "+2H", "position_biased_input": "+P·E", "legacy": "cls.predictions"}


def flag_text(flag: str, value: bool) -> str:
    return f"{'on' if value else 'off'}: {FLAG_COSTS[flag]}"


def pooler_of(model_type: str, head: str) -> bool | None:
    """Whether the family's head class fixes the pooler (None: the user chooses; unknown pairs as BERT's)."""
    heads = FAMILY_HEADS.get(model_type, {})
    return heads[head] if head in heads else HEADS[head].pooler if head in HEADS else None


def uses_labels(model_type: str, head: str) -> bool:
    return head in HEADS and (HEADS[head].uses_num_labels or (head == "pretraining" and model_type in LABELLED_PRETRAINING))


def cost_text(marginal: Marginal) -> str:
    """'+7.09 M / layer', '+768 / token', 'heads: +0, they split H'."""
    if marginal.field == "num_attention_heads":
        return "+0: split H"
    per = f"{marginal.step} {COST_UNITS[marginal.field]}" if marginal.step > 1 else COST_UNITS[marginal.field]
    return f"+{short_count(marginal.delta)}/{per}"


class FieldInput(Input):
    """An Input that runs its own key bindings in the order the keys arrive.

    Textual 8.2.8 runs a focused widget's bindings (End, Backspace, arrows) only once the key has bubbled back
    up to the App, but inserts printable keys at once: End then 1 in one read (a paste, a buffered SSH link)
    typed the 1 first, replacing the value selected on focus ("30522" became "1"). Running the bound action
    here, in the Input's own queue, keeps keys in order; the event stops so the App does not run it again.
    """

    BOUND = {key.strip(): binding.action for binding in Input.BINDINGS if isinstance(binding, Binding)
             for key in binding.key.split(",")}

    async def on_key(self, event: events.Key) -> None:
        action = self.BOUND.get(event.key)
        if action is not None:
            event.stop()
            event.prevent_default()
            await self.run_action(action)


class ConfigForm(VerticalScroll):
    """The editable config. Focus order: preset, the seven sizes, pooler, head, labels."""

    class Changed(Message):
        """The form holds a valid config; `edited` when a user's edit (not a load) made it so."""

        def __init__(self, config: BertConfig, preset: str | None, edited: bool) -> None:
            self.config = config
            self.preset = preset
            self.edited = edited
            super().__init__()

    class Invalid(Message):
        """The form holds a value the core refuses (or an empty field)."""

        def __init__(self, error: ConfigError) -> None:
            self.error = error
            super().__init__()

    class PresetSelected(Message):
        def __init__(self, name: str) -> None:
            self.name = name
            super().__init__()

    def __init__(self, presets: Iterable[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._base = BertConfig()  # the config last loaded: what the form has no field for comes from it
        self._preset_names = list(presets)
        self._user_pooler = True  # the switch's own value, restored when the head lets the user choose again
        self._error_field: str | None = None  # the field whose message is shown
        self._loaded = False  # the selects post Changed as they mount, before any config is loaded
        self._fresh: set[str] = set()  # family fields mounted just now: their first Changed is not an edit
        self._family = "bert"  # the family whose head classes the head select lists

    def compose(self) -> ComposeResult:
        yield Label("preset", classes="field-label")
        yield Select([(plain(name), name) for name in self._preset_names], allow_blank=True, prompt="(edited)", id="preset", compact=True)
        for field in INPUT_FIELDS:
            with Horizontal(classes="field", id=f"row-{field}"):
                yield Label(f"{FIELD_LABELS[field]} {ALL_SYMBOLS.get(field, '')}".rstrip(), classes="field-label")
                yield FieldInput(restrict=r"[0-9]*", max_length=12, id=field, tooltip=field, compact=True)
                yield Static("", classes="field-cost", id=f"cost-{field}")
        with Horizontal(classes="field", id="row-pooler"):
            yield Label("pooler", classes="field-label")
            yield Switch(value=True, id="pooler")
            yield Static("", classes="field-cost", id="cost-pooler")
        yield Label("head", classes="field-label")
        yield Select([(f"{name} ({spec.hf_class})", name) for name, spec in HEADS.items()], allow_blank=False, value="none", id="head", compact=True)
        yield Label("model type", classes="field-label")
        yield Select([(name, name) for name in MODEL_TYPES], allow_blank=False, value="bert", id="model_type", compact=True)

    def on_mount(self) -> None:
        self._sort_focus_order()

    def _sort_focus_order(self) -> None:
        """Labels after the model type select in DOM order; move them to the end of the form."""
        self.move_child(self.query_one("#row-num_labels"), after=self.query_one("#model_type"))

    def load(self, config: BertConfig, preset: str | None) -> None:
        """Fill every field from `config` (a preset was chosen), then report the result once."""
        self._base = config
        self._show_family(config)
        with self.prevent(Input.Changed, Switch.Changed, Select.Changed):
            for flag in FAMILY_FLAGS.get(config.model_type, ()):
                for switch in self.query(f"#{flag}").results(Switch):
                    switch.value = getattr(config, flag)
                self._describe_flag(flag, getattr(config, flag))
            for field in (*INPUT_FIELDS, *(f for f in EXTRA_FIELDS if f in config.fields)):
                for found in self.query(f"#{field}").results(Input):  # a row mounted just now holds it already
                    found.value = str(self._value(config, field))
            self._user_pooler = config.pooler
            self.query_one("#head", Select).value = config.head
            self.query_one("#model_type", Select).value = config.model_type
            self._sync_pooler(config.head)
            self.query_one("#preset", Select).value = preset if preset in self._preset_names else Select.NULL
        self._loaded = True
        self.refresh_state(edited=False)

    @staticmethod
    def _value(config: BertConfig, field: str) -> int:
        return config.embedding_width if field == "embedding_size" else int(getattr(config, field))

    def _show_family(self, config: BertConfig, edited: bool = False) -> None:
        """Show the family's fields and nothing else: its own rows (mounted the first time a family needs
        them: most runs never do) after the seven, a size it lacks hidden. A row mounted now is read (and
        its cost shown) once it is in place: the form reports again then."""
        if config.model_type != self._family:  # the head choices named as the family's classes
            self._family = config.model_type
            heads = FAMILY_HEADS[config.model_type]
            choices = [(f"{name} ({config.replace(head=name, pooler=True, num_labels=2).hf_class})" if name in heads
                        else f"{name} (no {config.model_type} class)", name) for name in HEADS]
            head = self.query_one("#head", Select)
            with self.prevent(Select.Changed):
                current = head.value
                head.set_options(choices)
                head.value = "mlm" if current == "none" else "none"  # a change, so the shown label is redrawn
                head.value = current
        fields = config.fields
        for field in SIZE_FIELDS:
            row = self.query_one(f"#row-{field}")
            if row.display != (field in fields):
                row.display = field in fields
        after = self.query_one("#row-type_vocab_size")
        for field in EXTRA_FIELDS:
            found = self.query(f"#row-{field}")
            if field in fields and not found:
                row = Horizontal(Label(f"{FIELD_LABELS[field]} {ALL_SYMBOLS.get(field, '')}".rstrip(), classes="field-label"),
                                 FieldInput(str(self._value(config, field)), restrict=r"[0-9]*", max_length=12, id=field,
                                            tooltip=field, compact=True),
                                 Static("", classes="field-cost", id=f"cost-{field}"), classes="field", id=f"row-{field}")
                self.mount(row, after=after)
                self._fresh.add(field)
                self.call_after_refresh(self.refresh_state, edited)
                after = row
            elif found:
                found.first().display = field in fields
                if field in fields:
                    after = found.first()
        flags = FAMILY_FLAGS.get(config.model_type, ())
        for flag in FLAG_FIELDS:
            found = self.query(f"#row-{flag}")
            if flag in flags and not found:
                row = Horizontal(Label(FLAG_LABELS[flag], classes="field-label"), Switch(getattr(config, flag), id=flag),
                                 Static(flag_text(flag, getattr(config, flag)), classes="field-cost", id=f"cost-{flag}"),
                                 classes="field", id=f"row-{flag}")
                self.mount(row, after=after)
                after = row
            elif found:
                found.first().display = flag in flags
                if flag in flags:
                    after = found.first()

    def _describe_flag(self, flag: str, value: bool) -> None:
        for line in self.query(f"#cost-{flag}").results(Static):
            line.update(flag_text(flag, value))

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
        for marginal in costs:
            for line in self.query(f"#cost-{marginal.field}").results(Static):
                line.update(cost_text(marginal))

    @on(Input.Changed)
    @on(Switch.Changed)
    def _edited(self, event: Input.Changed | Switch.Changed) -> None:
        event.stop()
        if isinstance(event, Input.Changed) and event.input.id in self._fresh:
            self._fresh.discard(event.input.id)  # a row just mounted reports the value it was built with
            return
        if isinstance(event, Switch.Changed) and event.switch.id == "pooler":
            self._user_pooler = event.value
            self._describe_pooler("none")
        elif isinstance(event, Switch.Changed):
            self._describe_flag(str(event.switch.id), event.value)
        self._mark_edited()
        self.refresh_state()

    @on(Select.Changed, "#head")
    @on(Select.Changed, "#model_type")
    def _class_changed(self, event: Select.Changed) -> None:
        event.stop()
        if not self._loaded:
            return
        if event.select.id == "head":
            self._sync_pooler(str(event.value))
        else:  # another family: its fields (values kept from the last config where the family has them)
            try:
                family = self._base.replace(model_type=str(event.value), head="none")
            except ConfigError:  # the last config is not one of this family (DeBERTa's T = 0 for BERT): its
                family = BertConfig(model_type=str(event.value))  # fields all the same; the form says what to fix
            self._show_family(family, edited=True)
            self._sync_pooler(str(self.query_one("#head", Select).value))
        self._mark_edited()
        self.refresh_state()

    def _mark_edited(self) -> None:
        with self.prevent(Select.Changed):
            self.query_one("#preset", Select).value = Select.NULL

    def _model_type(self) -> str:
        value = self.query_one("#model_type", Select).value
        return value if isinstance(value, str) else "bert"

    def _sync_pooler(self, head: str) -> None:
        """The switch shows what the head class builds; it is the user's to set only for a base model that
        takes the choice (BertModel, AlbertModel, ...)."""
        fixed = pooler_of(self._model_type(), head)
        switch = self.query_one("#pooler", Switch)
        with self.prevent(Switch.Changed):
            switch.value = self._user_pooler if fixed is None else fixed
        switch.disabled = fixed is not None
        self._describe_pooler(head)

    def _describe_pooler(self, head: str) -> None:
        fixed = pooler_of(self._model_type(), head)
        state = "on" if self.query_one("#pooler", Switch).value else "off"
        text = f"{state}: fixed by head" if fixed is not None else f"{state}: adds H² + H"
        if FAMILY_HEADS.get(self._model_type(), {}).get("none", None) is False:
            text = f"{state}: no pooler"
        self.query_one("#cost-pooler", Static).update(text)

    @on(Select.Changed, "#preset")
    def _preset_changed(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str):
            self.post_message(self.PresetSelected(event.value))

    def read(self) -> BertConfig:
        """The form as a config; raises the core's `ConfigError` for the first field it refuses."""
        values: dict[str, object] = {}
        shown = [f for f in (*INPUT_FIELDS, *EXTRA_FIELDS) if any(row.display for row in self.query(f"#row-{f}"))]
        for field in shown:
            found = self.query(f"#{field}").results(Input)
            field_input = next(found, None)
            if field_input is None:  # its row was mounted just now: the loaded value stands
                continue
            text = field_input.value.strip()
            if not text:
                raise ConfigError(field, text, "is empty: type a whole number")
            values[field] = text
        head = self.query_one("#head", Select).value
        values["head"] = head if isinstance(head, str) else "none"
        values["pooler"] = self.query_one("#pooler", Switch).value if values["head"] == "none" else True
        for flag in FLAG_FIELDS:
            for switch in self.query(f"#{flag}").results(Switch):
                if any(row.display for row in self.query(f"#row-{flag}")):
                    values[flag] = switch.value
        if "num_labels" not in values:
            values["num_labels"] = self._base.num_labels
        model_type = self.query_one("#model_type", Select).value
        values["model_type"] = model_type if isinstance(model_type, str) else "bert"
        return BertConfig.from_mapping(values, base=self._base)  # keys the form has no field for stay as loaded

    def refresh_state(self, edited: bool = True) -> None:
        """Validate, show or clear the inline message, and tell the app."""
        head = self.query_one("#head", Select).value
        labels_row = self.query_one("#row-num_labels")
        labelled = isinstance(head, str) and uses_labels(self._model_type(), head)
        if labels_row.display != labelled:
            labels_row.display = labelled
        try:
            config = self.read()
        except ConfigError as error:
            self._show_error(error)
            self.post_message(self.Invalid(error))
        else:
            self._show_error(None)
            preset = self.query_one("#preset", Select).value
            self.post_message(self.Changed(config, preset if isinstance(preset, str) else None, edited))

    def _show_error(self, error: ConfigError | None) -> None:
        """One message at a time, at its field; only what changes is touched (each touch costs a layout)."""
        target = None if error is None else error.field if error.field in ERROR_FIELDS else "head"
        if self._error_field not in (None, target):
            self._error_line(self._error_field).display = False
            if self._error_field in (*INPUT_FIELDS, *EXTRA_FIELDS):
                self.query_one(f"#{self._error_field}", Input).remove_class("-invalid")
        self._error_field = target
        if error is None or target is None:
            return
        line = self._error_line(target)
        line.update(plain(f"⚠ {error.field}: {error.rule}" if error.value == "" else f"⚠ {error.value}: {error.rule}"))
        line.display = True
        if target in (*INPUT_FIELDS, *EXTRA_FIELDS):
            self.query_one(f"#{target}", Input).add_class("-invalid")

    def _error_line(self, field: str) -> Static:
        """The message line under `field`'s row, mounted the first time it has a message: start-up pays for
        every widget composed, and most fields never show one."""
        found = self.query(f"#error-{field}")
        if found:
            return found.first(Static)
        line = Static("", classes="field-error", id=f"error-{field}")
        self.mount(line, after=self.query_one(f"#{field}" if field in ("head", "model_type") else f"#row-{field}"))
        return line
