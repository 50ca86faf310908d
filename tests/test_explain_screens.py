"""The explorer's audit screen, pinned baseline and export, driven by keys through Pilot."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from textual.widgets import Input

from tui.explorer.dialogs import AuditScreen, ConfirmScreen, ExportScreen
from tui.explorer.widgets.param_tree import ParamTreeView
from tui.io.files import write_atomic

from .hf_cases import hf_total
from .ready import type_text
from .test_app import WIDE, app_for, summary, text_of, total_shown


async def test_audit_screen_explains_the_presets_claim_and_typed_ones() -> None:
    app = app_for("example-40k")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("a")
        assert isinstance(app.screen, AuditScreen)
        assert app.focused is app.screen.query_one("#claim", Input)
        text = text_of_screen(app.screen, "#explanations")
        assert "186,828,288" in text and "full H × H matrix per head" in text and "pooler.dense  -590,592" in text
        await pilot.press("ctrl+u")
        await type_text(pilot, "88409856")
        assert "the exact count itself" in text_of_screen(app.screen, "#explanations")
        await pilot.press("ctrl+u", *"12x")
        assert "claim '12x'" in text_of_screen(app.screen, "#explanations")
        await pilot.press("escape")
        assert not isinstance(app.screen, AuditScreen)


def text_of_screen(screen: object, selector: str) -> str:
    import io

    from rich.console import Console
    from textual.widgets import Static

    console = Console(width=120, record=True, file=io.StringIO())
    console.print(screen.query_one(selector, Static).content)  # type: ignore[attr-defined]
    return console.export_text()


async def test_pinned_baseline_shows_deltas_until_unpinned() -> None:
    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("b", "tab", "tab", "tab", *"13")  # pin, then 13 layers
        assert total_shown(app) == hf_total("bert-base-uncased/none") + 7_087_872
        assert "Δ +7,087,872 vs pinned" in summary(app)
        totals = text_of(app, "#totals")
        assert "Δ +7,087,872 vs pinned 109,482,240" in totals and "+7,087,872" in totals
        tree = app.query_one(ParamTreeView)
        encoder = tree.root.children[1]
        assert "Δ +7,087,872" in tree.render_label(encoder, tree.rich_style, tree.rich_style).plain
        await pilot.press("f3", "b")
        assert "pinned" not in summary(app)
        assert "Δ" not in tree.render_label(encoder, tree.rich_style, tree.rich_style).plain


@pytest.mark.parametrize("suffix", [".json", ".csv", ".md"])
async def test_export_writes_the_breakdown(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"out{suffix}"
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("x")
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("ctrl+u")
        await type_text(pilot, str(target))
        await pilot.press("enter")
        assert not isinstance(app.screen, ExportScreen)
    text = target.read_text(encoding="utf-8")
    total = hf_total("bert-tiny/none")
    if suffix == ".json":
        assert json.loads(text)["total"] == total
    elif suffix == ".csv":
        assert sum(int(row["count"]) for row in csv.DictReader(text.splitlines())) == total
    else:
        assert f"**Total: {total:,}**" in text


async def test_export_asks_before_overwriting(tmp_path: Path) -> None:
    target = tmp_path / "kept.json"
    target.write_text("precious", encoding="utf-8")
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("x", "ctrl+u")
        await type_text(pilot, str(target))
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # no: the file is kept, the prompt stays for another name
        assert target.read_text(encoding="utf-8") == "precious"
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("enter", "y")
        assert not isinstance(app.screen, (ExportScreen, ConfirmScreen))
    assert json.loads(target.read_text(encoding="utf-8"))["total"] == hf_total("bert-tiny/none")


@pytest.mark.parametrize(("typed", "message"), [("", "type a file name"), ("/no/such/dir/x.json", "does not exist"),
                                                 ("{tmp}", "is a folder"), ("{tmp}/x.txt", "end the name with")])
async def test_export_refuses_bad_paths_with_a_message(tmp_path: Path, typed: str, message: str) -> None:
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("x", "ctrl+u")
        await type_text(pilot, typed.format(tmp=tmp_path))
        await pilot.press("enter")
        assert isinstance(app.screen, ExportScreen)
        assert message in text_of_screen(app.screen, "#export-error")
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_replaces_whole_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    write_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "new"
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
