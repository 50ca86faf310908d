"""The one way out for untrusted text: paths, preset names and titles, tensor names, claims, error messages.

Anything that came from a file, a path or the user is passed through `printable` before it reaches a
terminal (escape sequences and newlines could recolour it, write to the clipboard or forge a line), and
through `plain` before it reaches Rich or Textual, which would otherwise read `[b]` or `[/]` as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every non-printable character (controls, escapes, newlines, bidi overrides) written as
    `\\xNN` / `\\uNNNN`, so that it stays one visible line whatever it holds."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def plain(text: str, style: str = "") -> Text:
    """A Rich `Text` of `text` made printable: shown as written, never parsed as markup."""
    from rich.text import Text

    return Text(printable(text), style=style)


def middle_ellipsis(text: str, width: int) -> str:
    """`text` in at most `width` cells, its middle given up first: both ends of a path or name say the most.
    Whole parts (split after `-`, `_`, `.`, `/` and a space) are kept where they fit, the last first (`bert-…uncased`, never
    `bert-l…ncased`, which could be cased or uncased), else characters from both ends. Wide characters count as
    one cell here: names and paths are mostly narrow."""
    if len(text) <= width:
        return text
    if width < 1:
        return ""
    import re

    parts = [part for part in re.split(r"(?<=[-_./ ])", text) if part]  # (after a space too: " (edited)" stays whole)
    head: list[str] = []
    tail: list[str] = []
    left, right = 0, len(parts) - 1
    from_end = True
    while left <= right:  # the last part, the first, the one before the last, ...
        part = parts[right] if from_end else parts[left]
        if len("".join(head)) + len(part) + len("".join(tail)) + 1 > width:
            break
        if from_end:
            tail.insert(0, part)
            right -= 1
        else:
            head.append(part)
            left += 1
        from_end = not from_end
    if tail:
        return "".join(head) + "…" + "".join(tail)
    cut = width // 2  # no whole part fits on both sides: characters from both ends
    rest = width - 1 - cut
    return text[:cut] + "…" + (text[-rest:] if rest else "")


def width() -> int:
    """The columns prose is wrapped to: the terminal's, COLUMNS in a pipe, else 80 (as Rich's tables)."""
    import shutil

    return max(40, shutil.get_terminal_size((80, 24)).columns)


def prose(text: str, columns: int | None = None) -> str:
    """`text` for a person to read: each line longer than the width wrapped at word boundaries, continued four
    columns under its own indentation (a tensor name stays whole)."""
    import re
    import textwrap

    columns = columns or width()
    lines = []
    for line in text.split("\n"):
        if len(line) <= columns:
            lines.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip()))
        # A shape (`[768, 768]`), `× 12` and a size stay whole: textwrap never breaks at U+00A0.
        kept = re.sub(r"(?<=\d), (?=\d)", ",\xa0", line.strip()).replace(" × ", "\xa0×\xa0")
        kept = re.sub(r"(?<=\d) (?=(?:[KMGT]i?)?B\b|%)", "\xa0", kept)  # 33.3 KiB, 9.1 %
        wrapped = textwrap.wrap(kept, columns, initial_indent=lead, subsequent_indent=lead + "    ",
                                break_on_hyphens=False, break_long_words=False)
        lines += [part.replace("\xa0", " ") for part in wrapped] or [line]
    return "\n".join(lines)


def say(line: str) -> str:
    """A message for stderr: wrapped to a terminal's width when a person watches it; one line in a pipe or a log
    (a grep finds it whole)."""
    import sys

    return prose(line) if sys.stderr.isatty() else line
