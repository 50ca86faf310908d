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

import dataclasses
import importlib.util
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tui.core.config import FAMILIES, BertConfig
from tui.core.errors import ConfigError
from tui.core.step import allocations
from tui.core.step.compute import compute
from tui.core.step.workload import ATTENTIONS, LOOPS, OPTIMIZERS, PRECISIONS, Workload

MISSING = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(MISSING), reason="the [verify] extra (torch, transformers) is not installed"),
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ builds the fake-CUDA shim; none here")]
SEED, CHUNKS, DRAWS = 20261207, 4, 7


METHODS: list[dict[str, Any]] = [
    {"freeze": {"embeddings": True}}, {"freeze": {"layers": 1}}, {"freeze": {"body": True}}, {"lora": {"r": 4}},
    {"lora": {"r": 4, "target_modules": "all-linear"}}, {"lora": {"r": 2, "use_dora": True}}, {"ia3": {}},
    {"lora": {"r": 4, "bias": "all"}}, {"lora": {"r": 4, "lora_dropout": 0.1}}]


def draw(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """A config (BertConfig's fields), a workload (Workload's), as `compute` takes them, and a method as the
    recorder takes it (None: full fine-tuning)."""
    family = rng.choice(sorted(FAMILIES))
    head = rng.choice(list(FAMILIES[family].heads))
    heads = rng.choice([1, 2, 4])
    config: dict[str, Any] = dict(
        model_type=family, head=head, vocab_size=rng.choice([50, 300, 1000]), hidden_size=heads * rng.choice([8, 16]),
        num_hidden_layers=rng.choice([1, 2, 4]), num_attention_heads=heads, intermediate_size=rng.choice([16, 40, 64]),
        max_position_embeddings=128, num_labels=2 if head == "question-answering" else rng.choice([1, 2, 3]))
    if family in ("albert", "electra", "deberta-v2") and rng.random() < 0.5:
        config["embedding_size"] = rng.choice([8, 24])
    if family == "albert" and rng.random() < 0.5:
        config.update(num_hidden_layers=4, num_hidden_groups=rng.choice([1, 2]), inner_group_num=rng.choice([1, 2]))
    if family == "modernbert":
        config.update({key: rng.random() < 0.5 for key in ("norm_bias", "attention_bias", "mlp_bias",
                                                            "classifier_bias", "decoder_bias")})
    if family == "deberta-v2":
        config.update(relative_attention=rng.random() < 0.8, position_buckets=rng.choice([0, 4, 8]),
                      max_relative_positions=rng.choice([0, 16]), share_att_key=rng.random() < 0.5,
                      pos_att_c2p=rng.random() < 0.7, pos_att_p2c=rng.random() < 0.7,
                      norm_rel_ebd=rng.random() < 0.5, position_biased_input=rng.random() < 0.5,
                      legacy=rng.random() < 0.5, type_vocab_size=rng.choice([0, 2]))
    if rng.random() < 0.2:
        config["tie_word_embeddings"] = False
    if head == "none" and rng.random() < 0.4:
        config["pooler"] = False
    train = rng.random() < 0.7
    workload = dict(batch=rng.choice([1, 2, 3]), seq=rng.choice([1, 5, 16, 64, 70]),
                    mode="train" if train else "inference", precision=rng.choice(PRECISIONS),
                    optimizer=rng.choice(OPTIMIZERS), checkpointing=train and rng.random() < 0.25,
                    attention=rng.choice(ATTENTIONS), padding_mask=rng.random() < 0.4, device="cuda",
                    choices=rng.choice([2, 3]), loop=rng.choice(LOOPS))
    return config, workload, rng.choice(METHODS) if rng.random() < 1 / 3 else None


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.fixtures.generate_allocation import build_shim

    return build_shim(tmp_path_factory.mktemp("fake-cuda"))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_the_derived_order_of_a_drawn_step_is_the_recorded_one(chunk: int, shim: Path) -> None:
    from tests.fixtures.allocation.compare import as_recorded, normalized
    from tests.fixtures.generate_allocation import run_recorder
    from tests.fixtures.generate_methods import how_of
    from tui.core.count.families import build_tree
    from tui.core.step.method import method_of

    rng = random.Random(SEED)
    draws = [draw(rng) for _ in range(CHUNKS * DRAWS)][chunk * DRAWS:(chunk + 1) * DRAWS]
    differing, compared = [], 0
    for values, settings, spec in draws:
        try:
            config, workload = BertConfig(**values), Workload(**settings)
            method = None if spec is None else method_of(build_tree(config), config, how_of(spec))
            compute(config, workload, fits=False, method=method)
        except ConfigError:
            continue  # refused by name
        if allocations.covers(config, workload, method):
            continue  # its order is not derived: refused by name
        case = {"config": {key: value for key, value in dataclasses.asdict(config).items() if key != "step_keys"},
                "workload": dataclasses.asdict(workload), "steps": 2, "method": spec}
        recorded = run_recorder(shim, case)["events"]  # (transformers failing: SystemExit, the test fails)
        run = allocations.emulator(config, workload, method=method)
        ours, theirs = normalized(as_recorded(run.run(2), run.tape.sums)), normalized(recorded)
        compared += 1
        if ours != theirs:
            first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            differing.append(f"{values} {settings} {spec}: from event {first}")
    assert not differing, differing
    assert compared >= DRAWS // 2  # (a draw that refuses most of what it draws has stopped checking)
