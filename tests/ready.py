"""Waiting for the explorer by a condition, never by a pause of some length.

The explorer paints its first frame with a preview of the form and mounts the real fields right after; keys typed
meanwhile wait and are replayed. A test that queries a field must wait until that is done (`BertTuiApp.ready`):
a bare `pilot.pause()` usually sufficed and failed one run in three on a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
import unicodedata
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from textual import events

READY_WITHIN = 60.0  # seconds: a bound for a hung start-up, far beyond what a loaded 2-core machine needs


async def until(pilot: Any, condition: Callable[[], object], what: str) -> None:
    """Let the app run until `condition()` holds (`what` names it in the failure of a hung app)."""
    deadline = time.monotonic() + READY_WITHIN
    while not condition():
        if not pilot.app.is_running or time.monotonic() > deadline:
            raise AssertionError(f"the explorer never got there: {what}")
        await pilot.pause()
        await asyncio.sleep(0)


async def until_offered(pilot: Any, text: str) -> None:
    """Let the app run until the command palette's highlighted command names `text` (its search is a worker)."""
    from textual.command import CommandList

    def offered() -> bool:
        for results in pilot.app.screen.query(CommandList):
            index = results.highlighted
            return index is not None and text in str(results.get_option_at_index(index).prompt)
        return False

    await until(pilot, offered, f"the command palette offering {text!r}")


async def until_ready(pilot: Any) -> None:
    """Let the app run until its fields are mounted and the keys typed meanwhile are handled."""
    await until(pilot, lambda: pilot.app.ready, "its form's fields mounted")


def ready_first(run_test: Any) -> Any:
    """`App.run_test` that hands over the pilot once the explorer is ready."""

    @asynccontextmanager
    async def run(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with run_test(self, *args, **kwargs) as pilot:
            await until_ready(pilot)
            yield pilot

    return run


def key_for(character: str) -> str:
    """The key name Textual gives `character` (`/` → `slash`, `-` → `minus`), so bindings see what they see when
    it is typed."""
    if character.isalnum():
        return character
    name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    return {"solidus": "slash", "reverse_solidus": "backslash", "commercial_at": "at", "hyphen_minus": "minus",
            "plus_sign": "plus", "low_line": "underscore"}.get(name, name)


async def type_text(pilot: Any, text: str) -> None:
    """Type `text` into what has focus as a paste or a fast typist delivers it: every key queued in order at
    once, then one wait for the app to settle. `pilot.press(*text)` waits for idle after each key (40 ms or more
    a key; typing paths took a fifth of the suite). Keys pressed after it arrive after these, in order."""
    for character in text:
        pilot.app.post_message(events.Key(key_for(character), character))
    await pilot.pause()
