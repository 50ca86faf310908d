"""The architecture, enforced: the core imports no UI library and `bert-tui count` never loads Textual.

Each check runs in a fresh interpreter and inspects `sys.modules`, as harlequin's import-hygiene test does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def modules_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(result.stderr.strip().splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_core_imports_neither_textual_nor_rich_nor_yaml() -> None:
    loaded = top_level(modules_after("import tui.core; tui.core.build_tree(tui.core.BertConfig())"))
    assert {"textual", "rich", "yaml"}.isdisjoint(loaded)


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown", "table"])
def test_count_never_imports_textual(fmt: str) -> None:
    code = f"import sys; from tui.cli import main; sys.stdout = open('/dev/null', 'w'); main(['count', '--format', '{fmt}'])"
    loaded = top_level(modules_after(code))
    assert "textual" not in loaded
    if fmt != "table":  # only the table needs rich; the machine-readable formats start without it
        assert "rich" not in loaded


@pytest.mark.parametrize("argv", [["count", "--preset", "bert-tiny", "--format", "json"], ["count", "bert-tiny"],
                                  ["count", str(Path(__file__).parent / "fixtures" / "checkpoints" / "legacy")],
                                  ["diff", "bert-tiny", "bert-mini"], ["presets", "--format", "json"]])
def test_local_sources_never_import_the_hub_client(argv: list[str]) -> None:
    """huggingface_hub (and its HTTP library) load only for a Hub id: a local count starts without them."""
    code = f"import sys; from tui.cli import main; sys.stdout = open('/dev/null', 'w'); main({argv!r})"
    loaded = top_level(modules_after(code))
    assert {"huggingface_hub", "httpx", "httpx2", "requests"}.isdisjoint(loaded)
