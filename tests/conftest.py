"""Shared fixtures: the transformers ground truth, and an isolated user presets folder for every test."""

from __future__ import annotations

from pathlib import Path

import pytest

@pytest.fixture(autouse=True)
def isolated_user_presets(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point XDG_CONFIG_HOME at an empty folder so that no test reads or writes the real user presets."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "bert-tui" / "presets"
