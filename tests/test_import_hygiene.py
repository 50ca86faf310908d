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


def test_count_of_a_preset_with_claims_loads_neither_the_audit_nor_shutil() -> None:
    """A preset's claims are read with their grammar alone (`claims`), not the search over conventions; argparse's
    formatter is told the terminal's width without shutil (whose compression modules cost 2-3 ms of the ~90 ms
    start)."""
    code = ("import sys; from tui.cli import main; sys.stdout = open('/dev/null', 'w'); "
            "main(['count', '--preset', 'bert-large-uncased', '--format', 'json'])")
    loaded = modules_after(code)
    assert "tui.core.count.claims" in loaded  # (bert-large-uncased has a claim: the grammar read it)
    assert {"tui.core.count.audit", "shutil"}.isdisjoint(loaded)


@pytest.mark.parametrize("argv", [["count", "--preset", "bert-tiny", "--format", "json"], ["count", "bert-tiny"],
                                  ["count", str(Path(__file__).parent / "fixtures" / "checkpoints" / "legacy")],
                                  ["diff", "bert-tiny", "bert-mini"], ["presets", "--format", "json"]])
def test_local_sources_never_import_the_hub_client(argv: list[str]) -> None:
    """huggingface_hub (and its HTTP library) load only for a Hub id: a local count starts without them."""
    code = f"import sys; from tui.cli import main; sys.stdout = open('/dev/null', 'w'); main({argv!r})"
    loaded = top_level(modules_after(code))
    assert {"huggingface_hub", "httpx", "httpx2", "requests"}.isdisjoint(loaded)


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The tui modules `module` imports: at the top, in a function or under TYPE_CHECKING (a circle hidden there is
    still a circle: the two modules cannot be read, moved or tested apart)."""
    import ast

    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.update(candidate for candidate in (name, *(f"{name}.{alias.name}".lstrip(".")
                                                             for alias in node.names)) if candidate in modules)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
    return {name for name in found - {module} if not module.startswith(name + ".")}  # its own package: not a circle


def import_graph() -> dict[str, set[str]]:
    root = Path(__file__).parents[1]
    modules = {}
    for path in (root / "tui").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {module: _imports(module, path, modules) for module, path in modules.items()}


def test_no_module_imports_a_module_that_imports_it() -> None:
    """The architecture runs one way: no import circle anywhere in tui (app ↔ commands was one; compute ↔ peak
    another, hidden under TYPE_CHECKING and inside a function)."""
    graph = import_graph()

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), list(graph[start])
        while stack:
            module = stack.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                stack.extend(graph[module])
        return False

    circles = sorted(module for module in graph if reaches(module, module))
    assert circles == []


def test_counting_never_imports_the_step() -> None:
    """Two rooms, one door: the step (tui.core.step) reads the counting room's tree, never the reverse; the
    config and units they share import neither."""
    graph = import_graph()
    counting = [module for module in graph if module.startswith("tui.core.count") or module in (
        "tui.core", "tui.core.config", "tui.core.units")]
    assert counting and all(module.startswith("tui.core.count") or module in ("tui.core.config", "tui.core.units")
                            for module in graph["tui.core"])
    for module in counting:
        assert not {name for name in graph[module] if name.startswith("tui.core.step")}, module
    for module in ("tui.core.config", "tui.core.units"):
        assert not {name for name in graph[module] if name.startswith(("tui.core.count", "tui.core.step"))}


def test_the_family_records_import_neither_room_nor_the_config() -> None:
    """A family's record is read by both rooms and the way in; it reads only the head classes and the core's error
    (so a record can be made without counting or the step, as tests/test_families.py makes one)."""
    graph = import_graph()
    records = [module for module in graph if module.startswith("tui.core.families")]
    assert len(records) > 8
    for module in records:
        assert graph[module] <= {*records, "tui.core.heads", "tui.core.errors"}, module
