"""A training step under a fine-tuning method, on configurations drawn at random (seeded): every family and
head, LoRA (targets drawn from the model's own module names, `all-linear`, DoRA, biases, `lora_dropout`,
`modules_to_save`), IA3 and parts frozen, over every precision, attention, padding mask, checkpointing and batch
(one sequence too). Each is computed by bert-tui and measured by torch with peft (`tui.reference.measure`, the
`verify` extra): the FLOPs, the saved bytes by component, the recomputation's peak and the bytes of weights,
gradients and optimizer states are equal. A method bert-tui's step refuses by name is not modelled, which is
allowed; a different figure never. What this found is in tests/fixtures/compute_methods.json
(`found_by_drawing_cases`)."""

from __future__ import annotations

import importlib.util
import random
import warnings
from typing import Any

import pytest

from tui.core import ConfigError
from tui.core.config import FAMILIES
from tui.core.count.families import build_tree
from tui.core.step.compute import compute
from tui.core.step.method import method_of
from tui.core.step.workload import ATTENTIONS, PRECISIONS, Workload

from .test_fixtures_regenerate import FIXTURES, live_marks, script

SAVED = ["classifier", "pooler", "qa_outputs", "pre_classifier", "LayerNorm", "lm_head", "cls", "dense", "predictions"]


def draw(rng: random.Random) -> tuple[Any, Workload, dict[str, Any]]:
    methods = script(FIXTURES / "generate_methods.py")
    family = rng.choice(sorted(FAMILIES))
    config = methods.family_config(family, rng.choice(list(FAMILIES[family].heads)))
    leaves = sorted({p.name.rsplit(".", 1)[0].rsplit(".", 1)[-1] for p in build_tree(config).root.params()})
    r = rng.random()
    spec: dict[str, Any]
    if r < 0.2:
        spec = {"ia3": {"target_modules": rng.sample(leaves, 2), "feedforward_modules": [],
                        **({"modules_to_save": rng.sample(SAVED, 1)} if rng.random() < 0.4 else {})}}
    elif r < 0.35:
        spec = {"freeze": {"embeddings": rng.random() < 0.5, "layers": rng.randint(0, 2), "body": rng.random() < 0.2}}
    else:
        lora: dict[str, Any] = {"r": rng.randint(1, 3), "target_modules": rng.choice(
            ["all-linear", sorted(set(rng.sample(leaves, rng.randint(1, 3))))])}
        if rng.random() < 0.5:
            lora["modules_to_save"] = rng.sample(SAVED, 1)
        if rng.random() < 0.3:
            lora["bias"] = rng.choice(["all", "lora_only"])
        if rng.random() < 0.2:
            lora["use_dora"] = True
        if rng.random() < 0.3:
            lora["lora_dropout"] = 0.1
        spec = {"lora": lora}
    workload = Workload(batch=rng.randint(1, 3), seq=rng.randint(2, 7), precision=rng.choice(PRECISIONS),
                        attention=rng.choice(ATTENTIONS), padding_mask=rng.random() < 0.3,
                        checkpointing=rng.random() < 0.15)
    return config, workload, spec


def figures(result: Any) -> dict[str, Any]:
    """What torch measured (`Measured.as_dict()`), as the comparison reads it."""
    return {"flops": (result["flops"]["forward"], result["flops"]["backward"]),
            "saved": result["activations"]["by_component"], "recompute": result["activations"]["recompute_peak"],
            "state": (result["weights"], result["gradients"], result["optimizer"])}


def core_figures(result: Any) -> dict[str, Any]:
    """What bert-tui computed (a `Compute`), read as torch's."""
    return figures({"flops": {"forward": result.flops_forward, "backward": result.flops_backward},
                    "activations": {"by_component": result.activations_by_component(),
                                    "recompute_peak": result.recompute_peak},
                    "weights": result.weights, "gradients": result.gradients, "optimizer": result.optimizer})


@live_marks
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft (in the [verify] extra) is not installed")
@pytest.mark.parametrize(("seed", "count"), [(20261207, 30), pytest.param(3, 500, marks=pytest.mark.slow)])
def test_what_bert_tui_computes_under_a_method_torch_measures(seed: int, count: int) -> None:
    from tui.reference.measure import measure

    methods = script(FIXTURES / "generate_methods.py")
    rng = random.Random(seed)
    differing, compared = [], 0
    for _ in range(count):
        config, workload, spec = draw(rng)
        try:
            result = compute(config, workload, method=method_of(build_tree(config), config, methods.how_of(spec)))
        except ConfigError:
            continue  # (not modelled: refused by name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = figures(measure(config, workload, method=spec).as_dict())
        ours = core_figures(result)
        if config.model_type == "albert":  # torch names its stored layers, the core each run: their sums
            ours["saved"], theirs["saved"] = (sum(saved["saved"].values()) for saved in (ours, theirs))
        compared += 1
        if ours != theirs:
            differing.append((config.model_type, config.head, spec, workload, ours, theirs))
    assert not differing, differing
    assert compared > count // 3  # (a check that refuses most of what it draws has stopped checking)


def draw_full(rng: random.Random) -> tuple[Any, Workload]:
    """A family's small config of one, two or four heads and a workload (training, inference, every optimizer,
    one sequence and one token too)."""
    generator = script(FIXTURES / "generate_compute.py")
    family = rng.choice(sorted(FAMILIES))
    heads = rng.choice([1, 2, 4])
    changes: dict[str, Any] = {"num_attention_heads": heads, "hidden_size": heads * 2 * rng.randint(1, 4),
                               "num_hidden_layers": rng.randint(1, 3), "intermediate_size": rng.randint(4, 40)}
    if family in ("electra", "albert"):
        changes["embedding_size"] = rng.randint(2, 12)
    config = generator.family_config(family, rng.choice(list(FAMILIES[family].heads)), **changes)
    train = rng.random() < 0.8
    return config, Workload(batch=rng.choice([1, 1, 2, 3]), seq=rng.randint(1, 9),
                            mode="train" if train else "inference", precision=rng.choice(PRECISIONS),
                            optimizer=rng.choice(generator.OPTIMIZERS), attention=rng.choice(ATTENTIONS),
                            padding_mask=rng.random() < 0.3, choices=rng.randint(1, 3),
                            checkpointing=train and rng.random() < 0.3 and family not in generator.NO_CHECKPOINTING)


@pytest.mark.slow
@live_marks
def test_what_bert_tui_computes_for_a_full_step_torch_measures() -> None:
    """Full fine-tuning and inference, 300 steps drawn (seeded) beside the fixtures' grids: equal or refused."""
    from tui.reference.measure import measure

    rng = random.Random(20261207)
    differing, compared = [], 0
    for _ in range(300):
        config, workload = draw_full(rng)
        try:
            result = compute(config, workload)
        except ConfigError:
            continue
        theirs = figures(measure(config, workload).as_dict())
        ours = core_figures(result)
        ours["saved"], theirs["saved"] = (sum(saved["saved"].values()) for saved in (ours, theirs))  # (the full
        compared += 1  # step's components are the layer's and its parts, torch's each layer's: their sums)
        if ours != theirs:
            differing.append((config, workload, ours, theirs))
    assert not differing, differing
    assert compared > 200
