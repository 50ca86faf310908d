"""`bert-tui compute --device cuda` against real training steps of transformers' BERT classes on an NVIDIA H200
(torch 2.11, transformers 5.17; tests/fixtures/gpu/h200-steps.json, measured by tests/gpu/measure_steps_cuda.py).

Exact: the bytes every case saves for backward (one layer's in all, by component, by total), the recompute peak, the
optimizer states, FlopCounterMode's forward and backward with the real kernels. Within 3 %: the step's peak
(`torch.cuda.max_memory_allocated` less what the case began with and the cuBLAS workspaces), the derived allocation
order's, but on the two pure 16-bit SDPA classification steps whose backward the GPU's kernels add to (within
4.5 %); the peak rule's (where the order is not derived) on all. Never above what ran, and at least 90 % of it: the
largest batch under a memory cap.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.gpu.measure_steps_cuda import as_measured, objects
from tui.cli import main
from tui.core.step import allocations
from tui.core.step.compute import compute
from tui.core.step.peak import phases

DATA = json.loads((Path(__file__).parent / "fixtures" / "gpu" / "h200-steps.json").read_text(encoding="utf-8"))
STEPS = {case["case"]: case for case in DATA["steps"]}
SAVED = {case["case"]: case for case in DATA["saved_and_flops"]}
FITS = {case["case"]: case for case in DATA["fits"]}
PEAK_TOLERANCE = 0.03
# The steps whose derived peak falls short by more than 3 %: pure 16-bit sequence classification under sdpa peaks in
# its backward, where the GPU held ~54 MiB more than the derived order (tests/fixtures/allocation/phases.py), and
# where the step began it held ~26 MB more. Both were measured in a process that held 27-29 GiB of earlier cases'
# leaked graphs: replayed after those cases (tests/fixtures/allocation/landscape.py), the pure 16-bit steps allocate
# 39-104 MB more at every phase, which takes in the start's gap and about half of the backward's; the rest is the
# kernels' own temporaries, which no recording with CUDA faked shows. A fresh process on a GPU settles it.
BACKWARD_SHORT = {"b-sc-8x512-bf16-sdpa": 0.045, "b-sc-8x512-fp16-sdpa-pad": 0.045}

# One worker runs the module, so each case's `predicted` (a fits search at real sizes) is worked out once, not once
# on every worker its tests land on (`--dist loadgroup`): 11 s in one process, ~45 s spread over three.
pytestmark = pytest.mark.xdist_group("gpu-cases")


@cache
def predicted(argv: tuple[str, ...]) -> dict[str, Any]:
    """What `bert-tui compute ARGV --format json` prints (the case's own command line)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["compute", *argv, "--format", "json"]) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def argv_of(case: dict[str, Any]) -> tuple[str, ...]:
    """The case's command line with the loop it was measured with (`as_measured`)."""
    return tuple(as_measured([str(part) for part in case["argv"]]))


@pytest.mark.parametrize("name", [name for name, case in STEPS.items() if case.get("layer0_saved")])
def test_one_layer_saves_what_the_gpu_saved(name: str) -> None:
    case = STEPS[name]
    layer = predicted(argv_of(case))["activations_one_layer"]
    assert sum(layer.values()) == sum(row["bytes"] for row in case["layer0_saved"])


@pytest.mark.parametrize("name", [name for name, case in STEPS.items() if "saved_by_component" in case])
def test_every_component_saves_what_the_gpu_saved(name: str) -> None:
    case = STEPS[name]
    data = predicted(argv_of(case))
    assert data["activations_by_component"] == case["saved_by_component"]
    assert data["memory_bytes"]["activations"] == case["saved_total"]


@pytest.mark.parametrize("name", list(SAVED))
def test_saved_bytes_states_and_flops_are_exact(name: str) -> None:
    case = SAVED[name]
    data = predicted(argv_of(case))
    memory = data["memory_bytes"]
    assert memory["activations"] == case["saved_total"]
    assert memory["recompute"] == case["recompute_peak_saved"]
    assert memory["optimizer"] == case["optimizer_state_bytes_on_gpu"]
    assert data["flops"]["forward"] == case["flop_counter_forward"]
    assert data["flops"]["backward"] == case["flop_counter_backward"]
    if "--checkpointing" not in case["argv"]:  # the measurement's module stack credits checkpoint inputs to the head
        by_component = {k: v for k, v in case["saved_by_component"].items() if v}
        assert {k: v for k, v in data["activations_by_component"].items() if v} == by_component


def measured_workspaces() -> int:
    """The cuBLAS and cuBLASLt workspaces a training process holds from its first matrix product on, as measured:
    what the second measuring process still had allocated before each case after its first (one value)."""
    steps = DATA["steps"]
    first = max(index for index, case in enumerate(steps) if case["includes_workspaces"])
    left = {case["allocated_before_case"] for case in steps[first + 1:]}
    assert len(left) == 1 and "--mode" not in steps[first]["argv"], left  # a training case made them
    return left.pop()


WORKSPACES = measured_workspaces()


def measured_peak(case: dict[str, Any]) -> int:
    """The step's own allocated peak as the GPU measured it: `max_memory_allocated` less what was allocated when
    the case began, and less the workspaces where the case was its process's first (they appeared in it)."""
    return case["peak"] - (WORKSPACES if case["includes_workspaces"] else 0)


def test_the_workspaces_are_65_mib_as_the_readme_says() -> None:
    assert WORKSPACES == 65 * 2**20
    assert "65 MiB in a training process" in README


def error(case: dict[str, Any], peak: int) -> float:
    """A predicted peak's error against the GPU's, as a fraction of the measured peak."""
    measured = measured_peak(case)
    return (peak - measured) / measured


@pytest.mark.parametrize("name", list(STEPS))
def test_the_peak_is_the_derived_orders_and_within_3_percent_of_the_gpus(name: str) -> None:
    """`memory_bytes.peak` is the step's allocated peak without the cuBLAS workspaces (a fresh training process's
    `max_memory_allocated` is that plus 65 MiB), the derived allocation order's, compared with measured figures
    only: within 3 %, or short by at most `BACKWARD_SHORT`'s on the two steps named there (and on no other)."""
    data = predicted(argv_of(STEPS[name]))
    assert data["peak_model"] == "derived"
    off = error(STEPS[name], data["memory_bytes"]["peak"])
    if name in BACKWARD_SHORT:
        assert -BACKWARD_SHORT[name] <= off < -PEAK_TOLERANCE
    else:
        assert abs(off) <= PEAK_TOLERANCE


@cache
def rule_peak(name: str) -> int:
    """The peak rule's peak for a measured step (its phases, the order not run)."""
    config, workload = objects(predicted(argv_of(STEPS[name])))
    return max(phase.peak for phase in phases(compute(config, workload, fits=False, derive=False)))


@pytest.mark.parametrize("name", list(STEPS))
def test_the_peak_rule_is_within_3_percent_of_the_gpus(name: str) -> None:
    """The peak rule (the peak where a step's order is not derived, and the fits search's first guess) against the
    same steps: within 3 % on every one."""
    assert abs(error(STEPS[name], rule_peak(name))) <= PEAK_TOLERANCE


FORWARD_TOLERANCE = 0.02


@pytest.mark.parametrize("name", list(STEPS))
def test_the_derived_orders_forward_holds_what_the_gpu_held(name: str) -> None:
    """The derived allocation order replayed phase by phase (`allocations.phase_peaks`: the last of three steps,
    without the cuBLAS workspaces) against the GPU's `peak_forward`: within 2 % on every step, and the step begins
    holding what the GPU held within 35 MB (where the optimizer's states land in the pool; fake tensors cannot show
    the kernels' own temporaries that move them). The backward is not asserted: it falls short on every step
    whose backward peaks, 23.5 to 24.5 MiB in float32 and about 52 MiB in 16 bits (tests/fixtures/allocation/
    phases.py), which no recording without a GPU shows; `memory_bytes.peak` stays the peak rule's until it is
    found."""
    case = STEPS[name]
    derived = allocations.phase_peaks(*objects(predicted(argv_of(case))))
    memory = case["memory_allocated"]
    less = WORKSPACES if case["includes_workspaces"] else 0
    assert abs(derived["forward"] - (memory["peak_forward"] - less)) <= FORWARD_TOLERANCE * memory["peak_forward"]
    assert abs(derived["start"] - (memory["start"] - less)) <= 35_000_000
    assert set(derived) == ({"start", "forward"} if "--mode" in case["argv"] else
                            {"start", "forward", "backward", "optimizer"})


@pytest.mark.parametrize("name", list(STEPS))
def test_the_phase_that_sets_the_peak(name: str) -> None:
    """The phase named is the one that peaked on the GPU, or peaked there within the peak's tolerance of it (the
    derived backward falls short where the GPU's forward and backward peak within ~1 % of each other)."""
    case = STEPS[name]
    data = predicted(argv_of(case))
    memory = case["memory_allocated"]
    measured = {phase: memory[f"peak_{phase}"] for phase in data["phases"]}
    assert measured[data["peak_phase"]] >= (1 - PEAK_TOLERANCE) * max(measured.values())


@pytest.mark.parametrize("name", list(FITS))
def test_what_fits_never_claims_a_batch_that_ran_out_of_memory(name: str) -> None:
    case = FITS[name]
    fit = next(fit for fit in predicted(argv_of(case))["fits"] if fit["asked"])
    assert fit["max_batch"] < case["first_batch_out_of_memory"]
    assert fit["max_batch"] <= case["largest_batch_that_ran"]
    assert fit["max_batch"] >= 0.9 * case["largest_batch_that_ran"]


def test_the_default_attention_is_sdpa_and_eager_is_one_flag_away() -> None:
    base = ("bert-base-uncased", "--head", "sequence-classification", "--batch", "8", "--seq", "512", "--precision",
            "amp-bf16", "--device", "cuda")
    assert predicted(base)["workload"]["attention"] == "sdpa"
    assert predicted(base) == predicted((*base, "--attention", "sdpa"))
    eager = STEPS["b-sc-8x512-ampbf16-eager"]
    assert predicted((*base, "--attention", "eager"))["activations_one_layer"] == predicted(argv_of(eager))[
        "activations_one_layer"]


def test_phases_hold_what_the_step_holds() -> None:
    """Sanity of the phase model's own arithmetic: each phase's peak is its terms' sum."""
    data = predicted(argv_of(STEPS["b-mlm-32x128-ampbf16-sdpa"]))
    for phase in data["phases"].values():
        assert phase["peak"] == sum(phase["held"].values()) + sum(phase["transient"].values())


from .manual import SAID as README  # noqa: E402  (the manual's words: README.md and docs/)


def _errors_said(errors: list[float]) -> tuple[str, str]:
    """How the manual states a peak's errors (percent): their range and their mean absolute."""
    low, high, mean = min(errors), max(errors), sum(map(abs, errors)) / len(errors)
    return f"{low:+.1f} % to {high:+.1f} %".replace("-", "−"), f"{mean:.1f} % on average"


def test_the_manual_states_the_peaks_error_as_measured() -> None:
    derived = [error(case, predicted(argv_of(case))["memory_bytes"]["peak"]) * 100 for case in STEPS.values()]
    within = sum(abs(off) <= PEAK_TOLERANCE * 100 for off in derived)
    span, mean = _errors_said(derived)
    worst = max(map(abs, derived))
    assert f"within 3 % on {within} of {len(derived)} steps, {worst:.1f} % on all: {span}, {mean}" in README
    said = f"within 3 % of an H200's (torch 2.11) on {within} of {len(derived)} steps, {worst:.1f} % on all"
    assert said in " ".join(predicted(argv_of(STEPS["b-sc-8x512-bf16-sdpa"]))["conventions"])
    span, mean = _errors_said([error(case, rule_peak(name)) * 100 for name, case in STEPS.items()])
    assert f"the peak rule is within 3 % on every one: {span}, {mean}" in README


def test_the_readme_states_the_worst_share_of_what_ran_that_fits_claims() -> None:
    shares = []
    for case in FITS.values():
        fit = next(fit for fit in predicted(argv_of(case))["fits"] if fit["asked"])
        shares.append(fit["max_batch"] / case["largest_batch_that_ran"] * 100)
    assert f"claims at least {int(min(shares) * 10) / 10:.1f} % of the largest that ran" in README


def test_the_manual_states_how_far_the_rule_is_from_a_deberta_forwards_derived_order() -> None:
    """The case the manual gives for the derived order leading where it exists: the rule's peak below the order's
    by the share it states (both computed here: the order's replayed, the rule's phases)."""
    argv = ("deberta-v3-base", "--head", "token-classification", "--batch", "32", "--seq", "128", "--precision",
            "fp16", "--mode", "inference")
    data = predicted(argv)
    assert data["peak_model"] == "derived"
    config, workload = objects(data)
    rule = max(phase.peak for phase in phases(compute(config, workload, fits=False, derive=False)))
    lower = round((data["memory_bytes"]["peak"] - rule) / data["memory_bytes"]["peak"] * 100)
    assert f"which the rule (BERT's layer, not DeBERTa's relative attention) puts {lower} % lower" in README


def test_the_manual_states_the_sum_of_the_kinds_against_the_peak_on_the_training_steps() -> None:
    """`memory_bytes.total` (the sum of the kinds) against the peak on the H200's training steps, as said."""
    ratios = []
    for case in STEPS.values():
        if "--mode" not in case["argv"]:
            memory = predicted(argv_of(case))["memory_bytes"]
            ratios.append(memory["total"] / memory["peak"])
    assert f"on the H200's training steps from {min(ratios):.2f} × to {max(ratios):.2f} × of the peak" in README


def test_the_manual_states_what_the_first_measuring_process_adds_to_the_pure_16_bit_steps() -> None:
    """docs/compute.md: replayed after the earlier cases of the process that measured them (each up to its last
    forward, kept; the cache emptied between cases: tests/fixtures/allocation/landscape.py), the three pure 16-bit
    steps of the first run's 8 × 512 sequence classification allocate the range it states more at every phase,
    and that run's other steps there move by less than 10 MB."""
    import importlib.util

    from tui.core.step.allocator import CachingAllocator

    spec = importlib.util.spec_from_file_location("_landscape", Path(__file__).parent / "fixtures" / "allocation"
                                                  / "landscape.py")
    assert spec is not None and spec.loader is not None
    landscape = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(landscape)
    names = list(STEPS)
    run = names[:names.index("b-sc-8x512-ampbf16-sdpa-ckpt") + 1]
    assert STEPS[run[0]]["includes_workspaces"] and not any(STEPS[name]["includes_workspaces"] for name in run[1:])
    pure: list[int] = []
    others: list[int] = []
    for index, name in enumerate(run[1:], 1):
        shared = CachingAllocator()
        for earlier in run[:index]:
            landscape.replayed(shared, earlier, leak=True)
        after, fresh = landscape.replayed(shared, name), landscape.replayed(CachingAllocator(), name)
        sixteen = any(f"-{precision}-" in name for precision in ("bf16", "fp16"))
        (pure if sixteen else others).extend(after[phase] - fresh[phase] for phase in fresh)
    assert len(pure) == 3 * 4
    said = (f"the three pure 16-bit steps allocate {round(min(pure) / 1e6)} to {round(max(pure) / 1e6)} MB more at "
            "every phase, the run's other steps within 10 MB")
    assert said in README
    assert max(map(abs, others)) < 10e6
