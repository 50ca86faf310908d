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


@live_marks
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft (in the [verify] extra) is not installed")
def test_the_peft_fixture_regenerates() -> None:
    """Every case as peft builds it now (the versions in the header aside)."""
    generator = script(FIXTURES / "generate_peft.py")
    rows = [generator.run(entry) for entry in generator.CASES]
    assert rows == fixture("peft_params.json")["cases"]


@pytest.mark.parametrize("part", ["h200_caps", "lm_caps", "method_caps", "peaks"])
def test_the_allocation_generator_lists_exactly_the_fixtures_cases(part: str) -> None:
    cases = script(FIXTURES / "generate_allocation.py").CASES[part]
    recorded = fixture("allocation.json")[part]
    assert [(name, argv) for name, argv in cases] == [(case["case"], case["argv"]) for case in recorded]


@live_marks
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft (in the [verify] extra) is not installed")
def test_the_methods_fixture_regenerates_a_sample() -> None:
    """Every 63rd step of compute_methods.json measured again (the whole takes a minute or more)."""
    from tui.reference.measure import measure

    recorded = fixture("compute_methods.json")["cases"]
    grid = script(FIXTURES / "generate_methods.py").grid()
    assert len(grid) == len(recorded)
    for case, (config, workload, spec) in list(zip(recorded, grid))[::63]:
        assert measure(config, workload, method=spec).as_dict() == case["measured"]
