"""Loaded before pytest's plugins (`-p tests.frames` in pyproject's addopts): the pytest-textual-snapshot plugin
imports Textual, which reads its frame rate from the environment once, at import.

The tests' explorers paint at most 10 frames a second (`TEXTUAL_FPS`, Textual's own setting; 60 by default).
A test looks at the screen after `pilot.pause()`, which waits for the next frame, so every state a test checks
is still painted; what goes are frames painted while keys were still arriving, which no test looks at (the
seeded monkey's 2,000 keys: 899 frames at 60 a second, 528 at 10; painting was a third of its CPU). On 2 cores
the suite took 174 s at 60 frames a second, then 157 s and 166 s at 10 (the same hour). A frame rate set by
the caller stands.

A keypress (`pilot.press`) waits for the app to handle the keys, not for a frame: a test that reads what a
frame lays out or paints (a region, a size, rendered lines) after keys calls `pilot.pause()` first, which
paints one; likewise keys typed right after a pane is brought forward (F2–F5), as Textual orders Tab by where
widgets were last laid out. At 60 frames a second a frame usually happened meanwhile; at 10 one such read
failed one run in ten. `TEXTUAL_FPS=1 pytest` (frames only where a test pauses) finds a test that leans on a
frame it did not wait for: it passed alone, and failed one snapshot (the audit screen) with a second suite
running beside it, so the default here stays at 10.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_FPS", "10")
