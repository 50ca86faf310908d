"""Explorer benchmark: start-up, the update path of one edit, and memory, with baselines from the same run.

    python tests/benchmarks/bench_explorer.py [--edits N] [--json PATH]

* start-up to the first frame with the total, headless, in fresh processes: bert-tui against a minimal Textual
  app that shows one number (goal ≤ 1.5×). The clock starts just before the parent launches the child and stops
  in the child when the screen's compositor has rendered the first frame holding the total (the explorer's
  first frame has the form's preview; its fields are mounted right after). Beside it, without a goal: until the
  first idle (Pilot's first pause: the explorer's fields mounted, ready for input), and the whole process
  lifetime (interpreter teardown included);
* launch until the total is on the screen of a real pseudo-terminal (80×24), black-box: the same two apps
  run as a user runs them, their output read until the number appears (goal ≤ 1.5×);
* five digits typed at once into a field of a real pseudo-terminal, black-box, until the result shows: the
  explorer's new total against a minimal app echoing its field (goal ≤ 1.5×);
* one edit (the vocab size changes, as a keystroke does): CPU time of the handler that takes the new config
  to every pane, plus painting the tree's visible lines (labels are read at paint time), for bert-base and
  96 layers with the whole tree expanded, and 1,000 layers with the encoder open (a full viewport each)
  (goal: 96 and 1,000 layers within 1.5× of bert-base);
* peak memory (VmHWM, the high-water RSS) of the explorer at 1,000 layers with the encoder open, against the minimal app.

Medians; start-up figures take the baseline and bert-tui in turn, run by run (a shared machine's slower
spells weigh on both alike). Edits: CPU time (`time.process_time`), not Pilot wall time (Pilot waits in 20 ms steps).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from textual.geometry import Region  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli import ENV, median_seconds  # noqa: E402

from tui.core import BertConfig  # noqa: E402
from tui.explorer.app import make_app  # noqa: E402
from tui.explorer.widgets.param_tree import ParamTreeView  # noqa: E402
from tui.presets import load_catalog  # noqa: E402

# Each app prints two figures after it has exited, in seconds from its launch (BENCH_LAUNCH, wall clock set by
# the parent): its first frame with the total on it (the screen's compositor has rendered it: Textual hands each
# frame to App._display, which a headless app then drops), and its first idle (Pilot's first pause: every
# widget mounted, the explorer's fields included, ready for input).
PAINTED = """
import os, time
from textual.app import App as _App
launch = float(os.environ.get("BENCH_LAUNCH", time.time()))
painted, ready = [], []
_display = _App._display
def display(self, screen, renderable):
    now = time.time()
    _display(self, screen, renderable)
    if not painted and renderable is not None:
        text = "".join(segment.text for strip in screen._compositor.render_strips() for segment in strip)
        if "109,482,240" in text:
            painted.append(now - launch)
_App._display = display
async def done(pilot):
    await pilot.pause()
    ready.append(time.time() - launch)
    pilot.app.exit()
"""
MINIMAL_APP = PAINTED + """
from textual.app import App
from textual.widgets import Static
class One(App):
    def compose(self):
        yield Static("109,482,240")
One().run(headless=True, size=(120, 40), auto_pilot=done)
print(painted[0], ready[0])
"""
OUR_APP = PAINTED + """
from tui.explorer.app import make_app
from tui.presets import load_catalog
make_app(load_catalog()).run(headless=True, size=(120, 40), auto_pilot=done)
print(painted[0], ready[0])
"""
# Peak memory from /proc (VmHWM): ru_maxrss is carried over from the parent across fork and exec, so a
# child started by a big benchmark process would report the parent's peak.
MEMORY = """
{app}
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""
BIG_APP = """
from tui.explorer.app import make_app
from tui.core import BertConfig
from tui.presets import load_catalog
async def done(pilot):
    await pilot.pause()
    await pilot.press("f3", "down", "down", "enter")
    await pilot.pause()
    pilot.app.exit()
make_app(load_catalog(), BertConfig(num_hidden_layers=1000)).run(headless=True, size=(120, 40), auto_pilot=done)
"""


def interleaved(measure_once: Callable[[str], Any], labels: tuple[str, str], runs: int) -> list[list[Any]]:
    """`runs` measurements of each of two subjects, taken in turn (A, B, A, B, ...) after one warm-up each, so
    that a slower spell of a shared machine weighs on both alike."""
    for label in labels:
        measure_once(label)  # warm-up: .pyc, page cache
    results: list[list[Any]] = [[], []]
    for _ in range(runs):
        for index, label in enumerate(labels):
            results[index].append(measure_once(label))
    return results


def paint_once(code: str) -> tuple[float, float]:
    """Seconds from launching a fresh interpreter to its first frame with the total, and to its first idle."""
    env = {**ENV, "BENCH_LAUNCH": repr(time.time())}
    result = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, capture_output=True, text=True)
    first, idle = result.stdout.split()[-2:]
    return float(first), float(idle)


def paint_seconds(runs: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Medians (first frame with the total, first idle) of the minimal app and of the explorer."""
    def medians(pairs: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(pair[0] for pair in pairs), statistics.median(pair[1] for pair in pairs)

    minimal, ours = interleaved(paint_once, (MINIMAL_APP, OUR_APP), runs)
    return medians(minimal), medians(ours)


MINIMAL_TERMINAL_APP = """
from textual.app import App
from textual.widgets import Static
class One(App):
    def compose(self):
        yield Static("109,482,240")
One().run()
"""


class Pty:
    """A command running in a real pseudo-terminal (80×24), as a user runs it; ended (killed) on exit."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv

    def __enter__(self) -> "Pty":
        import fcntl
        import os
        import pty
        import struct
        import termios

        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(ROOT)
            os.execve(self.argv[0], self.argv, {**ENV, "TERM": "xterm-256color"})
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        return self

    def __exit__(self, *exc: object) -> None:
        import os
        import signal

        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)

    def write(self, data: bytes) -> None:
        import os

        os.write(self.fd, data)

    def read_until(self, text: bytes | None, seconds: float) -> bool:
        """Read its output until `text` appears (True), or for `seconds` (True only when `text` is None: the
        output was drained for that long)."""
        import os
        import select

        seen, start = bytearray(), time.perf_counter()
        while time.perf_counter() - start < seconds:
            if select.select([self.fd], [], [], 0.002)[0]:
                seen += os.read(self.fd, 65536)
                if text is not None and text in seen:
                    return True
        return text is None


def on_screen_seconds(commands: tuple[list[str], list[str]], runs: int,
                      text: bytes = b"109,482,240") -> tuple[float, float]:
    """Medians of seconds from launch until `text` is on the screen of a real pseudo-terminal (80×24), as a
    user sees it, for two commands measured in turn: each is started in the pty, its output read until the
    total appears, then it is ended."""
    def once(argv: list[str]) -> float:
        start = time.perf_counter()
        with Pty(argv) as terminal:
            return time.perf_counter() - start if terminal.read_until(text, 30) else float("nan")

    first, second = interleaved(lambda index: once(commands[int(index)]), ("0", "1"), runs)
    return statistics.median(first), statistics.median(second)


MINIMAL_TYPING_APP = """
from textual.app import App
from textual.widgets import Input, Static
class Echo(App):
    def compose(self):
        yield Input(id="field")
        yield Static("ready", id="echo")
    def on_input_changed(self, event):
        self.query_one("#echo", Static).update(f"echo {event.value}")
Echo().run()
"""


def typing_seconds(commands: tuple[list[str], list[str]], runs: int) -> tuple[float, float]:
    """Medians of seconds from five digits written to a real pseudo-terminal (80×24) at once, as a fast typist's
    or a paste's keys arrive, until the result is on the screen, black-box: for a minimal app, its Static's echo
    of the field (`echo 40000`); for the explorer, the new total in the summary line after `40000` replaces the
    vocab size (Tab from the preset select selects the field's text; the digits replace it)."""
    from tui.core import build_tree

    total = f"{build_tree(BertConfig(vocab_size=40000)).total:,}".encode()
    subjects = [(b"ready", b"", b"echo 40000"), (b"109,482,240", b"\t", total)]  # (shown, keys before, result)

    def once(index: int) -> float:
        ready, tab, wanted = subjects[index]
        with Pty(commands[index]) as terminal:
            if not (terminal.read_until(ready, 30) and terminal.read_until(None, 1.5)):  # shown, then settled
                return float("nan")
            if tab:
                terminal.write(tab)
                terminal.read_until(None, 0.5)
            start = time.perf_counter()
            terminal.write(b"40000")
            return time.perf_counter() - start if terminal.read_until(wanted, 10) else float("nan")

    first, second = interleaved(lambda index: once(int(index)), ("0", "1"), runs)
    return statistics.median(first), statistics.median(second)


def lifetime_seconds(code: str, runs: int) -> float:
    """Median seconds of the whole process: start-up, first paint, exit and interpreter teardown."""
    return median_seconds([sys.executable, "-c", code], runs, cwd=ROOT)


def max_rss_kib(code: str) -> int:
    result = subprocess.run([sys.executable, "-c", MEMORY.format(app=code)], check=True, cwd=ROOT,
                            capture_output=True, text=True, env=ENV)
    return int(result.stdout.strip().splitlines()[-1])


async def edit_seconds(config: BertConfig, keys: tuple[str, ...], edits: int) -> float:
    """Median CPU time of one edit: the handler from new config to panes, then painting the visible tree."""
    app = make_app(load_catalog(), config)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*keys)
        await pilot.pause()
        tree = app.query_one(ParamTreeView)
        times = []
        for index in range(edits):
            new = config.replace(vocab_size=config.vocab_size + 1 + index % 2)
            start = time.process_time()
            app.main.config = new
            tree.render_lines(Region(0, 0, tree.size.width, tree.size.height))
            times.append(time.process_time() - start)
            await pilot.pause()
        return statistics.median(times)


def measure(runs: int, edits: int) -> list[tuple[str, float, float, str]]:
    rows: list[tuple[str, float, float, str]] = []
    (minimal, minimal_ready), (ours, ours_ready) = paint_seconds(runs)
    rows += [("first frame with the total, in-process: minimal Textual app (baseline)", minimal, 1.0, ""),
             ("first frame with the total, in-process: bert-tui explorer", ours, ours / minimal, "goal ≤ 1.5×"),
             ("ready for input (first idle), in-process: minimal app (baseline)", minimal_ready, 1.0, ""),
             ("ready for input (first idle): explorer, its fields mounted", ours_ready, ours_ready / minimal_ready,
              "no goal: keys typed before wait, in order")]
    minimal, ours = on_screen_seconds(([sys.executable, "-c", MINIMAL_TERMINAL_APP], [sys.executable, "-m", "tui"]), runs)
    rows += [("total on screen, real terminal (pty): minimal (baseline)", minimal, 1.0, ""),
             ("total on screen, real terminal (pty): bert-tui explorer", ours, ours / minimal,
              "goal ≤ 1.5×")]
    minimal, ours = typing_seconds(([sys.executable, "-c", MINIMAL_TYPING_APP], [sys.executable, "-m", "tui"]), runs)
    rows += [("five digits typed, until shown (pty): minimal app echoing them (baseline)", minimal, 1.0, ""),
             ("five digits typed into a field, until the new total shows (pty): explorer", ours, ours / minimal,
              "goal ≤ 1.5×")]
    minimal, ours = lifetime_seconds(MINIMAL_APP, runs), lifetime_seconds(OUR_APP, runs)
    rows += [("process lifetime, paint then quit: minimal app (baseline)", minimal, 1.0, ""),
             ("process lifetime, paint then quit: bert-tui explorer", ours, ours / minimal, "no goal: includes teardown")]

    base = asyncio.run(edit_seconds(BertConfig(), ("f3", "e"), edits))
    wide = asyncio.run(edit_seconds(BertConfig(num_hidden_layers=96), ("f3", "e"), edits))
    huge = asyncio.run(edit_seconds(BertConfig(num_hidden_layers=1000), ("f3", "down", "down", "enter"), edits))
    rows += [("edit (CPU): bert-base, whole tree expanded (baseline)", base, 1.0, ""),
             ("edit (CPU): 96 layers, whole tree expanded", wide, wide / base, "goal ≤ 1.5×"),
             ("edit (CPU): 1,000 layers, encoder open", huge, huge / base, "goal ≤ 1.5×")]

    rss_min, rss_big = max_rss_kib(MINIMAL_APP), max_rss_kib(BIG_APP)
    rows += [("peak RSS: minimal Textual app (baseline)", rss_min / 1024, 1.0, "MiB"),
             ("peak RSS: explorer at 1,000 layers, encoder open", rss_big / 1024, rss_big / rss_min, "MiB (no goal)")]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=40, help="edits per scenario (default 40)")
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per start-up figure (default 7)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    from bench_cli import report

    report(measure(args.runs, args.edits), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
