"""The explorer's actions, declared once (tui/explorer/actions.py): every row runs a method that exists, is
bound where it says, and reaches the help, the palette and the key bar from the same row."""

from __future__ import annotations

from textual.widgets import Tree

from tui.explorer.actions import ACTIONS, bar_order, bindings, help_rows, palette
from tui.explorer.app import BertTuiApp
from tui.explorer.main_screen import KEY_ROWS, MainScreen
from tui.explorer.widgets.param_tree import ParamTreeView


def test_every_action_runs_a_method_that_exists_where_it_is_bound() -> None:
    owners = {"screen": MainScreen, "tree": ParamTreeView, "app": BertTuiApp}
    for action in ACTIONS:
        if not action.run:
            continue
        name = action.run.removeprefix("app.").split("(")[0]
        assert hasattr(owners[action.where], f"action_{name}"), action
    tree_keys = {b.key: b.action for b in ParamTreeView.BINDINGS if not isinstance(b, tuple)}
    assert all(tree_keys.get(a.key) == a.run for a in ACTIONS if a.where == "tree")
    app_keys = {b.key for b in BertTuiApp.BINDINGS if not isinstance(b, tuple)}
    assert all(a.key in app_keys for a in ACTIONS if a.where == "app")
    assert not issubclass(ParamTreeView, MainScreen) and issubclass(ParamTreeView, Tree)


def test_the_screen_the_help_the_palette_and_the_key_bar_come_from_the_table() -> None:
    screen = {(a.key, a.run) for a in ACTIONS if a.where == "screen" and a.run}
    assert {(b.key, b.action) for b in MainScreen.BINDINGS if not isinstance(b, tuple)} == screen
    assert [(b.key, b.action) for b in bindings()] == [(a.key, a.run) for a in ACTIONS if a.where == "screen" and a.run]
    assert KEY_ROWS == help_rows() and len(KEY_ROWS) == sum(a.help is not None for a in ACTIONS)
    assert [a.title for a in palette()][0] == "Help" and "Zoom the tree" in [a.title for a in palette()]
    assert bar_order()[:3] == ("quit", "help", "audit")
    assert all(a.key in {b.key for b in MainScreen.BINDINGS if not isinstance(b, tuple)}
               for a in ACTIONS if a.bar_rank is not None)
