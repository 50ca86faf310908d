"""The explorer's first frame: the form's preview (one widget) stands where the fields will be, and the screen
looks the same, cell by cell, before and after the fields are mounted in its place (no flash, no half-built
form at 80×24). Keys typed before the fields exist wait for them (tests/test_typeahead.py types into a pty)."""

from __future__ import annotations

import re

import pytest
from textual.widgets import Input

from tui.app import BertTuiApp, make_app
from tui.core import BertConfig
from tui.presets import load_catalog
from tui.widgets.form import ConfigForm, FormPreview

CATALOG = load_catalog()
DRAWN = [name for name in CATALOG.presets if FormPreview.draws(CATALOG.get(name).config, name)]


def screen(app: BertTuiApp) -> str:
    """The screen as an SVG, same style runs merged, its content-derived ids removed."""
    return re.sub(r"terminal-\d+", "terminal", app.export_screenshot(simplify=True))


async def before_and_after(monkeypatch: pytest.MonkeyPatch, config: BertConfig, preset: str | None,
                           size: tuple[int, int]) -> tuple[str | None, str]:
    """The screen just before the fields are mounted (None if they were composed at once), and after."""
    shots: list[str] = []
    build = ConfigForm.build

    async def watched(form: ConfigForm) -> None:
        if form.query(FormPreview):
            shots.append(screen(form.app))  # type: ignore[arg-type]
        await build(form)

    monkeypatch.setattr(ConfigForm, "build", watched)
    app = make_app(CATALOG, config, title=preset or "custom", preset=preset)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert not app.query(FormPreview) and app.query("#vocab_size")
        return (shots[0] if shots else None), screen(app)


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
        await pilot.pause()
        assert app.query_one("#vocab_size", Input).value == "40000"
        assert app.model is not None and app.model.config.vocab_size == 40000
