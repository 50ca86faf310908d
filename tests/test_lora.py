"""LoRA counted as peft counts it (tests/fixtures/peft_params.json, written by tests/fixtures/generate_peft.py from
`get_peft_model` on the meta device): every name, shape and `requires_grad`, and the trainable and total figures;
what peft refuses, refused."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tui.core import BertConfig, ConfigError, build_tree
from tui.core.count.lora import Adapted, Ia3, Lora, adapt, adapt_ia3

CASES = json.loads((Path(__file__).parent / "fixtures" / "peft_params.json").read_text(encoding="utf-8"))["cases"]


def adapted_of(case: dict[str, Any]) -> Adapted:
    config = BertConfig(**case["config"])
    if case.get("method") == "ia3":
        keys = {key: tuple(value) if isinstance(value, list) else value for key, value in case["lora"].items()}
        return adapt_ia3(build_tree(config), config, Ia3(**keys))
    return adapt(build_tree(config), config, lora_of(case["lora"]))


def lora_of(keys: dict[str, Any]) -> Lora:
    keys = dict(keys)
    for name in ("target_modules", "modules_to_save", "layers_to_transform", "exclude_modules", "layers_pattern"):
        if isinstance(keys.get(name), list):
            keys[name] = tuple(keys[name])
    if isinstance(keys.get("layers_pattern"), str):  # (peft takes one name or a list, as the adapter reader does)
        keys["layers_pattern"] = (keys["layers_pattern"],)
    if "rank_pattern" in keys:
        keys["rank_pattern"] = tuple(keys["rank_pattern"].items())
    return Lora(**keys)


@pytest.mark.parametrize("case", [c for c in CASES if "error" not in c], ids=lambda c: c["case"])
def test_every_peft_parameter_name_shape_and_trainable_flag(case: dict[str, Any]) -> None:
    adapted = adapted_of(case)
    ours = [[p.name, list(p.shape), p.trainable] for p in adapted.params]
    assert ours == case["params"]
    assert (adapted.trainable, adapted.total) == (case["trainable"], case["total"])


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c], ids=lambda c: c["case"])
def test_what_peft_refuses_is_refused_by_name(case: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as refused:
        adapted_of(case)
    assert refused.value.field in ("target_modules", "feedforward_modules", "exclude_modules", "layers_to_transform",
                                   "lora_bias")


def test_the_fixture_covers_every_family() -> None:
    from tui.core.config import FAMILIES

    assert {c["config"]["model_type"] for c in CASES} == set(FAMILIES)


def test_a_rank_out_of_range_or_a_bad_bias_is_refused_with_its_field() -> None:
    for keys, field in (({"r": 0}, "lora_r"), ({"bias": "some"}, "bias"), ({"target_modules": "("},
                                                                                  "target_modules")):
        with pytest.raises(ConfigError) as refused:
            Lora(**keys)  # type: ignore[arg-type]
        assert refused.value.field == field


def run_cli(*argv: str) -> tuple[int, str, str]:
    from .clirun import run

    return run(*argv)


def test_count_with_lora_gives_peft_s_two_figures_in_every_format() -> None:
    """roberta-base for sequence classification with r = 8: peft's own README prints `trainable params: 887,042
    || all params: 125,534,212`; the JSON keeps `total` as peft's all params, `trainable` beside it."""
    code, out, _ = run_cli("count", "roberta-base", "--head", "sequence-classification", "--lora-r", "8")
    assert code == 0
    assert "trainable params: 887,042 || all params: 125,534,212 || trainable%: 0.7066" in out
    code, out, _ = run_cli("count", "roberta-base", "--head", "sequence-classification", "--lora-r", "8",
                           "--format", "json")
    data = json.loads(out)
    assert (data["trainable"], data["total"], data["lora"]["target_modules"]) == (887_042, 125_534_212,
                                                                                 ["query", "value"])
    assert data["base_total"] == build_tree(BertConfig(model_type="roberta", vocab_size=50265,
                                                       max_position_embeddings=514, type_vocab_size=1,
                                                       head="sequence-classification")).total
    names = [row[0] for row in data["lora"]["peft_parameters"]]
    assert "base_model.model.roberta.encoder.layer.0.attention.self.query.lora_A.default.weight" in names
    code, out, _ = run_cli("count", "roberta-base", "--head", "sequence-classification", "--lora-r", "8",
                           "--format", "csv")
    assert "base_model.model.classifier.modules_to_save.default.dense.weight,768x768,589824,True,copy" in out


def test_full_fine_tuning_trains_everything() -> None:
    code, out, _ = run_cli("count", "--format", "json")
    data = json.loads(out)
    assert data["trainable"] == data["total"] == 109_482_240 and "lora" not in data


@pytest.mark.parametrize(("argv", "said"), [
    (["--lora-r", "0"], "--lora-r 0: must be a whole number between 1"),
    (["--lora-r", "x"], "--lora-r 'x': must be a whole number"),
    (["--lora-targets", "nope"], "--lora-targets nope: matches no module of BertModel"),
    (["--lora-targets", "LayerNorm"], "is not a Linear or an Embedding"),
    (["--preset", "distilbert-base-uncased", "--lora-r", "8"], "peft has no default for model type 'distilbert'"),
    (["--lora-rank-pattern", "value"], "--lora-rank-pattern 'value': write KEY=R"),
    (["--lora-targets", "query", "--lora-targets-regex", ".*"], "give one"),
    (["--lora-targets-regex", "("], "is not a regular expression"),
])
def test_a_bad_lora_flag_is_refused_in_one_line_naming_it(argv: list[str], said: str) -> None:
    code, out, err = run_cli("count", *argv)
    assert code == 2 and not out and said in err and err.count("\n") == 1, err


ADAPTERS = Path(__file__).parent / "fixtures" / "adapters"


@pytest.mark.parametrize("name", ["bert-seqcls-dora", "roberta-token", "bert-none-all-linear", "bert-seqcls-ia3",
                                  "bert-seqcls-bias-all"])
def test_an_adapter_folder_opens_on_its_base_with_its_task_heads_and_its_file_matches(name: str) -> None:
    """Folders as peft's save_pretrained writes them (tests/fixtures/adapters/): the base named by
    base_model_name_or_path, the head by task_type, and every tensor of adapter_model.safetensors predicted."""
    code, out, err = run_cli("count", str(ADAPTERS / name), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    saved = json.loads((ADAPTERS / name / "adapter_config.json").read_text(encoding="utf-8"))
    heads = {"SEQ_CLS": "sequence-classification", "TOKEN_CLS": "token-classification", "FEATURE_EXTRACTION": "none"}
    assert data["config"]["head"] == heads[saved["task_type"]]
    assert data["lora"]["r"] == saved["r"] if saved["peft_type"] == "LORA" else "ia3" in data
    assert data["adapter_file"]["clean"] and data["adapter_file"]["held"] == data["adapter_file"]["expected"]
    if saved["peft_type"] == "LORA" and saved["bias"] == "all":  # (#52 item 7: peft writes every bias: the saved
        base = data["base_total"]  # module's frozen original's, and its copy's under its wrapper's name, too)
        biases = sum(p["count"] for p in data["parameters"] if "bias" in p["name"])
        copies = sum(p["count"] for p in data["parameters"] if p["name"].startswith("classifier.") and
                     "bias" in p["name"]) if saved.get("modules_to_save") else 0
        assert data["adapter_file"]["held"] == data["trainable"] + 2 * copies and base > biases
    else:
        assert data["adapter_file"]["held"] == data["trainable"]


@pytest.mark.parametrize("name", ["bert-mlm-decoder-lora-only", "bert-mlm-bias-all-save-cls", "mpnet-mlm-bias-all",
                                  "bert-seqcls-lora-bias"])
def test_an_adapter_on_a_tied_decoder_or_with_every_bias_has_its_file_predicted(name: str) -> None:
    """No task type (the head is the base's class): LoRA on BERT's tied decoder with `lora_only` (peft's file names
    the decoder's bias, the tensor `cls.predictions.bias`), and `bias="all"`, whose file holds every state dict key
    ending in `.bias` — a tied tensor's second name, a saved module's original's — but not MPNet's
    `relative_attention_bias.weight`; and `lora_bias`, lora_B's own bias as `lora_B.bias` (tests/fixtures/adapters/,
    written by peft's save_pretrained)."""
    code, out, err = run_cli("count", str(ADAPTERS / name), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["config"]["head"] == ("sequence-classification" if "seqcls" in name else "mlm")
    assert data["adapter_file"]["clean"] and data["adapter_file"]["held"] == data["adapter_file"]["expected"]


def test_an_adapter_whose_file_disagrees_with_its_config_is_reported_and_exits_1(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(ADAPTERS / "base-bert", tmp_path / "base-bert")
    copy = tmp_path / "adapter"
    shutil.copytree(ADAPTERS / "bert-seqcls-dora", copy)
    config = json.loads((copy / "adapter_config.json").read_text(encoding="utf-8"))
    config["r"] = 8  # the file holds rank-4 tensors
    (copy / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    code, out, _ = run_cli("count", str(copy))
    said = " ".join(out.split())
    assert code == 1 and "differs from the adapter's config" in said
    assert "shape base_model.model.bert.encoder.layer.0.attention.self.query.lora_A.weight: config [8, 16], file " \
           "[4, 16]" in said


@pytest.mark.parametrize(("change", "said"), [
    ({"peft_type": "PREFIX_TUNING"}, "peft_type: 'PREFIX_TUNING': only LORA and IA3 adapters are modelled"),
    ({"target_parameters": ["weight"]}, "target_parameters: ['weight']: changes the adapter's parameters"),
    ({"lora_bias": True, "use_dora": True}, "lora_bias: True: peft refuses a bias on lora_B with DoRA"),
    ({"r": "8"}, "r: '8': must be a whole number"),
    ({"r": 0}, "lora_r: 0: must be a whole number between 1"),
    ({"task_type": "SEQ_2_SEQ_LM"}, "task_type: 'SEQ_2_SEQ_LM': must be one of"),
    ({"base_model_name_or_path": None}, "base_model_name_or_path: is null"),
    ({"base_model_name_or_path": "../nowhere-at-all"}, "nowhere-at-all"),
    ({"target_modules": 7}, "target_modules: 7: must be a list of module names"),
    ({"bias": "some"}, "bias: 'some': must be one of"),
    ({"layer_replication": [[0, 2]]}, "layer_replication: [[0, 2]]: changes the adapter's parameters"),
    ({"exclude_modules": 7}, "exclude_modules: 7: must be a list of module names"),
    ({"exclude_modules": ["query", "value"]}, "exclude_modules query,value (adapter_config.json): holds back every"),
    ({"layers_pattern": "layer"}, "layers_pattern: 'layer': needs layers_to_transform"),
    # a key bert-tui does not know, set, is refused (unset, as later peft releases write their new keys, it is not)
    ({"shard_adapters": {"n": 2}}, "shard_adapters: {'n': 2}: not a key of peft's LoraConfig or IA3Config"),
])
def test_a_bad_adapter_config_is_refused_in_one_line_naming_the_key(tmp_path: Path, change: dict[str, Any],
                                                                      said: str) -> None:
    import shutil

    shutil.copytree(ADAPTERS / "base-bert", tmp_path / "base-bert")
    copy = tmp_path / "adapter"
    shutil.copytree(ADAPTERS / "bert-seqcls-dora", copy)
    config = json.loads((copy / "adapter_config.json").read_text(encoding="utf-8"))
    config.update(change)
    (copy / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    code, out, err = run_cli("count", str(copy))
    assert code == 2 and not out and said in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_an_adapter_s_exclude_modules_and_layers_pattern_are_counted(tmp_path: Path) -> None:
    """DoRA r=4 on query and value, biases `lora_only`, H = 16: a query held back by `exclude_modules` trains
    lora_A (4 × 16), lora_B (16 × 4), its magnitude (16) and its bias (16) fewer — 160 (peft's rules, by hand);
    `layers_pattern` with `layers_to_transform` [2] keeps layer 2's two of the six."""
    import shutil

    shutil.copytree(ADAPTERS / "base-bert", tmp_path / "base-bert")
    copy = tmp_path / "adapter"
    shutil.copytree(ADAPTERS / "bert-seqcls-dora", copy)
    (copy / "adapter_model.safetensors").unlink()  # (its tensors are the whole adapter's)
    _, plain, _ = run_cli("count", str(copy), "--format", "json")
    config = json.loads((copy / "adapter_config.json").read_text(encoding="utf-8"))
    for change, fewer in (({"exclude_modules": ["bert.encoder.layer.0.attention.self.query"]}, 160),
                          ({"layers_to_transform": [2], "layers_pattern": ["layer"]}, 4 * 160)):
        (copy / "adapter_config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
        code, out, err = run_cli("count", str(copy), "--format", "json")
        assert code == 0, err
        assert json.loads(plain)["trainable"] - json.loads(out)["trainable"] == fewer


def test_keys_that_change_no_parameter_or_are_unset_are_counted_as_without_them(tmp_path: Path) -> None:
    """An initialisation (Astra's config, IA3's init), peft's runtime settings, or a key of a later release left
    unset: the count is the adapter's without them."""
    import shutil

    shutil.copytree(ADAPTERS / "base-bert", tmp_path / "base-bert")
    copy = tmp_path / "adapter"
    shutil.copytree(ADAPTERS / "bert-seqcls-dora", copy)
    _, plain, _ = run_cli("count", str(copy), "--format", "json")
    config = json.loads((copy / "adapter_config.json").read_text(encoding="utf-8"))
    config.update({"astra_config": {"ratio": 0.5}, "init_lora_weights": "astra", "runtime_config": {},
                   "a_later_key": None, "another": False})
    (copy / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    code, out, err = run_cli("count", str(copy), "--format", "json")
    assert code == 0 and json.loads(out)["total"] == json.loads(plain)["total"], err


def test_an_adapter_config_that_is_not_json_or_too_large_is_refused(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{not json", encoding="utf-8")
    code, _, err = run_cli("count", str(tmp_path))
    assert code == 2 and "adapter_config.json" in err and "JSON" in err
    (tmp_path / "adapter_config.json").write_bytes(b" " * (2 * 1024 * 1024))
    code, _, err = run_cli("count", str(tmp_path))
    assert code == 2 and "may be at most" in err


def test_an_adapter_s_own_lora_is_not_mixed_with_flags_and_head_overrides_its_task() -> None:
    code, _, err = run_cli("count", str(ADAPTERS / "roberta-token"), "--lora-r", "4")
    assert code == 2 and "drop the --lora-*, --ia3* and --freeze-* flags" in err
    code, out, _ = run_cli("count", str(ADAPTERS / "roberta-token"), "--head", "sequence-classification",
                           "--format", "json")
    data = json.loads(out)  # its classifier (token classification's) is not the one predicted: exit 1
    assert code == 1 and data["model"] == "RobertaForSequenceClassification" and not data["adapter_file"]["clean"]


def test_ia3_on_the_command_line_gives_peft_s_figures_and_refuses_mixing() -> None:
    """bert-base for sequence classification with IA3's defaults (key, value, output.dense; output.dense scaled on
    its input): peft's figures, as the fixture's smaller case checks name by name."""
    code, out, _ = run_cli("count", "--head", "sequence-classification", "--ia3", "--format", "json")
    data = json.loads(out)
    h, i, layers = 768, 3072, 12
    vectors = layers * (h + h + h + i)  # key and value [H, 1]; attention.output.dense [1, H]; output.dense [1, I]
    assert code == 0 and data["trainable"] == vectors + 2 * h + 2
    assert data["total"] == 109_482_240 + 2 * (2 * h + 2) + vectors  # the classifier, its trained copy, IA3
    code, _, err = run_cli("count", "--ia3", "--lora-r", "4")
    assert code == 2 and "name two methods" in err
    code, _, err = run_cli("count", "--ia3-targets", "query", "--ia3-feedforward", "key")
    assert code == 2 and "--ia3-feedforward key: must be a subset of target_modules" in err


FREEZES = [("bert", "sequence-classification"), ("distilbert", "token-classification"),
           ("modernbert", "sequence-classification"), ("deberta-v2", "question-answering"),
           ("mpnet", "mlm"), ("electra", "sequence-classification"), ("electra-projected", "pretraining"),
           ("deberta-v2", "sequence-classification")]  # (its pooler sits beside the body: it trains)


@pytest.mark.live
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the [verify] extra is not installed")
@pytest.mark.parametrize(("family", "head"), FREEZES)
def test_parts_frozen_train_what_torch_trains(family: str, head: str) -> None:
    """The class built on the meta device, its embeddings, first layers or body frozen by requires_grad_(False):
    the parameters left trainable are what the count says."""
    import torch

    from tests.fixtures.generate import build_family_model
    from tui.core.config import FAMILIES
    from tui.core.count.frozen import Freeze, freeze

    projected = family == "electra-projected"  # E ≠ H: its projection sits beside the embeddings, and trains
    family = family.removesuffix("-projected")
    config = BertConfig(**{**SMALL_CONFIG, "model_type": family, "head": head,
                           **({"type_vocab_size": 0} if family == "deberta-v2" else {}),
                           **({"embedding_size": 8} if projected else {})})
    for spec in (Freeze(embeddings=True), Freeze(layers=2), Freeze(body=True), Freeze(True, 1)):
        with torch.device("meta"):
            model = build_family_model(config)
        body = getattr(model, FAMILIES[family].body, model)
        if spec.body:
            body.requires_grad_(False)
        if spec.embeddings:
            body.embeddings.requires_grad_(False)
        stack = body.layers if family == "modernbert" else (body.transformer.layer if family == "distilbert"
                                                             else body.encoder.layer)
        for layer in list(stack)[:spec.layers]:
            layer.requires_grad_(False)
        trains = sum(p.numel() for p in model.parameters() if p.requires_grad)
        assert freeze(build_tree(config), config, spec).trainable == trains, spec


SMALL_CONFIG = {"vocab_size": 96, "hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 2,
                "intermediate_size": 24, "max_position_embeddings": 40}


def test_parts_frozen_on_the_command_line() -> None:
    code, out, _ = run_cli("count", "--head", "sequence-classification", "--freeze-body", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["trainable"] == 2 * 768 + 2 and data["frozen"]["count"] == 109_482_240
    code, _, err = run_cli("count", "--freeze-body")
    assert code == 2 and "--freeze-body: BertModel has no head" in err
    code, _, err = run_cli("count", "--freeze-layers", "13")
    assert code == 2 and "--freeze-layers 13: must be between 0 and num_hidden_layers (12)" in err


def test_a_module_saved_inside_another_saved_is_refused_by_name() -> None:
    """`modules_to_save=["dense", "pooler"]`: peft wraps the pooler, then its copy's `dense` again (a wrapper
    in a wrapper, with names of its own making), which is not modelled: refused, naming both."""
    config = BertConfig(head="none", num_hidden_layers=2)
    with pytest.raises(ConfigError) as refused:
        adapt(build_tree(config), config, Lora(target_modules=("query",), modules_to_save=("dense", "pooler")))
    assert refused.value.field == "modules_to_save"
    assert "saves pooler.dense inside pooler" in refused.value.rule


def test_a_saved_name_that_breaks_peft_s_pattern_is_refused_with_its_flag() -> None:
    """peft reads a `modules_to_save` entry inside a regular expression: `(` breaks it, for LoRA and IA3."""
    for argv, flag in ((("--lora-targets", "query", "--lora-save", "("), "--lora-save"),
                       (("--ia3", "--ia3-save", "["), "--ia3-save")):
        code, out, err = run_cli("count", "--preset", "bert-tiny", *argv)
        assert code == 2 and not out and err.startswith(f"bert-tui count: error: {flag} ") and "Traceback" not in err
        assert "breaks peft's pattern" in err and err.count("\n") == 1


def test_a_bias_on_lora_b_is_counted_and_its_step_refused_by_name() -> None:
    """peft's `lora_bias`: lora_B [out, r] gains a bias [out] that trains — BERT-tiny's query, r = 8, H = 128:
    8·128 + 128·8 + 128 = 2,176 a layer, 2 layers (peft's rule, by hand); compute refuses it by its flag."""
    code, out, err = run_cli("count", "bert-tiny", "--lora-targets", "query", "--lora-b-bias", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["trainable"] == 2 * (8 * 128 + 128 * 8 + 128)
    code, out, err = run_cli("compute", "bert-tiny", "--lora-targets", "query", "--lora-b-bias")
    assert code == 2 and not out and "--lora-b-bias: a bias on lora_B is counted, but its step is not modelled" in err
