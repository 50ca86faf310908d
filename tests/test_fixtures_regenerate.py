"""Every committed fixture comes from a script kept in the repository, and the script still makes it.

The case lists (what each generator would measure) are compared with the fixtures' without torch; the
transformers fixture is rebuilt in full where the `verify` extra is installed (seconds: meta device); the CUDA
script is run up to its first CUDA call (it needs a GPU to measure; none here).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .hf_cases import live

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
GPU_SCRIPT = TESTS / "gpu" / "measure_steps_cuda.py"


def live_marks(test: Any) -> Any:
    for mark in live():
        test = mark(test)
    return test


@cache
def script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_script_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("grid", ["bert", "families"])
def test_the_compute_generator_lists_exactly_the_fixtures_cases_in_order(grid: str) -> None:
    generator = script(FIXTURES / "generate_compute.py")
    output, _ = generator.GRIDS[grid]
    recorded = [{"config": case["config"], "workload": case["workload"]} for case in fixture(output.name)["cases"]]
    assert generator.case_list(grid) == recorded


@pytest.mark.parametrize("part", ["steps", "fits", "saved_and_flops"])  # held_out: not measured yet
def test_the_gpu_script_lists_exactly_the_fixtures_cases(part: str) -> None:
    cases = script(GPU_SCRIPT).CASES[part]
    recorded = fixture("gpu/h200-steps.json")[part]
    assert [(name, argv) for name, argv in cases] == [(case["case"], case["argv"]) for case in recorded]


def test_the_gpu_script_writes_the_fixtures_keys() -> None:
    """The keys of what each of its measurements returns, as the fixture holds them (read off its source)."""
    text = GPU_SCRIPT.read_text(encoding="utf-8")
    data = fixture("gpu/h200-steps.json")
    for key in {key for part in ("steps", "fits", "saved_and_flops") for case in data[part] for key in case}:
        assert f'"{key}"' in text, key
    for key in {key for case in data["steps"] for key in case["memory_allocated"]} | set(data["meta"]):
        assert f'"{key}"' in text, key


@pytest.mark.slow  # (a subprocess that imports torch and builds every case: ~7 s; CI's `-m slow` runs it)
def test_the_gpu_script_resolves_every_case_then_stops_at_the_first_cuda_call(tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(GPU_SCRIPT), str(output)], capture_output=True, text=True,
                          timeout=900, cwd=tmp_path)  # (a hang guard, not a time to meet: a busy machine)
    total = sum(len(cases) for cases in script(GPU_SCRIPT).CASES.values())
    assert done.returncode == 2, done.stderr
    assert f"{total} cases resolved" in done.stderr
    assert "needs a CUDA GPU" in done.stderr or "needs torch with CUDA" in done.stderr
    assert not output.exists()


def test_the_gpu_script_refuses_an_unknown_part(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(GPU_SCRIPT), str(tmp_path / "o.json"), "stepz"], capture_output=True,
                          text=True, timeout=600)  # (a hang guard)
    assert done.returncode == 2 and "usage:" in done.stderr


@pytest.mark.slow
@live_marks
def test_the_transformers_fixture_regenerates_byte_for_byte() -> None:
    generator = script(FIXTURES / "generate.py")
    assert generator.fixture_text(generator.all_cases()) == (FIXTURES / "transformers_params.json").read_text(
        encoding="utf-8")


NEEDS_PEFT = pytest.mark.skipif(importlib.util.find_spec("peft") is None,
                                reason="peft (in the [verify] extra) is not installed")


@live_marks
@NEEDS_PEFT
@pytest.mark.parametrize("every", [pytest.param(1, marks=pytest.mark.slow), 7])
def test_the_peft_fixture_regenerates(every: int) -> None:
    """Every case as peft builds it now (the versions in the header aside): all of them under `-m slow`, every
    7th in the default run."""
    generator = script(FIXTURES / "generate_peft.py")
    recorded = fixture("peft_params.json")["cases"]
    assert len(generator.CASES) == len(recorded)
    for entry, case in list(zip(generator.CASES, recorded))[::every]:
        assert generator.run(entry) == case


@pytest.mark.parametrize("part", ["h200_caps", "lm_caps", "method_caps", "peaks"])
def test_the_allocation_generator_lists_exactly_the_fixtures_cases(part: str) -> None:
    cases = script(FIXTURES / "generate_allocation.py").CASES[part]
    recorded = fixture("allocation.json")[part]
    assert [(name, argv) for name, argv in cases] == [(case["case"], case["argv"]) for case in recorded]


@live_marks
@NEEDS_PEFT
@pytest.mark.parametrize("every", [pytest.param(11, marks=pytest.mark.slow), 149])
def test_the_methods_fixture_regenerates(every: int) -> None:
    """Steps of compute_methods.json measured again: every 11th under `-m slow`, every 149th in the default run
    (all of them: `python tests/fixtures/generate_methods.py`, minutes)."""
    from tui.reference.measure import measure

    recorded = fixture("compute_methods.json")["cases"]
    grid = script(FIXTURES / "generate_methods.py").grid()
    assert len(grid) == len(recorded)
    for case, (config, workload, spec) in list(zip(recorded, grid))[::every]:
        assert measure(config, workload, method=spec).as_dict() == case["measured"]


def test_the_history_diff_names_each_block_the_gpu_asked_for_that_the_derivation_lacks() -> None:
    """`tests/fixtures/allocation/history.py` (the diff a GPU's recorded step is read with): a trace made of the
    derived step's own blocks, as a snapshot writes them (with the entries it leaves out: requests to free,
    segments), plus one temporary of the backward's, diffs to that temporary alone, with its stack."""
    from tui.core.config import BertConfig
    from tui.core.step import allocations
    from tui.core.step.workload import Workload

    tool = script(FIXTURES / "allocation" / "history.py")
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                        vocab_size=1000, max_position_embeddings=64)
    run = allocations.emulator(config, Workload(batch=2, seq=16, precision="bf16", device="cuda", loop="trainer"))
    derived = tool.derived_phases(run.run(3), run.last_phases())
    assert list(derived) == ["forward", "backward", "optimizer"]
    assert all(derived.values())

    def entries(blocks: list[tuple[str, int]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for kind, size in blocks:
            if kind == "f":
                out.append({"action": "free_requested", "size": size, "frames": []})
            out.append({"action": "alloc" if kind == "a" else "free_completed", "size": size - 5 * (kind == "a"),
                        "frames": [{"name": "forward", "filename": "/x/modeling_bert.py", "line": 1}]})
        return out

    temporary = [{"action": "segment_alloc", "size": 2 << 20, "frames": []},
                 {"action": "alloc", "size": 3 << 20, "frames": [{"name": "dgamma_blocks", "filename": "/a/ln.cu",
                                                                  "line": 7}]},
                 {"action": "free_completed", "size": 3 << 20, "frames": []}]
    backward = entries(derived["backward"])
    trace = backward[:9] + temporary + backward[9:]
    gpu, where = tool.traced(trace)
    assert len(gpu) == len(derived["backward"]) + 2
    lines = tool.differences(gpu, where, derived["backward"])
    assert len(lines) == 2 and "dgamma_blocks (ln.cu:7)" in lines[0] and "3,145,728" in lines[0]
    assert lines[1].split()[:3] == ["+", "GPU", "f"]
    assert tool.differences(*tool.traced(entries(derived["forward"])), derived["forward"]) == []
    assert tool.peak_of(gpu) >= tool.peak_of(derived["backward"])
