"""The CLI run in this process, as a child process would see it run: its exit code, standard output and error.

A child costs a fresh interpreter (~0.45 s of CPU a run); in-process runs are for the many tests about what a
command prints and returns. Tests of what only a real process shows (a hang bounded by a timeout, the
environment read at start-up, the entry point itself) start one.
"""

from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout

from tui.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    """Exit code, standard output and standard error of `bert-tui ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse's own refusals (--help, unknown flags) end this way
            code = exit_.code if isinstance(exit_.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def completed(*argv: str) -> subprocess.CompletedProcess[str]:
    """`run` in the shape `subprocess.run` gives."""
    code, out, err = run(*argv)
    return subprocess.CompletedProcess(["bert-tui", *argv], code, out, err)
