"""docs/architecture.md's code map is the tree: every module under tui/ is named there, and every path it names
exists (a module moved or added fails here until the note says so)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_every_module_is_in_the_code_map() -> None:
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tui").rglob("*.py")
               if path.name != "__init__.py"}
    named = set(re.findall(r"`(tui/[\w/]+\.py)`", DOC))
    assert sorted(modules - named) == []


def test_every_path_the_code_map_names_exists() -> None:
    named = set(re.findall(r"`(tui/[\w/]+\.py)`", DOC))
    assert named and sorted(path for path in named if not (ROOT / path).is_file()) == []
