"""One row of the config form: a label, its control (a number field or a switch) and what the core says it costs.

The row, its control and its cost line keep the ids the form and the tests know them by: `row-F`, `F` and
`cost-F` for field or switch `F`.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.containers import Horizontal
from textual.widgets import Label, Static, Switch

from ...core import ConfigError
from .field_input import FieldInput
from .form_fields import FLAG_LABELS, field_label


class FieldRow(Horizontal):
    """A field's or a switch's row."""

    def __init__(self, field: str, label: str, control: FieldInput | Switch, cost: str = "") -> None:
        self.field, self.control = field, control
        self.cost = Static(cost, classes="field-cost", id=f"cost-{field}")
        super().__init__(Label(label, classes="field-label"), control, self.cost, classes="field", id=f"row-{field}")

    @classmethod
    def number(cls, field: str, value: str, on_edit: Callable[[FieldInput], None]) -> FieldRow:
        """A size field: digits only, its edits handed to `on_edit` in the keystroke's turn."""
        control = FieldInput(value, restrict=r"[0-9]*", max_length=12, id=field, tooltip=field, compact=True,
                             on_edit=on_edit)
        return cls(field, field_label(field), control)

    @classmethod
    def toggle(cls, flag: str, value: bool, cost: str = "") -> FieldRow:
        """A config switch (`pooler`, or one of a family's) with its state and cost beside it."""
        return cls(flag, FLAG_LABELS.get(flag, flag), Switch(value, id=flag), cost)

    def value(self) -> str | bool:
        """What the row holds: a switch's state, or a size's text (the core reads it; empty is refused here)."""
        if isinstance(self.control, Switch):
            return self.control.value
        text = self.control.value.strip()
        if not text:
            raise ConfigError(self.field, text, "is empty: type a whole number")
        return text

    def show_cost(self, text: str) -> None:
        """The cost line, repainted only when it changes (one line, no wrap: no layout)."""
        if self.cost.content != text:
            self.cost.update(text, layout=False)
