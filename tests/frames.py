"""Loaded before pytest's plugins (`-p tests.frames` in pyproject's addopts): the pytest-textual-snapshot plugin
imports Textual, which reads its frame rate from the environment once, at import.

The tests' explorers paint at most 10 frames a second (`TEXTUAL_FPS`, Textual's own setting; 60 by default).
A test looks at the screen after `pilot.pause()`, which waits for the next frame, so every state a test checks
is still painted; what goes are the frames painted while keys were still arriving, which no test looks at and
which were a third of a busy test's CPU (the seeded monkey's 2,000 keys painted 899 frames). On 2 cores the
suite took 174 s at 60 frames a second and 157 s at 10, back to back. A frame rate set by the caller stands.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_FPS", "10")
