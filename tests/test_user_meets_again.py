"""What a user meets, second round (no figure from another model, nothing contradicting the figures): each test
failed before its fix."""

from __future__ import annotations

import pytest
from textual.widgets import Select

from tui.core import BertConfig, build_tree
from tui.core.config import FAMILIES
from tui.core.step.compute import compute
from tui.core.step.workload import Workload
from tui.formats.compute import compute_text, convention_lines
from tui.presets import load_catalog

from .clirun import run
from .scenarios import settled
from .test_app import WIDE, app_for, total_shown

DEBERTA = load_catalog().get("deberta-v3-base").config
OTHERS = [family for family in FAMILIES if family != "deberta-v2"]


@pytest.mark.parametrize("family", OTHERS)
def test_a_family_switch_carries_what_both_have_and_takes_the_rest_from_the_family(family: str) -> None:
    switched = DEBERTA.as_family(family)
    assert switched.model_type == family
    for field in switched.fields:  # a size both count is carried unless the new family refuses it (T = 0)
        if field in DEBERTA.fields and not (field == "type_vocab_size" and DEBERTA.type_vocab_size == 0):
            assert getattr(switched, field) == getattr(DEBERTA, field), field
        else:
            assert getattr(switched, field) == getattr(BertConfig(model_type=family), field), field
    assert switched.relative_attention is False and switched.share_att_key is False  # DeBERTa's switches go


def test_a_family_switch_keeps_the_head_where_the_family_has_its_class() -> None:
    config = DEBERTA.replace(head="sequence-classification", num_labels=5)
    assert config.as_family("roberta").head == "sequence-classification"
    assert config.as_family("roberta").num_labels == 5
    assert BertConfig(head="next-sentence").as_family("roberta").head == "none"


@pytest.mark.parametrize("family", ["distilbert", "modernbert", "mpnet", "roberta", "electra", "albert"])
def test_the_cli_switches_family_without_a_flag_never_passed(family: str) -> None:
    code, out, err = run("count", "--preset", "deberta-v3-base", "--model-type", family, "--format", "json")
    assert (code, err) == (0, ""), err
    assert f'"total": {build_tree(DEBERTA.as_family(family)).total}' in out


@pytest.mark.parametrize("family", ["distilbert", "modernbert", "bert"])
async def test_the_explorer_switches_family_from_deberta_to_a_valid_count(family: str) -> None:
    app = app_for("deberta-v3-base")
    async with app.run_test(size=WIDE) as pilot:
        app.query_one("#model_type", Select).value = family
        await pilot.pause()
        assert not app.main.stale
        assert app.main.model is not None  # (the pooler switch speaks for a base model that takes the choice)
        assert app.main.model.config.replace(pooler=True) == DEBERTA.as_family(family).replace(pooler=True)
        assert total_shown(app) == build_tree(DEBERTA.as_family(family)).total
        assert FAMILIES[family].heads  # (the head select lists the family's classes)


@pytest.mark.parametrize("preset", ["albert-base-v2", "ModernBERT-base"])
def test_a_family_without_dropout_is_not_said_to_keep_masks(preset: str) -> None:
    result = compute(load_catalog().get(preset).config, Workload(batch=2, seq=16, device="cuda"))
    lines = convention_lines(result)
    assert not any("keeps its mask" in line for line in lines)
    assert any("no dropout" in line for line in lines)


def test_an_inference_forward_states_no_backward_optimizer_dropout_or_labels() -> None:
    result = compute(BertConfig(), Workload(batch=2, seq=16, mode="inference", device="cuda", precision="amp-bf16"))
    text = compute_text(result, "bert-base-uncased")
    for said in ("2 × forward", "AdamW", "dropout", "labels", "backward", "moments"):
        assert said not in text, said


def test_the_sum_of_the_kinds_is_not_called_all_it_allocates() -> None:
    """The sum can be below the peak (checkpointing: the peak holds a recomputed layer and transients)."""
    result = compute(BertConfig(head="mlm"), Workload(batch=16, seq=512, precision="amp-bf16", checkpointing=True,
                                                     device="cuda"))
    assert result.total < result.peak
    text = compute_text(result, "bert-base-uncased")
    assert "all it allocates" not in text and "not a bound on the peak" in text  # (#52 item 5: nor a bound)


def test_no_label_is_cut_mid_word() -> None:
    result = compute(load_catalog().get("deberta-v3-base").config,
                     Workload(batch=8, seq=512, precision="amp-bf16", device="cuda"))
    text = compute_text(result, "deberta-v3-base")
    labels = [*result.layer_activations(), *result.layer_flops()] + [what for phase in result.phases
                                                          for what, _ in (*phase.held, *phase.transient)]
    flat = " ".join(text.split())
    for label in labels:
        assert " ".join(label.split()) in flat, label


async def test_the_compute_pane_never_shows_another_models_figures_as_this_ones() -> None:
    from textual.widgets import Static

    app = app_for("ModernBERT-base")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("f5", "tab", "ctrl+u", *"8192")
        await pilot.pause()
        assert "Wqkv" in str(app.query_one("#compute-result", Static).render())
        app.query_one("#preset", Select).value = "albert-base-v2"
        await pilot.pause()
        shown = str(app.query_one("#compute-result", Static).render())
        assert "seq 8192" in str(app.query_one("#compute-error", Static).render())
        assert "Wqkv" not in shown and "rotary" not in shown and shown.strip() == ""


async def test_a_refused_config_is_named_as_why_the_compute_pane_is_stale() -> None:
    from textual.widgets import Input, Static

    app = app_for("bert-large-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        app.query_one("#hidden_size", Input).value = "1000"
        await settled(pilot)  # (bert-large's bare model on CUDA in float32: what fits comes from a worker)
        shown = str(app.query_one("#compute-result", Static).render())
        assert app.main.stale and "the form holds a refused value" in shown and "workload" not in shown


def test_a_checkpoint_is_compared_with_the_preset_named_beside_it() -> None:
    """`count --checkpoint X --preset P` compares X with P (it read the config beside X without a word)."""
    from pathlib import Path

    folder = Path(__file__).parent / "fixtures" / "checkpoints" / "legacy"
    code, out, _ = run("count", "--checkpoint", str(folder))
    assert code == 0 and "matches the config" in out
    code, out, err = run("count", "--checkpoint", str(folder), "--preset", "bert-large-uncased")
    assert code == 1, err
    assert "bert-large-uncased" in out and "matches the config" not in out


COMMANDS = ["count", "compute", "presets", "audit", "diff", "verify"]
PRINTED = [  # what a person reads: tables and prose (json, csv and markdown are data, kept whole)
    ("count",), ("count", "--preset", "albert-base-v2", "--head", "mlm"),
    ("count", "--checkpoint", "tests/fixtures/checkpoints/legacy"),
    ("compute", "--head", "mlm", "--batch", "8", "--seq", "512", "--gpu-memory", "24GiB"),
    ("compute", "--preset", "deberta-v3-base", "--head", "mlm", "--batch", "8", "--seq", "512"),
    ("compute", "--preset", "ModernBERT-base", "--mode", "inference", "--batch", "4", "--seq", "8192"),
    ("presets",), ("audit", "110M"), ("audit", "186828288", "--preset", "example-40k"),
    ("audit", "7,113,216", "--scope", "layer"), ("diff", "bert-base-uncased", "bert-large-uncased"),
    ("diff", "roberta-base", "deberta-v3-base"),
]


@pytest.mark.parametrize("argv", [("--help",), *((command, "--help") for command in COMMANDS), *PRINTED],
                         ids=" ".join)
def test_help_tables_and_prose_fit_80_columns(argv: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """#35 item 8: at COLUMNS=80 no line of help, a table or prose is wider (help was one 781-column line)."""
    import os

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(os.path.dirname(os.path.dirname(__file__)))
    code, out, _ = run(*argv)
    assert code in (0, 1) and out
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, wide[:3]


def test_an_example_command_in_help_is_continued_with_a_backslash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = run("compute", "--help")
    examples = out.split("examples:", 1)[1].strip().splitlines()
    assert examples[0].endswith(" \\") and examples[1].startswith("      --")  # a flag stays with its value
    joined = " ".join(line.removesuffix(" \\").strip() for line in examples[:2])
    assert joined == "bert-tui compute bert-large-uncased --batch 32 --seq 512 --precision amp-bf16 --gpu-memory 24GiB"


def test_prose_keeps_a_shape_and_a_count_whole() -> None:
    from tui.plain import prose

    line = "  encoder.layer.{0..11}.attention.self.query.weight  [768, 768] → [1024, 1024] × 12  +5,505,024"
    assert prose(line, 80).splitlines() == ["  encoder.layer.{0..11}.attention.self.query.weight  [768, 768] →",
                                            "      [1024, 1024] × 12  +5,505,024"]


def test_an_error_is_one_line_in_a_pipe_and_wrapped_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tui.plain import say

    message = "bert-tui count: error: --hidden-size 770: must be a multiple of num_attention_heads (12), e.g. 768 or 780"
    monkeypatch.setenv("COLUMNS", "80")
    assert say(message) == message  # the test's stderr is not a terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    lines = say(message).splitlines()
    assert len(lines) == 2 and all(len(line) <= 80 for line in lines) and " ".join(lines).split() == message.split()


@pytest.mark.parametrize("columns", ["80", "120"])
def test_presets_say_each_family_as_a_column_or_a_heading(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """#35 item 8: the family column was dropped silently at 80 columns (the order then looked random)."""
    monkeypatch.setenv("COLUMNS", columns)
    _, out, _ = run("presets")
    if columns == "80":
        assert "│ family" not in out and "│ albert:" in out and "│ deberta-v2:" in out
    else:
        assert "family" in out and "│ albert-base-v2               │ albert" in out


async def test_a_dialogs_error_goes_when_the_field_is_retyped_and_stays_gone_after_no(
        tmp_path: object, isolated_user_presets: object) -> None:
    """#35 item 10: the export dialog kept an old error after the path was retyped; the save dialog brought one
    back after "No"; shadowing a built-in said "Yes, overwrite" (nothing is overwritten)."""
    from textual.widgets import Button

    from tui.explorer.dialogs import ConfirmScreen, ExportScreen, SavePresetScreen

    from .ready import type_text
    from .test_explain_screens import text_of_screen

    app = app_for("bert-tiny")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("x", "ctrl+u")
        await type_text(pilot, f"{tmp_path}/x.txt")
        await pilot.press("enter")
        assert isinstance(app.screen, ExportScreen) and "end the name with" in text_of_screen(app.screen,
                                                                                              "#export-error")
        await pilot.press("backspace")
        assert text_of_screen(app.screen, "#export-error").strip() == ""
        await pilot.press("escape", "s", "ctrl+u")
        await type_text(pilot, "../x")
        await pilot.press("enter")
        assert isinstance(app.screen, SavePresetScreen) and "not a plain preset name" in text_of_screen(
            app.screen, "#save-error")
        await pilot.press("ctrl+u")
        await type_text(pilot, "bert-base-uncased")
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen)
        assert str(app.screen.query_one("#yes", Button).label) == "Yes, shadow it"
        await pilot.press("n")
        assert isinstance(app.screen, SavePresetScreen) and text_of_screen(app.screen, "#save-error").strip() == ""


async def test_the_audit_dialog_names_the_command_that_lists_every_explanation() -> None:
    """#35 item 10: the dialog pointed to `--format json`, a flag of a command the explorer's user never typed."""
    from .ready import type_text
    from .test_explain_screens import text_of_screen

    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("a", "ctrl+u")
        await type_text(pilot, "110M")
        text = " ".join(text_of_screen(app.screen, "#explanations").split())
        assert "more with more assumptions (`bert-tui audit 110M --format json` lists them)" in text


def test_the_checkpoint_report_says_what_its_dtype_figure_counts() -> None:
    """#35 item 10: `(F32 7,282)` beside 6,194 parameters, unexplained (a tied tensor stored twice)."""
    from pathlib import Path

    folder = Path(__file__).parent / "fixtures" / "checkpoints"
    _, out, _ = run("count", "--checkpoint", str(folder / "legacy"))
    said = " ".join(out.split())
    assert "48 tensors holding 6,194 parameters (7,282 stored as F32: a tensor stored twice counts once)" in said
    _, out, _ = run("count", "--checkpoint", str(folder / "bertmodel"))
    assert "39 tensors holding 5,792 parameters, stored as F32" in " ".join(out.split())


async def test_a_switchs_hint_is_what_the_core_says_it_adds_for_the_config_shown() -> None:
    """#35 item 10: DeBERTa's hints said `no pos proj` and `+H²+H/layer` for c2p, which adds nothing while the
    keys are shared; a switch's hint is now what turning it on adds, as the core counts it (and follows edits)."""
    from tui.explorer.widgets.form import ConfigForm

    app = app_for("deberta-v3-base")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        form = app.query_one(ConfigForm)
        hints = {flag: str(form.query_one(f"#cost-{flag}").render()).strip()
                 for flag in ("share_att_key", "pos_att_c2p", "relative_attention")}
        assert hints == {"share_att_key": "on: −14.17 M", "pos_att_c2p": "on: +0", "relative_attention": "on: +393.22 K"}
        await pilot.click("#share_att_key")
        await pilot.pause()
        shared = DEBERTA.replace(share_att_key=False)
        assert build_tree(shared).total - build_tree(shared.replace(pos_att_c2p=False)).total == 7_087_104
        assert str(form.query_one("#cost-pos_att_c2p").render()).strip() == "on: +7.09 M"
        assert str(form.query_one("#cost-share_att_key").render()).strip() == "off: −14.17 M"


@pytest.mark.parametrize(("name", "width", "shown"), [
    ("bert-large-uncased", 13, "bert-…uncased"), ("bert-large-uncased", 8, "…uncased"),
    ("tests/fixtures/checkpoints/legacy", 20, "tests/…legacy"), ("abcdefghij", 5, "ab…ij"),
    ("bert-large-uncased", 18, "bert-large-uncased"),
])
def test_a_name_cut_short_keeps_whole_parts(name: str, width: int, shown: str) -> None:
    """#35 item 9: the summary cut `bert-l…ncased` (cased or uncased?): whole parts are kept, the last first."""
    from tui.plain import middle_ellipsis

    assert middle_ellipsis(name, width) == shown


async def test_at_120_columns_z_gives_the_tree_room_for_its_change_and_shape_columns() -> None:
    """#35 item 9: beside the form and the totals at 120×40 the tree lost the Δ and shape columns that 80×24
    shows; `z` zooms it to the whole screen, where they have room, and restores it."""
    from tui.explorer.widgets.param_tree import ParamTreeView

    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("b", "f3", "e")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        tree = app.query_one(ParamTreeView)
        narrow = tree.columns()
        assert not (narrow.shape and narrow.delta)
        await pilot.press("z")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        assert app.screen.maximized is tree
        wide = tree.columns()
        assert wide.shape and wide.delta and wide.share
        lines = [tree.render_line(y).text for y in range(tree.scrollable_content_region.height)]
        assert any("[30522, 768]" in line and "Δ 0" in line for line in lines), lines
        await pilot.press("z")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        assert app.screen.maximized is None and tree.columns() == narrow


async def test_a_field_that_takes_the_focus_is_brought_into_view() -> None:
    """#35 item 5: at 120×40, after PageDown in the Compute pane, F3 then F5 focused the batch scrolled out of
    sight, and `4` changed it off screen."""
    from textual.widgets import Input

    app = app_for("bert-base-uncased")
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("f5")
        await pilot.pause()
        await pilot.press("pagedown", "pagedown", "f3", "f5")
        batch = app.query_one("#batch", Input)
        for _ in range(40):  # (the scroll waits for the frame's layout: a refresh or two, later under load)
            await pilot.pause(0.05)
            if app.focused is batch and app.screen.region.contains_region(batch.region):
                break
        assert app.focused is batch and app.screen.region.contains_region(batch.region), batch.region


async def test_every_focus_stop_of_the_form_is_a_field() -> None:
    """#35 item 5: shift+Tab from the preset select landed on the form's container, nothing lit; each stop is in
    view (shift+Tab walked through fields unseen)."""
    from tui.explorer.widgets.form import ConfigForm

    app = app_for("bert-base-uncased")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        stops = []
        for _ in range(14):
            await pilot.press("shift+tab")
            await pilot.pause()
            stops.append(app.focused)
            assert app.focused is not None and app.screen.region.contains_region(app.focused.region), app.focused
        assert not any(isinstance(stop, ConfigForm) for stop in stops), stops
