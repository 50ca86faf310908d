"""The manual cannot go stale: every command output and figure in README.md and docs/ is what the command prints
today (tests/docs.py regenerates them), the site builds strictly, and the README stays the front door."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import docs

ROOT = Path(__file__).resolve().parents[1]
PAGES = docs.pages()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_generated_place_is_what_its_command_prints_today(page: Path) -> None:
    """`python tests/docs.py` would change nothing: run it, and say which places were stale."""
    assert docs.stale(page.read_text(encoding="utf-8")) == []


def test_the_pages_generate_something() -> None:
    """(The check above sees what it is looking for: blocks, named blocks and figures in the pages.)"""
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert len(docs.CONSOLE.findall(text)) >= 8
    assert {match[1] for match in docs.NAMED_BLOCK.findall(text)} == set(docs.NAMED)
    assert len(docs.FIGURE.findall(text)) >= 20


def test_a_changed_preset_makes_the_pages_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Change bert-base-uncased's intermediate size and the README's figures no longer hold until regenerated."""
    presets = tmp_path / "presets"
    shutil.copytree(ROOT / "presets", presets)
    path = presets / "bert-base-uncased.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("intermediate_size: 3072", "intermediate_size: 3000"),
                    encoding="utf-8")
    monkeypatch.setattr("tui.presets.builtin_dir", lambda: presets)
    docs.printed.cache_clear()
    docs.json_of.cache_clear()
    try:
        places = docs.stale((ROOT / "README.md").read_text(encoding="utf-8"))
    finally:
        docs.printed.cache_clear()
        docs.json_of.cache_clear()
    assert any("figure: count --preset bert-base-uncased :: total" in place for place in places), places
    assert any(place.startswith("$ bert-tui compute bert-base-uncased") for place in places), places


def test_a_stale_figure_is_named_and_the_check_exits_1(tmp_path: Path) -> None:
    page = "Before <!-- figure: count --preset bert-tiny :: total -->1<!-- /figure --> after.\n"
    assert docs.stale(page) == ["<!-- figure: count --preset bert-tiny :: total -->1<!-- /figure -->"]
    fresh = docs.regenerate(page)
    assert docs.stale(fresh) == [] and re.search(r"-->[\d,]+<!-- /figure -->", fresh)


def test_the_manual_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` (the `docs` extra): a broken link or a page missing from the nav fails it."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "site" / "compute" / "index.html").exists()


def test_every_page_is_in_the_site_and_linked_from_the_readme() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    listed = {page for entry in nav for page in entry.values()}
    pages = {page.name for page in (ROOT / "docs").glob("*.md")}
    assert listed == pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert {page for page in pages if page != "index.md"} <= set(re.findall(r"\]\(docs/([\w-]+\.md)\)", readme))


def test_the_readme_is_the_front_door() -> None:
    """At most ~200 lines; the quick start's two commands first, the test command the first fenced line with
    pytest; five commands across the range; LICENSE and CHANGELOG beside it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    first_block = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert first_block[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . && bert-tui")
    assert first_block[1].startswith("pip install -e '.[test]' && pytest")
    for command in ("bert-tui count", "bert-tui compute", "--lora-r", "bert-tui audit", "bert-tui serve"):
        assert command in readme
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").startswith("# Changelog")
