"""The explorer driven by real key presses through Pilot: edits, presets, stale state, tree state, help, quit."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from textual.widgets import Input, Select, Static, Switch

from tui.core import build_tree
from tui.explorer.app import BertTuiApp, make_app
from tui.explorer.dialogs import HelpScreen
from tui.explorer.widgets.param_tree import ParamTreeView
from tui.presets import load_catalog

from .hf_cases import hf_total
from .ready import type_text, until_offered

NARROW = (80, 24)
WIDE = (120, 40)


def app_for(preset: str = "bert-base-uncased") -> BertTuiApp:
    catalog = load_catalog()
    return make_app(catalog, catalog.get(preset).config, title=preset, preset=preset)


def text_of(app: BertTuiApp, selector: str) -> str:
    """What a Static pane shows, as plain text."""
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


def summary(app: BertTuiApp) -> str:
    return text_of(app, "#summary")


def total_shown(app: BertTuiApp) -> int:
    assert app.main.model is not None
    return app.main.model.total


async def test_starts_on_the_preset_selector_with_bert_base() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        assert app.focused is app.query_one("#preset", Select)
        assert total_shown(app) == hf_total("bert-base-uncased/none")
        assert "109,482,240" in summary(app) and "109.48 M" in summary(app)


async def test_tab_order_through_the_form() -> None:
    app = app_for()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        order = []
        for _ in range(10):
            await pilot.press("tab")
            order.append(app.focused.id if app.focused else None)
        assert order == ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                         "intermediate_size", "max_position_embeddings", "type_vocab_size", "pooler", "head",
                         "model_type"]
        await pilot.press("tab")
        assert isinstance(app.focused, ParamTreeView)


async def test_every_keystroke_updates_the_total_and_empty_keeps_it_stale() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab", "end")  # Tab selects the field's text (typing replaces it); End keeps it
        assert app.focused is app.query_one("#vocab_size", Input)
        seen = []
        for key in ["backspace"] * 5:
            await pilot.press(key)
            seen.append((app.query_one("#vocab_size", Input).value, app.main.stale, total_shown(app)))
        base = build_tree(load_catalog().get("bert-base-uncased").config)
        per_token = 768
        assert seen[0] == ("3052", False, base.total - (30522 - 3052) * per_token)
        assert seen[3] == ("3", False, base.total - (30522 - 3) * per_token)
        assert seen[4] == ("", True, base.total - (30522 - 3) * per_token)  # empty: the last valid count, stale
        assert "stale" in summary(app)
        error = app.query_one("#error-vocab_size")
        assert error.display and "vocab_size: is empty" in text_of(app, "#error-vocab_size")
        for key in "40000":
            await pilot.press(key)
        assert not app.main.stale and not error.display
        assert total_shown(app) == base.total + (40000 - 30522) * per_token


async def test_a_burst_of_keys_is_counted_once_with_its_last_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys that arrive together (a paste, a fast typist, a slow SSH link): the field reports the value they
    end with, once, and the screen builds the panes for it; the next keys are counted again."""
    import tui.explorer.main_screen as main_screen

    built: list[int] = []

    def counted(config):  # type: ignore[no-untyped-def]
        built.append(config.vocab_size)
        return build_tree(config)

    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab")  # Tab selects the field's text: the digits replace it
        monkeypatch.setattr(main_screen, "build_tree", counted)
        await type_text(pilot, "40000")
        assert built == [40000]
        assert not app.main.stale and total_shown(app) == hf_total("bert-base-uncased/none") + (40000 - 30522) * 768
        await type_text(pilot, "12")
        await pilot.press("backspace")
        assert built == [40000, 4000012, 400001]
        assert total_shown(app) == hf_total("bert-base-uncased/none") + (400001 - 30522) * 768


async def test_invalid_hidden_size_shows_inline_message_and_keeps_last_count() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab", "tab", "end", "1")  # hidden 7681 with 12 heads
        assert app.main.stale and total_shown(app) == hf_total("bert-base-uncased/none")
        message = text_of(app, "#error-hidden_size")
        assert "7681" in message and "multiple of num_attention_heads (12)" in message
        await pilot.press("backspace")
        assert not app.main.stale


async def test_typing_after_tab_replaces_the_value() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab", "tab", "tab", *"24")
        assert app.query_one("#num_hidden_layers", Input).value == "24"
        assert total_shown(app) == hf_total("bert-base-uncased/none") + 12 * 7_087_872


async def test_a_fields_first_keystroke_keeps_its_scroll_size() -> None:
    """A field's virtual size is its width from its first layout on, so the first keystroke in it changes
    nothing the screen lays out by (Input sets it as it mounts, before its width is known: a layout of the
    whole screen at the first key)."""
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab")
        await pilot.pause()
        field = app.query_one("#vocab_size", Input)
        before = field.virtual_size
        await pilot.press("4")
        assert field.value == "4"
        assert before == field.virtual_size == field.content_size.with_height(1)


async def test_letters_never_reach_a_size_field() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab", "end", "a", "-", ".", "5")
        assert app.query_one("#vocab_size", Input).value == "305225"
        assert total_shown(app) == hf_total("bert-base-uncased/none") + (305225 - 30522) * 768


@pytest.mark.parametrize(("keys", "value"), [
    (("end", "1"), "305221"),                          # the value is selected on focus: End keeps it
    (("end", "backspace", "backspace", "9"), "3059"),
    (("home", "delete", "4"), "40522"),
    (("end", "left", "left", "7"), "305722"),
])
async def test_keys_that_arrive_in_one_read_keep_their_order(keys: tuple[str, ...], value: str) -> None:
    """A paste or a buffered SSH link delivers several keys at once; bound keys (End, Backspace) must not
    fall behind the digits that follow them (Textual runs bindings after the key bubbles to the App)."""
    from textual import events

    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab")
        for key in keys:  # posted together, as the terminal driver posts one read
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        await pilot.pause()
        assert app.query_one("#vocab_size", Input).value == value
        assert total_shown(app) == hf_total("bert-base-uncased/none") + (int(value) - 30522) * 768


@pytest.mark.parametrize("page", ["pagedown", "pageup"])
async def test_page_key_for_a_dropdown_that_just_closed_is_dropped(page: str) -> None:
    """Enter opens the preset dropdown, Tab closes it, and a page key in the same read reaches the closed
    list (Textual 8.2.8 raised KeyError in OptionList._move_page and the app ended)."""
    from textual import events

    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        assert app.focused is app.query_one("#preset", Select)
        for key, character in (("enter", "\r"), ("tab", "\t"), (page, None)):
            app.post_message(events.Key(key, character))
        await pilot.pause()
        assert app.is_running
        await pilot.press("shift+tab", "enter", page, "escape")  # an open list still pages as before
        assert app.is_running and total_shown(app) == hf_total("bert-base-uncased/none")


@pytest.mark.parametrize("opener", ["search_themes", "action_command_palette"])
async def test_two_quick_enters_in_any_palette_close_it_once(opener: str) -> None:
    """The theme picker (palette: "Change theme") and the main palette: Enter twice in one read must not
    close the palette twice (the second close popped the explorer: ScreenStackError, the app ended)."""
    from textual import events

    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        getattr(app, opener)()
        await pilot.pause()
        for key, character in (("down", None), ("enter", "\r"), ("enter", "\r"), ("enter", "\r")):
            app.post_message(events.Key(key, character))
        await pilot.pause()
        assert app.is_running and len(app.screen_stack) >= 1
        await pilot.press("escape", "escape", "f2")
        assert app.is_running and app.query_one("#preset", Select) is not None


async def test_palette_switches_preset() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"bert-large-uncased")
        await until_offered(pilot, "bert-large-uncased")
        await pilot.press("enter")
        await pilot.pause()
        assert total_shown(app) == hf_total("bert-large-uncased/none") == 335_141_888
        assert app.query_one("#preset", Select).value == "bert-large-uncased"
        assert app.query_one("#hidden_size", Input).value == "1024"


async def test_preset_selector_switches_preset() -> None:
    app = app_for()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()  # the fields are mounted right after the first frame (its preview)
        app.query_one("#preset", Select).value = "example-40k"
        await pilot.pause()
        assert total_shown(app) == hf_total("example-40k/none") == 88_409_856


async def test_head_and_pooler_follow_the_hf_classes() -> None:
    app = app_for()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press(*["tab"] * 8)
        assert app.focused is app.query_one("#pooler", Switch)
        await pilot.press("space")
        assert total_shown(app) == hf_total("bert-base-uncased/none-no-pooler")
        app.query_one("#head", Select).value = "mlm"
        await pilot.pause()
        assert total_shown(app) == hf_total("bert-base-uncased/mlm")
        assert app.query_one("#pooler", Switch).disabled
        app.query_one("#head", Select).value = "sequence-classification"
        await pilot.pause()
        assert app.query_one("#row-num_labels").display
        assert total_shown(app) == hf_total("bert-base-uncased/sequence-classification")
        app.query_one("#head", Select).value = "none"
        await pilot.pause()
        assert total_shown(app) == hf_total("bert-base-uncased/none-no-pooler")  # the user's choice comes back


async def test_model_type_switches_to_roberta_layouts() -> None:
    app = app_for("roberta-base")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert total_shown(app) == hf_total("roberta-base/none")
        app.query_one("#head", Select).value = "sequence-classification"
        await pilot.pause()
        assert total_shown(app) == hf_total("roberta-base/sequence-classification")
        app.query_one("#head", Select).value = "pretraining"  # RoBERTa has no NSP: refused at the head field
        await pilot.pause()
        assert app.main.stale and "no pretraining class" in text_of(app, "#error-head")
        app.query_one("#model_type", Select).value = "bert"
        await pilot.pause()
        assert not app.main.stale and app.main.model is not None and app.main.model.config.hf_class == "BertForPreTraining"


async def test_expanded_nodes_and_cursor_survive_an_edit() -> None:
    app = app_for()
    async with app.run_test(size=WIDE) as pilot:
        tree = app.query_one(ParamTreeView)
        await pilot.press("f3")
        assert app.focused is tree
        await pilot.press("down", "down", "enter")  # open encoder
        await pilot.press("down", "down", "down", "down", "enter")  # open layer.3
        layer3 = tree.cursor_node
        assert layer3 is not None and layer3.data == "encoder.layer.3" and layer3.is_expanded
        await pilot.press("f2", "tab", "end", "0")  # vocab 305220
        await pilot.pause()
        assert layer3.is_expanded and tree.cursor_node is layer3  # same node object, still open
        assert "encoder.layer.3" in text_of(app, "#detail")
        await pilot.press("tab", "tab", "end", "backspace", "backspace", "4")  # layers 4: layer.3 stays
        await pilot.pause()
        encoder = layer3.parent
        assert encoder is not None and [c.data for c in encoder.children][-1] == "encoder.layer.3"
        assert layer3.is_expanded
        await pilot.press("backspace", "2")  # layers 2: layer.3 goes, layer.0 and 1 stay
        await pilot.pause()
        assert [c.data for c in encoder.children] == ["encoder.layer.0", "encoder.layer.1"]


async def test_tree_labels_read_the_current_count() -> None:
    app = app_for()
    async with app.run_test(size=(200, 50)) as pilot:  # room for every column
        tree = app.query_one(ParamTreeView)
        embeddings = tree.root.children[0]
        embeddings.expand()
        await pilot.pause()
        word = embeddings.children[0]
        assert word.data == "embeddings.word_embeddings.weight"
        assert "23,440,896" in tree.render_label(word, tree.rich_style, tree.rich_style).plain
        await pilot.press("tab", "end", "backspace", "backspace", "backspace", "backspace", "0")  # vocab 30
        label = tree.render_label(word, tree.rich_style, tree.rich_style).plain
        assert "23,040" in label and "[30, 768]" in label


def _lines(tree: ParamTreeView) -> list[str]:
    """Every visible line of the tree as text, with its guides, as on screen."""
    return [strip.text for strip in tree.render_lines(tree.region.reset_offset)]


@pytest.mark.parametrize(("size", "share", "shape"), [((200, 50), True, True), ((130, 40), False, True),
                                                      ((120, 40), False, False), ((80, 24), True, True)])
async def test_the_tree_reads_like_a_table_and_narrow_panes_drop_share_then_shape(
    size: tuple[int, int], share: bool, shape: bool
) -> None:
    app = app_for("bert-large-uncased")
    async with app.run_test(size=size) as pilot:
        await pilot.press("f3")
        tree = app.query_one(ParamTreeView)
        tree.root.children[1].expand()  # encoder
        await pilot.pause()
        tree.root.children[1].children[0].expand()  # layer.0
        await pilot.pause()
        tree.root.children[1].children[0].children[0].expand()  # attention
        await pilot.pause()
        tree.root.children[1].children[0].children[0].children[0].expand()  # self: query, key, value
        await pilot.pause()
        columns = tree.columns()
        assert (columns.share, bool(columns.shape)) == (share, shape)
        lines = [line.rstrip() for line in _lines(tree) if any(ch.isdigit() for ch in line)]
        counts = [re.search(r"[\d,]{3,}(?=\s|$)", line) for line in lines]
        assert all(counts) and len({m.end() for m in counts if m}) == 1  # the counts end in one column
        if shape:
            assert "[1024, 1024]" in "".join(lines) and all("[1024, 102" not in l or "[1024, 1024]" in l for l in lines)
        if share:
            assert "90.2%" in "".join(lines)


async def test_head_change_keeps_open_nodes_under_bert() -> None:
    app = app_for()
    async with app.run_test(size=WIDE) as pilot:
        tree = app.query_one(ParamTreeView)
        tree.root.children[1].expand()  # encoder
        await pilot.pause()
        app.query_one("#head", Select).value = "pretraining"
        await pilot.pause()
        bert, cls = tree.root.children
        assert (bert.data, cls.data) == ("bert", "cls") and bert.is_expanded
        encoder = next(child for child in bert.children if child.data == "encoder")
        assert encoder.is_expanded and len(encoder.children) == 12
        assert str(tree.root.label) == "BertForPreTraining"


async def test_qkv_leaf_detail_shows_formula_and_head_split() -> None:
    app = app_for()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("f3", "down", "down", "enter", "down", "enter", "down", "enter", "down", "enter", "down")
        await pilot.pause()
        detail = text_of(app, "#detail")
        assert "encoder.layer.0.attention.self.query.weight" in detail
        assert "H × H = 768 × 768 = 589,824" in detail and "12 heads × [64, 768]" in detail


async def test_expand_and_collapse_all() -> None:
    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        tree = app.query_one(ParamTreeView)
        await pilot.press("f3", "e")
        names = set()
        stack = [tree.root]
        while stack:
            node = stack.pop()
            names.add(node.data)
            stack.extend(node.children)
        params = {p.name for p in build_tree(load_catalog().get("bert-tiny").config).root.params()}
        assert params <= names  # every parameter is a visible leaf
        await pilot.press("c")
        assert not any(child.is_expanded for child in tree.root.children)


async def test_help_opens_with_f1_and_question_mark_and_closes() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")  # focus is on the preset selector, not an input
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)


async def test_q_types_nothing_in_a_field_and_quits_outside() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab", "q")
        assert app.is_running and app.query_one("#vocab_size", Input).value == "30522"
        await pilot.press("shift+tab", "q")
    assert app.return_code == 0


async def test_ctrl_q_quits_from_a_field() -> None:
    app = app_for()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.press("tab", "ctrl+q")
    assert app.return_code == 0 and not app.is_running


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (100, 30), (120, 40)])
async def test_total_stays_visible_and_panes_reachable(size: tuple[int, int]) -> None:
    app = app_for("example-40k")
    async with app.run_test(size=size) as pilot:
        for pane in ("f2", "f3", "f4"):
            await pilot.press(pane)
            await pilot.pause()
            assert "88,409,856" in summary(app)
            assert app.query_one("#summary").region.height == 1
        assert app.query_one("#totals").region.width > 0


@pytest.mark.parametrize("size", [(100, 30), (119, 30)])
async def test_below_120_columns_the_panes_are_tabs_and_the_tree_shows_whole_counts(size: tuple[int, int]) -> None:
    app = app_for("bert-large-uncased")
    async with app.run_test(size=size) as pilot:
        await pilot.press("f3")
        await pilot.pause()  # the frame that lays the tab out (Pilot's pause paints it; a keypress does not)
        tree = app.query_one(ParamTreeView)
        assert not app.query_one("#form").display and tree.scrollable_content_region.width > 60
        assert any("335,141,888" in line for line in _lines(tree))


async def test_deberta_form_shows_its_fields_and_flags_and_every_switch_counts() -> None:
    """DeBERTa-v3-base: the form holds its four sizes and seven switches (nothing of ALBERT's or ModernBERT's);
    each switch changes the total to what the core counts for the changed config (the fixtures check the
    core against transformers); switching to BERT hides them again."""
    from tui.core.config import EXTRA_FIELDS, FAMILIES, FLAG_FIELDS

    app = app_for("deberta-v3-base")
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        assert total_shown(app) == hf_total("deberta-v3-base/none")

        def shown(names: tuple[str, ...]) -> set[str]:
            return {name for name in names if any(row.display for row in app.query(f"#row-{name}"))}

        assert shown(EXTRA_FIELDS) == {"embedding_size", "position_buckets", "max_relative_positions", "conv_kernel_size"}
        assert shown(FLAG_FIELDS) == set(FAMILIES["deberta-v2"].switches)
        config = load_catalog().get("deberta-v3-base").config
        for flag in FAMILIES["deberta-v2"].switches:
            app.query_one(f"#{flag}", Switch).value = not getattr(config, flag)
            await pilot.pause()
            config = config.replace(**{flag: not getattr(config, flag)})
            assert not app.main.stale and total_shown(app) == build_tree(config).total, flag
        app.query_one("#model_type", Select).value = "bert"  # BERT has no T = 0: its default comes instead
        await pilot.pause()
        assert app.query_one("#type_vocab_size", Input).value == "2"
        assert shown(EXTRA_FIELDS) == set() and shown(FLAG_FIELDS) == set()
        assert not app.main.stale and app.main.model is not None and app.main.model.config.model_type == "bert"


@pytest.mark.parametrize("preset", ["ModernBERT-base", "deberta-v3-base"])
async def test_every_switch_shows_what_the_core_counts_it_adds(preset: str) -> None:
    """Beside each switch, its state and what it adds when on, as the core's marginal cost says for the config
    shown, also on rows mounted after the costs were handed in (a family's switches, mounted with its preset)."""
    from tui.core import marginal_costs
    from tui.core.config import FAMILIES
    from tui.explorer.widgets.form_fields import cost_text

    app = app_for(preset)
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        config = load_catalog().get(preset).config
        costs = {marginal.field: cost_text(marginal) for marginal in marginal_costs(config)}
        for flag in FAMILIES[config.model_type].switches:
            state = "on" if getattr(config, flag) else "off"
            assert text_of(app, f"#cost-{flag}").strip() == f"{state}: {costs[flag]}", flag
