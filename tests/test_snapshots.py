"""Snapshots of rendered screens (pytest-textual-snapshot). Review the SVGs like code before accepting them:

    pytest tests/test_snapshots.py --snapshot-update      # then look at tests/__snapshots__/…/*.svg

Deterministic: cursor blink off, a fixed theme (set by the app), and nothing shows a clock.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .scenarios import (
    ALBERT_KEYS,
    AUDIT_KEYS,
    COMPUTE_KEYS,
    LORA_KEYS,
    MODERNBERT_KEYS,
    NARROW,
    PINNED_KEYS,
    QUERY_LEAF_KEYS,
    WIDE,
    Scenario,
)

PRESETS = ["bert-base-uncased", "bert-large-uncased", "example-40k"]

Snap = Callable[..., bool]


def snap(snap_compare: Snap, scenario: Scenario) -> bool:
    return snap_compare(scenario.app(), terminal_size=scenario.size, run_before=scenario.run_before())


class TestPresets:
    @pytest.mark.parametrize("preset", PRESETS)
    def test_narrow(self, snap_compare: Snap, preset: str) -> None:
        assert snap(snap_compare, Scenario("narrow", preset, NARROW))

    @pytest.mark.parametrize("preset", PRESETS)
    def test_wide(self, snap_compare: Snap, preset: str) -> None:
        assert snap(snap_compare, Scenario("wide", preset, WIDE))


class TestStates:
    def test_invalid_hidden_size_is_stale(self, snap_compare: Snap) -> None:
        """H 7681 with 12 heads: inline message, last valid count marked stale."""
        assert snap(snap_compare, Scenario("stale", "bert-base-uncased", WIDE, ("tab", "tab", "end", "1")))

    def test_help_screen(self, snap_compare: Snap) -> None:
        assert snap(snap_compare, Scenario("help", "bert-base-uncased", NARROW, ("f1",)))

    def test_query_leaf_detail(self, snap_compare: Snap) -> None:
        """layer.0 ▸ attention ▸ self ▸ query.weight highlighted: formula and per-head split in the detail."""
        assert snap(snap_compare, Scenario("query", "bert-base-uncased", WIDE, QUERY_LEAF_KEYS))

    def test_tree_tab_narrow(self, snap_compare: Snap) -> None:
        """At 80×24 the tree is a tab; the summary line keeps the total in view."""
        keys = ("f3", "down", "down", "enter", "down", "enter")
        assert snap(snap_compare, Scenario("tree", "example-40k", NARROW, keys))


LONG_PATH = "/home/someone/experiments/2026-12/checkpoints/bert-base-uncased-finetuned-sst2-seed-42/config.json"


class TestSummary:
    @pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "120x40"])
    def test_a_long_source_name_gives_way_to_the_total(self, snap_compare: Snap, size: tuple[int, int]) -> None:
        """The name is shortened in its middle; the class and the total stay whole."""
        assert snap(snap_compare, Scenario("long", "bert-base-uncased", size, title=LONG_PATH))


class TestFamilies:
    def test_deberta_form_wide(self, snap_compare: Snap) -> None:
        """DeBERTa-v3-base: its sizes and seven switches in the form, with their marginal costs."""
        assert snap(snap_compare, Scenario("deberta", "deberta-v3-base", WIDE))

    def test_albert_stored_once_run_twelve_times(self, snap_compare: Snap) -> None:
        """ALBERT-base: E, G and K in the form; the totals say one layer is stored and run 12 times, and what
        an unshared model would hold; the tree shows the one stored group."""
        assert snap(snap_compare, Scenario("albert", "albert-base-v2", WIDE, ALBERT_KEYS))

    def test_modernbert_fields_flags_and_first_layer(self, snap_compare: Snap) -> None:
        """ModernBERT-base: no positions or token types in the form, its bias flags as switches; layers.0
        without attn_norm beside layers.1 with it."""
        assert snap(snap_compare, Scenario("modernbert", "ModernBERT-base", WIDE, MODERNBERT_KEYS))

    def test_modernbert_narrow(self, snap_compare: Snap) -> None:
        assert snap(snap_compare, Scenario("narrow", "ModernBERT-base", NARROW))


class TestExplain:
    def test_audit_screen(self, snap_compare: Snap) -> None:
        """The preset's published 186,828,288 explained by four conventions, with the parts they change."""
        assert snap(snap_compare, Scenario("audit", "example-40k", WIDE, AUDIT_KEYS))

    def test_pinned_diff(self, snap_compare: Snap) -> None:
        """bert-base pinned, then edited to bert-large's sizes: deltas in the summary, totals and tree."""
        assert snap(snap_compare, Scenario("pinned", "bert-base-uncased", WIDE, PINNED_KEYS))


class TestCompute:
    def test_compute_narrow(self, snap_compare: Snap) -> None:
        """F5 at 80×24: bert-large at batch 8 × 512 in amp-bf16: FLOPs, memory by kind with bars, what fits."""
        assert snap(snap_compare, Scenario("compute", "bert-large-uncased", NARROW, COMPUTE_KEYS))

    def test_compute_wide(self, snap_compare: Snap) -> None:
        """At 120×40 the Compute pane stands beside the form, where the tree and the totals do (F3 brings them back)."""
        assert snap(snap_compare, Scenario("compute", "bert-large-uncased", WIDE, COMPUTE_KEYS))

    def test_compute_lora(self, snap_compare: Snap) -> None:
        """Fine-tuning LoRA (r 8 on query, value) on roberta-base: its fields, what trains, the step's figures."""
        assert snap(snap_compare, Scenario("compute-lora", "roberta-base", NARROW, LORA_KEYS))

    def test_compute_refused_sequence_is_stale(self, snap_compare: Snap) -> None:
        """A sequence longer than the positions: the message names both, the last result stays, marked stale."""
        keys = ("f5", "tab", "ctrl+u", *"1024")
        assert snap(snap_compare, Scenario("compute-stale", "bert-base-uncased", NARROW, keys))


class TestTerminals:
    def test_no_color(self, snap_compare: Snap, monkeypatch: pytest.MonkeyPatch) -> None:
        """NO_COLOR=1 (Textual's monochrome filter) at 80×24 with an empty field: the total, the message and
        the stale mark read without colour."""
        monkeypatch.setenv("NO_COLOR", "1")
        assert snap(snap_compare, Scenario("no-color", "bert-base-uncased", NARROW, ("tab", "ctrl+u")))
