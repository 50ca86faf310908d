"""LoRA counted as peft counts it (tests/fixtures/peft_params.json, written by tests/fixtures/generate_peft.py from
`get_peft_model` on the meta device): every name, shape and `requires_grad`, and the trainable and total figures;
what peft refuses, refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tui.core import BertConfig, ConfigError, build_tree
from tui.core.count.lora import Lora, adapt

CASES = json.loads((Path(__file__).parent / "fixtures" / "peft_params.json").read_text(encoding="utf-8"))["cases"]


def lora_of(keys: dict[str, Any]) -> Lora:
    keys = dict(keys)
    for name in ("target_modules", "modules_to_save", "layers_to_transform"):
        if isinstance(keys.get(name), list):
            keys[name] = tuple(keys[name])
    if "rank_pattern" in keys:
        keys["rank_pattern"] = tuple(keys["rank_pattern"].items())
    return Lora(**keys)


@pytest.mark.parametrize("case", [c for c in CASES if "error" not in c], ids=lambda c: c["case"])
def test_every_peft_parameter_name_shape_and_trainable_flag(case: dict[str, Any]) -> None:
    config = BertConfig(**case["config"])
    adapted = adapt(build_tree(config), config, lora_of(case["lora"]))
    ours = [[p.name, list(p.shape), p.trainable] for p in adapted.params]
    assert ours == case["params"]
    assert (adapted.trainable, adapted.total) == (case["trainable"], case["total"])


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c], ids=lambda c: c["case"])
def test_what_peft_refuses_is_refused_by_name(case: dict[str, Any]) -> None:
    config = BertConfig(**case["config"])
    with pytest.raises(ConfigError) as refused:
        adapt(build_tree(config), config, lora_of(case["lora"]))
    assert refused.value.field == "target_modules"


def test_the_fixture_covers_every_family() -> None:
    from tui.core.config import MODEL_TYPES

    assert {c["config"]["model_type"] for c in CASES} == set(MODEL_TYPES)


def test_a_rank_out_of_range_or_a_bad_bias_is_refused_with_its_field() -> None:
    for keys, field in (({"r": 0}, "lora_r"), ({"bias": "some"}, "lora_bias"), ({"target_modules": "("},
                                                                                  "target_modules")):
        with pytest.raises(ConfigError) as refused:
            Lora(**keys)  # type: ignore[arg-type]
        assert refused.value.field == field
