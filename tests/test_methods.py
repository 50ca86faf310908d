"""A fine-tuning method is one protocol (`tui.core.count.trained.FineTuning`): LoRA and DoRA, IA3 and parts frozen
each say their name, label, settings and what they make of a model, and why the step does not model them; the
faces hold a method and read it, and peft's defaults come from the families' records."""

from __future__ import annotations

import pytest

from tests.clirun import run

from tui.cli.common import peft_defaults
from tui.core import BertConfig, ConfigError, build_tree
from tui.core.config import FAMILIES
from tui.core.count.frozen import Freeze
from tui.core.count.lora import Ia3, Lora
from tui.core.count.trained import FineTuning, Trained, trained
from tui.core.step.method import method_of

METHODS: list[FineTuning] = [Lora(r=4), Lora(r=4, use_dora=True), Lora(r=4, use_dora=True, lora_dropout=0.1), Ia3(),
                             Freeze(embeddings=True, layers=2)]


@pytest.mark.parametrize("how", METHODS, ids=lambda how: how.name)
def test_each_method_keeps_the_protocol(how: FineTuning) -> None:
    config = BertConfig(num_hidden_layers=3, head="sequence-classification")
    tree = build_tree(config)
    made = trained(tree, config, how)
    assert isinstance(made, Trained) and made.how is how
    assert made.total == made.trainable + made.frozen and 0 < made.trainable < made.total
    assert made.label.startswith(how.label(made.adapted))
    assert how.kind in ("lora", "ia3", "freeze") and how.name
    assert isinstance(how.settings(), dict)
    assert (made.adapted is None) == (how.kind == "freeze")


@pytest.mark.parametrize("how", [Lora(r=4, use_dora=True), Ia3()], ids=lambda how: how.name)
def test_a_method_the_step_does_not_model_is_refused_by_its_own_rule_everywhere(
        how: FineTuning, monkeypatch: pytest.MonkeyPatch) -> None:
    """A method says itself why the step does not model it (`step_refusal`, a method that gains one): the core's
    step refuses it with that rule, and the command line says that rule, exit 2."""
    refusal = ConfigError("use_dora" if how.kind == "lora" else "ia3", True, "not modelled in this test's world")
    monkeypatch.setattr(type(how), "step_refusal", lambda self: refusal)
    config = BertConfig(num_hidden_layers=2)
    with pytest.raises(ConfigError) as refused:
        method_of(build_tree(config), config, how)
    assert (refused.value.field, refused.value.value, refused.value.rule) == (refusal.field, refusal.value,
                                                                              refusal.rule)
    flags = ["--ia3"] if how.kind == "ia3" else ["--lora-r", "4", "--dora"]
    code, _, err = run("compute", "--preset", "bert-base-uncased", *flags)
    assert code == 2 and refusal.rule in err


def test_every_method_s_step_is_modelled() -> None:
    """LoRA, DoRA (with dropout too), IA3 and parts frozen: none refused (checkpointing with a method is the
    workload's refusal, not a method's)."""
    assert [how.name for how in METHODS if how.step_refusal() is None] == ["LoRA", "DoRA", "DoRA", "IA3",
                                                                           "parts frozen"]


def test_peft_defaults_are_the_records_and_the_help_says_them() -> None:
    said = peft_defaults("lora_targets")
    for name, family in FAMILIES.items():
        if family.lora_targets is not None:
            assert f"{name}" in said and ",".join(family.lora_targets) in said
    assert said.endswith("others have none")
    _, help_text, _ = run("count", "--help")
    assert "query_proj,value_proj" in " ".join(help_text.split())


def test_the_records_peft_defaults_are_peft_s_own() -> None:
    """Against peft itself (the `verify` extra): each family's default LoRA and IA3 targets as peft maps them."""
    constants = pytest.importorskip("peft.utils.constants")
    lora = constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    ia3 = constants.TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING
    feedforward = constants.TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING
    for name, family in FAMILIES.items():
        assert family.lora_targets == (tuple(lora[name]) if name in lora else None), name
        assert family.ia3_targets == (tuple(ia3[name]) if name in ia3 else None), name
        assert family.ia3_feedforward == tuple(feedforward.get(name, ())), name


def test_the_compute_pane_s_lora_takes_the_familys_default_targets() -> None:
    """An empty targets field is peft's default for the model's family: DeBERTa's query_proj and value_proj (the
    pane once sent query,value to every family, which DeBERTa refuses)."""
    config = BertConfig(model_type="deberta-v2", num_hidden_layers=2, type_vocab_size=0)
    made = trained(build_tree(config), config, Lora(r=8, target_modules=None))
    assert made.adapted is not None
    assert {name.rsplit(".", 1)[-1] for name in made.adapted.targets} == {"query_proj", "value_proj"}
    with pytest.raises(ConfigError):
        trained(build_tree(config), config, Lora(r=8, target_modules=("query", "value")))


def test_the_workload_is_one_schema() -> None:
    """Every setting of `Workload` is said once (`WORKLOAD`): the CLI's flags and the JSON's keys are its names, and
    the CLI, the pane and the JSON start from the same defaults (the pane once took 2 choices where the CLI took 4)."""
    from dataclasses import fields

    from tui.core.step.workload import WORKLOAD, Workload

    assert [field.name for field in fields(Workload)] == list(WORKLOAD)
    _, help_text, _ = run("compute", "--help")
    for setting in WORKLOAD.values():
        assert setting.flag in help_text
    code, out, _ = run("compute", "--preset", "bert-base-uncased", "--format", "json")
    assert code == 0
    import json

    said = json.loads(out)["workload"]
    assert {name: said[name] for name in WORKLOAD} == {name: setting.default for name, setting in WORKLOAD.items()}
    assert Workload.from_settings({}) == Workload(**{name: s.default for name, s in WORKLOAD.items()})  # type: ignore[arg-type]


def test_a_step_key_that_does_not_touch_the_head_leaves_its_order_derived() -> None:
    """#54: a ModernBERT config from the Hub with `classifier_pooling: mean` was refused the replay even for masked
    LM, where pooling plays no part; its pooling heads stay refused (their order is derived for `cls` only)."""
    from tui.core.families.modernbert import MEAN_POOLING
    from tui.core.step.allocations import covers
    from tui.core.step.workload import Workload

    config = BertConfig(model_type="modernbert", head="mlm", num_hidden_layers=3, step_keys=(MEAN_POOLING,))
    workload = Workload(batch=2, seq=16, device="cuda")
    assert covers(config, workload) is None
    refused = covers(config.replace(head="sequence-classification"), workload)
    assert refused is not None and refused.startswith("classifier_pooling: mean")
