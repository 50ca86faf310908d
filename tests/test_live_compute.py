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


@pytest.mark.parametrize("precision", ["fp32", "bf16", "amp-bf16"])
def test_every_familys_buffers_are_what_its_model_registers(precision: str) -> None:
    """`buffers` is what the model holds besides its parameters, `model.buffers()` after `.to(dtype)` (they were
    16·P for every family: DistilBERT, MPNet and DeBERTa register position ids only, ModernBERT rotary tables)."""
    import torch

    from tui.core.config import FAMILIES
    from tui.reference.measure import construct, dtype_of

    for name in FAMILIES:
        config = BertConfig(model_type=name, num_hidden_layers=4, hidden_size=64, num_attention_heads=4,
                            intermediate_size=128, vocab_size=128, max_position_embeddings=96,
                            type_vocab_size=0 if FAMILIES[name].zero_types else 2)
        workload = Workload(batch=2, seq=8, precision=precision, device="cuda")
        with torch.device("meta"):
            model = construct(config, workload)
        model.to(dtype_of(workload))
        held = sum(buffer.numel() * buffer.element_size() for buffer in model.buffers())
        assert compute(config, workload, fits=False).buffers == held, name


@pytest.mark.parametrize("name", ["bert", "albert", "electra"])
def test_the_batch_on_the_device_is_what_the_step_is_given(name: str) -> None:
    """The peak's batch (`peak.inputs_bytes`) is the tensors the step is given: the pre-training heads' sentence
    labels are BERT's and ALBERT's, not ELECTRA's (its discriminator has one label a token)."""
    from tui.core.step.peak import inputs_bytes
    from tui.reference.measure import inputs

    config = BertConfig(model_type=name, head="pretraining", num_hidden_layers=1, hidden_size=32,
                        num_attention_heads=2, intermediate_size=64, vocab_size=64)
    workload = Workload(batch=3, seq=8, device="cuda", padding_mask=name != "electra")  # (ELECTRA's: refused)
    given = inputs(config, workload, "cpu")
    assert inputs_bytes(compute(config, workload, fits=False)) == sum(t.numel() * t.element_size()
                                                                     for t in given.values())


def test_a_step_refused_because_transformers_cannot_run_it_fails_in_transformers() -> None:
    """DeBERTa's newer masked-LM head (legacy: false) with embedding_size ≠ hidden_size: transformers' forward
    fails (the H-wide states times the E-wide word table), and bert-tui's step refuses it by name rather than
    computing a step that cannot run; with legacy: true (H → E first) both run and agree."""
    from tui.core import ConfigError
    from tui.reference.measure import measure

    config = BertConfig(model_type="deberta-v2", head="mlm", vocab_size=40, hidden_size=8, embedding_size=12,
                        num_hidden_layers=1, num_attention_heads=1, intermediate_size=16, max_position_embeddings=16,
                        legacy=False)
    workload = Workload(batch=2, seq=5)
    with pytest.raises(RuntimeError, match="cannot be multiplied|same reduction dim"):
        measure(config, workload)
    with pytest.raises(ConfigError, match="embedding_size = 12: must equal hidden_size"):
        compute(config, workload)
    legacy = config.replace(legacy=True)
    assert compute(legacy, workload).flops_forward == measure(legacy, workload).flops_forward
