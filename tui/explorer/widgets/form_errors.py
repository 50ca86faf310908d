"""The config form's one message at a time: the core's refusal shown under the field it names."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.widget import Widget
from textual.widgets import Input, Static

from ...core import ConfigError
from ...core.config import EXTRA_FIELDS
from ...plain import plain
from .form_fields import ERROR_FIELDS, INPUT_FIELDS

if TYPE_CHECKING:
    from textual.widget import AwaitMount

TYPED = (*INPUT_FIELDS, *EXTRA_FIELDS)  # fields whose input is marked invalid beside the message


class ErrorLines:
    """The message lines under the form's rows; only what changes is touched (each touch costs a layout)."""

    def __init__(self, form: Widget, mounted: Callable[[AwaitMount], object]) -> None:
        """`mounted`: how the form mounts a widget of its own (it keeps an index of its widgets)."""
        self._form, self._mounted = form, mounted
        self._field: str | None = None  # the field whose message is shown

    def show(self, error: ConfigError | None) -> None:
        """`error`'s message at its field (a field without a line of its own: at the head), or none."""
        target = None if error is None else error.field if error.field in ERROR_FIELDS else "head"
        if self._field not in (None, target):
            self._line(self._field).display = False
            if self._field in TYPED:
                self._form.query_one(f"#{self._field}", Input).remove_class("-invalid")
        self._field = target
        if error is None or target is None:
            return
        line = self._line(target)
        line.update(plain(f"⚠ {error.field}: {error.rule}" if error.value == "" else f"⚠ {error.value}: {error.rule}"))
        line.display = True
        if target in TYPED:
            self._form.query_one(f"#{target}", Input).add_class("-invalid")

    def _line(self, field: str) -> Static:
        """The message line under `field`'s row, mounted the first time it has a message: start-up pays for
        every widget composed, and most fields never show one."""
        found = self._form.query(f"#error-{field}")
        if found:
            return found.first(Static)
        line = Static("", classes="field-error", id=f"error-{field}")
        under = self._form.query_one(f"#{field}" if field in ("head", "model_type") else f"#row-{field}")
        self._mounted(self._form.mount(line, after=under))
        return line
