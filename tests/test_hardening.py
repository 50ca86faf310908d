"""Hostile input and odd terminals: random argv, huge numbers, huge files, sizes from 40×12 to 250×70."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.cli import main
from tui.presets import PresetError, load_preset

from .test_app import app_for, summary

FLAGS = ["--preset", "--preset-file", "--config", "--checkpoint", "--vocab-size", "--hidden-size", "--num-hidden-layers",
         "--num-attention-heads", "--intermediate-size", "--max-position-embeddings", "--type-vocab-size", "--head",
         "--num-labels", "--no-pooler", "--model-type", "--format", "--scope", "--help", "-h", "--", "-x"]
WORDS = st.one_of(
    st.sampled_from(FLAGS),
    st.sampled_from(["bert-base-uncased", "example-40k", "mlm", "json", "csv", "table", "markdown", "layer", "110M",
                     "0", "-1", "1.5", "768", "12", "1e9", str(10**30), "abc", "", " ", "/", "/etc/passwd", "..",
                     "roberta", "pretraining", "186,828,288", "\x00", "é", "--format=json"]),
    st.text(max_size=8),
    st.integers(-10**6, 10**12).map(str),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["count", "audit", "diff", "presets"]), words=st.lists(WORDS, max_size=7))
def test_random_argv_exits_0_1_or_2_and_never_raises(command: str, words: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main([command, *words])
    except SystemExit as exit_:  # argparse's own exits: --help (0) and usage errors (2)
        code = exit_.code if isinstance(exit_.code, int) else 2
    assert code in (0, 1, 2), (command, words, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") <= 1 or "usage:" in out.getvalue()


def test_a_100_mb_preset_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:
        handle.truncate(100 * 1024 * 1024)  # sparse: costs no disk
    with pytest.raises(PresetError, match="a preset file may be at most"):
        load_preset(huge)
    result = subprocess.run([sys.executable, "-m", "tui", "count", "--preset-file", str(huge)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "104,857,600 bytes" in result.stderr


def test_no_color_and_16_color_terminals_start(tmp_path: Path) -> None:
    code = ("from tui.explorer.app import make_app\nfrom tui.presets import load_catalog\n"
            "async def done(pilot):\n    await pilot.press('f3', 'e', 'f1', 'escape')\n    pilot.app.exit(pilot.app.main.model.total)\n"
            "print(make_app(load_catalog()).run(headless=True, size=(80, 24), auto_pilot=done))")
    envs = ({"NO_COLOR": "1"}, {"TERM": "xterm"}, {"TERM": "linux"})
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **env}, cwd=tmp_path) for env in envs]  # side by side: a third of the wait
    for env, run in zip(envs, runs):
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0 and out.strip().endswith("109482240"), (env, err[-500:])


# each starts at its size and resizes through the others: the default run starts at 80×24, `-m slow` at the rest
@pytest.mark.parametrize("size", [pytest.param((40, 12), marks=pytest.mark.slow), (80, 24),
                                  pytest.param((250, 70), marks=pytest.mark.slow)])
async def test_sizes_and_resizes_keep_the_total_reachable(size: tuple[int, int]) -> None:
    app = app_for("example-40k")
    async with app.run_test(size=size) as pilot:
        for width, height in ((250, 70), (40, 12), size):
            await pilot.resize_terminal(width, height)
            for key in ("f2", "f3", "f4"):
                await pilot.press(key)
            await pilot.pause()  # the frame that lays the panes out (a keypress does not paint one)
            assert "88,409,856" in summary(app)
            assert app.query_one("#summary").region.height == 1
        await pilot.press("f3", "down", "down", "enter", "end")  # the tree scrolls to its last layer
        assert app.is_running


async def test_a_thousand_layers_open_and_edit() -> None:
    """Layers are built as they come into view: an edit at 1,000 layers builds a screenful, not 16,000 tensors."""
    from tui.core import BertConfig, closed_form_total
    from tui.core.count.tree import LayerStack
    from tui.explorer.app import make_app
    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.presets import load_catalog

    app = make_app(load_catalog(), BertConfig(num_hidden_layers=1000))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f3", "down", "down", "enter", "end")
        tree = app.query_one(ParamTreeView)
        assert tree.cursor_node is not None and tree.cursor_node.data == "pooler"
        await pilot.press("f2", "tab", *"4")  # vocab 4: the labels follow
        assert app.main.model is not None
        assert app.main.model.total == closed_form_total(BertConfig(num_hidden_layers=1000, vocab_size=4))
        await pilot.press("f3")
        await pilot.pause()
        encoder = app.main.model.find("encoder")
        assert encoder is not None and isinstance(encoder.children, LayerStack)
        assert len(encoder.children._built) < 100


async def test_expand_all_at_10000_layers_opens_the_first_layers_and_says_so() -> None:
    """`e` at 10,000 layers froze the explorer for ~20 s (a message per node); it opens every module and the
    first layers, says how many more there are, and the keys after it are answered."""
    from tui.core import BertConfig
    from tui.explorer.app import make_app
    from tui.explorer.widgets.param_tree import EXPAND_ALL_LAYERS, ParamTreeView
    from tui.presets import load_catalog

    app = make_app(load_catalog(), BertConfig(num_hidden_layers=10_000))
    said: list[str] = []
    app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign,assignment]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f3", "e")
        tree = app.query_one(ParamTreeView)
        layers = next(node for node in tree.root.children if node.data == "encoder").children
        assert len(layers) == 10_000
        assert all(node.is_expanded for node in layers[:EXPAND_ALL_LAYERS])
        assert not any(node.is_expanded for node in layers[EXPAND_ALL_LAYERS:])
        assert said and f"{10_000 - EXPAND_ALL_LAYERS:,} more" in said[-1]
        await pilot.press("f2", "tab", "4")  # still answering: vocab 4
        assert app.main.model is not None and app.main.model.config.vocab_size == 4
