"""Loaded before pytest's plugins (`-p tests.frames` in pyproject's addopts): the pytest-textual-snapshot plugin
imports Textual, which reads its frame rate from the environment once, at import.

The tests' explorers paint one frame a second on their own (`TEXTUAL_FPS`, Textual's own setting; 60 by
default); every other frame is one a test asks for. A test looks at the screen after `pilot.pause()`, which
paints a frame (it runs the screen's update), so every state a test checks is painted; what goes are the frames
the screen's timer painted while keys were still arriving, which no test looks at (the seeded monkey's 2,000
keys: 899 frames at 60 a second; painting was a third of its CPU). On 2 cores the suite took 174 s at 60 frames
a second, 157–166 s at 10 and 155 s at 1 (single runs, the same hour). A frame rate set by the caller stands.

So no test may lean on a frame it did not ask for: a keypress (`pilot.press`) waits for the app to handle the
keys, not for a frame. A test that reads what a frame lays out or paints (a region, a size, rendered lines)
after keys calls `pilot.pause()` first; likewise before typing right after a pane is brought forward (F2–F5),
as Textual orders Tab by where widgets were last laid out. At 60 frames a second a frame usually happened
meanwhile; at 10 one such read failed one run in ten. At one frame a second such a test fails nearly every
time, which is how the five there were found.
"""

from __future__ import annotations

import os

os.environ.setdefault("TEXTUAL_FPS", "1")
