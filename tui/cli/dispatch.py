"""`bert-tui`'s one way in: which command runs, and the one way out (exit codes, one line for any error,
never a traceback). A command's module is imported only when it runs.

    bert-tui [MODEL] [overrides]              the explorer (default preset: bert-base-uncased)
    bert-tui count [MODEL] [overrides] [--head HEAD] [--num-labels N] [--no-pooler] [--format FORMAT]
    bert-tui compute [MODEL] [overrides] [--batch B] [--seq S] [workload flags] [--format FORMAT]
    bert-tui presets | audit | diff | verify ...
    bert-tui serve [--host 127.0.0.1] [--port 8000]   the explorer in a web page

Bad input exits 2 with one line on stderr naming the field, the value and what is allowed.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from collections.abc import Sequence

from .. import COMMANDS
from ..plain import printable, say
from .common import EXIT_INTERNAL, EXIT_OUTPUT, EXIT_USAGE, UsageError


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    prog = f"bert-tui {command}" if command else "bert-tui"
    _tolerant_output()
    try:
        module = importlib.import_module(f"{__package__}.{command or 'explore'}")
        code: int = module.run(argv[1:] if command else argv)
        sys.stdout.flush()
        return code
    except UsageError as error:
        print(say(f"{prog}: error: {printable(str(error))}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `bert-tui count | head`: the reader left; not an error of ours
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        if error.errno not in OUTPUT_ERRNOS:
            return _internal_error(prog, error)
        _silence_stdout()  # else the interpreter's last flush fails again, with a traceback
        print(f"{prog}: error: cannot write the output: {printable(error.strerror or str(error))}", file=sys.stderr)
        return EXIT_OUTPUT
    except Exception as error:  # the last line of defence: one line, never a traceback on a user's terminal
        return _internal_error(prog, error)


OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EBADF, errno.EDQUOT}  # EPIPE: BrokenPipeError above


def _internal_error(prog: str, error: BaseException) -> int:
    if os.environ.get("BERT_TUI_DEBUG"):
        import traceback

        traceback.print_exception(error)
    print(f"{prog}: internal error: {error.__class__.__name__}: {printable(str(error))[:300]} "
          "(a bug in bert-tui: please report it with the command line; BERT_TUI_DEBUG=1 shows the traceback)",
          file=sys.stderr)
    return EXIT_INTERNAL


def _tolerant_output() -> None:
    """Text that stdout's encoding cannot hold (PYTHONIOENCODING=ascii, a C locale) is written escaped."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass  # a stream that cannot change: its own errors setting stays


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that nothing is flushed at exit to a pipe that is gone or a full disk."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass

