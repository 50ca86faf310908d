"""The compute core against torch, measured live (the `verify` extra); skipped with that reason without it.

tests/test_compute.py checks the committed measurements in the default run; these measure fresh seeded cases
(other seeds than the fixture's) with the same oracle, `tui.reference.measure`.
"""

from __future__ import annotations

import random

import pytest

from tui.core import BertConfig
from tui.core.config import HEADS
from tui.core.step.compute import compute
from tui.core.step.workload import ATTENTIONS, OPTIMIZERS, PRECISIONS, Workload

from .hf_cases import live

pytestmark = live()


def random_case(seed: int) -> tuple[BertConfig, Workload]:
    rng = random.Random(seed)
    heads, seq = rng.randint(1, 3), rng.randint(2, 9)
    config = BertConfig(vocab_size=rng.randint(8, 64), hidden_size=heads * rng.randint(1, 6),
                        num_hidden_layers=rng.randint(1, 2), num_attention_heads=heads,
                        intermediate_size=rng.randint(2, 24), max_position_embeddings=seq + 3,
                        head=rng.choice(list(HEADS)), num_labels=rng.randint(1, 3))
    workload = Workload(batch=rng.randint(1, 3), seq=seq, precision=rng.choice(PRECISIONS),
                        optimizer=rng.choice(OPTIMIZERS), checkpointing=rng.random() < 0.5,
                        attention=rng.choice(ATTENTIONS), padding_mask=rng.random() < 0.5, device="cpu")
    return config, workload


@pytest.mark.parametrize("seed", range(900, 908))
def test_core_matches_a_fresh_measurement(seed: int) -> None:
    from tui.reference.measure import measure

    config, workload = random_case(seed)
    result, measured = compute(config, workload), measure(config, workload)
    assert (result.flops_forward, result.flops_backward) == (measured.flops_forward, measured.flops_backward)
    assert (result.weights, result.gradients, result.optimizer) == (measured.weights, measured.gradients,
                                                                     measured.optimizer)
    assert result.recompute_peak == measured.recompute_peak
    assert result.activations == sum(measured.activations_by_component.values())
