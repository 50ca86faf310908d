"""Saving user presets from the explorer: plain names only, atomic, never overwriting without asking."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Select

from tui.explorer.dialogs import ConfirmScreen, SavePresetScreen
from tui.presets import load_catalog

from .ready import type_text, until_offered
from .test_app import WIDE, app_for, total_shown
from .test_explain_screens import text_of_screen


async def test_save_appears_in_selector_and_palette_at_once(isolated_user_presets: Path) -> None:
    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("tab", "tab", "tab", *"6", "shift+tab", "shift+tab", "shift+tab", "s")
        assert isinstance(app.screen, SavePresetScreen)
        await pilot.press("ctrl+u")
        await type_text(pilot, "six-layers")
        await pilot.press("enter")
        assert not isinstance(app.screen, SavePresetScreen)
        assert (isolated_user_presets / "six-layers.yaml").is_file()
        assert app.query_one("#preset", Select).value == "six-layers"
        saved = load_catalog().get("six-layers")
        assert saved.config.num_hidden_layers == 6 and not saved.builtin
        await pilot.press("ctrl+p", *"six-layers")
        await until_offered(pilot, "six-layers")
        await pilot.press("enter")
        await pilot.pause()
        assert total_shown(app) == 109_482_240 - 6 * 7_087_872


@pytest.mark.parametrize("name", ["../x", "", "/", "a/b", "..", ".hidden", "x" * 65])
async def test_names_that_are_not_plain_file_names_are_refused(isolated_user_presets: Path, name: str) -> None:
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s", "ctrl+u")
        await type_text(pilot, name)
        await pilot.press("enter")
        assert isinstance(app.screen, SavePresetScreen)
        assert "not a plain preset name" in text_of_screen(app.screen, "#save-error")
    assert not isolated_user_presets.exists() or list(isolated_user_presets.iterdir()) == []


async def test_overwrite_asks_and_no_keeps_the_file(isolated_user_presets: Path) -> None:
    isolated_user_presets.mkdir(parents=True)
    kept = isolated_user_presets / "mine.yaml"
    kept.write_text("name: mine\nconfig: {num_hidden_layers: 3}\n", encoding="utf-8")
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s", "ctrl+u", *"mine", "enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert "num_hidden_layers: 3" in kept.read_text(encoding="utf-8")
        await pilot.press("enter", "y")
        assert not isinstance(app.screen, (ConfirmScreen, SavePresetScreen))
    assert load_catalog().get("mine").config.hidden_size == 128  # bert-tiny's, saved over it


async def test_shadowing_a_builtin_preset_asks_first(isolated_user_presets: Path) -> None:
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s", "ctrl+u")
        await type_text(pilot, "bert-base-uncased")
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
    assert not (isolated_user_presets / "bert-base-uncased.yaml").exists()


@pytest.mark.parametrize("preset", ["bert-base-uncased", "deberta-v3-base", "ModernBERT-base", "albert-base-v2"])
def test_a_saved_preset_holds_its_familys_keys_and_reads_back_the_same(isolated_user_presets: Path,
                                                                       preset: str) -> None:
    """A saved BERT carried ~20 keys of other families (norm_bias, pos_att_c2p, legacy, ...)."""
    import yaml

    from tui.core.config import FAMILIES
    from tui.presets import save_user_preset

    config = load_catalog().get(preset).config
    path = save_user_preset("mine", config, "mine")
    keys = set(yaml.safe_load(path.read_text(encoding="utf-8"))["config"])
    others = {flag for family, flags in ((name, family.switches) for name, family in FAMILIES.items()) if family != config.model_type for flag in flags}
    assert not keys & (others - set(FAMILIES[config.model_type].switches))
    assert keys >= set(config.fields)
    assert load_catalog().get("mine").config == config
