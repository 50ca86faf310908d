"""#51's one peak: where a step's allocation order is derived, `memory_bytes.peak` and every phase's peak are that
order's (its settled step replayed through the caching allocator, the cuBLAS workspaces out), and the reserved
figure, the same order's replay, is never below it; the peak rule only where the order is not derived, and the
output says which.

The expected peak is worked out here another way than the core's: the whole run (three steps) replayed at once,
its allocated peak less the workspaces the tape made, where the core replays the last step phase by phase.
"""

from __future__ import annotations

import json
from itertools import cycle
from typing import Any

import pytest

from tui.cli import main
from tui.core import BertConfig
from tui.core.config import FAMILIES
from tui.core.count.families import build_tree
from tui.core.step import allocations
from tui.core.step.allocator import replay
from tui.core.step.compute import compute
from tui.core.step.method import Method, method_of
from tui.core.step.peak import DERIVED_REST, INFERENCE_REST, phases
from tui.core.step.tape import CUBLAS_WORKSPACE, CUBLASLT_WORKSPACE
from tui.core.step.workload import Workload

from .test_fixtures_regenerate import script
from .test_method_step import GENERATOR


def small(family: str, head: str) -> BertConfig:
    return BertConfig(head=head, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                      vocab_size=500).as_family(family)


def whole_run_peak(config: BertConfig, workload: Workload, method: Method | None = None) -> int:
    """The allocated peak of three steps replayed at once, less the cuBLAS workspaces the run made."""
    run = allocations.emulator(config, workload, method=method)
    events = run.run(3)
    return replay(events).peak_allocated - allocations.workspaces_of(run)


def cases() -> list[tuple[str, str, Workload]]:
    """Every family with each of its heads, trained and run for inference, the precisions, attentions and loops
    taken in turn (a padding mask every fourth, checkpointing every third); where that step's order is refused by
    name, the family's plain step with that head (ModernBERT's multiple choice and DeBERTa's classification with
    two labels are refused in training whatever the settings: inference only)."""
    settings = cycle([("fp32", "sdpa", "course"), ("bf16", "eager", "trainer"), ("amp-bf16", "sdpa", "hand-written"),
                      ("fp16", "sdpa", "trainer"), ("amp-fp16", "eager", "course")])
    made = []
    for family in sorted(FAMILIES):
        for head in FAMILIES[family].heads:
            for mode in ("train", "inference"):
                precision, attention, loop = next(settings)
                workload = Workload(batch=3, seq=24, precision=precision, attention=attention, mode=mode, loop=loop,
                                    device="cuda", padding_mask=len(made) % 4 == 1,
                                    checkpointing=mode == "train" and len(made) % 3 == 0)
                if allocations.covers(small(family, head), workload) is not None:
                    workload = Workload(batch=3, seq=24, mode=mode, device="cuda")
                if allocations.covers(small(family, head), workload) is None:
                    made.append((family, head, workload))
    return made


def held_and_rest(result: Any) -> None:
    """Each phase names what it holds throughout (the terms the memory table shows) and one rest, never negative."""
    for phase in result.phases:
        held = dict(phase.held)
        assert held["weights"] == result.weights and held["buffers"] == result.buffers
        assert held.get("optimizer states", 0) == result.optimizer
        assert held.get("gradients", 0) == (result.gradients if phase.name == "optimizer" else 0)
        ((rest, n),) = phase.transient
        assert rest == (DERIVED_REST[phase.name] if result.workload.train else INFERENCE_REST)
        assert n >= 0


@pytest.mark.parametrize(("family", "head", "workload"), cases(),
                         ids=lambda value: value if isinstance(value, str) else value.mode)
def test_the_peak_is_the_derived_orders_where_it_is_derived(family: str, head: str, workload: Workload) -> None:
    config = small(family, head)
    result = compute(config, workload, fits=False)
    assert result.derived
    assert result.peak == whole_run_peak(config, workload)
    assert result.phase_peaks() == {name: peak for name, peak in allocations.phase_peaks(config, workload).items()
                                    if name != "start"}
    held_and_rest(result)


@pytest.mark.parametrize("spec", [{"lora": {"r": 4}}, {"lora": {"r": 4, "target_modules": "all-linear"}},
                                  {"lora": {"r": 2, "use_dora": True}}, {"ia3": {}}, {"freeze": {"body": True}},
                                  {"freeze": {"layers": 1}}])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_under_a_method_too(spec: dict[str, Any], checkpointing: bool) -> None:
    config = small("bert", "sequence-classification")
    chosen = method_of(build_tree(config), config, script(GENERATOR).how_of(spec))
    workload = Workload(batch=3, seq=24, precision="amp-bf16", device="cuda", checkpointing=checkpointing)
    result = compute(config, workload, method=chosen, fits=False)
    assert result.derived and result.peak == whole_run_peak(config, workload, chosen)
    held_and_rest(result)


@pytest.mark.parametrize("mode", ["train", "inference"])
def test_the_reserved_figure_is_never_below_the_peak_by_construction(mode: str) -> None:
    """The replay's own reserved peak (not the larger of it and the peak) holds the allocated peak and the
    workspaces at least: one order, two measures of it."""
    config = BertConfig(head="mlm", num_hidden_layers=4)
    result = compute(config, Workload(batch=16, seq=128, precision="amp-bf16", device="cuda", mode=mode))
    spaces = (2 * CUBLAS_WORKSPACE if mode == "train" else CUBLAS_WORKSPACE) + CUBLASLT_WORKSPACE
    assert result.replayed and result.derived and result.reserved >= result.peak + spaces


def json_of(*argv: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["compute", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_where_the_order_is_not_derived_the_rule_gives_the_peak_and_says_so(capsys: pytest.CaptureFixture[str]
                                                                           ) -> None:
    """An untied decoder (its order not derived) and the CPU (no caching allocator): the peak rule's phases."""
    untied = BertConfig(head="mlm", num_hidden_layers=2, tie_word_embeddings=False)
    workload = Workload(batch=4, seq=32, device="cuda")
    assert allocations.covers(untied, workload) is not None
    cpu = (BertConfig(head="sequence-classification", num_hidden_layers=2), Workload(batch=4, seq=32, device="cpu"))
    for config, chosen in ((untied, workload), cpu):
        result = compute(config, chosen, fits=False)
        assert not result.derived
        assert result.phases == phases(result)
    data = json_of("--preset", "bert-mini", "--head", "sequence-classification", "--device", "cpu", capsys=capsys)
    assert data["peak_model"] == "peak rule"
    assert any(line.startswith("peak: the peak rule") for line in data["conventions"])
    data = json_of("--preset", "bert-mini", "--head", "sequence-classification", "--device", "cuda", capsys=capsys)
    assert data["peak_model"] == "derived"
    assert any(line.startswith("peak: the step's allocation order, derived op by op") for line in data["conventions"])


def test_the_explorers_keystroke_figures_leave_the_peak_to_its_worker() -> None:
    """`derive=False` (the explorer's figures at each keystroke, without the fits): the rule's phases, not run;
    `fits=False` alone still derives, so every caller that reads a peak reads the one."""
    config, workload = small("bert", "mlm"), Workload(batch=3, seq=24, device="cuda")
    quick = compute(config, workload, fits=False, derive=False)
    assert not quick.derived and quick.phases == phases(quick)
    assert compute(config, workload, fits=False).peak == compute(config, workload).peak == whole_run_peak(config,
                                                                                                          workload)


@pytest.mark.parametrize(("device", "said"), [("cuda", ("derived", "by its derived allocation order",
                                                         "peak: the step's allocation order, derived op by op")),
                                               ("cpu", ("peak rule", "by the peak rule", "peak: the peak rule"))])
@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_every_format_says_which_peak_it_shows(capsys: pytest.CaptureFixture[str], fmt: str, device: str,
                                               said: tuple[str, str, str]) -> None:
    assert main(["compute", "--preset", "bert-mini", "--head", "sequence-classification", "--device", device,
                 "--format", fmt]) == 0
    out = " ".join(capsys.readouterr().out.split())
    model, header, convention = said
    wanted = {"table": (header, convention), "csv": (f"peak_model,{model}",), "markdown": (convention,)}[fmt]
    assert all(words in out for words in wanted), wanted
