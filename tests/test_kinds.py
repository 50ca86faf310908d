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


# The allocation order's rule for each op a kind names (`Module.ops`), as `emulation_ops.Run` and its rooms name them
OP_RULES = {"_dense": "linear", "_eager_attention": "attention", "_fused_attention": "attention",
            "_dropout": "dropout", "_layer_norm": "norm", "_activation": "activation", "_gelu": "activation",
            "_tanh": "activation", "_lookup": "lookup", "_cross_entropy": "cross_entropy", "_mse": "mse",
            "_binary_cross_entropy": "binary_cross_entropy"}


def _run_ops(config: typing.Any, workload: typing.Any) -> tuple[list[str], list[list[str]], list[str]]:
    """The ops the derived allocation order runs before the first layer (the embeddings, ALBERT's projection),
    in each encoder layer, and in the head (the pooler included): outermost only (a Linear's casts and products
    are its own), a dropout only where it does something (in eval mode it gives its input back)."""
    from tui.core.step.allocations import emulator

    run = emulator(config, workload)
    parts: list[list[str]] = []
    depth = [0]

    def traced(rule: str, op: str) -> None:
        inner = getattr(run, rule)

        def call(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
            if parts and depth[0] == 1 and (op != "dropout" or run.train):
                parts[-1].append(op)
            depth[0] += 1
            try:
                return inner(*args, **kwargs)
            finally:
                depth[0] -= 1
        setattr(run, rule, call)

    def part(rule: str) -> None:
        inner = getattr(run, rule)

        def call(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
            parts.append([])
            outer, depth[0] = depth[0], 1  # (a part's own ops are its outermost: a layer's within the forward)
            try:
                return inner(*args, **kwargs)
            finally:
                depth[0] = outer
        setattr(run, rule, call)

    for rule, op in OP_RULES.items():
        traced(rule, op)
    part("_forward")
    part("_layer")
    part("_head")
    run.run(1)
    return parts[0], parts[1:-1], parts[-1]


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "distilbert", "albert", "mpnet"])
def test_the_derived_allocation_order_runs_the_ops_its_kinds_name_in_order(family: str) -> None:
    """The two descriptions of a family's forward agree: the step layout's kinds (`kinds.ops`; FLOPs and saved
    tensors are theirs too) and the op order the allocation order derives (BERT's run, which BERT's code and the
    families built like it follow), layer by layer and for every head with its pooler and its loss (one label:
    MSE), in every precision and kernel, training and inference, the embeddings' lookups too."""
    from tui.core.config import FAMILIES
    from tui.core.step.allocations import covers
    from tui.core.step.compute import _step
    from tui.core.step.layouts import STEPS
    from tui.core.step.workload import Conventions, Workload

    from .test_fixtures_regenerate import FIXTURES, script

    layout, compared = STEPS[family], 0
    configs = [script(FIXTURES / "generate_compute.py").family_config(family, head) for head in FAMILIES[family].heads]
    configs += [config.replace(num_labels=1) for config in configs if config.head == "sequence-classification"]
    for config in configs:
        head = config.head
        for precision in ("fp32", "bf16", "amp-bf16"):
            for attention in ("eager", "sdpa"):
                for mode in ("train", "inference"):
                    workload = Workload(batch=2, seq=8, precision=precision, attention=attention, mode=mode,
                                        device="cuda")
                    if covers(config, workload):
                        continue
                    step = _step(config, workload, Conventions.of(workload))
                    before, layers, head_ops = _run_ops(config, workload)
                    assert before == list(kinds.ops(layout.embeddings, step)), (head, precision, mode)
                    named = list(kinds.ops(layout.layer, step))
                    assert len(layers) == config.num_hidden_layers  # (ALBERT: its stored layers run L times)
                    assert all(ops == named for ops in layers), (head, precision, attention, mode, layers[0], named)
                    pooler = layout.pooler if config.has_pooler else ()
                    assert head_ops == list(kinds.ops((*pooler, *layout.heads[head]), step)), (head, precision, mode)
                    compared += 1
    assert compared >= 12
