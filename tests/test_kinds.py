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


def op_rules(run: type) -> dict[str, str]:
    """A run's rules marked as the op a kind names (`emulation_ops.op`), by method name."""
    return {name: rule.op for name in dir(run) if hasattr(rule := getattr(run, name), "op")}


def _run_ops(config: typing.Any, workload: typing.Any) -> list[str]:
    """The ops the derived allocation order runs in the forward, in order: outermost only (a Linear's casts and
    products are its own, an activation's pieces its own), a dropout only where it does something (in eval mode
    it gives its input back)."""
    from tui.core.step.allocations import emulator

    run = emulator(config, workload)
    ops: list[str] = []
    depth = [0]

    def traced(rule: str, op: str) -> None:
        inner = getattr(run, rule)

        def call(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
            if depth[0] == 0 and (op != "dropout" or run.train):
                ops.append(op)
            depth[0] += 1
            try:
                return inner(*args, **kwargs)
            finally:
                depth[0] -= 1
        setattr(run, rule, call)

    for rule, op in op_rules(type(run)).items():
        traced(rule, op)
    run.run(1)
    return ops


def _kinds_ops(config: typing.Any, workload: typing.Any) -> list[tuple[str, str]]:
    """The ops the step's kinds name, each with its component, in the order a method's walk takes them (every
    layer apart: ModernBERT's layer 0 lacks its attention norm; ALBERT's stored layers each run)."""
    from tui.core.step.compute import _step, method_parts
    from tui.core.step.workload import Conventions

    step = _step(config, workload, Conventions.of(workload))
    return [(component, op) for component, _, modules, _ in method_parts(config, workload)
            for op in kinds.ops(modules, step)]


def _deberta_switches() -> list[typing.Any]:
    """DeBERTa's switches as the presets of its recorded orders set them (v2, v3, c2p alone, no relative attention,
    relative attention that no score reads)."""
    import yaml

    from tui.core.config import BertConfig

    from .test_fixtures_regenerate import FIXTURES

    return [BertConfig(**yaml.safe_load(preset.read_text(encoding="utf-8"))["config"])
            for preset in sorted((FIXTURES / "allocation").glob("deberta-*.yaml"))]


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "distilbert", "albert", "mpnet", "modernbert",
                                    "deberta-v2"])
def test_the_derived_allocation_order_runs_the_ops_its_kinds_name_in_order(family: str) -> None:
    """The two descriptions of a family's forward agree: the step layout's kinds (`kinds.ops`; FLOPs and saved
    tensors are theirs too) and the op order the allocation order derives, from the embeddings' lookups through
    every layer to the head with its pooler and its loss (one label: MSE), in every precision and kernel,
    training and inference, with a padding mask and without."""
    from tui.core.config import FAMILIES
    from tui.core.step.allocations import covers
    from tui.core.step.workload import Workload

    from .test_fixtures_regenerate import FIXTURES, script

    configs = [script(FIXTURES / "generate_compute.py").family_config(family, head).replace(num_hidden_layers=4)
               for head in FAMILIES[family].heads]  # (4: ModernBERT's global layers, the first and the fourth)
    if family == "deberta-v2":
        configs += [config.replace(head=head) for config in _deberta_switches() for head in FAMILIES[family].heads]
    configs += [config.replace(num_labels=1) for config in configs if config.head == "sequence-classification"]
    compared = 0
    for config in configs:
        for precision in ("fp32", "bf16", "amp-bf16"):
            for attention in ("eager", "sdpa"):
                for mode, padded in (("train", False), ("train", True), ("inference", False)):
                    workload = Workload(batch=2, seq=8, precision=precision, attention=attention, mode=mode,
                                        device="cuda", padding_mask=padded)
                    if covers(config, workload):
                        continue
                    named = _kinds_ops(config, workload)
                    ran = _run_ops(config, workload)
                    if ran != [op for _, op in named]:
                        at = next((i for i, (a, (_, b)) in enumerate(zip(ran, named)) if a != b),
                                  min(len(ran), len(named)))
                        where = named[at][0] if at < len(named) else "the end"
                        pytest.fail(f"{config.head} {workload}: from op {at} ({where}), the run {ran[at:at + 6]}, "
                                    f"the kinds {[op for _, op in named[at:at + 6]]}")
                    compared += 1
    assert compared >= 12


@pytest.mark.parametrize("family", ["albert", "modernbert", "deberta-v2"])
def test_a_layer_as_the_full_step_counts_it_runs_the_ops_a_methods_walk_takes(family: str) -> None:
    """A layout's layer (`StepLayout.layer`, which the full step sums over the layers) and its layer as a method's
    walk takes it (`walks`: ModernBERT's layers after the first, DeBERTa's; ALBERT's `run`) name the same ops, in
    every precision, kernel and mode, for every switch of DeBERTa's: two descriptions of one layer that agree.
    (The other families' walk takes their `layer` itself.)"""
    from tui.core.config import FAMILIES
    from tui.core.step.compute import _step
    from tui.core.step.layouts import STEPS
    from tui.core.step.workload import Conventions, Workload

    from .test_fixtures_regenerate import FIXTURES, script

    layout = STEPS[family]
    walks = layout.walks[1:] if layout.first else layout.walks or (layout.run or layout.layer,)
    assert walks != (layout.layer,)  # (each family here has a walk of its own)
    configs = [script(FIXTURES / "generate_compute.py").family_config(family, next(iter(FAMILIES[family].heads)))]
    if family == "deberta-v2":
        configs += _deberta_switches()
    for config in configs:
        for precision in ("fp32", "bf16", "amp-bf16"):
            for attention in ("eager", "sdpa"):
                for mode in ("train", "inference"):
                    workload = Workload(batch=2, seq=8, precision=precision, attention=attention, mode=mode,
                                        device="cuda")
                    step = _step(config, workload, Conventions.of(workload))
                    named = kinds.ops(layout.layer, step)
                    assert named and all(kinds.ops(walk, step) == named for walk in walks), (config, workload)


def test_every_op_a_kind_names_has_a_rule_of_the_run_and_every_rule_an_op_a_kind_names() -> None:
    """The ops the kinds name over every family's layouts (all their modules, whatever the facts) and the ops the
    runs' rules are marked with (`emulation_ops.op`) are one set: no op without a rule, no rule without a kind."""
    from tui.core.step.allocations import EMULATORS
    from tui.core.step.layouts import STEPS
    from tui.core.step.workload import Workload

    facts = typing.cast(typing.Any, type("Every", (), {"holds": lambda self, when: True,
                                                         "workload": Workload(batch=1, seq=1)})())
    named = set()
    for layout in STEPS.values():
        parts = (layout.embeddings, layout.layer, layout.pooler, *layout.heads.values(), *layout.walks, layout.run)
        named |= {op for modules in parts for module in modules for op in module.ops(facts)}
    marked = {op for run in EMULATORS.values() for op in op_rules(run).values()}
    assert named == marked
    assert {"lookup", "linear", "attention", "norm", "activation", "dropout", "cross_entropy"} <= named
