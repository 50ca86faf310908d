"""An op kind owns its rules (`tui.core.step.kinds`): its FLOPs, its saved tensors and the rule it walks by under a
fine-tuning method (`Walker`); nothing outside the kinds asks a module which kind it is."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from tui.core.step import kinds
from tui.core.step.flow import Walk

KINDS = typing.get_args(kinds.Module)
RULES = [name for name in vars(kinds.Walker) if not name.startswith("_")]


def test_the_walker_has_a_rule_for_each_kind_and_the_walk_keeps_them_all() -> None:
    assert len(KINDS) >= 14
    assert set(RULES) <= set(dir(Walk)), set(RULES) - set(dir(Walk))


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_each_kind_walks_by_one_rule_of_the_walker(kind: type) -> None:
    """A kind's `walk` calls one rule of the walker with itself (a recording walker stands in for `flow.Walk`)."""
    called: list[tuple[str, object]] = []

    class Recorder:
        def __getattr__(self, name: str) -> typing.Callable[[object, object], None]:
            return lambda module, step: called.append((name, module))

    module = object.__new__(kind)
    kind.walk(module, Recorder(), None)  # type: ignore[attr-defined]
    assert len(called) == 1 and called[0][0] in RULES and called[0][1] is module


def test_nothing_outside_the_kinds_asks_a_module_its_kind() -> None:
    names = {kind.__name__ for kind in KINDS} | {"SavesOnly"}
    asked = []
    for path in sorted((Path(__file__).resolve().parents[1] / "tui").rglob("*.py")):
        if path.name == "kinds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                if any(getattr(c, "id", None) in names for c in classes):
                    asked.append(f"{path.name}:{node.lineno}")
    assert asked == []
