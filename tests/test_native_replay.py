"""The compiled replay of the caching allocator (`tui/core/step/_replay.c`, loaded by `tui.core.step.native`)
against its reference, the Python replay (`tui.core.step.allocator`): the same answer, field for field (peaks,
pinned, stranded, the event that ran out, steps, steady), on every recorded order under several caps, on derived
runs at many batches, and on random programs; and how it is built, chosen and refused."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.core.config import BertConfig
from tui.core.step import allocations, native
from tui.core.step.allocator import (
    HANDED_ON_STEPS_LIMIT,
    STEPS_LIMIT,
    Replay,
    prepare,
    replay,
    replay_ops,
)
from tui.core.step.workload import Workload

from .test_allocation_order import DATA as ORDER_FIXTURE

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20

pytestmark = pytest.mark.skipif(not native.enabled(), reason="no compiled replay built here (or "
                                f"{native.PURE_PYTHON} set): the reference alone runs")


def reference(first: native.Program, later: native.Program, batch: int, cap: int | None, limit: int,
              carried: tuple[int, ...] = ()) -> Replay:
    def ops(program: native.Program) -> list[tuple[str, int, int]]:
        return prepare((kind, key, c if kind == "m" else c + d * batch) for kind, key, c, d in program)

    return replay_ops(ops(first), ops(later), cap, limit, carried)


def compiled(first: native.Program, later: native.Program, batch: int, cap: int | None, limit: int,
             carried: tuple[int, ...] = ()) -> Replay | None:
    program = native.compiled(first, later, carried)
    assert program is not None
    return program.replay(batch, cap, limit)


ORDERS = ORDER_FIXTURE["cases"]  # (parsed once a process: 9 MB, 0.35 s a parse at collection, on every worker)


def test_every_recorded_order_replays_the_same_under_every_cap() -> None:
    """The 252 runs recorded under fake CUDA, as one program (their three steps in a row), with no cap, at their
    peak, a byte under it, a half and 40 MiB: where they run, where they run out, at the same event."""
    differing = []
    for case in ORDERS:
        program = [(kind, key, n, 0) for kind, key, n, *_ in case["events"]]
        peak = replay([event[:3] for event in program]).peak_reserved
        for cap in (None, peak, peak - 1, peak // 2, 40 * MiB):
            ours, theirs = compiled(program, [], 0, cap, 1), reference(program, [], 0, cap, 1)
            if ours != theirs:
                differing.append((case["case"], cap, ours, theirs))
    assert differing == []


RUNS = [  # derived runs: settling, a run that hands blocks on and walks (never settles), checkpointing, a batch of 1
    (BertConfig(head="mlm"), Workload(2, 128, precision="fp32", attention="sdpa", device="cuda")),
    (BertConfig(head="sequence-classification", num_hidden_layers=4).as_family("modernbert"),
     Workload(2, 256, precision="amp-bf16", attention="eager", device="cuda", loop="course")),
    (BertConfig(head="causal-lm").as_family("roberta"),
     Workload(2, 510, precision="amp-bf16", attention="eager", device="cuda", mode="inference", loop="course")),
    (BertConfig(head="mlm", num_hidden_layers=3).as_family("deberta-v2"),
     Workload(2, 64, precision="amp-fp16", attention="eager", device="cuda", checkpointing=True)),
]


@pytest.mark.parametrize(("config", "workload"), RUNS, ids=["bert-mlm", "modernbert-course", "causal-inference",
                                                            "deberta-checkpointed"])
def test_a_derived_run_replays_the_same_at_every_batch_and_cap(config: BertConfig, workload: Workload) -> None:
    first, later, handed = allocations._steps(config, workload)
    limit = HANDED_ON_STEPS_LIMIT if handed else STEPS_LIMIT
    full = reference(first, later, 64, None, limit, handed)
    for batch in (2, 3, 17, 64, 301):
        for cap in (None, 2 << 30, 16 << 30, 80 << 30, full.peak_reserved):
            assert compiled(first, later, batch, cap, limit, handed) == \
                reference(first, later, batch, cap, limit, handed), (batch, cap)
    first, later, handed = allocations._small_steps(config, workload, 1)  # (a batch of one: its own program)
    assert compiled(first, later, 1, 4 << 30, limit, handed) == reference(first, later, 1, 4 << 30, limit, handed)


def test_the_search_for_what_fits_answers_the_same_on_either_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    config, workload = RUNS[0]
    rooms = {16 << 30: 100, 24 << 30: 150, 80 << 30: 500}

    def search() -> dict[int, int]:
        allocations._replayed.cache_clear()
        return allocations.largest_batches(config, workload, rooms, 4096, 150 << 20)

    fast = search()
    monkeypatch.setenv(native.PURE_PYTHON, "1")
    assert not native.enabled()
    assert search() == fast
    allocations._replayed.cache_clear()


sizes = st.one_of(st.integers(0, 4096), st.integers(MiB - 1024, MiB + 1024), st.integers(1, 64 * MiB))


@st.composite
def programs(draw: st.DrawFn) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, int]],
                                       tuple[int, ...]]:
    """A first step that keeps some blocks, a later step that frees what it makes but may hand one block on."""
    first: list[tuple[str, int, int, int]] = []
    live: list[int] = []
    for key in range(draw(st.integers(1, 12))):
        first.append(("a", key, draw(sizes), draw(st.integers(0, 3 * MiB))))
        live.append(key)
        if draw(st.booleans()) and len(live) > 1:
            first.append(("f", live.pop(draw(st.integers(0, len(live) - 2))), 0, 0))
    later: list[tuple[str, int, int, int]] = []
    made = []
    for key in range(100, 100 + draw(st.integers(1, 16))):
        later.append(("a", key, draw(sizes), draw(st.integers(0, 3 * MiB))))
        made.append(key)
        if draw(st.booleans()):
            later.append(("f", made.pop(draw(st.integers(0, len(made) - 1))), 0, 0))
    handing = draw(st.booleans()) and bool(made)
    handed = made.pop(0) if handing else None
    later += [("f", key, 0, 0) for key in reversed(made)]
    if handed is None:
        return first, later, ()
    # the first step makes a block it hands on; each later step frees it and hands its own on
    first += [("a", 50, draw(sizes), 0), ("m", 50, -1, 0)]
    later = [("f", -1, 0, 0), *later, ("m", handed, -1, 0)]
    return first, later, (-1,)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 40), st.one_of(st.none(), st.integers(0, 512 * MiB)), st.integers(0, 20))
def test_random_programs_replay_the_same(program: tuple[list[tuple[str, int, int, int]], list[tuple[str, int,
                                                                                                       int, int]],
                                                        tuple[int, ...]],
                                         batch: int, cap: int | None, limit: int) -> None:
    first, later, carried = program
    assert compiled(first, later, batch, cap, limit, carried) == reference(first, later, batch, cap, limit, carried)


def test_a_size_past_64_bits_safe_range_is_refused_and_the_reference_answers() -> None:
    program = [("a", 0, 1 << 61, 0), ("a", 1, 1 << 61, 0)]  # each fits; together past what the C replay holds
    assert native.compiled(program, [], ()).replay(0, None, 1) is None  # type: ignore[union-attr]
    assert native.compiled([("a", 0, 1, 1 << 40)], [], ()).replay(1 << 22, None, 1) is None  # type: ignore[union-attr]
    assert native.compiled([("a", 0, 1 << 64, 0)], [], ()) is None  # (not even an array of 64 bits holds it)
    assert native.compiled([("a", 0, 5, 0)], [], ()).replay(1 << 64, None, 1) is None  # type: ignore[union-attr]
    big = BertConfig(head="mlm", num_hidden_layers=1)  # logits of 30,522·128·4 bytes a sequence: past 2⁶⁴ bytes
    workload = Workload(2, 128, precision="fp32", attention="sdpa", device="cuda")
    ran = allocations.replayed(big, workload, 1 << 50, None)  # (the reference's integers have no width)
    assert ran.peak_allocated > 1 << 64 and ran.out_of_memory is None


def test_the_reference_is_forced_by_the_environment_and_version_says_which_runs() -> None:
    def version(**env: str) -> str:
        done = subprocess.run([sys.executable, "-m", "tui", "--version"], capture_output=True, text=True,
                              env={**os.environ, **env}, check=True)
        return done.stdout

    assert "caching allocator replay: compiled" in version()
    assert "the Python reference (BERT_TUI_PURE_PYTHON is set)" in version(BERT_TUI_PURE_PYTHON="1")


def test_a_library_missing_or_from_another_source_is_not_loaded(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    built = native.library_path()
    try:
        monkeypatch.setattr(native, "library_path", lambda: tmp_path / "_replay.so")
        native._library.cache_clear()
        assert not native.enabled() and "no compiled replay was built" in native.which()
        (tmp_path / "_replay.so").write_bytes(b"not a library")
        native._library.cache_clear()
        assert not native.enabled()
        monkeypatch.setattr(native, "library_path", lambda: built)
        monkeypatch.setattr(native, "ABI", native.ABI + 1)  # a library built from another version of the source
        native._library.cache_clear()
        assert not native.enabled()
    finally:
        monkeypatch.undo()
        native._library.cache_clear()
    assert native.enabled()


def test_the_build_hook_compiles_the_library_and_a_missing_compiler_builds_none(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`hatch_build.build`, as `pip install` runs it: the library it makes loads and replays; with CC=false (no
    compiler) it says why and makes none, and the install goes on without it."""
    sys.path.insert(0, str(ROOT))
    try:
        import hatch_build
    finally:
        sys.path.remove(str(ROOT))
    target = tmp_path / "_replay.so"
    assert hatch_build.build(ROOT / hatch_build.SOURCE, target) is None
    monkeypatch.setattr(native, "library_path", lambda: target)
    native._library.cache_clear()
    try:
        assert native.enabled()
        assert compiled([("a", 0, 100, 0)], [], 0, None, 1) == reference([("a", 0, 100, 0)], [], 0, None, 1)
    finally:
        monkeypatch.undo()
        native._library.cache_clear()
    monkeypatch.setenv("CC", "false")
    missing = tmp_path / "none.so"
    assert "exited 1" in (hatch_build.build(ROOT / hatch_build.SOURCE, missing) or "")
    assert not missing.exists()


def test_the_explorer_and_cli_read_the_same_search_as_before_on_a_batch_of_one() -> None:
    """A card that cannot hold a batch of 2 replays a batch of 1, whose program is emulated once (not at every
    card), and the compiled replay of it answers as the reference does."""
    config = BertConfig(head="mlm", num_hidden_layers=2)
    workload = Workload(2, 512, precision="fp32", attention="eager", device="cuda")
    allocations._small_steps.cache_clear()
    for room in (1 << 30, 2 << 30, 3 << 30):
        allocations.replayed(config, workload, 1, room)
    assert allocations._small_steps.cache_info().misses == 1
    first, later, handed = allocations._small_steps(config, replace(workload, batch=2), 1)
    for room in (1 << 30, 3 << 30):
        assert allocations.replayed(config, workload, 1, room) == reference(first, later, 1, room, STEPS_LIMIT,
                                                                            handed)
