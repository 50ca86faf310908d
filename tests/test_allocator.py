"""The caching allocator's replay (`tui.core.step.allocator`), rule by rule as CUDACachingAllocator.cpp states it."""

from __future__ import annotations

import pytest

from tui.core.step.allocator import (
    CachingAllocator,
    OutOfMemory,
    allocation_size,
    replay,
    replay_steps,
    round_size,
)

MiB = 1 << 20


@pytest.mark.parametrize(("asked", "block"), [(0, 512), (1, 512), (512, 512), (513, 1024), (MiB + 1, MiB + 512)])
def test_every_request_is_rounded_up_to_512_bytes(asked: int, block: int) -> None:
    assert round_size(asked) == block


@pytest.mark.parametrize(("block", "segment"), [(512, 2 * MiB), (MiB, 2 * MiB), (MiB + 512, 20 * MiB),
                                                (10 * MiB - 512, 20 * MiB), (10 * MiB, 10 * MiB),
                                                (11 * MiB + 512, 12 * MiB)])
def test_a_new_segment_is_2_mib_20_mib_or_the_block_rounded_to_2_mib(block: int, segment: int) -> None:
    assert allocation_size(block) == segment


def test_small_blocks_share_a_2_mib_segment() -> None:
    allocator = CachingAllocator()
    allocator.malloc(100), allocator.malloc(600)
    assert (allocator.allocated, allocator.reserved) == (512 + 1024, 2 * MiB)


def test_a_large_segments_rest_is_split_off_and_reused() -> None:
    allocator = CachingAllocator()
    allocator.malloc(3 * MiB), allocator.malloc(3 * MiB)
    assert (allocator.allocated, allocator.reserved) == (6 * MiB, 20 * MiB)


def test_a_rest_of_at_most_1_mib_is_not_split_off_in_the_large_pool() -> None:
    allocator = CachingAllocator()
    block = allocator.malloc(19 * MiB + 512)  # its segment is 20 MiB; the 1 MiB - 512 left goes with it
    assert block.size == allocator.allocated == allocator.reserved == 20 * MiB


def test_best_fit_takes_the_smallest_cached_block_that_is_large_enough() -> None:
    allocator = CachingAllocator()
    big, small = allocator.malloc(30 * MiB), allocator.malloc(12 * MiB)
    allocator.free(big), allocator.free(small)
    taken = allocator.malloc(11 * MiB)
    assert taken.address == small.address and allocator.reserved == 42 * MiB


def test_freed_neighbours_merge_into_their_segment_again() -> None:
    allocator = CachingAllocator()
    first, second = allocator.malloc(3 * MiB), allocator.malloc(3 * MiB)
    allocator.free(second), allocator.free(first)
    assert allocator.release_cached_blocks() == 20 * MiB and allocator.reserved == 0


def test_whole_cached_segments_are_given_back_before_running_out() -> None:
    allocator = CachingAllocator(cap=41 * MiB)
    allocator.free(allocator.malloc(40 * MiB))
    allocator.malloc(100)  # a 2 MiB small segment: over the cap until the cached 40 MiB go back
    assert allocator.reserved == 2 * MiB


def test_a_split_segment_strands_its_rest_and_a_cap_runs_out_with_room_allocated() -> None:
    """A freed 40 MiB block that best fit hands to an 8 MiB tensor cannot be given back: the next 40 MiB request
    needs a segment of its own, which a 64 MiB cap refuses with 8 MiB allocated."""
    events = [("a", 0, 40 * MiB), ("f", 0, 0), ("a", 1, 8 * MiB), ("a", 2, 40 * MiB)]
    ran = replay(events, cap=80 * MiB)
    assert ran.out_of_memory is None and ran.peak_reserved == 80 * MiB
    assert ran.peak_allocated == 48 * MiB and ran.peak_pinned == 80 * MiB and ran.stranded == 32 * MiB
    assert replay(events, cap=64 * MiB).out_of_memory == 3
    with pytest.raises(OutOfMemory):
        allocator = CachingAllocator(cap=64 * MiB)
        allocator.free(allocator.malloc(40 * MiB))
        allocator.malloc(8 * MiB)
        allocator.malloc(40 * MiB)


def test_wholly_free_segments_are_not_pinned() -> None:
    """A cached segment that is wholly free is given back before an out-of-memory error: a cap pays only for
    segments partly in use."""
    ran = replay([("a", 0, 40 * MiB), ("f", 0, 0), ("a", 1, 600), ("a", 2, 30 * MiB)])
    assert ran.peak_reserved == 42 * MiB  # the 30 MiB went into the cached 40 MiB segment, split
    assert ran.peak_pinned == 42 * MiB and ran.stranded == 12 * MiB - 1024  # (600 bytes: a 1,024-byte block)
    fresh = replay([("a", 0, 40 * MiB), ("f", 0, 0), ("a", 1, 600)])
    assert fresh.peak_reserved == 42 * MiB and fresh.peak_pinned == 40 * MiB and fresh.stranded == 0


def test_a_run_is_replayed_until_a_step_leaves_the_allocator_as_an_earlier_one_did() -> None:
    """The second step makes the small pool's first segment; the third ends as the second did: settled, every
    later step the same. A limit below that is not a proof, and such a run is not counted as running."""
    first = [("a", 0, 4 * MiB)]  # (a block that stays: the weights, the optimizer's states)
    step = [("a", 1, 8 * MiB), ("a", 2, 600), ("f", 2, 0), ("f", 1, 0)]
    settled = replay_steps(first, step)
    assert settled.steady and settled.steps == 3 and settled.out_of_memory is None
    assert settled.peak_allocated == 12 * MiB + 1024 and settled.peak_reserved == 22 * MiB
    assert replay_steps(first, step, limit=2).steady is False
    assert replay_steps(first, [("a", 1, 8 * MiB), ("f", 1, 0)]).steps == 2  # (no new segment: the second)
    out = replay_steps(first, step, cap=10 * MiB)  # the first step's 20 MiB segment does not fit
    assert out.out_of_memory == 0 and out.steps == 1


def test_a_segment_given_back_and_asked_again_is_the_same_state_wherever_it_lands() -> None:
    """Under a cap that binds, a step gives back a cached segment and cudaMalloc's next one has another address:
    states compare by the addresses' order (segments by rank, blocks by offset), so the run still settles."""
    first = [("a", 0, 30 * MiB), ("f", 0, 0)]
    step = [("a", 1, 50 * MiB), ("f", 1, 0), ("a", 2, 30 * MiB), ("f", 2, 0)]
    run = replay_steps(first, step, cap=60 * MiB)  # each step: the 50 MiB segment given back for the 30 MiB one
    assert run.steady and run.out_of_memory is None and run.steps <= 3
    assert run.peak_reserved == 50 * MiB
