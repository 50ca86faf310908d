"""What a user meets on screen (issue: no stale or wrong figure, nothing cut): each test failed before its fix."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Select

from tui.explorer.app import make_app
from tui.io.hf_config import load_hf_config
from tui.presets import load_catalog

from .ready import type_text
from .test_app import NARROW, WIDE, app_for, summary, text_of

CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"
FIXTURES = Path(__file__).parent / "fixtures"


async def test_a_checkpoint_comparison_ends_when_another_model_is_chosen() -> None:
    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("o")
        await type_text(pilot, str(CHECKPOINTS / "legacy"))
        await pilot.press("enter")
        await pilot.pause()
        assert app.main.comparison is not None and "holds 6,194" in text_of(app, "#totals")
        app.query_one("#preset", Select).value = "bert-base-uncased"
        await pilot.pause()
        assert app.main.comparison is None and app.main.stored is None
        assert "holds " not in text_of(app, "#totals") and "legacy" not in summary(app)


async def test_a_comparison_also_ends_with_a_preset_from_the_palette() -> None:
    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("o")
        await type_text(pilot, str(CHECKPOINTS / "legacy"))
        await pilot.press("enter")
        await pilot.pause()
        app.main.open_preset("bert-tiny")
        await pilot.pause()
        assert app.main.comparison is None and "holds " not in text_of(app, "#totals")


async def test_export_and_save_refuse_while_the_form_is_stale(tmp_path: Path) -> None:
    from tui.explorer.dialogs import ExportScreen, SavePresetScreen

    app = app_for("bert-mini")
    said: list[str] = []
    app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign,assignment]
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("tab", "tab", "ctrl+u", *"77")
        await pilot.pause()
        assert app.main.stale
        await pilot.press("shift+tab", "shift+tab", "x")
        assert not isinstance(app.screen, ExportScreen)
        await pilot.press("s")
        assert not isinstance(app.screen, SavePresetScreen)
        assert len(said) == 2 and all("hidden_size 77" in line and "nothing" in line for line in said)


async def test_the_summary_keeps_the_total_when_the_name_is_long() -> None:
    long_name = str(CHECKPOINTS / "legacy") + "/" + "very-long-folder-name-" * 4
    config = load_hf_config(CHECKPOINTS / "legacy").config
    app = make_app(load_catalog(), config, title=long_name)
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        line = app.query_one("#summary").render_line(0).text
        assert app.main.model is not None and f"{app.main.model.total:,}" in line
        assert "…" in line and line.startswith(config.hf_class)


async def test_the_summary_names_a_saved_preset_and_an_opened_file_unedited(
        isolated_user_presets: Path) -> None:
    app = app_for("bert-large-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("tab", "tab", "tab", "ctrl+u", "6", "shift+tab", "shift+tab", "shift+tab")
        await pilot.pause()
        assert "(edited)" in summary(app)
        await pilot.press("s", "ctrl+u")
        await type_text(pilot, "my-bert-6l")
        await pilot.press("enter")
        await pilot.pause()
        assert "my-bert-6l" in summary(app) and "(edited)" not in summary(app)
        await pilot.press("o")
        await type_text(pilot, str(FIXTURES / "hub" / "bert-base-uncased"))
        await pilot.press("enter")
        await pilot.pause()
        assert "(edited)" not in summary(app) and "bert-base-uncased" in summary(app)


async def test_ctrl_c_says_how_to_quit_without_markup() -> None:
    app = app_for("bert-base-uncased")
    said: list[str] = []
    app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign,assignment]
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("f3", "ctrl+c")
        assert said and "ctrl+q" in said[-1] and "[" not in said[-1]


async def test_the_key_bar_shows_whole_keys_and_every_action_at_80_columns() -> None:
    """It ended `a Aud…` at 80 columns; b, x, o and s never appeared."""
    app = app_for("bert-base-uncased")
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        line = app.query_one("#keys").render_line(0).text
        assert "…" not in line
        for label in ("Quit", "Help", "Audit", "Pin", "Export", "Open", "Save"):
            assert f" {label} " in f"{line} ", label
        await pilot.press("f3")
        await pilot.pause()  # the frame that shows the tree's keys (a keypress does not paint one)
        line = app.query_one("#keys").render_line(0).text
        assert "Expand all" in line and "Collapse all" in line and "…" not in line


DEBERTA_V3 = load_catalog().get("deberta-v3-base").config


async def test_at_120_columns_the_tree_keeps_every_name_and_count_whole_and_the_form_its_hints() -> None:
    """At 120×40 the tree had 43 columns while the form's were half empty: after expanding it (a scroll bar
    appears), counts were cut ('183,831,5') and names too ('query_proj.weig…'); DeBERTa's switch hints were cut
    without an ellipsis ('c2p on: +H² +')."""
    from tui.core import marginal_costs
    from tui.explorer.widgets.form_fields import cost_text, flag_text
    from tui.explorer.widgets.param_tree import ParamTreeView

    app = app_for("deberta-v3-base")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("f3", "e")
        await pilot.pause()
        tree = app.query_one(ParamTreeView)
        width = tree.scrollable_content_region.width
        lines = [tree.render_line(y).text for y in range(tree.scrollable_content_region.height)]
        assert "183,831,552" in lines[0]
        assert any("query_proj.weight" in line and "589,824" in line for line in lines), lines
        assert all(len(line.rstrip()) <= width for line in lines)
        for flag in ("pos_att_c2p", "pos_att_p2c", "share_att_key", "norm_rel_ebd"):
            hint = text_of(app, f"#cost-{flag}").strip()
            costs = {m.field: cost_text(m) for m in marginal_costs(DEBERTA_V3)}
            assert hint == flag_text(flag, True, costs) and costs[flag] in hint, hint
