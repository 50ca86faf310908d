"""The core against the real transformers classes, built live on the meta device.

Needs the `verify` extra (torch, transformers); without it these tests are skipped with that reason. The
committed fixtures (tests/test_conformance.py) cover the same ground in the default run without torch.
"""

from __future__ import annotations

import random

import pytest

from tui.core import HEADS, BertConfig, build_tree
from tui.presets import load_catalog
from tui.reference.verify import hf_parameters

from .hf_cases import live

pytestmark = live()


def hf_params(config: BertConfig) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    _, params, total = hf_parameters(config)
    return params, total


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


def test_verify_command_agrees(capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    assert main(["verify", "--preset", "bert-large-uncased", "--head", "pretraining"]) == 0
    out = capsys.readouterr().out
    assert "agree: 398 parameters" in out and "336,226,108" in out


def test_checkpoint_folders_count_as_the_live_models() -> None:
    """The save_pretrained fixtures, re-counted live: file total = live model total (the fixture JSON too)."""
    import json
    from pathlib import Path

    from tui.core.count.compare import compare
    from tui.io.hf_config import load_hf_config
    from tui.io.safetensors import load_checkpoint

    folder = Path(__file__).parent / "fixtures" / "checkpoints"
    live = json.loads((folder / "live_totals.json").read_text(encoding="utf-8"))
    for name in ("pretraining", "sharded", "legacy", "bertmodel"):
        config = load_hf_config(folder / name).config
        stored = [(t.name, t.shape) for t in load_checkpoint(folder / name).tensors]
        result = compare(build_tree(config), stored)
        assert result.clean and result.held == live[name] == hf_params(config)[1]


@pytest.mark.parametrize("model_type", ["bert", "roberta", "xlm-roberta", "camembert"])
@pytest.mark.parametrize("head", ["mlm", "causal-lm"])
def test_untied_decoders_live(model_type: str, head: str) -> None:
    """tie_word_embeddings false: the decoder's weight and bias are parameters of their own, in every family."""
    config = BertConfig(vocab_size=97, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
                        head=head, model_type=model_type, tie_word_embeddings=False)
    tree = build_tree(config)
    params, total = hf_params(config)
    assert [(p.name, p.shape) for p in tree.unique_params()] == params and tree.total == total
