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


def _runtime_imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The tui modules `module` imports at run time (at the top or in a function; not under TYPE_CHECKING)."""
    import ast

    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.update(candidate for candidate in (name, *(f"{name}.{alias.name}".lstrip(".")
                                                             for alias in node.names)) if candidate in modules)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names if alias.name in modules)

    Imports().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found - {module}


def test_no_module_imports_a_module_that_imports_it() -> None:
    """The architecture runs one way: no import circle anywhere in tui (app ↔ commands was one)."""
    root = Path(__file__).parents[1]
    modules = {}
    for path in (root / "tui").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {module: _runtime_imports(module, path, modules) for module, path in modules.items()}

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
