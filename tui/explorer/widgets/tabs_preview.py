"""The pane tabs as the explorer's first frame shows them, drawn by one widget.

Textual's `Tabs` is seven widgets (the bar, its scroll containers, a `Tab` per pane, the underline) and three
stylesheets to parse: the explorer paints its first frame with this line pair and mounts the `Tabs` right
after, in the same frame as the form's fields (see `ConfigForm.build`). It restates the rules of Textual's
`Tab` and `Underline` (the active tab in the foreground colour, the others at half) and draws the underline
as a new `Tabs` draws it: an empty highlight (`╸╺`) that Textual moves under the active tab once the tabs have
been laid out. tests/test_first_frame.py holds the screen before and after the swap to be the same.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget


class TabsPreview(Widget):
    COMPONENT_CLASSES = {"tabs-preview--tab", "tabs-preview--active", "tabs-preview--bar"}
    DEFAULT_CSS = """
    TabsPreview { width: 100%; height: 2; }
    TabsPreview > .tabs-preview--tab { color: $foreground 50%; }
    TabsPreview > .tabs-preview--active { color: $foreground; }
    TabsPreview > .tabs-preview--bar { color: $block-cursor-background; background: $foreground 10%; }
    """

    def __init__(self, labels: list[str], active: int = 0, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._labels = labels
        self._active = active

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = Style(bgcolor=self.rich_style.bgcolor)
        if y == 0:  # each tab padded by one cell on either side (Textual's `Tab { padding: 0 1 }`)
            segments = []
            for index, label in enumerate(self._labels):
                name = "tabs-preview--active" if index == self._active else "tabs-preview--tab"
                segments += [Segment(" ", base), Segment(label, base + self.get_component_rich_style(name)),
                             Segment(" ", base)]
            return Strip(segments).adjust_cell_length(width, base)
        if y == 1:  # the underline's bar, its background colour drawn as the line's colour (as Textual's Bar)
            bar = self.get_component_rich_style("tabs-preview--bar")
            return Strip([Segment(("╸╺" + "━" * width)[:width], base + Style.from_color(bar.bgcolor))])
        return Strip.blank(width, base)
