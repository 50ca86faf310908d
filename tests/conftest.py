"""Shared fixtures: an isolated user presets folder, at collection and for every test."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Collection reads the catalog too (parametrized tests): it must not see the user's real presets either.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="bert-tui-tests-")

@pytest.fixture(autouse=True)
def isolated_user_presets(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point XDG_CONFIG_HOME at an empty folder so that no test reads or writes the real user presets."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "bert-tui" / "presets"
