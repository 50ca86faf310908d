"""The caching allocator's replay, compiled: `_replay.c`, the same policy as `allocator` (the reference), loaded
with ctypes where it was built at install (`hatch_build.py`: wherever a C compiler was found).

The pattern of PyYAML's and msgpack's speed-ups: optional, the pure-Python replay the reference and the fallback.
`BERT_TUI_PURE_PYTHON=1` forces the reference; `bert-tui --version` says which one runs (`which`). The compiled
replay reads a run's program as it is (each size c + d·b, the batch given), so a new batch is one call, with no
list of ops made in Python; it answers exactly what `allocator.replay_ops` answers (tests/test_native_replay.py:
every recorded order under several caps, and random programs), or refuses (`None`: a size too large for its 64-bit
arithmetic, an id it was not given), and the reference answers instead.
"""

from __future__ import annotations

import ctypes
import os
import sys
from array import array
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .allocator import Replay

ABI = 1  # `replay_abi()` of the library this module reads: a library built from another source is not loaded
PURE_PYTHON = "BERT_TUI_PURE_PYTHON"
KINDS = {"a": 0, "f": 1, "m": 2}  # ALLOC, FREE, MOVE in `_replay.c`
_FIELDS = 7  # the out[] words: peak allocated, reserved, pinned, stranded, out of memory (+1; 0 none), steps, steady

Program = Sequence[tuple[str, int, int, int]]  # (kind, id, c, d): a size c + d·b ("m": c the id handed on to)


def library_path() -> Path:
    """Where the build puts the compiled replay: beside this module."""
    return Path(__file__).with_name("_replay.dll" if sys.platform == "win32" else "_replay.so")


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    path = library_path()
    if not path.is_file():
        return None
    try:
        library = ctypes.CDLL(str(path))
        if library.replay_abi() != ABI:
            return None
    except (OSError, AttributeError):  # not loadable here (another platform's build), or not this library
        return None
    step: list[Any] = [ctypes.c_void_p] * 4 + [ctypes.c_int64]  # kinds, slots, c, d; their count
    library.replay_steps.argtypes = [*step, *step, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64,
                                     ctypes.c_int, ctypes.c_uint64, ctypes.c_int32, ctypes.c_void_p]
    library.replay_steps.restype = ctypes.c_int
    return library


def enabled() -> bool:
    """Whether replays run compiled: the library was built and loads, and the reference is not asked for."""
    return os.environ.get(PURE_PYTHON, "") in ("", "0") and _library() is not None


def which() -> str:
    """Which replay of the caching allocator runs, in words (`bert-tui --version`)."""
    if os.environ.get(PURE_PYTHON, "") not in ("", "0"):
        return f"the Python reference ({PURE_PYTHON} is set)"
    if _library() is None:
        return "the Python reference (no compiled replay was built at install: no C compiler?)"
    return f"compiled ({library_path().name})"


class Compiled:
    """A run's program (its first step and a later one, as `allocations._steps` gives them) in the arrays the
    compiled replay reads, made once; `replay` at any batch and cap."""

    def __init__(self, first: Program, later: Program, carried: Sequence[int]) -> None:
        slots: dict[int, int] = {}
        for kind, key, c, _ in (*first, *later):
            slots.setdefault(key, len(slots))
            if kind == "m":
                slots.setdefault(c, len(slots))
        for key in carried:
            slots.setdefault(key, len(slots))
        self._slots = len(slots)
        self._steps = [self._arrays(program, slots) for program in (first, later)]
        self._carried = array("i", [slots[key] for key in carried])

    @staticmethod
    def _arrays(program: Program, slots: dict[int, int]) -> tuple[array[int], ...]:
        return (array("B", [KINDS[kind] for kind, _, _, _ in program]),
                array("i", [slots[key] for _, key, _, _ in program]),
                array("Q", [slots[c] if kind == "m" else c for kind, _, c, _ in program]),
                array("Q", [d for _, _, _, d in program]))

    def replay(self, batch: int, cap: int | None, limit: int) -> Replay | None:
        """`allocator.replay_ops` of the program at `batch` under `cap`; None where the compiled replay refuses
        (a size past its 64-bit arithmetic's safe range: the reference answers)."""
        library = _library()
        if library is None or batch < 0 or batch >= 1 << 64 or (cap is not None and not 0 <= cap < 1 << 64):
            return None
        out = (ctypes.c_uint64 * _FIELDS)()
        arguments: list[object] = []
        for arrays in self._steps:
            arguments += [arrays[0].buffer_info()[0], arrays[1].buffer_info()[0], arrays[2].buffer_info()[0],
                          arrays[3].buffer_info()[0], len(arrays[0])]
        status = library.replay_steps(*arguments, self._slots, self._carried.buffer_info()[0], len(self._carried),
                                      batch, cap is not None, cap or 0, limit, out)
        if status != 0:
            return None
        allocated, reserved, pinned, stranded, out_of_memory, steps, steady = out
        return Replay(allocated, reserved, pinned, stranded, out_of_memory - 1 if out_of_memory else None, steps,
                      bool(steady))


def compiled(first: Program, later: Program, carried: Sequence[int]) -> Compiled | None:
    """The program for the compiled replay; None where a size or id does not fit its arrays (the reference
    replays it)."""
    try:
        return Compiled(first, later, carried)
    except OverflowError:
        return None
