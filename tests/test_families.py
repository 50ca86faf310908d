"""A family is one record (`tui.core.families`): the records against the real thing, a family made here counted and
computed with nothing else edited, and the rest of the code held to reading records rather than naming families."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tui.cli import main
from tui.core import BertConfig, ConfigError, build_tree
from tui.core.config import EXTRA_FIELDS, FAMILIES, HEADS, SIZE_FIELDS
from tui.core.count.families import LAYOUTS, role_name
from tui.core.families import ROBERTA, Family, register
from tui.core.fields import SWITCHES
from tui.core.step.compute import compute
from tui.core.step.layouts import STEPS
from tui.core.step.workload import Workload
from tui.io.hf_config import load_hf_config, to_hf_keys

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests/fixtures/transformers_params.json").read_text())["cases"]
# The modules that may name a family: its own (tui/core/families/, a run or step layout of its own) and the two
# registries of layouts by model type.
OWN = re.compile(r"^tui/core/families/|^tui/core/step/(steps|allocations)_[a-z]+\.py$")
REGISTRIES = {"tui/core/count/families.py", "tui/core/step/layouts.py"}


def _named_families(path: Path) -> list[tuple[int, str]]:
    """The string literals in `path`'s code (not its docstrings) that are a model type."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and node.value in FAMILIES and id(node) not in docstrings]


def test_only_a_familys_own_modules_and_the_layout_registries_name_a_family() -> None:
    """Everything else reads the record (`config.family`): a family is never tested by its name."""
    named = {}
    for path in sorted((ROOT / "tui").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if not OWN.search(relative) and _named_families(path):
            named[relative] = _named_families(path)
    assert set(named) <= REGISTRIES, {name: hits for name, hits in named.items() if name not in REGISTRIES}
    assert set(named) == REGISTRIES  # (the scan finds what it is looking for)


def test_the_scan_sees_a_family_named_in_code_but_not_in_a_docstring(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""bert is named here."""\n\ndef f(c):\n    """albert too."""\n    return c == "electra"\n')
    assert _named_families(module) == [(5, "electra")]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_record_names_the_classes_transformers_builds(name: str) -> None:
    """Every head class the record names is one transformers built for the fixtures (tests/fixtures/generate.py),
    and every class recorded for the family is one of the record's."""
    family = FAMILIES[name]
    recorded = {case["class"] for case in FIXTURE if case["config"].get("model_type", "bert") == name}
    assert set(family.classes) == recorded


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_record_is_made_of_known_parts(name: str) -> None:
    family = FAMILIES[name]
    assert set(family.heads) <= set(HEADS)
    assert set(family.switches) <= set(SWITCHES)
    assert set(family.fields) <= set(EXTRA_FIELDS)
    assert set(family.lacks) <= set(SIZE_FIELDS)
    assert set(family.defaults) <= {*SIZE_FIELDS, *family.fields}
    assert set(family.aliases.values()) <= set(SIZE_FIELDS)
    assert set(family.words) <= set(family.switches)
    assert name in LAYOUTS and name in STEPS


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_records_layer_stack_and_peft_targets_are_modules_its_layout_builds(name: str) -> None:
    """The layer stack holds L layers, and peft's default targets are modules of every layer (the walk and peft
    would find nothing otherwise)."""
    family = FAMILIES[name]
    config = BertConfig(model_type=name, num_hidden_layers=3, embedding_size=0)
    names = [param.name for param in build_tree(config).root.params()]
    stacked = {int(match[1]) for p in names if (match := re.match(rf"^{re.escape(family.layer_stack)}\.(\d+)\.", p))}
    assert stacked == (set(range(3)) if not family.forward.shared_layers else {0})
    for target in (*(family.lora_targets or ()), *(family.ia3_targets or ())):
        layers = {int(m[1]) for p in names if (m := re.match(rf"^.*\.(\d+)\..*\b{re.escape(target)}\.weight$", p))}
        assert layers, (name, target)


@pytest.mark.parametrize("name", [name for name, family in FAMILIES.items() if family.roles])
def test_a_records_roles_name_its_layers_as_berts(name: str) -> None:
    """Read as BERT's, a family's layer parameters are BERT's layer parameters (the names `diff` matches by)."""
    config = BertConfig(model_type=name, num_hidden_layers=2, num_hidden_groups=1, inner_group_num=2)
    bert = {param.name for param in build_tree(BertConfig(num_hidden_layers=2)).root.params()}
    layers = [param.name for param in build_tree(config).root.params() if "layer" in param.name]
    read = {role_name(layer, config) for layer in layers}
    matched = {layer for layer in read if layer.startswith("encoder.layer.")}
    assert matched and matched <= bert, sorted(matched - bert)


# A family made here: RoBERTa's code under another name, prefix and body, with a config class default of its own.
TOY = Family("toy-roberta", "ToyRoberta", "toy", ROBERTA.heads, switches=ROBERTA.switches,
             defaults={"vocab_size": 1000}, own_classes=ROBERTA.own_classes, bert_names=True,
             forward=ROBERTA.forward, lora_targets=ROBERTA.lora_targets)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Family:
    """The toy family registered as a new family is: its record, its counting layout, its step layout (RoBERTa's)."""
    monkeypatch.setitem(FAMILIES, TOY.name, TOY)
    monkeypatch.setitem(LAYOUTS, TOY.name, LAYOUTS["roberta"])
    monkeypatch.setitem(STEPS, TOY.name, STEPS["roberta"])
    return TOY


def test_register_adds_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui.core.families.FAMILIES", dict(FAMILIES))
    from tui.core import families

    register(TOY)
    assert families.FAMILIES[TOY.name] is TOY


def test_a_family_made_in_the_test_is_counted(toy: Family) -> None:
    """Counted as its record and layout say: RoBERTa's parameters (checked against transformers) under its own
    body and class names."""
    config = BertConfig(model_type=toy.name, head="sequence-classification", vocab_size=1000)
    reference = BertConfig(model_type="roberta", head="sequence-classification", vocab_size=1000)
    tree, roberta = build_tree(config), build_tree(reference)
    assert config.hf_class == "ToyRobertaForSequenceClassification"
    assert tree.total == roberta.total
    assert [p.name for p in tree.root.params()] == [p.name.replace("roberta.", "toy.", 1)
                                                    for p in roberta.root.params()]
    assert tree.groups() == roberta.groups()  # (its body's parts counted in their groups)
    with pytest.raises(ConfigError, match="no pretraining class"):
        config.replace(head="pretraining")


def test_a_family_made_in_the_test_reads_its_config_json(toy: Family, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": toy.name, "architectures": ["ToyRobertaForMaskedLM"],
                                "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                                "intermediate_size": 128}))
    loaded = load_hf_config(path)
    assert (loaded.config.model_type, loaded.config.head, loaded.config.vocab_size) == (toy.name, "mlm", 1000)
    assert any("vocab_size not in the file: HF's default 1000" in note for note in loaded.notes)
    assert to_hf_keys(loaded.config)["vocab_size"] == 1000


def test_a_family_made_in_the_test_is_computed(toy: Family) -> None:
    """Its step is RoBERTa's (every figure, the replayed fits included) for the same sizes."""
    workload = Workload(batch=4, seq=64, precision="amp-bf16", device="cuda")
    config = BertConfig(model_type=toy.name, head="mlm", vocab_size=1000, num_hidden_layers=2)
    result = compute(config, workload, gpu_memory=2**30)
    reference = compute(config.replace(model_type="roberta"), workload, gpu_memory=2**30)
    assert (result.flops_forward, result.flops_backward) == (reference.flops_forward, reference.flops_backward)
    assert (result.saved_terms, result.phases) == (reference.saved_terms, reference.phases)
    assert result.replayed and result.fits == reference.fits
    assert [fit.max_batch for fit in result.fits if fit.asked] > [0]


def test_a_family_made_in_the_test_is_a_choice_of_the_command_line(toy: Family,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", "--model-type", toy.name, "--head", "mlm", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "ToyRobertaForMaskedLM"  # (the default preset's sizes, as for any --model-type)
    assert data["total"] == build_tree(BertConfig(model_type="roberta", head="mlm")).total
