"""Keys typed while the explorer starts, through a real pseudo-terminal: the command as a user runs it.

`Tab End ctrl+u 40000` is written to the terminal right after launch, long before the first paint; the
explorer must apply it exactly (vocab 40000), then export what it shows, which the test reads back. (A pty's
master and slave share one termios: the test sees when the command has switched line editing off.)
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

KEYS_AT_LAUNCH = "\t" + "\x1b[F" + "\x15" + "40000"  # Tab, End, ctrl+u, 40000
F3, CTRL_U, ENTER, CTRL_Q = "\x1bOR", "\x15", "\r", "\x11"


class Terminal:
    """The explorer in a pseudo-terminal of 80×24; its output is drained so that it never blocks."""

    def __init__(self, tmp_path: Path) -> None:
        env = {**os.environ, "TERM": "xterm-256color", "ESCDELAY": "50", "BERT_TUI_MOUSE": "0",
               "XDG_CONFIG_HOME": str(tmp_path / "config")}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, as typed in a shell
            os.execve(sys.executable, [sys.executable, "-m", "tui"], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.output = bytearray()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.output += chunk

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_exit(self, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise AssertionError(f"the explorer did not exit within {seconds} s")


def wait_for(condition: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():  # type: ignore[operator]
        time.sleep(0.05)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a POSIX pseudo-terminal")
def test_keys_typed_before_the_first_paint_are_applied_in_order(tmp_path: Path) -> None:
    terminal = Terminal(tmp_path)
    try:
        # The keys go in as soon as the command has turned the terminal's line editing off (its first step;
        # keys typed before the interpreter gets there are edited by the kernel, which no program can undo),
        # long before the first paint: the alternate screen is not even open yet.
        wait_for(lambda: not termios.tcgetattr(terminal.fd)[3] & termios.ICANON, 20)
        assert b"\x1b[?1049h" not in terminal.output
        terminal.type(KEYS_AT_LAUNCH)
        wait_for(lambda: b"116,761,344" in terminal.output, 20)  # bert-base with V = 40000
        assert b"116,761,344" in terminal.output
        target = tmp_path / "out.json"
        painted = len(terminal.output)
        terminal.type(F3)
        wait_for(lambda: b"embeddings" in terminal.output[painted:], 20)  # the tree is painted (it has the focus)
        painted = len(terminal.output)
        terminal.type("x")
        wait_for(lambda: b"Export the breakdown" in terminal.output[painted:], 20)  # the dialog is painted
        terminal.type(CTRL_U + str(target) + ENTER)
        wait_for(target.exists, 10)
        terminal.type(CTRL_Q)
        assert terminal.wait_exit(10) == 0
    finally:
        os.close(terminal.fd)
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data["config"]["vocab_size"] == 40000 and data["total"] == 116_761_344
