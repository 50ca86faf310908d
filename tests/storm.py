"""Key storms with the command palette in them, outside the test suite (their outcome depends on timing).

    python tests/storm.py                       # seeds 0-9, bursts of 25
    python tests/storm.py --seeds 100 120 --burst 10

Each seed posts 1,500 random keys (every screen's keys, the palette's, ctrl+p) in bursts, as a paste or a
slow SSH link delivers them, waiting for idle between bursts. A seed fails if the app raises or stops. The
seeded monkey in the default run (tests/test_monkey.py) leaves ctrl+p out of its bursts to stay
deterministic; this is where the palette is stormed. It found the three palette/dropdown crashes guarded in
tui/explorer/commands.py and tui/explorer/app.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402

from tests.test_app import app_for  # noqa: E402
from tests.test_monkey import CHARACTERS, KEYS, PALETTE_KEYS  # noqa: E402

STORM_KEYS = KEYS + PALETTE_KEYS + ["ctrl+p"] * 5


async def storm(seed: int, burst: int, presses: int) -> str:
    rng = random.Random(seed)
    keys = [rng.choice(STORM_KEYS) for _ in range(presses)]
    app = app_for("bert-base-uncased")
    app.action_quit = lambda: None  # type: ignore[method-assign]  # the palette's Quit would end the run
    async with app.run_test(size=(80, 24)) as pilot:
        for start in range(0, len(keys), burst):
            for key in keys[start:start + burst]:
                app.post_message(events.Key(key, CHARACTERS.get(key, key if len(key) == 1 else None)))
            await asyncio.wait_for(pilot.pause(), timeout=30)
            if not app.is_running:
                return f"the app stopped after key {start + burst}"
    return "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs=2, default=(0, 10), metavar=("FIRST", "END"),
                        help="seeds FIRST..END-1 (default 0 10)")
    parser.add_argument("--burst", type=int, default=25, help="keys posted before waiting for idle (default 25)")
    parser.add_argument("--presses", type=int, default=1500, help="keys per seed (default 1500)")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # exports and screenshots the storm makes land here
        for seed in range(*args.seeds):
            try:
                outcome = asyncio.run(storm(seed, args.burst, args.presses))
            except Exception as error:  # noqa: BLE001  (any failure is the finding)
                outcome = f"{type(error).__name__}: {error}"
            failed += outcome != "ok"
            print(f"seed {seed}: {outcome}", flush=True)
    print(f"{failed} of {args.seeds[1] - args.seeds[0]} seeds failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
