"""The transformers ground truth written by tests/fixtures/generate.py (read once per test session)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


@cache
def load_hf_cases() -> tuple[dict[str, Any], ...]:
    with (FIXTURES / "transformers_params.json").open(encoding="utf-8") as handle:
        return tuple(json.load(handle)["cases"])


def hf_total(case_id: str) -> int:
    """The total transformers gave for one case (e.g. 'bert-base-uncased/mlm')."""
    return next(int(case["total"]) for case in load_hf_cases() if case["id"] == case_id)
