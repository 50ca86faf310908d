"""The manual's text, for the tests that hold its prose to what the tool says: README.md and every docs/ page."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = "\n\n".join(page.read_text(encoding="utf-8") for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
SAID = " ".join(TEXT.split())  # its words, whatever the lines they were wrapped to
