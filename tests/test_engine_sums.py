"""Where autograd's engine sums a second gradient into a new block, against the allocation order's tape.

`InputBuffer::accumulate` adds a second gradient into the first in place only where the first is its storage's
only user (`can_accumulate_inplace`): a first that is a view (a Linear's input gradient viewed back to 3-D, a
weight's transposed, a broadcast operand's summed down and viewed) or that another buffer still holds (the residual's
gradient, handed to both branches) is summed into a new block. Runs recorded with fake tensors cannot show it (a fake
tensor is never summed in place; the recorder takes every sum for its first's), so here the real engine runs on
real CPU tensors (the same engine code as on a GPU: no stream is involved in the choice) under torch's profiler,
whose `aten::add` in the backward are those sums (in place they are `aten::add_`), and the tape's
(`Tape.sums`) must be the same ones: as many, of the same sizes, each step.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from math import prod
from pathlib import Path
from typing import Any

import pytest
from yaml import safe_load

from tests.fixtures.generate_methods import how_of
from tests.hf_cases import live
from tui.core.config import BertConfig
from tui.core.count.families import build_tree
from tui.core.step import allocations
from tui.core.step.method import method_of
from tui.core.step.workload import Workload

pytestmark = [*live(), pytest.mark.skipif(importlib.util.find_spec("peft") is None,
                                          reason="peft (in the [verify] extra) is not installed")]

TINY = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 40}
ALL = {"r": 4, "target_modules": "all-linear"}
CASES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "bert-sc": ({"head": "sequence-classification"}, None),
    "bert-pretraining (the tied table, the sequence output read twice)": ({"head": "pretraining"}, None),
    "bert-mlm (the tied table)": ({"head": "mlm"}, None),
    "bert-qa": ({"head": "question-answering", "num_labels": 2}, None),
    "albert-sc (every shared weight)": ({"model_type": "albert", "embedding_size": 16,
                                         "head": "sequence-classification"}, None),
    "albert-mlm": ({"model_type": "albert", "embedding_size": 16, "head": "mlm"}, None),
    "electra-pretraining": ({"model_type": "electra", "embedding_size": 16, "head": "pretraining"}, None),
    "mpnet-mlm (one position bias, every layer)": ({"model_type": "mpnet", "head": "mlm"}, None),
    "distilbert-tok": ({"model_type": "distilbert", "head": "token-classification"}, None),
    "bert-sc LoRA q, v": ({"head": "sequence-classification"}, {"lora": {"r": 4}}),
    "bert-sc LoRA all-linear": ({"head": "sequence-classification"}, {"lora": ALL}),
    "roberta-mlm LoRA all-linear": ({"model_type": "roberta", "head": "mlm"}, {"lora": ALL}),
    "distilbert-mlm DoRA q, v, out (the projection meets the residual)": (
        {"model_type": "distilbert", "head": "mlm"},
        {"lora": {"r": 4, "use_dora": True, "target_modules": ["q_lin", "v_lin", "out_lin"]}}),
    "albert-tok DoRA on every layer Linear": (
        {"model_type": "albert", "embedding_size": 16, "head": "token-classification"},
        {"lora": {"r": 4, "use_dora": True, "target_modules": ["query", "value", "dense", "ffn", "ffn_output"]}}),
    "modernbert-mlm DoRA Wqkv, Wo (the fused projection's gradient viewed back)": (
        {"model_type": "modernbert", "head": "mlm", "max_position_embeddings": 64},
        {"lora": {"r": 4, "use_dora": True, "target_modules": ["Wqkv", "Wo"]}}),
    "modernbert-sc DoRA Wi": ({"model_type": "modernbert", "head": "sequence-classification",
                               "max_position_embeddings": 64},
                              {"lora": {"r": 4, "use_dora": True, "target_modules": ["Wi"]}}),
    "modernbert-sc": ({"model_type": "modernbert", "head": "sequence-classification",
                       "max_position_embeddings": 64}, None),
    "deberta-v3-tok (relative embeddings read by every layer)": (
        {"preset": "deberta-v3", "head": "token-classification"}, None),
    "deberta-v3-mlm LoRA all-linear": ({"preset": "deberta-v3", "head": "mlm"},
                                       {"lora": {"r": 4, "target_modules": ["query_proj", "value_proj", "dense"]}}),
    "bert-tok IA3": ({"head": "token-classification"}, {"ia3": {}}),
    "bert-mlm frozen embeddings, 1 layer": ({"head": "mlm"}, {"freeze": {"embeddings": True, "layers": 1}}),
}


DEBERTA = BertConfig(**safe_load((Path(__file__).parent / "fixtures" / "allocation" / "deberta-v3.yaml").read_text(
    encoding="utf-8"))["config"])


def engine(config: BertConfig, workload: Workload, spec: dict[str, Any] | None) -> Counter[int]:
    """The elements of each gradient the real engine summed into a new block in one backward."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tui.reference import measure

    torch.manual_seed(0)
    model = measure.build_model(config, workload, "cpu", spec)
    model.train()
    loss = measure.loss_of(model(**measure.inputs(config, workload, "cpu")))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiled:
        loss.backward()
    sums: Counter[int] = Counter()
    for event in profiled.events():
        shapes = event.input_shapes
        if event.name == "aten::add" and len(shapes) >= 2 and shapes[0] and shapes[0] == shapes[1]:
            sums[prod(shapes[0])] += 1
    return sums


def tape(config: BertConfig, workload: Workload, spec: dict[str, Any] | None) -> Counter[int]:
    """The same from the derived order: the new blocks of the sums of its first step (float32: 4 bytes each)."""
    method = None if spec is None else method_of(build_tree(config), config, how_of(spec))
    run = allocations.emulator(config, workload, method=method)
    sizes = {key: nbytes for kind, key, nbytes in run.run(1) if kind == "a"}
    return Counter(sizes[total] // 4 for _, _, total in run.tape.sums if total)


@pytest.mark.parametrize("name", list(CASES))
def test_the_tape_sums_apart_where_the_engine_does(name: str) -> None:
    fields, spec = CASES[name]
    config = BertConfig(**{**TINY, **fields}) if "preset" not in fields else DEBERTA.replace(head=fields["head"])
    workload = Workload(batch=2, seq=8, precision="fp32", attention="eager", device="cuda", loop="hand-written")
    assert allocations.covers(config, workload, None if spec is None else method_of(
        build_tree(config), config, how_of(spec))) is None
    assert tape(config, workload, spec) == engine(config, workload, spec)


def test_the_engine_sums_apart_at_all() -> None:
    """The check can fail: LoRA on every Linear sums each layer's context and FFN input apart (3 layers)."""
    config = BertConfig(**{**TINY, "head": "sequence-classification"})
    workload = Workload(batch=2, seq=8, precision="fp32", attention="eager", device="cuda", loop="hand-written")
    assert engine(config, workload, {"lora": ALL}) == Counter({2 * 8 * 32: 3, 2 * 8 * 64: 3})


def test_the_manual_says_how_many_runs_check_it() -> None:
    text = (Path(__file__).parents[1] / "docs" / "fine-tuning.md").read_text(encoding="utf-8")
    assert f"as many, of the same sizes, in {len(CASES)} runs" in " ".join(text.split())
