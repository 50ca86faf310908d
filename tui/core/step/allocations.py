"""The step's allocation order and the search for what fits on it: `covers` says where the order is derived
(`emulation` derives BERT's code and the families built like it, `allocations_modernbert` ModernBERT's,
`allocations_deberta` DeBERTa-v2's; training steps and inference forwards),
`events` and `events_at` give it, `largest_batches` replays it through the caching allocator for each card
(an inference run's "steps" are its forwards).

Every size is affine in the batch from 2 on (`events_at` reads the program off one run at a batch of 2⁶⁴), so
the search for what fits replays a new batch without running the step again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from itertools import repeat
from operator import add, mul
from typing import NamedTuple

from ..config import FAMILIES, BertConfig
from . import native
from .allocations_deberta import DebertaRun
from .allocations_modernbert import ModernBertRun
from .allocator import (
    HANDED_ON_STEPS_LIMIT,
    STEPS_LIMIT,
    Block,
    CachingAllocator,
    Op,
    Replay,
    allocation,
    allocation_size,
    collector_paused,
    prepare,
    replay_ops,
    round_size,
)
from .emulation import BertRun
from .emulation_loop import last_phases
from .emulation_ops import ALBERT_LAYER, BERT_LAYER, DISTILBERT_LAYER, MPNET_LAYER
from .layouts import STEPS
from .method import Method
from .result import RUNS, RUNS_OUT, UNPROVEN
from .tape import CUBLAS_WORKSPACE, CUBLASLT_WORKSPACE, Event
from .workload import Workload

# The runs that derive a family's step op by op, by the layer class whose code they follow (its record's
# `forward.layer`): BERT's run follows BertLayer and its kin; ModernBERT and DeBERTa-v2 have runs of their own.
EMULATORS: dict[str, type[BertRun]] = {**dict.fromkeys((BERT_LAYER, DISTILBERT_LAYER, ALBERT_LAYER, MPNET_LAYER), BertRun),
                                       ModernBertRun.LAYER: ModernBertRun, DebertaRun.LAYER: DebertaRun}
DERIVED_HEADS = ("sequence-classification", "mlm", "causal-lm", "token-classification", "question-answering",
                 "multiple-choice", "pretraining", "next-sentence", "none")


def covers(config: BertConfig, workload: Workload, method: Method | None = None) -> str | None:
    """Why the allocation order of `config`'s step (under `method`, if any) is not derived yet (None: it is)."""
    run = EMULATORS.get(config.family.forward.layer)
    if run is None:
        derived = [name for name, family in FAMILIES.items() if family.forward.layer in EMULATORS]
        return f"model type {config.model_type}: its allocation order is not derived yet ({', '.join(derived)})"
    if config.add_cross_attention:
        return "cross-attention (add_cross_attention): its allocation order is not derived yet"
    refused = run.refuses(config, workload, method)
    if refused:
        return refused
    # a config.json's step setting changes the order only for the heads it matters to (ModernBERT's mean pooling:
    # the pooling heads'; a masked LM's step is the default's whatever the pooling)
    matters = {key: heads for (key, _), heads in STEPS[config.model_type].modelled_keys.items()}
    changing = [(key, value) for key, value in config.step_keys if config.head in matters.get(key, (config.head,))]
    if changing:
        keys = ", ".join(f"{key}: {value}" for key, value in changing)
        return f"{keys}: the allocation order is derived for the family's defaults only"
    if config.head == "question-answering" and config.num_labels != 2:
        return f"question answering with num_labels = {config.num_labels}: transformers splits start and end (2)"
    if config.lm_decoder and not config.tie_word_embeddings:
        return "an untied decoder (tie_word_embeddings false): its allocation order is not derived yet"
    if config.head not in DERIVED_HEADS:
        return f"head {config.head}: its allocation order is not derived yet ({', '.join(DERIVED_HEADS)})"
    if workload.device != "cuda":
        return "the allocation order is the CUDA caching allocator's: device cuda only"
    refused = STEPS[config.model_type].no_checkpointing
    if workload.checkpointing and refused:
        return f"checkpointing: {config.model_type}'s classes do not checkpoint ({refused})"
    if method is not None and not run.LOOKUP_ADAPTERS and any(".lora_embedding_" in name for name, *_ in method.layout):
        return f"LoRA on {config.model_type}'s word embeddings: its allocation order is not derived yet"
    return None

def events(config: BertConfig, workload: Workload, steps: int = 3, method: Method | None = None) -> list[Event]:
    """The allocation events of `steps` steps of `workload` on `config` under `method` (see `covers`)."""
    return _stepped(config, workload, steps, method)[1]


def _stepped(config: BertConfig, workload: Workload, steps: int, method: Method | None = None
             ) -> tuple[BertRun, list[Event]]:
    """The step's run after `steps` steps, and its events (`covers` asked first)."""
    refused = covers(config, workload, method)
    if refused:
        raise ValueError(refused)
    run = emulator(config, workload, method=method)
    return run, run.run(steps)


Phases = tuple[tuple[str, int], ...]  # each phase of each step: its name and how many events its end has seen


def phase_peaks(config: BertConfig, workload: Workload, method: Method | None = None, steps: int = 3
                ) -> dict[str, int]:
    """The last of `steps` steps replayed phase by phase: what the allocator holds as the step begins (`start`)
    and its allocated peak in each phase (`forward`, `backward`, `optimizer`; an inference forward's only
    `forward`), each without the cuBLAS workspaces (all made by the first step, as `memory_bytes.peak` leaves
    them out): what `torch.cuda.max_memory_allocated` reads phase by phase (tests/gpu/measure_steps_cuda.py).
    The events come from the step's program (`_program`, run once for every batch from 2 on); kept for the next
    ask of the same step (the explorer asks for the terms, then the fits, at every edit)."""
    return dict(_phase_peaks(config, workload, method, steps))


@lru_cache(maxsize=32)
def _phase_peaks(config: BertConfig, workload: Workload, method: Method | None = None, steps: int = 3
                 ) -> tuple[tuple[str, int], ...]:
    events, step_ends, phase_ends, workspaces = _at(config, workload, workload.batch, steps, method)
    phases = last_phases(step_ends, phase_ends)
    return tuple(replayed_phases(CachingAllocator(), events, phases, workspaces).items())


def replayed_phases(allocator: CachingAllocator, events: Sequence[Event], phases: Sequence[tuple[str, int, int]],
                    less: int = 0) -> dict[str, int]:
    """`events` replayed into `allocator`, the last step's `phases` (name, first event, end) one by one: what it
    holds as that step begins and each phase's allocated peak, each less `less` (the workspaces; what the
    allocator held before, where it was not fresh)."""
    live: dict[int, Block] = {}
    with collector_paused():
        allocator.run(events[:phases[0][1]], live)
        peaks = {"start": allocator.allocated - less}
        for phase, begin, end in phases:
            allocator.peak_allocated = allocator.allocated
            allocator.run(events[begin:end], live)
            peaks[phase] = allocator.peak_allocated - less
    return peaks


def emulator(config: BertConfig, workload: Workload, batch: int | None = None, method: Method | None = None
             ) -> BertRun:
    """The family's step, op by op (`covers` not asked: a developer's tool derives what is not covered yet)."""
    return EMULATORS[config.family.forward.layer](config, workload, batch, method)


SYMBOLIC_BATCH = 1 << 64  # a batch so large that a size affine in it, c + d·b, reads off as its two coefficients


class Symbolic(NamedTuple):
    """A run's events for every batch from 2 on (`_program`): each event's kind and id, its size as c + d·b, how
    many events each step's end and each phase's end has seen, and the cuBLAS workspaces it made."""

    kinds: tuple[str, ...]
    keys: tuple[int, ...]
    fixed: tuple[int, ...]
    per_example: tuple[int, ...]
    step_ends: tuple[int, ...]
    phase_ends: Phases
    workspaces: int

    def at(self, batch: int) -> list[Event]:
        return list(zip(self.kinds, self.keys, map(add, self.fixed, map(mul, self.per_example, repeat(batch))),
                        strict=True))

    def first(self, steps: int) -> Symbolic:
        """The program of its first `steps` steps: a run's steps do not look ahead, so a shorter run's events are
        a longer one's first (`tests/test_allocation_order.py`)."""
        n, phases = self.step_ends[steps - 1], len(self.phase_ends) // len(self.step_ends) * steps
        return Symbolic(self.kinds[:n], self.keys[:n], self.fixed[:n], self.per_example[:n], self.step_ends[:steps],
                        self.phase_ends[:phases], self.workspaces)


STEPS_KEPT = 3  # the steps a program is run for at the least: the fits' replays read two, the phases the third


def _program_of(config: BertConfig, workload: Workload, steps: int, method: Method | None = None) -> Symbolic:
    """`steps` steps of the program, read off one run of at least `STEPS_KEPT` (one symbolic run serves the fits'
    replays and the phases' peaks)."""
    if steps >= STEPS_KEPT:
        return _program(config, workload, steps, method)
    return _program(config, workload, STEPS_KEPT, method).first(steps)


@lru_cache(maxsize=8)
def _program(config: BertConfig, workload: Workload, steps: int, method: Method | None = None) -> Symbolic:
    """The run's events for every batch from 2 on: their kinds and ids (the same at each such batch: only one
    sequence or one head changes which views copy) and each size as c + d·b, read off one run at a batch of
    2⁶⁴ (no block of the run is that large without the batch); and how many events each step's end has seen."""
    refused = covers(config, workload, method)
    if refused:
        raise ValueError(refused)
    run = emulator(config, workload, SYMBOLIC_BATCH, method)
    kinds, keys, sizes = zip(*run.run(steps), strict=True)
    return Symbolic(kinds, keys, tuple(n % SYMBOLIC_BATCH for n in sizes), tuple(n // SYMBOLIC_BATCH for n in sizes),
                    tuple(run.step_ends), tuple(run.phase_ends), workspaces_of(run))


def workspaces_of(run: BertRun) -> int:
    """The bytes of the cuBLAS (and cuBLASLt) workspaces a run made: never freed, left out of its peaks."""
    return sum(CUBLAS_WORKSPACE if name.startswith("cublas ") else CUBLASLT_WORKSPACE for name in run.tape.workspaces)


def events_at(config: BertConfig, workload: Workload, batch: int, steps: int = 3, method: Method | None = None
              ) -> list[Event]:
    """`events` at another batch, from the program (a batch of one: built as it is)."""
    return _at(config, workload, batch, steps, method)[0]


def steps_at(config: BertConfig, workload: Workload, batch: int, method: Method | None = None
             ) -> tuple[list[Event], list[Event]]:
    """The first step's events at `batch`, and a later step's: each later step the same, every block it allocates
    freed by its end or handed on to the next step under an id of its own (`_steps`)."""
    first, later = _small_steps(config, replace(workload, batch=2), batch, method)[:2] if batch < 2 else \
        _steps(config, replace(workload, batch=2), method)[:2]
    return [(kind, key, c + d * batch) for kind, key, c, d in first], \
        [(kind, key, c + d * batch) for kind, key, c, d in later]


@lru_cache(maxsize=8)
def _small_steps(config: BertConfig, workload: Workload, batch: int, method: Method | None = None
                 ) -> tuple[Program, Program, tuple[int, ...]]:
    """The first step's program and a later step's at a batch below 2 (0 or 1), where the program for 2 on does
    not hold (one sequence or one head changes which views copy, and so which blocks a step hands on), and the
    ids it hands on under: emulated once, not at every card that asks."""
    two, ends, _, _ = _at(config, workload, batch, 2, method)
    return _handed_on([(kind, key, n, 0) for kind, key, n in two], ends)


def _ops_at(config: BertConfig, workload: Workload, batch: int, method: Method | None = None
            ) -> tuple[list[Op], list[Op]]:
    """`steps_at` as the replay reads it (`allocator.prepare`): the batch's own sizes written into the program's
    ops (`_templates`: the ops of every size the batch does not change, worked out once)."""
    if batch < 2:
        first, later = steps_at(config, workload, batch, method)
        return prepare(first), prepare(later)
    (first, first_varying), (later, later_varying) = _templates(config, replace(workload, batch=2), method)
    return _filled(first, first_varying, batch), _filled(later, later_varying, batch)


Varying = list[tuple[int, int, int, int]]  # (index, id, c, d): an allocation whose size c + d·b grows with b


def _filled(ops: list[Op], varying: Varying, batch: int) -> list[Op]:
    filled = ops.copy()
    for index, key, c, d in varying:
        filled[index] = allocation(key, c + d * batch)
    return filled


@lru_cache(maxsize=8)
def _templates(config: BertConfig, workload: Workload, method: Method | None = None
               ) -> tuple[tuple[list[Op], Varying], ...]:
    """The first step's ops and a later step's, each with the allocations whose size grows with the batch, as
    (their index, id, c, d): the ops of every other event are the same at every batch."""
    templates = []
    for program in _steps(config, workload, method)[:2]:
        ops = prepare((kind, key, c) for kind, key, c, _ in program)  # (those that grow: filled in by `_filled`)
        templates.append((ops, [(index, key, c, d) for index, (kind, key, c, d) in enumerate(program) if d]))
    return tuple(templates)


def carried(config: BertConfig, workload: Workload, method: Method | None = None, batch: int = 2
            ) -> tuple[int, ...]:
    """The ids under which a step at `batch` hands blocks on to the next (`_handed_on`): the course's loop's
    outputs (a batch below 2 its own: one token's start and end logits are views, not copies)."""
    if batch < 2:
        return _small_steps(config, replace(workload, batch=2), batch, method)[2]
    return _steps(config, replace(workload, batch=2), method)[2]


Program = list[tuple[str, int, int, int]]  # (kind, id, c, d): an event whose size is c + d·b ("m": c the new id)


@lru_cache(maxsize=8)
def _steps(config: BertConfig, workload: Workload, method: Method | None = None
           ) -> tuple[Program, Program, tuple[int, ...]]:
    """The first step's program and a later step's (`_handed_on` over the program's two steps)."""
    program = _program_of(config, workload, 2, method)
    return _handed_on(list(zip(program.kinds, program.keys, program.fixed, program.per_example, strict=True)),
                      program.step_ends)


def _handed_on(events: Program, ends: Sequence[int]) -> tuple[Program, Program, tuple[int, ...]]:
    """Two steps' events as the first step's and a later step's, which can be replayed again and again. A block
    a step allocates and the next step frees (the course's loop keeps the outputs until the next forward returns)
    is handed on under an id of its own: `("m", id, new)` at the step's end moves it there, and the next step
    frees it by that id. What the first step hands on and what the second does must match, in the order they
    were allocated, size for size; anything else a later step kept would make it a step that does not repeat."""
    first, second = events[:ends[0]], events[ends[0]:ends[1]]
    freed_first = {key for kind, key, _, _ in first if kind == "f"}
    freed_second = {key for kind, key, _, _ in second if kind == "f"}
    made = {key: sizes for kind, key, *sizes in first if kind == "a"}
    handed = [key for key in made if key not in freed_first and key in freed_second]
    own = {key: sizes for kind, key, *sizes in second if kind == "a"}
    kept = [key for key in own if key not in freed_second]
    if [made[key] for key in handed] != [own[key] for key in kept]:
        raise AssertionError("a later step keeps blocks that are not what the step before it handed on")
    ids = tuple(-1 - j for j in range(len(handed)))
    renamed = dict(zip(handed, ids, strict=True))
    later = [(kind, renamed.get(key, key) if kind == "f" else key, c, d) for kind, key, c, d in second]
    return ([*first, *(("m", key, new, 0) for key, new in zip(handed, ids, strict=True))],
            [*later, *(("m", key, new, 0) for key, new in zip(kept, ids, strict=True))], ids)


def _at(config: BertConfig, workload: Workload, batch: int, steps: int, method: Method | None = None
        ) -> tuple[list[Event], Sequence[int], Phases, int]:
    """The events of `steps` steps at `batch`, how many each step's end and each phase's end has seen, and the
    cuBLAS workspaces made: from the program for every batch from 2 on, or the run itself at one sequence (where
    the program does not hold)."""
    if batch < 2:
        run, events = _stepped(config, replace(workload, batch=batch), steps, method)
        return events, run.step_ends, tuple(run.phase_ends), workspaces_of(run)
    program = _program_of(config, replace(workload, batch=2), steps, method)
    return program.at(batch), program.step_ends, program.phase_ends, program.workspaces


def replayed(config: BertConfig, workload: Workload, batch: int, room: int | None = None,
             method: Method | None = None) -> Replay:
    """The run at `batch` through the caching allocator under `room` bytes, step after step until one leaves it
    as it found it (`allocator.replay_steps`); kept for the next asker (the explorer's edits come back to a
    batch, and the fits table is checked at the batches its search replayed)."""
    return _replayed(config, replace(workload, batch=2), batch, room, method)


class Cancelled(Exception):
    """The asker no longer wants the answer (`cancellable`): raised before the next replay."""


_asker = threading.local()  # the thread's `cancellable` check, if any


@contextmanager
def cancellable(cancelled: Callable[[], bool]) -> Iterator[None]:
    """Replays asked on this thread within the block stop as soon as `cancelled()` says so (checked before each
    replay: tenths of a second at 96 layers), raising `Cancelled`: the explorer's worker for an edit since
    superseded (a thread cannot be stopped from outside; its replays would compete with the next edit's)."""
    outer = getattr(_asker, "cancelled", None)
    _asker.cancelled = cancelled
    try:
        yield
    finally:
        _asker.cancelled = outer


@lru_cache(maxsize=1024)
def _replayed(config: BertConfig, workload: Workload, batch: int, room: int | None, method: Method | None = None
              ) -> Replay:
    cancelled = getattr(_asker, "cancelled", None)
    if cancelled is not None and cancelled():
        raise Cancelled
    with collector_paused():  # (the step's derivation, its ops and their replay)
        handed = carried(config, workload, method, batch)
        limit = HANDED_ON_STEPS_LIMIT if handed else STEPS_LIMIT
        if native.enabled():
            program = _compiled(config, workload, min(batch, 2), method)
            ran = program.replay(batch, room, limit) if program is not None else None
            if ran is not None:
                return ran
        return replay_ops(*_ops_at(config, workload, batch, method), room, limit, handed)


@lru_cache(maxsize=16)
def _compiled(config: BertConfig, workload: Workload, batch: int, method: Method | None = None
              ) -> native.Compiled | None:
    """The run's program for the compiled replay: every batch from 2 on (`batch` 2: sizes c + d·b), or a batch
    below 2's own (its sizes as they are)."""
    if batch >= 2:
        first, later, handed = _steps(config, workload, method)
        return native.compiled(first, later, handed)
    return native.compiled(*_small_steps(config, workload, batch, method))


def runs(config: BertConfig, workload: Workload, batch: int, room: int, uncapped: Replay | None = None,
         method: Method | None = None) -> bool:
    """Whether `batch` runs, every step of it, without the allocator running out of `room` bytes reserved: its
    replay settled, or (a run whose steps hand blocks on, which can walk through the free slots without the
    allocator ever coming back to a state) it never ran out over the replay's steps and holds one segment of its
    largest handed-on block to spare (`spare`). `uncapped`: as `verdict` takes it."""
    return verdict(config, workload, batch, room, uncapped, method) == RUNS


def verdict(config: BertConfig, workload: Workload, batch: int, room: int, uncapped: Replay | None = None,
            method: Method | None = None) -> str:
    """`RUNS` (as `runs` says), `RUNS_OUT` (the replay ran out of `room`), or `UNPROVEN` (it never ran out, but
    never came back to a state either, and holds no segment of its largest handed-on block to spare).
    `uncapped`: the run at `batch` under no cap, where the asker has it: if it never reserved more than `room`,
    the run under `room` is that same run (a cap is read only when a segment is asked, and it never refused one),
    not replayed again."""
    margin = spare(config, workload, batch, method)
    run = uncapped if uncapped is not None and uncapped.peak_reserved <= room else \
        replayed(config, workload, batch, room, method)
    if run.out_of_memory is not None:
        return RUNS_OUT
    return RUNS if _ran(run, margin, room) else UNPROVEN


def _ran(run: Replay, margin: int, room: int) -> bool:
    if run.out_of_memory is not None:
        return False
    return run.steady or (margin > 0 and run.peak_pinned + margin <= room)


def spare(config: BertConfig, workload: Workload, batch: int, method: Method | None = None) -> int:
    """What a run that hands blocks on and does not settle must hold to spare: a new segment for its largest
    handed-on block (the causal LM's cache, under the course's loop, walks through the free slots: where no
    state comes back, a later step can ask one more segment, BERT-base's 478 MiB logits at its 171st forward);
    0 where nothing is handed on (such a run must settle)."""
    return max((allocation_size(round_size(c + d * batch))
                for c, d in _handed(config, replace(workload, batch=2), method)), default=0)


@lru_cache(maxsize=8)
def _handed(config: BertConfig, workload: Workload, method: Method | None = None) -> tuple[tuple[int, int], ...]:
    """The sizes (c + d·b) of the blocks a later step hands on to the next."""
    later = _steps(config, workload, method)[1]
    made = {key: (c, d) for kind, key, c, d in later if kind == "a"}
    return tuple(made[key] for kind, key, _, _ in later if kind == "m" and key in made)


DOWN_ONE_BY_ONE = 5  # `largest_batches`: runs that ran out, one batch below the other, before the steps double


def largest_batches(config: BertConfig, workload: Workload, rooms: dict[int, int], limit: int, slope: int,
                    method: Method | None = None) -> dict[int, int]:
    """For each room (bytes the allocator may reserve) and its first guess (the peak rule's answer), the largest
    batch up to `limit` whose run never runs out of the room, every step of it (`replayed`; 0: not even one).

    Each answer rests on replays: its batch runs, the next runs out (or is past `limit`). A run's most-pinned
    bytes are nearly affine in the batch, so a line through the batches that ran says where to look (the peak
    rule's `slope`, bytes per example, until runs far enough apart give one of their own, within a factor of two
    of it). A run that runs out stops there, one that runs replays until it settles, about three times the
    events, so the search leans on runs that run out: from a run that ran out it steps down one batch at a time
    (`DOWN_ONE_BY_ONE` runs, then 2, 4 … batches), from one that ran it gallops up (1, 2, 4 …) until the answer
    flips, then probes a bracket just under its top. Rooms go in ascending order, a smaller room's answer the
    floor of the next (what runs under a cap runs under a larger one), their runs shared. (Against a cut at 3/5 of
    the bracket: over nine workloads — 96 layers at six lengths, BERT-base MLM at two, a 24-layer classifier under
    autocast — 16 % fewer events, the same answers; over six others, 3.5 % fewer: 96 layers checkpointed 3 % more,
    a causal LM's inference forwards 12 % fewer, where a ragged boundary makes answers depend on the path, in
    both directions, each a batch that runs with the next one running out.)"""
    pinned: dict[int, int] = {}  # batch → the most-pinned bytes of its run, for runs that ran
    answers: dict[int, int] = {}

    def predict(room: int) -> int:
        top, low = max(pinned), min(pinned)
        per = max(1, slope)
        if 4 * (top - low) >= top:  # runs far enough apart that fragmentation's noise does not tilt the line
            per = min(max((pinned[top] - pinned[low]) // (top - low), per // 2), 2 * per)
        return top + (room - pinned[top]) // per

    for room, guess in sorted(rooms.items()):
        good, bad = max(answers.values(), default=0), limit + 1
        probe = predict(room) if pinned else guess
        ran_here = out_here = False
        looks, step, failed = 0, 1, 0
        while bad - good > 1:
            probe = min(max(probe, good + 1), bad - 1)
            run = replayed(config, workload, probe, room, method)
            ran = _ran(run, spare(config, workload, probe, method), room)
            if ran:
                good, pinned[probe], ran_here = probe, run.peak_pinned, True
            else:
                bad, out_here, failed = probe, True, failed + 1
            if ran_here and out_here:  # (just under the run that ran out: a tenth of the bracket above it)
                probe = good + max(1, -(-(bad - good - 1) * 9 // 10))
            elif ran and looks == 0:  # a second look along the line, with the run just made
                probe, looks = predict(room), 1
                if probe <= good:
                    probe = good + 1
            elif ran:
                probe, step = good + step, 2 * step
            else:
                probe = bad - (1 if failed <= DOWN_ONE_BY_ONE else 1 << (failed - DOWN_ONE_BY_ONE - 1))
        answers[room] = good
    return answers
