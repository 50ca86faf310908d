"""The core against the real transformers classes, built live on the meta device.

Needs the `verify` extra (torch, transformers); without it these tests are skipped with that reason. The
committed fixtures (tests/test_conformance.py) cover the same ground in the default run without torch.
"""

from __future__ import annotations

import random

import pytest

from tui.core import HEADS, BertConfig, build_tree
from tui.presets import load_catalog

torch = pytest.importorskip("torch", reason="the [verify] extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the [verify] extra (torch, transformers) is not installed")

pytestmark = pytest.mark.live


def hf_params(config: BertConfig) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    hf_config = transformers.BertConfig(**config.sizes(), num_labels=config.num_labels)
    cls = getattr(transformers, config.hf_class)
    with torch.device("meta"):
        model = cls(hf_config, add_pooling_layer=config.pooler) if config.head == "none" else cls(hf_config)
    params = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    return params, sum(p.numel() for p in model.parameters())


def random_config(seed: int) -> BertConfig:
    rng = random.Random(seed)
    heads = rng.randint(1, 12)
    head = rng.choice(list(HEADS))
    return BertConfig(
        vocab_size=rng.randint(1, 40_000), hidden_size=heads * rng.randint(1, 40), num_hidden_layers=rng.randint(1, 4),
        num_attention_heads=heads, intermediate_size=rng.randint(1, 3000), max_position_embeddings=rng.randint(1, 1024),
        type_vocab_size=rng.randint(1, 8), head=head, pooler=rng.random() < 0.5 if head == "none" else True,
        num_labels=rng.randint(1, 9),
    )


@pytest.mark.parametrize("head", list(HEADS))
def test_bert_base_every_head_live(head: str) -> None:
    config = load_catalog().get("bert-base-uncased").config.replace(head=head)
    tree = build_tree(config)
    params, total = hf_params(config)
    assert [(p.name, p.shape) for p in tree.unique_params()] == params
    assert tree.total == total


@pytest.mark.parametrize("seed", range(25))
def test_random_configs_live(seed: int) -> None:
    config = random_config(1000 + seed)
    tree = build_tree(config)
    params, total = hf_params(config)
    assert [(p.name, p.shape) for p in tree.unique_params()] == params
    assert tree.total == total
