"""LoRA and IA3 as peft builds them, on configurations drawn at random (seeded): every family and head, targets
drawn from the model's own module names (those without parameters too: a dropout) and the heads' (`classifier`,
`qa_outputs`, `pre_classifier`, …),
`all-linear`, regular expressions, `modules_to_save`, `exclude_modules`, biases, DoRA, `layers_to_transform` and
`layers_pattern`. Each is counted by
bert-tui and built by `get_peft_model` (the `verify` extra, on the meta device): where bert-tui counts, peft
builds the same parameters (names, shapes, `requires_grad`, in order); where peft refuses, bert-tui refuses. Where
bert-tui refuses by name and peft builds (a tied tensor adapted, a module saved inside another saved) the case is
not modelled, which is allowed: nothing is counted wrong. The fixture's cases (tests/fixtures/peft_params.json)
hold what was found this way."""

from __future__ import annotations

import copy
import importlib.util
import random
import warnings
from typing import Any

import pytest

from tui.core import BertConfig, ConfigError, build_tree
from tui.core.config import FAMILIES
from tui.core.count.families import bare_modules
from tui.core.count.lora import Ia3, Lora, adapt, adapt_ia3, task_type

from .test_fixtures_regenerate import FIXTURES, live_marks, script

HEADS_NAMES = ["classifier", "pooler", "qa_outputs", "score", "pre_classifier", "dense", "attention", "output"]
SAVED_NAMES = ["classifier", "pooler", "qa_outputs", "pre_classifier", "dense", "LayerNorm", "lm_head", "cls",
               "dropout"]
REGEXES = [r".*(query|classifier)", r".*\.dense", r".*layer\.0\..*", r".*(q_lin|pre_classifier)", r".*(value|drop)"]


def draw(rng: random.Random) -> tuple[BertConfig, bool, dict[str, Any]] | None:
    """A family, a head and a method's keys (None: a config the family cannot take)."""
    sizes = script(FIXTURES / "generate_peft.py")
    family = rng.choice(sorted(FAMILIES))
    head = rng.choice(list(FAMILIES[family].heads))
    try:
        config = BertConfig(**{**sizes.SMALL, **sizes.FAMILY_SIZES.get(family, {}), "model_type": family,
                               "head": head})
    except ConfigError:
        return None
    leaves = sorted({p.name.rsplit(".", 1)[0].rsplit(".", 1)[-1] for p in build_tree(config).root.params()})
    if rng.random() < 0.2:  # the modules without parameters too (dropouts, activations): peft refuses them
        leaves = sorted({*leaves, *(name.rsplit(".", 1)[-1] for name in bare_modules(config))})
    ia3 = rng.random() < 0.25
    spec: dict[str, Any] = {}
    r = rng.random()
    if r < 0.15 and not ia3:
        spec["target_modules"] = "all-linear"
    elif r < 0.25:
        spec["target_modules"] = rng.choice(REGEXES)
    elif r >= 0.3:  # (else peft's default for the family)
        spec["target_modules"] = sorted(set(rng.sample(leaves + HEADS_NAMES, rng.randint(1, 4))))
    if rng.random() < 0.3:
        spec["modules_to_save"] = sorted(set(rng.sample(SAVED_NAMES, rng.randint(1, 2))))
    if rng.random() < 0.15:  # held back: names (an ending, or a layer's whole path) or a regular expression
        spec["exclude_modules"] = rng.choice([sorted(set(rng.sample(leaves, rng.randint(1, 2)))), r".*\.0\..*",
                                              [f"layer.{rng.randint(0, 2)}.attention.self.query"]])
    if ia3:
        if isinstance(spec.get("target_modules"), list) and rng.random() < 0.5:
            spec["feedforward_modules"] = rng.sample(spec["target_modules"], 1)
        elif "target_modules" in spec:
            spec["feedforward_modules"] = []
    else:
        spec["r"] = rng.randint(1, 4)
        spec["bias"] = rng.choice(["none", "all", "lora_only"])
        spec["use_dora"] = rng.random() < 0.2
        spec["lora_bias"] = rng.random() < 0.1
        if rng.random() < 0.15 and isinstance(spec.get("target_modules"), list):
            spec["layers_to_transform"] = [rng.randint(0, 2)]
            if rng.random() < 0.5:
                spec["layers_pattern"] = [rng.choice(["layer", "layers", "albert_layers", "albert_layer_groups",
                                                      "blocks"])]
    return config, ia3, spec


def peft_builds(config: BertConfig, ia3: bool, spec: dict[str, Any]) -> list[list[Any]] | None:
    """`get_peft_model`'s parameters (None: peft refuses)."""
    from peft import IA3Config, LoraConfig, get_peft_model

    model = script(FIXTURES / "generate.py").build_family_model(config)
    method = IA3Config if ia3 else LoraConfig
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            built = get_peft_model(model, method(task_type=task_type(config), **copy.deepcopy(spec)))
        except (ValueError, TypeError, KeyError, RuntimeError, NotImplementedError, AttributeError):
            return None
    return [[name, list(p.shape), p.requires_grad] for name, p in built.named_parameters()]


def bert_tui_counts(config: BertConfig, ia3: bool, spec: dict[str, Any]) -> list[list[Any]] | None:
    """bert-tui's peft parameters (None: refused by name)."""
    keys = {key: tuple(value) if isinstance(value, list) else value for key, value in spec.items()}
    try:
        adapted = adapt_ia3(build_tree(config), config, Ia3(**keys)) if ia3 else \
            adapt(build_tree(config), config, Lora(**keys))
    except ConfigError:
        return None
    return [[p.name, list(p.shape), p.trainable] for p in adapted.params]


@live_marks
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft (in the [verify] extra) is not installed")
@pytest.mark.parametrize(("seed", "count"), [(20261207, 100), pytest.param(7, 600, marks=pytest.mark.slow)])
def test_what_bert_tui_counts_peft_builds_the_same(seed: int, count: int) -> None:
    rng = random.Random(seed)
    differing, refused_only = [], 0
    for _ in range(count):
        drawn = draw(rng)
        if drawn is None:
            continue
        ours, theirs = bert_tui_counts(*drawn), peft_builds(*drawn)
        if ours is None:
            refused_only += theirs is not None  # (not modelled: refused by name)
        elif ours != theirs:
            differing.append((drawn[0].model_type, drawn[0].head, drawn[2], "peft refuses" if theirs is None else
                              "different parameters"))
    assert not differing, differing
    assert refused_only < count // 10  # (a check that refuses what peft builds often has stopped checking)


@live_marks
@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft (in the [verify] extra) is not installed")
def test_a_saved_lm_head_s_adapter_file_is_predicted_key_by_key(tmp_path: Any) -> None:
    """`modules_to_save=["cls"]` on a masked LM, saved by peft: its file holds the copy's state dict — the decoder
    weight (untied from the word table, a tensor of its own) and both names of the bias the copy shares within
    itself (`predictions.bias`, `predictions.decoder.bias`); bert-tui's count of the folder predicts each."""
    import json

    import transformers
    from peft import LoraConfig, get_peft_model

    from .clirun import run

    config = transformers.BertConfig(vocab_size=96, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=24, max_position_embeddings=40)
    config.save_pretrained(tmp_path / "base")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_peft_model(transformers.BertForMaskedLM(config),
                               LoraConfig(r=2, target_modules=["value"], modules_to_save=["cls"]))
        model.save_pretrained(tmp_path / "adapter")
    path = tmp_path / "adapter" / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "base_model_name_or_path": "../base"}),
                    encoding="utf-8")
    code, out, err = run("count", str(tmp_path / "adapter"), "--head", "mlm", "--format", "json")
    assert code == 0, err
    data = json.loads(out)["adapter_file"]
    assert data["clean"] and data["held"] == data["expected"]
