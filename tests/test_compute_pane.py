"""The Compute pane (F5) driven by Pilot: live updates, refusals kept inline, the last valid result kept."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from textual import events
from textual.widgets import Input, Static

from tui.core import BertConfig
from tui.core.step.compute import compute
from tui.core.step.workload import Workload
from tui.core.units import short_bytes
from tui.explorer.app import make_app
from tui.formats.compute import answer_lines
from tui.explorer.widgets.compute import ComputePane
from tui.presets import load_catalog

from .scenarios import settled


def result_text(app: Any) -> str:
    return str(app.query_one("#compute-result", Static).render())


def error_text(app: Any) -> str:
    line = app.query_one("#compute-error", Static)
    return str(line.render()) if line.display else ""


def preset_app(preset: str) -> tuple[Any, BertConfig]:
    """The explorer on one of the shipped presets, and that preset's config."""
    catalog = load_catalog()
    config = catalog.get(preset).config
    return make_app(catalog, config, title=preset, preset=preset), config


async def test_compute_pane_mounts_on_f5_and_follows_edits() -> None:
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        assert not app.query(ComputePane)  # composed on first use: start-up pays nothing for it
        await pilot.press("f5")
        await settled(pilot)  # (what fits, where replayed, comes from a worker)
        assert app.focused is app.query_one("#batch", Input)
        expected = compute(BertConfig(), Workload(batch=32, seq=128, device="cuda"))
        assert short_bytes(expected.total) in result_text(app)
        await pilot.press("ctrl+u", *"8")
        await settled(pilot)
        eight = compute(BertConfig(), Workload(batch=8, seq=128, device="cuda"))
        assert short_bytes(eight.total) in result_text(app)
        await pilot.press("f2")
        await pilot.pause()  # a frame: Tab's order is Textual's, by where fields were laid out (see tests/frames.py)
        await pilot.press("tab", "tab", "tab", "ctrl+u", *"24", "f5")  # layers 24 in the form
        await settled(pilot)
        deeper = compute(BertConfig(num_hidden_layers=24), Workload(batch=8, seq=128, device="cuda"))
        assert short_bytes(deeper.total) in result_text(app)


async def test_the_answer_leads_the_pane_with_no_size_typed_too() -> None:
    """What the step's batch does on every card of the fits table is the pane's first line, as the command line's
    (it was below the FLOPs, the memory and the table: off a 24-line screen)."""
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        result = compute(BertConfig(), Workload(batch=32, seq=128, device="cuda"))
        lines = result_text(app).splitlines()
        assert lines[0] == answer_lines(result, None)[0] == ("this step's batch, 32: runs on every size of the table "
                                                             "below")
        assert lines.index(lines[0]) < min(i for i, line in enumerate(lines) if line.startswith("FLOPs"))


async def test_a_refused_sequence_keeps_the_last_result_marked_stale() -> None:
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5", "tab", "ctrl+u", *"1024")
        await settled(pilot)
        assert "seq 1024: must be at most max_position_embeddings (512)" in error_text(app)
        assert "stale" in result_text(app)
        last = compute(BertConfig(), Workload(batch=32, seq=102, device="cuda"))
        assert short_bytes(last.total) in result_text(app)  # 102 was the last valid value typed
        await pilot.press("backspace")
        await settled(pilot)
        assert error_text(app) == "" and "stale" not in result_text(app)
        await pilot.press("ctrl+u")
        await settled(pilot)
        assert "seq: is empty" in error_text(app)


async def test_a_config_compute_does_not_model_is_refused_by_name() -> None:
    catalog = load_catalog()
    app = make_app(catalog, BertConfig(add_cross_attention=True), title="a decoder")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        assert "add_cross_attention True: compute and memory do not model a decoder's" in error_text(app)


async def test_every_modelled_family_shows_its_step_at_80_columns() -> None:
    """DeBERTa-v3 and ModernBERT (the families least like BERT), ALBERT and XLM-R: the pane shows the core's
    figures, no refusal."""
    catalog = load_catalog()
    for preset in ("deberta-v3-base", "albert-base-v2", "xlm-roberta-base", "ModernBERT-base"):
        config = catalog.get(preset).config
        app = make_app(catalog, config, title=preset, preset=preset)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("f5")
            await settled(pilot)
            expected = compute(config, Workload(batch=32, seq=128, device="cuda"))
            assert not error_text(app), preset
            assert short_bytes(expected.total) in result_text(app), preset
            said = "attention runs eager: deberta-v2 has no sdpa in transformers" in result_text(app)
            assert said == (preset == "deberta-v3-base"), preset  # MPNet and DeBERTa run the math path


async def test_keys_typed_right_after_the_first_f5_reach_the_pane_in_order() -> None:
    """F5 composes the pane; Tab and digits sent with it (one read of a fast typist) go to its fields, not
    to a focus that lands later and sends them back to the batch."""
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("f5", "tab", "ctrl+u", "6", "4"):  # one burst, as one read of a fast typist delivers it
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        await settled(pilot)
        await settled(pilot)
        assert app.query_one("#batch", Input).value == "32"
        assert app.query_one("#seq", Input).value == "64"
        assert app.focused is app.query_one("#seq", Input)


async def test_keys_typed_right_after_f2_from_the_compute_pane_reach_the_form_in_order() -> None:
    """F2 Tab 40 in one read, the form hidden until then: Tab goes to the field after the preset (the vocab),
    not to one a stale layout put first (Textual orders Tab by where widgets were last laid out)."""
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        for key in ("f2", "tab", "ctrl+u", "4", "0"):  # one burst: no frame lays the form out before the Tab
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        await settled(pilot)
        await settled(pilot)
        assert app.focused is app.query_one("#vocab_size", Input)
        assert app.query_one("#vocab_size", Input).value == "40"
        assert app.query_one("#hidden_size", Input).value == "768"


@pytest.mark.parametrize("size", [(80, 24), (140, 40)])
async def test_the_focus_order_of_a_pane_is_the_same_before_and_after_its_first_frame(size: tuple[int, int]) -> None:
    """The Tab order right after a pane comes forward (nothing laid out yet) is the order a frame later."""
    app = make_app(load_catalog())
    async with app.run_test(size=size) as pilot:
        await pilot.press("f5", "f3")  # every pane has been shown and hidden once
        await settled(pilot)
        for pane in ("form", "tree", "totals", "compute", "form"):
            await app.screen.action_show_pane(pane)
            before = [widget.id for widget in app.screen.focus_chain]
            await settled(pilot)
            assert [widget.id for widget in app.screen.focus_chain] == before, pane


async def test_pane_keys_do_nothing_under_a_dialog() -> None:
    """F2–F5 act as they arrive (priority keys), but not under the help screen: it stays, nothing mounts."""
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1", "f5", "f3")
        await settled(pilot)
        assert type(app.screen).__name__ == "HelpScreen"
        assert not app.query(ComputePane)
        await pilot.press("escape", "f5")
        await settled(pilot)
        assert app.query(ComputePane) and app.focused is app.query_one("#batch", Input)


async def test_the_pane_sets_mode_attention_padding_and_a_gpu_size() -> None:
    """Every workload choice the CLI has is in the pane too (it had batch, sequence, checkpointing, precision and
    optimizer only), and one typed GPU size joins the fits table."""
    from textual.widgets import Select, Switch

    app = make_app(load_catalog())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        app.query_one("#mode", Select).value = "inference"
        app.query_one("#attention", Select).value = "eager"
        app.query_one("#padding_mask", Switch).value = True
        await settled(pilot)
        app.query_one("#gpu_memory", Input).focus()
        await pilot.press(*"12GiB")
        await settled(pilot)
        expected = compute(BertConfig(), Workload(batch=32, seq=128, mode="inference", attention="eager",
                                                  padding_mask=True, device="cuda", choices=4), 12 * 1024**3)
        assert app.main.workload == expected.workload
        shown = result_text(app)
        assert short_bytes(expected.peak) in shown and f"12 GiB ≤ {expected.fits[-1].max_batch:,}*" in shown
        assert "one layer" in shown
        await pilot.press("backspace", "backspace", "backspace", "x")
        await settled(pilot)
        assert "gpu_memory 12x" in error_text(app) and "stale" in result_text(app)


async def test_the_loop_is_chosen_in_the_pane_and_changes_what_fits() -> None:
    """#32: the loop the fits assume is a field of the pane (the Trainer's drops the logits before the backward)."""
    from textual.widgets import Select

    from tui.explorer.widgets.compute import render_result

    app = make_app(load_catalog())
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#head", Select).value = "mlm"
        await pilot.press("f5")
        await settled(pilot)
        pane = app.query_one(ComputePane)
        pane.query_one("#gpu_memory", Input).value = "24GiB"
        await settled(pilot)
        shown = {}
        for loop in ("hand-written", "course", "trainer"):
            pane.query_one("#loop", Select).value = loop
            await settled(pilot)
            expected = compute(BertConfig(head="mlm"), Workload(batch=32, seq=128, device="cuda", loop=loop), 24 << 30)
            assert result_text(app) == str(render_result(expected))
            assert f"{loop} loop" in result_text(app)
            shown[loop] = result_text(app)
        assert len(set(shown.values())) == 3


async def test_the_fine_tuning_method_is_part_of_the_step() -> None:
    """LoRA and frozen parts from the pane's own fields: the core's figures for that method, a refusal inline
    with the last valid figures kept, the method's fields shown only with it."""
    from textual.widgets import Select, Switch

    from tui.core.count.families import build_tree
    from tui.core.count.frozen import Freeze
    from tui.core.count.lora import Lora
    from tui.core.step.method import method_of

    app, config = preset_app("roberta-base")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        assert not app.query_one("#lora-row").display and not app.query_one("#freeze-row").display
        app.query_one("#method", Select).value = "lora"
        await settled(pilot)
        assert app.query_one("#lora-row").display
        workload = Workload(batch=32, seq=128, device="cuda")
        lora = compute(config, workload, method=method_of(build_tree(config), config, Lora(r=8, target_modules=(
            "query", "value"))))
        assert "LoRA r=8 on query, value: trains 294,912 of" in result_text(app)
        assert short_bytes(lora.total) in result_text(app)
        app.query_one("#lora_r", Input).value = "0"
        await settled(pilot)
        assert "lora_r 0: must be a whole number between 1" in error_text(app)
        assert "stale" in result_text(app) and short_bytes(lora.total) in result_text(app)
        app.query_one("#lora_r", Input).value = "8"
        app.query_one("#lora_targets", Input).value = "nope"
        await settled(pilot)
        assert "target_modules nope: matches no module of RobertaModel" in error_text(app)
        app.query_one("#method", Select).value = "freeze"
        await settled(pilot)
        assert app.query_one("#freeze-row").display and not app.query_one("#lora-row").display
        frozen = compute(config, workload, method=method_of(build_tree(config), config, Freeze(embeddings=True)))
        assert not error_text(app) and short_bytes(frozen.total) in result_text(app)
        assert "embeddings frozen: trains" in result_text(app)
        app.query_one("#freeze_body", Switch).value = True
        await settled(pilot)
        assert "freeze_body True: RobertaModel has no head" in error_text(app)
        app.query_one("#method", Select).value = "full"
        await settled(pilot)
        assert not error_text(app) and "trains" not in result_text(app)
        assert short_bytes(compute(config, workload).total) in result_text(app)


def held_workers(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """The core's `compute` held back on a worker's thread while `holding` is set, until the test has `looked`
    (the event loop's own calls go through): the pane can be seen while a worker runs."""
    import tui.core.step.compute as core

    holding, looked = threading.Event(), threading.Event()
    unheld = core.compute

    def held(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread() and holding.is_set():
            assert looked.wait(30)
        return unheld(*args, **kwargs)

    monkeypatch.setattr(core, "compute", held)
    return holding, looked


async def test_while_another_models_fits_are_worked_out_its_predecessors_figures_are_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A model opened while the pane shows another's figures: until the worker answers, the pane says what it
    is working out and shows no figures of the model before (they are not this one's)."""
    from tui.sources import load_source

    holding, looked = held_workers(monkeypatch)
    catalog = load_catalog()
    app = make_app(catalog, catalog.get("roberta-base").config, title="roberta-base", preset="roberta-base")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        roberta = compute(catalog.get("roberta-base").config, Workload(batch=32, seq=128, device="cuda"))
        assert short_bytes(roberta.total) in result_text(app)
        holding.set()
        app.main._opened((load_source("bert-base-uncased", "name"), None))
        await pilot.pause()
        await pilot.pause()
        shown = result_text(app)
        assert "working out the peak and what fits" in shown and short_bytes(roberta.total) not in shown
        looked.set()
        await settled(pilot)
        bert = compute(catalog.get("bert-base-uncased").config, Workload(batch=32, seq=128, device="cuda"))
        assert short_bytes(bert.total) in result_text(app)


async def test_an_opened_adapter_is_the_step_the_pane_computes() -> None:
    """An adapter folder opened (from the command line, or `o` later): the pane offers and chooses its own LoRA,
    whole (ranks, biases, saved modules as its config says); a model opened without one stops offering it."""
    from pathlib import Path

    from textual.widgets import Select

    from tui.core.count.families import build_tree
    from tui.core.step.method import method_of
    from tui.sources import load_source, open_adapter

    source = open_adapter(Path(__file__).parent / "fixtures" / "adapters" / "roberta-token")
    assert source.method is not None
    app = make_app(load_catalog(), source.config, title=source.name, adapter=source.method)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        assert app.query_one("#method", Select).value == "adapter"
        workload = Workload(batch=32, seq=16, device="cuda")
        app.query_one("#seq", Input).value = "16"
        await settled(pilot)
        expected = compute(source.config, workload, method=method_of(build_tree(source.config), source.config,
                                                                       source.method))
        assert "LoRA r=2 on query, value: trains" in result_text(app) and not error_text(app)
        assert short_bytes(expected.total) in result_text(app)
        assert not app.query_one("#lora-row").display and not app.query_one("#freeze-row").display
        app.main._opened((load_source("bert-base-uncased", "name"), None))
        await settled(pilot)
        assert app.query_one("#method", Select).value == "full" and "trains" not in result_text(app)


async def test_the_totals_say_what_an_open_adapter_trains() -> None:
    """peft's trainable and frozen for the model on screen; an edit the adapter no longer fits says why."""
    from pathlib import Path

    from tui.core.count.families import build_tree
    from tui.core.count.lora import adapt
    from tui.sources import open_adapter

    from .test_app import text_of

    source = open_adapter(Path(__file__).parent / "fixtures" / "adapters" / "roberta-token")
    assert source.method is not None
    adapted = adapt(build_tree(source.config), source.config, source.method)  # type: ignore[arg-type]
    app = make_app(load_catalog(), source.config, title=source.name, adapter=source.method)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot)
        totals = text_of(app, "#totals")
        assert f"trains {adapted.trainable:,}" in totals and f"frozen {adapted.frozen:,} of {adapted.total:,}" in totals
        await pilot.press("tab", "tab", "tab", "ctrl+u", *"1")  # one layer: the adapter still fits
        await settled(pilot)
        one = adapt(build_tree(source.config.replace(num_hidden_layers=1)), source.config.replace(
            num_hidden_layers=1), source.method)  # type: ignore[arg-type]
        assert f"trains {one.trainable:,}" in text_of(app, "#totals")


async def test_the_tree_marks_where_an_adapter_puts_its_tensors_and_what_trains() -> None:
    from pathlib import Path

    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.sources import open_adapter

    source = open_adapter(Path(__file__).parent / "fixtures" / "adapters" / "roberta-token")
    app = make_app(load_catalog(), source.config, title=source.name, adapter=source.method)
    async with app.run_test(size=(160, 40)) as pilot:
        await settled(pilot)
        marks = app.main._marks()
        assert marks["encoder.layer.0.attention.self.query.weight"] == "frozen + A [2, 16], B [16, 2]"
        assert marks["encoder.layer.2.attention.self.value.weight"] == "frozen + A [2, 16], B [16, 2]"
        assert marks["classifier.weight"] == "trains (a trained copy)"  # TOKEN_CLS saves its classifier whole
        assert "encoder.layer.0.attention.self.key.weight" not in marks  # not adapted: frozen, said by the totals
        tree = app.query_one(ParamTreeView)
        node = next(child for child in tree.root.children if child.data == "classifier.bias")
        assert "trains (a trained copy)" in str(tree.render_label(node, tree.rich_style, tree.rich_style))


async def open_on_a_masked_lm(app: Any, pilot: Any) -> None:
    """The explorer on BERT-base's masked LM, its Compute pane open and settled (float32 on CUDA: replayed)."""
    from textual.widgets import Select

    app.query_one("#head", Select).value = "mlm"
    await pilot.press("f5")
    await settled(pilot)


async def test_under_a_method_the_full_step_beside_it_is_replayed_off_the_event_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under LoRA the pane shows the same step fully fine-tuned beside the method's, and that step's fits are the
    caching allocator replayed (seconds for deep models): every replay runs in the worker, none on the event
    loop, and the pane ends on the core's figures for both."""
    from textual.widgets import Select

    from tui.core.count.families import build_tree
    from tui.core.count.lora import Lora
    from tui.core.step import allocations
    from tui.core.step.method import method_of
    from tui.explorer.widgets.compute import render_result

    on_loop: list[bool] = []
    real = allocations.replayed

    def spied(*args: Any, **kwargs: Any) -> Any:
        on_loop.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(allocations, "replayed", spied)
    app = make_app(load_catalog())
    async with app.run_test(size=(120, 40)) as pilot:
        await open_on_a_masked_lm(app, pilot)
        app.query_one("#method", Select).value = "lora"
        await settled(pilot)
        pane = app.query_one(ComputePane)
        pane.query_one("#seq", Input).value = "96"  # (a new sequence: the full step's fits searched afresh)
        await settled(pilot)
        pane.query_one("#batch", Input).value = "12"
        await settled(pilot)
        assert on_loop and not any(on_loop)
        config = BertConfig(head="mlm")
        workload = Workload(batch=12, seq=96, precision="fp32", device="cuda")
        method = method_of(build_tree(config), config, Lora(r=8, target_modules=("query", "value")))
        lora, full = compute(config, workload, method=method), compute(config, workload)
        assert result_text(app) == str(render_result(lora, full=full))


async def test_what_fits_replayed_is_worked_out_off_the_event_loop_and_the_last_edit_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """#32: float32 BERT on CUDA replays the caching allocator on every card (tenths of a second): a worker asks
    the core, the pane says it is working meanwhile (the core held back here until the test has looked), and an
    answer to an earlier edit is never shown as the fields' (three batches typed in a row: the pane ends on the
    last)."""
    from tui.explorer.main_screen import WORKING_OUT
    from tui.explorer.widgets.compute import render_result

    holding, looked = held_workers(monkeypatch)
    app = make_app(load_catalog())
    async with app.run_test(size=(120, 40)) as pilot:
        await open_on_a_masked_lm(app, pilot)
        first = compute(BertConfig(head="mlm"), Workload(batch=32, seq=128, precision="fp32", device="cuda"))
        assert first.replayed and result_text(app) == str(render_result(first))
        pane = app.query_one(ComputePane)
        holding.set()
        pane.query_one("#seq", Input).value = "64"
        await pilot.pause()
        terms = compute(BertConfig(head="mlm"), Workload(batch=32, seq=64, precision="fp32", device="cuda"),
                        fits=False, derive=False)  # (FLOPs and memory at once, while the worker replays: the peak
        assert result_text(app) == str(render_result(terms, pending=WORKING_OUT))  # and what fits said pending)
        assert "working out the peak and what fits" in result_text(app) and "FLOPs per step" in result_text(app)
        assert "in the forward" not in result_text(app) and "in the backward" not in result_text(app)
        looked.set()
        await settled(pilot)
        holding.set()
        looked.clear()
        pane.query_one("#batch", Input).value = "0"  # refused at the fields: its message, the figures stale
        await pilot.pause()
        assert "batch 0" in error_text(app)
        pane.query_one("#batch", Input).value = "32"  # valid again: the message goes while the worker runs
        await pilot.pause()
        assert error_text(app) == "" and "working out the peak and what fits" in result_text(app)
        looked.set()
        await settled(pilot)
        expected = compute(BertConfig(head="mlm"), Workload(batch=32, seq=64, precision="fp32", device="cuda"))
        assert result_text(app) == str(render_result(expected))
        batch = pane.query_one("#batch", Input)
        for typed in ("8", "16", "24"):
            batch.value = typed
            await pilot.pause(0)
        await settled(pilot)
        last = compute(BertConfig(head="mlm"), Workload(batch=24, seq=64, precision="fp32", device="cuda", choices=4))
        assert app.main.workload == last.workload and result_text(app) == str(render_result(last))


async def test_dora_and_ia3_are_the_pane_s_methods_too() -> None:
    """DoRA (LoRA's rank and targets, a magnitude beside) and IA3 (peft's targets for the family) from the pane:
    the core's figures for that method; a family without IA3 defaults is refused inline, the last figures kept."""
    from textual.widgets import Select

    from tui.core.count.families import build_tree
    from tui.core.count.lora import Ia3, Lora
    from tui.core.step.method import method_of

    app, config = preset_app("bert-base-uncased")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        workload = Workload(batch=32, seq=128, device="cuda")
        app.query_one("#method", Select).value = "dora"
        await settled(pilot)
        assert app.query_one("#lora-row").display
        dora = compute(config, workload, method=method_of(build_tree(config), config, Lora(r=8, use_dora=True)))
        assert "DoRA r=8 on query, value: trains" in result_text(app)
        assert short_bytes(dora.total) in result_text(app)
        app.query_one("#method", Select).value = "ia3"
        await settled(pilot)
        assert not app.query_one("#lora-row").display
        ia3 = compute(config, workload, method=method_of(build_tree(config), config, Ia3()))
        assert "IA3" in result_text(app) and short_bytes(ia3.total) in result_text(app)


async def test_checkpointing_under_a_method_is_computed_in_the_pane() -> None:
    """#54: LoRA with checkpointing was refused at the field; it is the core's step now, its fits replayed."""
    from textual.widgets import Select, Switch

    from tui.core.count.families import build_tree
    from tui.core.count.lora import Lora
    from tui.core.step.method import method_of

    app, config = preset_app("bert-base-uncased")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        app.query_one("#method", Select).value = "lora"
        app.query_one("#checkpointing", Switch).value = True
        await settled(pilot)
        method = method_of(build_tree(config), config, Lora(r=8, target_modules=("query", "value")))
        expected = compute(config, Workload(batch=32, seq=128, device="cuda", checkpointing=True), method=method)
        assert expected.replayed and not error_text(app)
        shown = result_text(app)
        assert "stale" not in shown and short_bytes(expected.peak) in shown
        assert f"24 GiB ≤ {expected.fits[1].max_batch:,}" in shown
