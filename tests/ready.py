"""Waiting for the explorer by a condition, never by a pause of some length.

The explorer paints its first frame with a preview of the form and mounts the real fields right after; keys typed
meanwhile wait and are replayed. A test that queries a field must wait until that is done (`BertTuiApp.ready`):
a bare `pilot.pause()` usually sufficed and failed one run in three on a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

READY_WITHIN = 60.0  # seconds: a bound for a hung start-up, far beyond what a loaded 2-core machine needs


async def until_ready(pilot: Any) -> None:
    """Let the app run until its fields are mounted and the keys typed meanwhile are handled."""
    deadline = time.monotonic() + READY_WITHIN
    while not pilot.app.ready:
        if not pilot.app.is_running or time.monotonic() > deadline:
            raise AssertionError("the explorer never became ready (its form's fields were not mounted)")
        await pilot.pause()
        await asyncio.sleep(0)


def ready_first(run_test: Any) -> Any:
    """`App.run_test` that hands over the pilot once the explorer is ready."""

    @asynccontextmanager
    async def run(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with run_test(self, *args, **kwargs) as pilot:
            await until_ready(pilot)
            yield pilot

    return run
