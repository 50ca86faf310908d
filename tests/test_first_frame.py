"""The explorer's first frame: one-widget previews stand where the form's fields and the pane tabs will be, and
the screen looks the same, cell by cell, before and after those are mounted in their place (no flash, no
half-built form at 80×24). Keys typed before the fields exist wait for them (tests/test_typeahead.py types into a
pty). Side by side (120 columns) the screen also stays the same once everything has settled; below, the tabs'
underline then moves under the active tab, as Textual's Tabs always did."""

from __future__ import annotations

import re
from typing import cast

import pytest
from textual.widgets import Input

from tui.core import BertConfig
from tui.explorer.app import BertTuiApp, make_app
from tui.explorer.main_screen import MainScreen
from tui.explorer.widgets.form_preview import FormPreview
from tui.presets import load_catalog

from .ready import until

pytestmark = pytest.mark.startup  # these tests look at the explorer before its fields are mounted

CATALOG = load_catalog()
DRAWN = [name for name in CATALOG.presets if FormPreview.draws(CATALOG.get(name).config, name)]


def screen(app: BertTuiApp) -> str:
    """The screen as an SVG, same style runs merged, each text run's style written in place of its class (the
    class numbers depend on which styles the whole screen uses), the content-derived ids removed."""
    svg = re.sub(r"terminal-\d+-", "terminal-", app.export_screenshot(simplify=True))
    styles = dict(re.findall(r"\.(terminal-r\d+) \{ ([^}]*) \}", svg))
    svg = re.sub(r'class="(terminal-r\d+)"', lambda found: f'style="{styles[found.group(1)]}"', svg)
    return svg[svg.index("</style>"):]


def without_row(svg: str, row: int) -> str:
    """The SVG without one row of cells (its text runs and background rects)."""
    y = f'y="{1.5 + 24.4 * row:.1f}"'.replace('.0"', '"')
    svg = re.sub(rf'<text [^>]*terminal-line-{row}\)"[^>]*>.*?</text>', "", svg, flags=re.S)
    return re.sub(rf"<rect [^>]*{y}[^>]*/>", "", svg)


async def before_and_after(monkeypatch: pytest.MonkeyPatch, config: BertConfig, preset: str | None,
                           size: tuple[int, int]) -> tuple[str | None, str]:
    """The screen just before the previews are replaced (None if the form was composed at once), and once the
    fields and tabs are in place and everything has settled. Below 120 columns the tabs' underline row is left
    out of both: a new Tabs moves its highlight under the active tab after its first layout, as it always did."""
    shots: list[str] = []
    finish = MainScreen._build_form

    async def watched(main: MainScreen) -> None:
        if main.query(FormPreview):
            shots.append(screen(cast(BertTuiApp, main.app)))
        await finish(main)

    monkeypatch.setattr(MainScreen, "_build_form", watched)
    app = make_app(CATALOG, config, title=preset or "custom", preset=preset)
    async with app.run_test(size=size) as pilot:  # waited for by a condition: one pause was not enough under load
        await until(pilot, lambda: (app.ready and not app.query(FormPreview) and app.query("#vocab_size")
                                    and app.query("Tabs")), "the fields and tabs in place of the previews")
        await pilot.pause()
        settled = screen(app)
    if size[0] < 120:
        return (without_row(shots[0], 2) if shots else None), without_row(settled, 2)
    return (shots[0] if shots else None), settled


def test_the_preview_draws_most_presets() -> None:
    assert {"bert-base-uncased", "bert-large-uncased", "example-40k", "albert-base-v2", "roberta-base"} <= set(DRAWN)


@pytest.mark.parametrize("name", DRAWN)
async def test_every_drawn_preset_looks_the_same_before_and_after_its_fields_mount(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    before, after = await before_and_after(monkeypatch, CATALOG.get(name).config, name, (80, 24))
    assert before is not None, "the preview was not shown"
    assert before == after
    assert f"{CATALOG.get(name).config.hf_class}" in before  # the summary: class and total are in the first frame


@pytest.mark.parametrize(("name", "size"), [("bert-base-uncased", (120, 40)), ("albert-base-v2", (120, 40)),
                                            ("bert-base-uncased", (40, 15)), ("roberta-base", (200, 50))])
async def test_wide_and_tiny_terminals_look_the_same_too(monkeypatch: pytest.MonkeyPatch, name: str,
                                                         size: tuple[int, int]) -> None:
    before, after = await before_and_after(monkeypatch, CATALOG.get(name).config, name, size)
    assert before is not None and before == after


async def test_a_config_of_no_preset_shows_the_edited_prompt_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = await before_and_after(monkeypatch, BertConfig(num_hidden_layers=3), None, (80, 24))
    assert before is not None and before == after and "(edited)" in before


def test_only_the_underline_row_is_left_out() -> None:
    svg = '<rect fill="#1" x="0" y="50.3" width="1"/><rect fill="#2" x="0" y="74.7" width="1"/>' \
          '<text class="r1" x="0" y="68.8" clip-path="url(#terminal-line-2)">╸╺</text>' \
          '<text class="r1" x="0" y="93.2" clip-path="url(#terminal-line-3)">preset</text>'
    assert without_row(svg, 2) == '<rect fill="#2" x="0" y="74.7" width="1"/>' \
                                  '<text class="r1" x="0" y="93.2" clip-path="url(#terminal-line-3)">preset</text>'


async def test_the_first_frame_already_shows_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    before, _ = await before_and_after(monkeypatch, CATALOG.get("bert-base-uncased").config, "bert-base-uncased", (80, 24))
    assert before is not None and "109,482,240" in before


@pytest.mark.parametrize(("config", "preset"), [
    (CATALOG.get("distilbert-base-uncased").config, "distilbert-base-uncased"),  # no pooler: the switch is disabled
    (BertConfig(head="mlm"), None),  # the head class fixes the pooler
    (BertConfig(), "a-user-preset-whose-name-is-long-enough-to-wrap-in-the-select"),
])
async def test_what_the_preview_does_not_draw_is_composed_at_once(
        monkeypatch: pytest.MonkeyPatch, config: BertConfig, preset: str | None) -> None:
    assert not FormPreview.draws(config, preset)
    before, _ = await before_and_after(monkeypatch, config, preset, (80, 24))
    assert before is None


async def test_keys_sent_before_the_fields_exist_are_applied_after_in_order() -> None:
    app = make_app(CATALOG)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.query(FormPreview)  # nothing mounted yet: the keys wait
        await pilot.press("tab", "end", "ctrl+u", "4", "0", "0", "0", "0")
        await until(pilot, lambda: app.ready and app.query_one("#vocab_size", Input).value == "40000",
                    "the keys typed before the fields existed applied to them")
        assert app.main.model is not None and app.main.model.config.vocab_size == 40000
