"""The transformers ground truth written by tests/fixtures/generate.py (read once per test session)."""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@cache
def load_hf_cases() -> tuple[dict[str, Any], ...]:
    with (FIXTURES / "transformers_params.json").open(encoding="utf-8") as handle:
        return tuple(json.load(handle)["cases"])


def hf_total(case_id: str) -> int:
    """The total transformers gave for one case (e.g. 'bert-base-uncased/mlm')."""
    return next(int(case["total"]) for case in load_hf_cases() if case["id"] == case_id)


def live() -> list[pytest.MarkDecorator]:
    """The marks of a module of live tests: `live`; skipped with the reason when the `verify` extra is missing
    (looked up, not imported: torch and transformers take seconds to import, and every test worker collects every
    module); and run on one worker (`--dist loadgroup`), which imports them once, not every worker."""
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    reason = "the [verify] extra (torch, transformers) is not installed"
    return [pytest.mark.live, pytest.mark.skipif(bool(missing), reason=reason), pytest.mark.xdist_group("torch")]
