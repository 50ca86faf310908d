"""The CUDA caching allocator's policy, replayed: what a cap (a card, or `set_per_process_memory_fraction`) sees.

A cap limits what the allocator *reserves* (segments got from cudaMalloc), not what it hands out: a segment that is
partly in use can never be given back, so a freed block that best fit split for a smaller tensor strands the rest
of its segment, and the next large request needs a new one. This module is that policy, as
`c10/cuda/CUDACachingAllocator.cpp` (`DeviceCachingAllocator`) states it for one stream and the default settings
(no expandable segments, no `max_split_size`, no garbage-collection threshold, no power-of-two rounding); each rule
names the function it comes from:

- `round_size`: a request is rounded up to a multiple of 512 bytes (at least 512).
- `get_pool`: blocks of at most 1 MiB come from the small pool, larger ones from the large pool.
- `get_allocation_size`: a new segment is 2 MiB for a small block, 20 MiB for a block under 10 MiB, otherwise the
  block rounded up to a multiple of 2 MiB.
- `get_free_block`: best fit: the smallest cached free block of the pool at least as large, the lowest address
  among equal sizes.
- `alloc_block`: a new segment, unless it would take the reserved bytes over the cap (`set_fraction`).
- `release_cached_blocks` (tried once before an out-of-memory error): every cached block that is a whole segment is
  given back; a segment with any block in use stays.
- `should_split`: the rest of a block is split off when it is at least 512 bytes (small pool) or more than 1 MiB
  (large pool); otherwise the whole block is handed out.
- `alloc_found_block`: the allocation takes the front of the block; the rest goes back to the pool.
- `free_block` / `try_merge_blocks`: a freed block merges with free neighbours of its segment.

`memory_allocated` is the sum of the blocks handed out, `memory_reserved` the sum of the segments.
"""

from __future__ import annotations

import gc
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the largest block of the small pool
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small pool's segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: the segment of a block under kMinLargeAlloc
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge


def round_size(nbytes: int) -> int:
    """The block a request of `nbytes` gets (`round_size`): at least 512 bytes, rounded up to a multiple of 512."""
    return max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)


def allocation_size(size: int) -> int:
    """The segment a new block of `size` (rounded) bytes asks cudaMalloc for (`get_allocation_size`)."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


# A block: a piece of a segment, allocated or cached free, with its neighbours in the segment — a list, not an
# object, for the replay's hot path (a list is made and read faster than any class's instance).
ADDRESS, SIZE, SMALL, IN_USE, PREV, NEXT = range(6)
Block: TypeAlias = list[Any]  # [address, size, small (its pool), in use, the block before it, the block after
# it (None: the end)]


def _whole_segment(block: Block) -> bool:
    return block[PREV] is None and block[NEXT] is None


_ADDRESS_BITS = 64  # a pool's key: size, then address, in one integer (addresses stay far below 2⁶⁴)
_ADDRESS_MASK = (1 << _ADDRESS_BITS) - 1


class _Pool:
    """Cached free blocks in `BlockComparatorSize` order: by size, then address (one integer key each, size then
    address; `CachingAllocator._run` takes the best fit and adds blocks on its own)."""

    __slots__ = ("_keys", "_blocks")

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._blocks: dict[int, Block] = {}


class OutOfMemory(Exception):
    """The allocator could not get a segment under the cap, even after giving back every whole cached segment."""

    def __init__(self, nbytes: int, reserved: int, allocated: int, index: int = 0) -> None:
        self.nbytes, self.reserved, self.allocated = nbytes, reserved, allocated
        self.index = index  # the event that ran out, among those `CachingAllocator.run` was given
        super().__init__(f"{nbytes:,} bytes asked with {reserved:,} reserved and {allocated:,} allocated")


@dataclass(frozen=True, slots=True)
class Taken:
    """A block `CachingAllocator.malloc` handed out: where it is and how large (`free` gives it back)."""

    address: int
    size: int
    block: Block


Op = tuple[str, int, int]  # an event as the replay's loop reads it (`prepare`): ("s" or "l", id, the rounded
# block) allocates from the small or the large pool; ("f", id, 0) and ("m", id, new) as events say


def prepare(events: Iterable[Event]) -> list[Op]:
    """`events` as the replay's loop reads them: each request rounded and its pool decided once (`allocation`),
    not at every step that replays it."""
    return [allocation(key, nbytes) if kind == "a" else (kind, key, nbytes) for kind, key, nbytes in events]


def allocation(key: int, nbytes: int) -> Op:
    """The op of a request of `nbytes` for `key`: its block (`round_size`) from its pool (`get_pool`)."""
    size = round_size(nbytes)
    return "s" if size <= SMALL_SIZE else "l", key, size


class CachingAllocator:
    """One device's caching allocator under an optional cap on the bytes it reserves."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap
        self._small, self._large = _Pool(), _Pool()
        self._next_address = 0
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.cached_segments = 0  # bytes of cached segments wholly free: given back before an out-of-memory
        self.peak_pinned = 0  # the most reserved in segments that are partly in use: what a cap must hold
        self.stranded = 0  # free bytes inside partly used segments when `peak_pinned` was reached
        self._segments: dict[int, int] = {}  # each segment's address → its size

    def malloc(self, nbytes: int) -> Taken:
        """A block for a request of `nbytes` (`run`'s rules)."""
        live: dict[int, Block] = {}
        self.run((("a", 0, nbytes),), live)
        return Taken(live[0][ADDRESS], live[0][SIZE], live[0])

    def free(self, taken: Taken) -> None:
        """Give a block back to its pool, merged with its free neighbours (`run`'s rules)."""
        self.run((("f", 0, 0),), {0: taken.block})

    def run(self, events: Iterable[Event], live: dict[int, Block]) -> None:
        """Carry out `events` (`live`: the block of each id in use; `_run`'s rules)."""
        self._run(prepare(events), live)

    def _run(self, ops: Iterable[Op], live: dict[int, Block]) -> None:
        """Carry out `ops` (`prepare`), the policy's rules written out in one loop, the replay's hot path (well
        under a microsecond an event): an allocation — the best fit of its pool or a new segment (`alloc_block`;
        over the cap, the cached whole segments given back first and the segment asked again, else
        `OutOfMemory`), the rest split off (`should_split`, `alloc_found_block`); `free` — merged with free
        neighbours (`try_merge_blocks`); `("m", id, new)` hands a block on to another id. After an
        `OutOfMemory` (its `index`: the event) the allocator holds what it held before that event, less the
        cached whole segments it gave back trying. (Blocks are lists: 0 address, 1 size, 2 small, 3 in use,
        4 the block before, 5 the block after; the indices are written out, as `ADDRESS` … `NEXT` name them.)"""
        small_keys, small_blocks = self._small._keys, self._small._blocks
        large_keys, large_blocks = self._large._keys, self._large._blocks
        allocated, cached, reserved = self.allocated, self.cached_segments, self.reserved
        peak_allocated, peak_pinned, stranded = self.peak_allocated, self.peak_pinned, self.stranded
        try:
            for index, (kind, key, size) in enumerate(ops):
                if kind == "f":
                    block = live.pop(key)
                    block[3] = False
                    size = block[1]
                    allocated -= size
                    keys, blocks = (small_keys, small_blocks) if block[2] else (large_keys, large_blocks)
                    before, after = block[4], block[5]
                    if before is not None and not before[3]:
                        gone = before[1] << _ADDRESS_BITS | before[0]
                        del keys[bisect_left(keys, gone)]
                        del blocks[gone]
                        size += before[1]
                        block[0] = before[0]
                        block[4] = before = before[4]
                        if before is not None:
                            before[5] = block
                    if after is not None and not after[3]:
                        gone = after[1] << _ADDRESS_BITS | after[0]
                        del keys[bisect_left(keys, gone)]
                        del blocks[gone]
                        size += after[1]
                        block[5] = after = after[5]
                        if after is not None:
                            after[4] = block
                    block[1] = size
                    if before is None and after is None:
                        cached += size
                    free_key = size << _ADDRESS_BITS | block[0]
                    insort(keys, free_key)
                    blocks[free_key] = block
                elif kind == "m":
                    live[size] = live.pop(key)
                else:
                    small = kind == "s"
                    keys, blocks = (small_keys, small_blocks) if small else (large_keys, large_blocks)
                    fit = bisect_left(keys, size << _ADDRESS_BITS)
                    if fit < len(keys):
                        block = blocks.pop(keys.pop(fit))
                        if block[4] is None and block[5] is None:
                            cached -= block[1]
                    else:
                        self.allocated, self.cached_segments = allocated, cached
                        segment = self._new_segment(allocation_size(size), small)
                        if segment is None:
                            self.release_cached_blocks()
                            cached = self.cached_segments
                            segment = self._new_segment(allocation_size(size), small)
                            if segment is None:
                                raise OutOfMemory(size, self.reserved, allocated, index)
                        block, reserved = segment, self.reserved
                    rest = block[1] - size
                    if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
                        address = block[0]
                        before = block[4]
                        front = [address, size, small, True, before, block]
                        if before is not None:
                            before[5] = front
                        block[4] = front
                        block[0] = address = address + size
                        block[1] = rest
                        rest_key = rest << _ADDRESS_BITS | address
                        insort(keys, rest_key)
                        blocks[rest_key] = block
                        block = front
                    else:
                        block[3] = True
                    live[key] = block
                    allocated += block[1]
                    if allocated > peak_allocated:
                        peak_allocated = allocated
                    pinned = reserved - cached
                    if pinned > peak_pinned:
                        peak_pinned, stranded = pinned, pinned - allocated
        finally:
            self.allocated, self.cached_segments = allocated, cached
            self.peak_allocated, self.peak_pinned, self.stranded = peak_allocated, peak_pinned, stranded

    def state(self) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]:
        """What the next allocations depend on, with addresses as the policy reads them (only their order: new
        segments come after every other): the segments' sizes in address order, and every cached free block as
        (size, its segment's rank, its offset in it), small pool, then large."""
        bases = sorted(self._segments)
        blocks = []
        for pool in (self._small, self._large):
            for key in pool._keys:
                address = key & _ADDRESS_MASK
                rank = bisect_right(bases, address) - 1
                blocks.append((key >> _ADDRESS_BITS, rank, address - bases[rank]))
        return tuple(self._segments[base] for base in bases), tuple(blocks)

    def where(self, block: Block) -> tuple[int, int, int]:
        """A block as `state` places it: its segment's rank, its offset in it, its size."""
        bases = sorted(self._segments)
        rank = bisect_right(bases, block[ADDRESS]) - 1
        return rank, block[ADDRESS] - bases[rank], block[SIZE]

    def release_cached_blocks(self) -> int:
        """Give back every cached block that is a whole segment (`release_cached_blocks`); the bytes given back."""
        given = 0
        for pool in (self._small, self._large):
            kept = []
            for key in pool._keys:
                block = pool._blocks[key]
                if _whole_segment(block):
                    del pool._blocks[key]
                    del self._segments[block[ADDRESS]]
                    given += block[SIZE]
                else:
                    kept.append(key)
            pool._keys[:] = kept
        self.reserved -= given
        self.cached_segments -= given
        return given

    def _new_segment(self, size: int, small: bool) -> Block | None:
        if self.cap is not None and self.reserved + size > self.cap:
            return None
        block: Block = [self._next_address, size, small, False, None, None]
        self._segments[self._next_address] = size
        self._next_address += size + ROUND_LARGE  # segments never adjacent: they never merge
        self.reserved += size
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved
        return block


@dataclass(frozen=True, slots=True)
class Replay:
    """What the allocator did over a sequence of allocations and frees."""

    peak_allocated: int
    peak_reserved: int
    peak_pinned: int  # the most reserved in segments partly in use (wholly free ones are given back under a cap)
    stranded: int  # free bytes inside partly used segments at that moment: what fragmentation costs a cap
    out_of_memory: int | None  # the index of the event that ran out of memory under the cap, if one did
    steps: int = 0  # (`replay_steps`) the steps replayed
    steady: bool = True  # (`replay_steps`) whether a step left the allocator as it found it: every later one repeats it


Event = tuple[str, int, int]  # ("a", id, bytes) allocates a block for `id`; ("f", id, 0) frees it; ("m", id, new)
# hands the block of `id` on under the id `new` (a block one step leaves to the next: `allocations._handed_on`)


def replay(events: Iterable[Event], cap: int | None = None) -> Replay:
    """Replay `events` through a fresh allocator under `cap` (bytes it may reserve), stopping at an out-of-memory."""
    allocator = CachingAllocator(cap)
    try:
        allocator.run(events, {})
    except OutOfMemory as error:
        return _result(allocator, error.index)
    return _result(allocator, None)


STEPS_LIMIT = 16  # `replay_steps`: a run whose allocator has not settled by then is not counted as running
# A run that hands blocks on from step to step (the course's loop) can take longer to come back to a state: each
# step's loss (512 bytes) is made while the last one lives, so the two walk through a small segment's free slots,
# and the logits alternate between two segments; the period is the walk's times two (ModernBERT-base under
# autocast: 18 steps, its peaks the same from the third on).
HANDED_ON_STEPS_LIMIT = 64


def replay_steps(first: Sequence[Event], step: Sequence[Event], cap: int | None = None, limit: int = STEPS_LIMIT,
                 carried: Sequence[int] = ()) -> Replay:
    """`replay_ops` over the events of the first step and a later one."""
    return replay_ops(prepare(first), prepare(step), cap, limit, carried)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused: a replay makes ~10⁵ blocks that link each other (and the step's
    derivation as many objects), and the collector's passes over them cost a tenth of its time; what they leave
    is collected after. (Process-wide, as the collector is: where another thread has paused it, left paused.)"""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def replay_ops(first: Sequence[Op], step: Sequence[Op], cap: int | None = None, limit: int = STEPS_LIMIT,
               carried: Sequence[int] = ()) -> Replay:
    """A training run (its events as `prepare` gives them): `first` (its first step, where the optimizer's
    states appear), then `step` (every later step: the same events each time, each block it allocates freed by
    its end) again and again, until a step
    leaves the allocator as an earlier step left it (the same segments, the same free blocks: the blocks in use
    are the same tensors, the weights, states and batch). From the same state the same events do the same, so
    every later step repeats one already replayed, and the run is settled: its peaks are the run's, however long
    it trains. Most runs settle at their third step (it ends as the second did); some need a fourth, and a cap
    that binds can make a run alternate (each step gives back cached segments the next one asks for again): it
    settles when a state comes back. A run not settled after `limit` steps is not proven to run: `steady` False
    (the search counts it as running out). `carried`: the ids of blocks a step hands on to the next (`("m", id,
    new)` events), whose places are part of the state (the next step frees them)."""
    with collector_paused():
        return _replay_ops(first, step, cap, limit, carried)


def _replay_ops(first: Sequence[Op], step: Sequence[Op], cap: int | None, limit: int, carried: Sequence[int]
                ) -> Replay:
    allocator = CachingAllocator(cap)
    live: dict[int, Block] = {}
    done = count = 0  # the events of the steps before this one
    seen: set[object] = set()
    try:
        for count in range(1, limit + 1):
            ops = first if count == 1 else step
            allocator._run(ops, live)
            done += len(ops)
            state = allocator.state(), tuple(allocator.where(live[key]) for key in carried)
            if state in seen:
                return _result(allocator, None, count)
            seen.add(state)
    except OutOfMemory as error:
        return _result(allocator, done + error.index, count)
    return _result(allocator, None, count, steady=False)


def _result(allocator: CachingAllocator, out_of_memory: int | None, steps: int = 0, steady: bool = True) -> Replay:
    return Replay(allocator.peak_allocated, allocator.peak_reserved, allocator.peak_pinned, allocator.stranded,
                  out_of_memory, steps, steady)
