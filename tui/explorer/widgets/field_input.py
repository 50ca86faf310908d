"""`FieldInput`: the Input every numeric field of the explorer uses (the form's, the Compute pane's, the
dialogs'), its keys run in the order they arrive and its edits handed over in its own turn."""

from __future__ import annotations

from collections.abc import Callable

from textual import events, on
from textual.binding import Binding
from textual.geometry import Size
from textual.widgets import Input


class FieldInput(Input):
    """An Input that runs its own key bindings in the order the keys arrive.

    Textual 8.2.8 runs a focused widget's bindings (End, Backspace, arrows) only once the key has bubbled back
    up to the App, but inserts printable keys at once: End then 1 in one read (a paste, a buffered SSH link)
    typed the 1 first, replacing the value selected on focus ("30522" became "1"). Running the bound action
    here, in the Input's own queue, keeps keys in order; the event stops so the App does not run it again.
    """

    BOUND = {key.strip(): binding.action for binding in Input.BINDINGS if isinstance(binding, Binding)
             for key in binding.key.split(",")}

    def __init__(self, value: str | None = None, *, on_edit: Callable[[FieldInput], None] | None = None,
                 **kwargs: object) -> None:
        """`on_edit`: called with the field for each edit, in the field's own turn, instead of posting
        `Input.Changed` on (see `_edited`)."""
        super().__init__(value, **kwargs)  # type: ignore[arg-type]
        # Input sets `-valid` at every change (no validators: always valid); set from the start, the first
        # keystroke does not restyle the field (nothing in the stylesheets styles `-valid`).
        self.add_class("-valid")
        self._on_edit = on_edit
        self._ahead: str | None = None  # a value reported before its own Changed arrived (see `_edited`)

    @property
    def content_width(self) -> int:
        """The value's width (Input's own), but never less than the field's: Textual's Input sets its virtual
        size from it at every change, and a new virtual size lays out the whole screen. While the value fits the
        field the virtual size stays; scrolling is as before (nothing to scroll until the value is wider than
        the field)."""
        return max(super().content_width, self.content_size.width)

    def on_resize(self) -> None:
        """The virtual size the next keystroke would set, set now without a layout: Input sets it as it mounts,
        before its width is known, so the first keystroke changed it (a layout of the whole screen)."""
        self.set_reactive(Input.virtual_size, Size(self.content_width, 1))

    @on(Input.Changed)
    def _edited(self, event: Input.Changed) -> None:
        """Hand the edit to `on_edit` now, with the value the field holds now.

        Keys that arrive in one read (a fast typist, a paste) are all applied before the first of their
        Changed messages is handled: the first reports the value the burst ends with, and the others are
        dropped up to the one that carries it. Reported in this turn, before the field goes idle and asks the
        screen for its repaint, the panes' repaint requests reach the screen with the field's, and one frame
        shows the keys and their count (a message would be handled after the field had gone idle: a frame
        later)."""
        if self._on_edit is None:
            return
        event.stop()
        if event.value != self.value:  # a burst's earlier key: the field holds a later value already
            if self._ahead is None:
                self._ahead = self.value
                self._on_edit(self)
        elif self._ahead == event.value:  # the burst's last key: reported ahead
            self._ahead = None
        else:
            self._ahead = None
            self._on_edit(self)

    async def on_key(self, event: events.Key) -> None:
        action = self.BOUND.get(event.key)
        if action is not None:
            event.stop()
            event.prevent_default()
            await self.run_action(action)
