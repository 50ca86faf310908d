"""The `bert-tui` command's first step: stop the terminal's line editing before anything slow happens.

Until the explorer's terminal driver takes over (after Python, Textual and the app have loaded: most of a
second), the terminal is in its cooked mode: keys typed meanwhile are echoed and line-edited by the kernel, so
`Tab End ctrl+u 40000` typed right after launch loses Tab and End to ctrl+u (the kernel's "kill line"). When
the explorer may start, this puts the terminal in non-canonical, no-echo mode at once: the keys wait, unedited,
for the explorer to read them. The terminal's own settings are restored on every exit.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from . import COMMANDS

NO_EXPLORER = (*COMMANDS, "-h", "--help", "--version")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    saved = _hold_keys() if not (argv and argv[0] in NO_EXPLORER) else None
    try:
        from .cli import main as cli_main

        return cli_main(argv)
    finally:
        if saved is not None:
            _restore(saved)


def _hold_keys() -> list[Any] | None:
    """Non-canonical input without echo on a terminal's standard input; its settings before, to restore."""
    try:
        import termios

        if not (sys.stdin.isatty() and sys.stdout.isatty()):  # no explorer: leave the terminal to its owner (less)
            return None
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        held = termios.tcgetattr(fd)
        held[3] &= ~(termios.ICANON | termios.ECHO)  # lflag: no line editing, no echo; signals stay (ctrl+c)
        held[6][termios.VMIN], held[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, held)
        return saved
    except (ImportError, OSError, ValueError, termios.error):  # not a POSIX terminal: nothing to hold
        return None


def _restore(saved: list[Any]) -> None:
    import termios

    try:
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, saved)
    except (OSError, ValueError, termios.error):
        pass
