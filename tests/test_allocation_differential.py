"""The allocation order the core derives, on full steps drawn at random (seeded), against the run recorded with
CUDA faked (tests/fixtures/allocation/record.py, the real transformers classes): every family and head, sizes
down to one head, one layer and one sequence, each family's switches (ALBERT's groups, ModernBERT's biases,
DeBERTa's attention types), untied decoders and the bare model without its pooler, every precision, kernel,
optimizer and loop, padding masks, checkpointing and inference, and a third of them under a fine-tuning method
(parts frozen, LoRA, DoRA, IA3: peft's model, recorded). A drawn case is computed and derived, or refused by name
(`compute`, `allocations.covers`); one that bert-tui computes must run in transformers, and its order must be the
recorded one event by event. What this found is in the recorded orders it added
(tests/fixtures/allocation_order.json: `modernbert-*-one-layer-*`, `albert-*-inner-*`, `*-qa-one-token-*`,
`deberta-unread-qa-inf`, `*-deberta-unread-qa*` under a method, `lora-biases-bert-nsp-a-sgdm-bf16`,
`*-deberta-c2p-e16-*-ckpt`).

Slow (each recording is a process importing torch), and it needs the `verify` extra and g++ for the shim."""

from __future__ import annotations

import importlib.util
import random
import shutil
from pathlib import Path

import pytest

MISSING = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(MISSING), reason="the [verify] extra (torch, transformers) is not installed"),
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ builds the fake-CUDA shim; none here")]
SEED, CHUNKS, DRAWS = 20261207, 4, 7


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.fixtures.generate_allocation import build_shim

    return build_shim(tmp_path_factory.mktemp("fake-cuda"))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_the_derived_order_of_a_drawn_step_is_the_recorded_one(chunk: int, shim: Path) -> None:
    from tests.fixtures.allocation.draw import draw, verdict

    rng = random.Random(SEED)
    draws = [draw(rng) for _ in range(CHUNKS * DRAWS)][chunk * DRAWS:(chunk + 1) * DRAWS]
    said = [verdict(shim, *case, steps=2) for case in draws]  # (transformers failing to run one: "failed")
    differing = [detail for kind, detail in said if kind not in ("equal", "refused")]
    assert not differing, differing
    assert sum(kind != "refused" for kind, _ in said) >= DRAWS // 2  # (a draw that refuses most of what it draws
    # has stopped checking)
