"""The config form's first frame, drawn as lines by one widget (`FormPreview`): the app paints it and mounts the
form's sixty-odd widgets right after, in a frame that looks the same."""

from __future__ import annotations

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from ...core import SIZE_FIELDS, BertConfig
from ...core.config import EXTRA_FIELDS, FLAG_FIELDS
from ...plain import plain
from .form_fields import (
    FLAG_LABELS,
    field_label,
    field_value,
    first_line,
    flag_text,
    form_flags,
    head_choices,
    pooler_state,
    uses_labels,
)

# A cell run of the preview: text, the component class that styles it, the width it takes (padded).
Run = tuple[str, str, int]
LABEL_WIDTH, VALUE_WIDTH, SWITCH_WIDTH = 12, 10, 6  # as app.tcss sets them: `.field-label`, the form's Input, Switch


class FormPreview(Widget):
    """The form as its first frame shows it, drawn as lines by one widget.

    The form's sixty-odd widgets were two thirds of the explorer's start-up: the app paints its first frame
    with this preview and mounts the fields right after (`ConfigForm.build`), in one frame that looks the
    same. Its component classes restate the real widgets' rules (Textual's own CSS for compact Input, Select
    and Switch, app.tcss for labels and costs), so the colours come from the theme as theirs do; a test holds
    the screen before and after the swap to be the same, cell by cell, for every preset.
    """

    COMPONENT_CLASSES = {"preview--label", "preview--input", "preview--select", "preview--select-focus",
                         "preview--prompt-focus", "preview--arrow", "preview--arrow-focus", "preview--switch",
                         "preview--slider-on", "preview--slider-off"}
    DEFAULT_CSS = """
    FormPreview { height: auto; }
    FormPreview > .preview--label { color: $text-muted; }
    FormPreview > .preview--input { background: $surface; color: $foreground; }
    FormPreview > .preview--select { background: $surface; color: $foreground; }
    FormPreview > .preview--select-focus { background: $surface; background-tint: $primary 45%; color: $foreground; }
    FormPreview > .preview--prompt-focus { background: $surface; background-tint: $primary 45%; color: $foreground 50%; }
    FormPreview > .preview--arrow { background: $surface; color: $foreground 50%; }
    FormPreview > .preview--arrow-focus { background: $surface; background-tint: $primary 45%; color: $foreground 50%; }
    FormPreview > .preview--switch { background: $surface; }
    FormPreview > .preview--slider-on { color: $success; background: $panel-darken-2; }
    FormPreview > .preview--slider-off { color: $panel; background: $panel-darken-2; }
    """

    @staticmethod
    def draws(config: BertConfig, preset: str | None) -> bool:
        """Whether the preview draws the form for `config` as its fields look: not when the pooler switch is
        fixed by the head class (Textual dims a disabled widget in two passes, its background and then every
        colour, which the preview does not reproduce), nor a preset name long enough to wrap in its select
        (up to 64 characters). Those forms are composed at once."""
        return not pooler_state(config.model_type, config.head, config.pooler)[1] and len(preset or "") <= 32

    def __init__(self, costs: dict[str, str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[list[Run] | None] = []  # None: a blank line
        self._costs = costs  # the form's own cost texts (kept by the form, read here)

    def show(self, config: BertConfig, preset: str | None) -> None:
        """The rows the form shows for `config`, in its order (see `ConfigForm._fields` and `_show_family`)."""
        def select(text: str, focused: bool = False) -> list[Run]:
            name = "preview--prompt-focus" if focused and preset is None else f"preview--select{'-focus' * focused}"
            return [(text, name, -2), ("▼", f"preview--arrow{'-focus' * focused}", 1),
                    ("", f"preview--select{'-focus' * focused}", 1)]

        def row(label: str, value: str, field: str) -> list[Run]:  # the cost is looked up as it is drawn
            return [(label, "preview--label", LABEL_WIDTH), (value, "preview--input", VALUE_WIDTH),
                    (" ", "", 1), (field, "cost", 0)]

        def switch(label: str, on: bool, cost: str) -> list[Run]:
            return [(label, "preview--label", LABEL_WIDTH), ("", f"switch:{'on' if on else 'off'}", SWITCH_WIDTH),
                    (" ", "", 1), (cost, "preview--label", 0)]

        fields = config.fields
        rows: list[list[Run] | None] = [None, [("preset", "preview--label", 0)],
                                        select(plain(preset).plain if preset is not None else "(edited)", focused=True), None]
        for field in SIZE_FIELDS:
            if field in fields:
                rows.append(row(field_label(field), str(field_value(config, field)), field))
        rows += [row(field_label(field), str(field_value(config, field)), field)
                 for field in EXTRA_FIELDS if field in fields]
        rows += [switch(FLAG_LABELS[flag], getattr(config, flag), flag_text(flag, getattr(config, flag), self._costs))
                 for flag in FLAG_FIELDS if flag in form_flags(config.model_type)]
        rows.append(None)
        on, _, text = pooler_state(config.model_type, config.head, config.pooler)
        rows.append(switch("pooler", on, text))
        choices = dict((name, label) for label, name in head_choices(config))
        rows += [None, [("head", "preview--label", 0)], select(choices[config.head]),
                 None, [("model type", "preview--label", 0)], select(config.model_type)]
        if uses_labels(config.model_type, config.head):
            rows.append(row(field_label("num_labels"), str(config.num_labels), "num_labels"))
        self._rows = rows
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        row = self._rows[y] if y < len(self._rows) else None
        base = Style(bgcolor=self.rich_style.bgcolor)  # what lies under the form: its background, no colour
        segments: list[Segment] = []
        for text, name, spec in row or ():
            rest = not spec  # the rest of the line: a cost, cut with an ellipsis as app.tcss says
            cells = width + spec if spec < 0 else spec or max(0, width - sum(s.cell_length for s in segments))
            if name.startswith("switch:"):
                segments += self._switch(name == "switch:on", cells, base)
                continue
            if name == "cost":
                text, name = self._costs.get(text, ""), "preview--label"
            style = base + self.get_component_rich_style(name) if name else base
            text = first_line(text, cells, ellipsis=rest)
            pad = style if name == "preview--input" else base if name == "preview--label" else Style(bgcolor=style.bgcolor)
            segments += [Segment(part, part_style) for part, part_style in ((text, style), (" " * (cells - len(text)), pad))
                         if part]
        return Strip(segments).adjust_cell_length(width, base)

    def _switch(self, on: bool, cells: int, base: Style) -> list[Segment]:
        """A Switch as Textual draws it: its slider is a horizontal scroll bar."""
        slider = self.get_component_rich_style(f"preview--slider-{'on' if on else 'off'}")
        switch = self.get_component_rich_style("preview--switch")
        bar = ScrollBarRender.render_bar(size=cells, virtual_size=100, window_size=50, position=50 * on, thickness=1,
                                         vertical=False, back_color=slider.bgcolor or Color.parse("#555555"),
                                         bar_color=slider.color or Color.parse("bright_magenta"))
        return [Segment(segment.text, base + switch + (segment.style or Style()))
                for segment in bar.segments if segment.text != "\n"]
