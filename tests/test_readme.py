"""What README.md quotes the command line saying is what it says."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from .clirun import run

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


def quoted_errors() -> list[tuple[str, str]]:
    """The (command, line it prints) pairs of the README's block of bad input (`...` ends a line cut short)."""
    block = README.split("Bad input exits with code 2", 1)[1].split("```", 2)[1]
    lines = block.strip().splitlines()
    return [(command.removeprefix("$ "), said) for command, said in zip(lines[::2], lines[1::2], strict=True)]


def test_the_readme_quotes_three_refusals() -> None:
    assert len(quoted_errors()) == 3


@pytest.mark.parametrize(("command", "said"), quoted_errors())
def test_each_refusal_the_readme_quotes_is_what_the_command_says(command: str, said: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    *setup, command = command.split("; ")
    for step in setup:
        name = re.fullmatch(r"mkfifo (\S+)", step)
        assert name, step
        os.mkfifo(name.group(1))
    argv = shlex.split(command)
    assert argv[0] == "bert-tui"
    code, out, err = run(*argv[1:])
    assert (code, out) == (2, "")
    if said.endswith("..."):
        assert err.startswith(said.removesuffix("..."))
    else:
        assert err == said + "\n"
