"""`bert-tui [MODEL]`: the explorer opened from the command line (Textual is imported only here), or,
without a terminal, what `bert-tui count` prints."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import COMMANDS, __version__
from ..presets import DEFAULT_PRESET, load_catalog
from .common import (
    Parser,
    Selection,
    SourceUnavailable,
    UsageError,
    add_model,
    add_overrides,
    add_source,
    catalog_with_warnings,
    resolve,
)
from .count import print_count


def build_parser() -> Parser:
    parser = Parser(
        prog="bert-tui",
        description="Every weight in BERT, counted and explained, exactly as Hugging Face transformers counts it. "
        "With no command, opens the explorer.",
        epilog="commands:\n  count     count one configuration (table, json, csv or markdown)\n"
        "  compute   FLOPs and memory of a training step at a batch and sequence length\n"
        "  presets   list the presets with their totals\n"
        "  audit     explain a published count (bert-tui audit 110M)\n"
        "  diff      compare two presets, preset files or config.json files\n"
        "  verify    cross-check against transformers (pip install 'bert-tui[verify]')\n"
        "  serve     the explorer in a web page (pip install 'bert-tui[serve]')\n\n"
        "examples:\n  bert-tui --preset bert-large-uncased\n"
        "  bert-tui count --preset example-40k --format json\n"
        "  bert-tui count --num-hidden-layers 6 --head mlm",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and which replay of the caching allocator runs, and exit")
    add_model(parser)
    add_source(parser)
    add_overrides(parser)
    return parser


class _Version(argparse.Action):
    """`--version`: the version, and which replay of the caching allocator runs (compiled where it was built at
    install, else the Python reference), asked only when printed."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from ..core.step.native import which

        print(f"bert-tui {__version__}\ncaching allocator replay: {which()}")
        parser.exit()


def _no_mistyped_command(model: str | None) -> None:
    """`bert-tui counts` is a command mistyped more likely than a model: say so before looking for a model."""
    import difflib

    if model is None or "/" in model or "." in model:
        return
    close = difflib.get_close_matches(model, COMMANDS, n=1, cutoff=0.75)
    if close and not Path(model).exists():
        raise UsageError(f"unknown command {model!r}; did you mean `bert-tui {close[0]}`? (commands: {', '.join(COMMANDS)})")


def terminal() -> tuple[bool, bool]:
    """Whether standard input and standard output are a terminal."""
    return sys.stdin.isatty(), sys.stdout.isatty()


def run(argv: Sequence[str]) -> int:
    """Open the explorer on the selected configuration (Textual is imported only here)."""
    args = build_parser().parse_args(argv)
    _no_mistyped_command(args.model)
    keyboard, screen = terminal()
    unavailable = None
    try:
        selection = resolve(args)
    except SourceUnavailable as error:  # (in a terminal: the explorer opens on the default, the error shown)
        if not (keyboard and screen):
            raise
        unavailable = f"{error}: showing {DEFAULT_PRESET} instead (o opens another model)"
        selection = Selection(load_catalog().get(DEFAULT_PRESET).config, DEFAULT_PRESET)
    if not screen:  # a pipe, a file, cron, CI: the explorer would paint escape codes into it
        return print_count(selection, "table")
    if not keyboard:
        raise UsageError("the explorer needs a terminal to read keys from (standard input is not one); "
                         "`bert-tui count` prints the same count without one")
    over_ssh = bool(os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"))
    # Textual reads ESCDELAY (ms) at import: over a slow link an arrow key's escape sequence can arrive in
    # pieces, and a short delay turns the rest into typed text ("[D" in a field). Mouse reporting is off over
    # SSH for the same reason (its sequences are longer); the explorer needs no mouse. Both can be overridden.
    os.environ.setdefault("ESCDELAY", "250" if over_ssh else "100")
    return explore(selection, mouse=os.environ.get("BERT_TUI_MOUSE", "0" if over_ssh else "1") == "1",
                   notice=unavailable)


def explore(selection: Selection, mouse: bool, notice: str | None = None) -> int:
    """Run the explorer on `selection` until it quits; its exit code. `notice`: an error to show at start (the
    model asked for could not be read)."""
    catalog = catalog_with_warnings()
    from ..explorer.app import make_app

    preset = selection.title if selection.title in catalog.presets else None
    stored = ([(t.name, t.shape) for t in selection.checkpoint.checkpoint.tensors]
              if selection.checkpoint is not None else None)
    app = make_app(catalog, selection.config, title=selection.title, preset=preset, stored=stored,
                   adapter=selection.method, notice=notice)
    app.run(mouse=mouse)
    # The interpreter's last garbage collection would walk every widget between quitting and the shell prompt;
    # nothing is left to finalise here (files are written and closed by then).
    gc.freeze()
    return app.return_code or 0  # 1 after a crash (Textual has restored the terminal and printed it)

