"""The step of a fine-tuning method (LoRA as peft runs it, parts frozen) against torch, to the FLOP and the byte.

tests/fixtures/compute_methods.json is written by tests/fixtures/generate_methods.py (the `verify` extra and peft):
FLOPs from FlopCounterMode on the meta device, the activations saved for backward from saved_tensors_hooks by
component on CPU, and the bytes of weights, gradients and optimizer states after one real step, for each family's
heads × precision × attention × padding mask under LoRA (with and without dropout, with biases, on the attention
and the FFN Linear layers) and under frozen embeddings, layers and bodies, plus seeded random cases.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tui.core import BertConfig
from tui.core.config import FAMILIES, HEADS, ConfigError
from tui.core.count.families import build_tree
from tui.core.count.frozen import Freeze
from tui.core.count.lora import Ia3, Lora, adapt, adapt_ia3
from tui.core.step.compute import compute, not_replayed
from tui.core.step.layouts import STEPS
from tui.core.step.method import Method, method_of
from tui.core.step.peak import phases
from tui.core.step.workload import PRECISIONS, Workload

from .test_fixtures_regenerate import script

FIXTURES = Path(__file__).parent / "fixtures"
GENERATOR = FIXTURES / "generate_methods.py"


@cache
def cases() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads((FIXTURES / "compute_methods.json").read_text(encoding="utf-8"))["cases"])


def case_id(case: dict[str, Any]) -> str:
    c, w = case["config"], case["workload"]
    how = next(iter(case["method"]))
    keys = ",".join(f"{k}={v}" for k, v in case["method"][how].items())
    mask = "-mask" if w["padding_mask"] else ""
    return (f"{c.get('model_type', 'bert')}-{c['head']}-H{c['hidden_size']}-b{w['batch']}s{w['seq']}-"
            f"{w['precision']}-{w['attention']}{mask}-{how}({keys})")


def method(config: BertConfig, spec: dict[str, Any]) -> Method:
    return method_of(build_tree(config), config, script(GENERATOR).how_of(spec))


def build(case: dict[str, Any]) -> tuple[Any, Method]:
    config = BertConfig(**case["config"])
    chosen = method(config, case["method"])
    return compute(config, Workload(**case["workload"]), method=chosen), chosen


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_core_matches_torch_under_the_method(case: dict[str, Any]) -> None:
    (result, _), measured = build(case), case["measured"]
    assert (result.flops_forward, result.flops_backward) == (measured["flops"]["forward"],
                                                             measured["flops"]["backward"])
    ours = {k: v for k, v in result.flops_by_component().items() if v}
    theirs = measured["flops"]["forward_by_component"]
    if case["config"].get("model_type") == "albert":  # torch names its stored layers, the core each run
        ours, theirs = (_layers_summed(flops) for flops in (ours, theirs))
    assert ours == theirs
    assert result.activations_by_component() == measured["activations"]["by_component"]
    assert result.recompute_peak == measured["activations"]["recompute_peak"]
    assert (result.weights, result.gradients, result.optimizer) == (measured["weights"], measured["gradients"],
                                                                     measured["optimizer"])


def _layers_summed(by_component: dict[str, int]) -> dict[str, int]:
    layers = sum(n for k, n in by_component.items() if k.startswith("layer."))
    return {**{k: n for k, n in by_component.items() if not k.startswith("layer.")}, "layers": layers}


def test_the_generator_lists_exactly_the_fixtures_cases_in_order() -> None:
    recorded = [{key: case[key] for key in ("config", "workload", "method")} for case in cases()]
    assert script(GENERATOR).case_list() == recorded


def test_the_fixture_covers_every_family_head_precision_and_method() -> None:
    seen = {(c["config"].get("model_type", "bert"), c["config"]["head"], c["workload"]["precision"],
             json.dumps(c["method"], sort_keys=True)) for c in cases()}
    specs = {json.dumps(spec, sort_keys=True) for spec in script(GENERATOR).SPECS}
    for family in STEPS:
        heads = HEADS if family == "bert" else FAMILIES[family].heads
        assert {head for f, head, _, _ in seen if f == family} == set(heads), family
    assert {precision for f, _, precision, _ in seen if f == "bert"} == set(PRECISIONS)
    for head in HEADS:  # every method BERT's head can run, under fp32 and amp-bf16
        for spec in specs:
            if head != "none" or "body" not in spec:
                assert {p for f, h, p, s in seen if (f, h, s) == ("bert", head, spec)} >= {"fp32", "amp-bf16"}


def test_the_methods_trainable_parameters_are_peft_s() -> None:
    config = BertConfig(head="sequence-classification")
    lora = Lora(r=8, target_modules=("query", "value"))
    chosen = method(config, {"lora": {"r": 8, "target_modules": ["query", "value"]}})
    adapted = adapt(build_tree(config), config, lora)
    assert (chosen.trainable, chosen.parameters) == (adapted.trainable, adapted.total)
    assert chosen.adapters == 2 * 12 * 2 * 8 * 768  # A (r × H) and B (H × r) on query and value, 12 layers


def test_lora_trains_fewer_bytes_than_the_full_step_and_keeps_the_weights() -> None:
    config = BertConfig(head="sequence-classification")
    workload = Workload(batch=8, seq=128, precision="amp-bf16")
    full = compute(config, workload)
    lora = compute(config, workload, method=method(config, {"lora": {"r": 8, "target_modules": ["query", "value"]}}))
    assert lora.gradients < full.gradients / 100 and lora.optimizer < full.optimizer / 100
    assert lora.weights > full.weights  # the model whole, and the adapters beside it
    assert lora.flops_forward > full.flops_forward  # the adapters' products
    assert lora.flops_backward < full.flops_backward  # no weight gradient for the frozen Linear layers


@pytest.mark.parametrize(("family", "head", "workload", "spec", "field"), [
    ("bert", "none", {}, {"lora": {"target_modules": ["position_embeddings", "query"]}}, "target_modules"),
    ("bert", "mlm", {}, {"lora": {"target_modules": ["word_embeddings", "query"], "use_dora": True}}, "use_dora"),
    ("bert", "mlm", {}, {"freeze": {}}, "freeze"),
    ("bert", "none", {}, {"freeze": {"body": True}}, "freeze_body"),
    ("bert", "token-classification", {}, {"lora": {"target_modules": "all-linear"}}, "target_modules"),
])
def test_what_the_step_does_not_model_is_refused_by_name(family: str, head: str, workload: dict[str, Any],
                                                         spec: dict[str, Any], field: str) -> None:
    config = BertConfig(model_type=family, head=head)
    with pytest.raises(ConfigError) as refused:
        compute(config, Workload(batch=2, seq=8, **workload), method=method(config, spec))
    assert refused.value.field == field


def test_a_frozen_body_keeps_no_layer_activations() -> None:
    config = BertConfig(head="sequence-classification")
    result = compute(config, Workload(batch=4, seq=64), method=method(config, {"freeze": {"body": True}}))
    assert not any(k.startswith("layer.") and v for k, v in result.activations_by_component().items())
    assert result.gradients == 4 * sum(size for _, size in result.method.sizes)  # the head alone, in float32


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_frozen_count_is_what_torch_computes_gradients_for(precision: str) -> None:
    """`count --freeze-*`'s trainable elements against the gradients torch held after the step (4 or 2 bytes
    each): tied tensors included (XLM-R's MLM head yields the decoder's name, which frozen embeddings freeze)."""
    from tui.core.count.frozen import freeze

    checked = set()
    for case in cases():
        if "freeze" in case["method"] and case["workload"]["precision"] == precision:
            config = BertConfig(**case["config"])
            trainable = freeze(build_tree(config), config, Freeze(**case["method"]["freeze"])).trainable
            assert trainable * (4 if precision == "fp32" else 2) == case["measured"]["gradients"], case_id(case)
            checked.add((config.model_type, config.head))
    assert ("xlm-roberta", "mlm") in checked or precision == "bf16"


# The CLI ---------------------------------------------------------------------------------------------------------
def run_json(*argv: str) -> dict[str, Any]:
    from .clirun import run

    code, out, err = run(*argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_compute_takes_the_method_and_says_what_trains_as_count_does() -> None:
    argv = ("roberta-base", "--head", "sequence-classification", "--lora-r", "8", "--lora-targets", "query,value")
    data = run_json("compute", *argv, "--batch", "8", "--seq", "256", "--precision", "amp-bf16")
    counted = run_json("count", *argv)
    assert (data["parameters"], data["trainable"]) == (counted["total"], counted["trainable"]) == (125_534_212,
                                                                                                  887_042)
    config = BertConfig(model_type="roberta", head="sequence-classification", vocab_size=50265,
                        max_position_embeddings=514, type_vocab_size=1)
    core = compute(config, Workload(batch=8, seq=256, precision="amp-bf16", device="cuda"),
                   method=method(config, {"lora": {"r": 8, "target_modules": ["query", "value"]}}))
    assert data["method"] == "LoRA r=8 on query, value"
    assert data["flops"]["forward"] == core.flops_forward and data["memory_bytes"]["peak"] == core.peak
    assert list(data["activations_by_component"]) == [*(f"layer.{i}" for i in range(12)), "head"]
    assert "trainable" not in run_json("compute", "roberta-base", "--batch", "8", "--seq", "256")


def test_a_frozen_step_is_cheaper_than_the_full_one_on_the_command_line() -> None:
    full = run_json("compute", "bert-base-uncased", "--head", "mlm", "--batch", "8", "--seq", "128")
    cold = run_json("compute", "bert-base-uncased", "--head", "mlm", "--batch", "8", "--seq", "128",
                    "--freeze-embeddings", "--freeze-layers", "6")
    assert cold["flops"]["backward"] < full["flops"]["backward"]
    assert cold["memory_bytes"]["activations"] < full["memory_bytes"]["activations"]
    assert cold["fits"][0]["max_batch"] >= full["fits"][0]["max_batch"]
    assert all(cold["activations_by_component"].get(f"layer.{i}", 0) == 0 for i in range(5))


def test_an_adapter_folder_computes_with_its_own_lora() -> None:
    data = run_json("compute", str(FIXTURES / "adapters" / "roberta-token"), "--batch", "4", "--seq", "16")
    assert data["method"] == "LoRA r=2 on query, value" and data["model"] == "RobertaForTokenClassification"


@pytest.mark.parametrize(("argv", "words"), [
    (["albert-base-v2", "--lora-r", "4", "--lora-targets", "query", "--checkpointing"],
     "--checkpointing: albert's classes do not support activation checkpointing"),
    (["bert-base-uncased", "--lora-r", "4", "--lora-dropout", "1"], "--lora-dropout '1': must be a number from 0"),
    (["bert-base-uncased", "--lora-r", "4", "--lora-dropout", "nan"], "--lora-dropout 'nan': must be a number"),
    ([str(FIXTURES / "adapters" / "roberta-token"), "--lora-r", "4"], "names its own method"),
])
def test_compute_refuses_what_it_does_not_model_in_one_line(argv: list[str], words: str) -> None:
    from .clirun import run

    code, out, err = run("compute", *argv, "--batch", "2", "--seq", "8")
    assert code == 2 and not out and words in err and "Traceback" not in err


@pytest.mark.parametrize("spec", script(GENERATOR).SPECS, ids=lambda spec: json.dumps(spec))
def test_the_method_s_text_fits_80_columns(spec: dict[str, Any]) -> None:
    from tui.formats.compute import compute_text

    config = BertConfig(head="sequence-classification")
    for workload in (Workload(batch=8, seq=128, precision="amp-bf16", device="cuda"), Workload(batch=2, seq=16)):
        text = compute_text(compute(config, workload, method=method(config, spec)), "bert-base-uncased")
        assert max(len(line) for line in text.splitlines()) <= 80
        assert method(config, spec).label in text


def _everything(config: BertConfig) -> Method:
    """A method that trains every parameter: its step must be the full step's."""
    from dataclasses import replace

    from tui.core.step.method import method_of

    tree = build_tree(config)
    cold = method_of(tree, config, Freeze(body=config.head != "none", embeddings=config.head == "none"))
    return replace(cold, trained=frozenset(p.name for p in tree.root.params()), unreached=(0, 0))


@pytest.mark.parametrize("family", STEPS)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_method_that_trains_everything_is_the_full_step(family: str, device: str) -> None:
    """The walk against the full step's own terms, on every head, precision, attention and mask, CUDA's
    conventions included (the CPU fixtures cannot show those): the same saved bytes and the same FLOPs."""
    from tui.core.config import FAMILIES

    fixture_config = script(FIXTURES / "generate_compute.py").family_config
    for head in FAMILIES[family].heads:
        config = fixture_config(family, head)
        for precision in PRECISIONS:
            for attention in ("eager", "sdpa"):
                for mask in (False, True):
                    workload = Workload(batch=3, seq=5, precision=precision, attention=attention,
                                        padding_mask=mask, device=device)
                    try:
                        full = compute(config, workload, fits=False, derive=False)  # (the terms only: no replay)
                    except ConfigError:
                        continue  # refused for the full step too (ELECTRA's pre-training with a mask)
                    walked = compute(config, workload, method=_everything(config), fits=False, derive=False)
                    said = f"{head} {precision} {attention} mask={mask}"
                    assert walked.activations == full.activations, said
                    assert (walked.flops_forward, walked.flops_backward) == (full.flops_forward,
                                                                             full.flops_backward), said


def test_the_full_step_stands_beside_the_method_s() -> None:
    """Full fine-tuning and the method side by side: the CLI's text and JSON give the same step fully trained."""
    from .clirun import run

    argv = ("compute", "bert-base-uncased", "--head", "sequence-classification", "--lora-r", "8", "--batch", "16",
            "--seq", "128", "--precision", "amp-bf16", "--gpu-memory", "24GiB")
    data = run_json(*argv)
    full = run_json(*argv[:4], *argv[6:])
    assert "full_fine_tuning" not in full
    beside = data["full_fine_tuning"]
    assert (beside["trainable"], beside["flops_step"], beside["peak"]) == (
        full["parameters"], full["flops"]["step"], full["memory_bytes"]["peak"])
    assert [fit["max_batch"] for fit in beside["fits"]] == [fit["max_batch"] for fit in full["fits"]]
    assert [fit["runs_at_batch"] for fit in beside["fits"]] == [fit["runs_at_batch"] for fit in full["fits"]]
    code, text, _ = run(*argv)
    asked = next(fit["max_batch"] for fit in full["fits"] if fit["asked"])
    assert code == 0 and f"full fine-tuning: trains {full['parameters']:,}" in " ".join(text.split())
    assert f"24 GiB fits batch ≤ {asked:,}" in " ".join(text.split())


# A linear each family has, where peft names no default LoRA targets for it (`Family.lora_targets` None)
OWN_TARGETS = {"distilbert": ("q_lin", "v_lin"), "albert": ("query", "value"), "mpnet": ("q", "v"),
               "modernbert": ("Wqkv",), "camembert": ("query", "value")}


@pytest.mark.parametrize(("family", "checkpointing"), [(family, False) for family in sorted(FAMILIES)] + [
    (family, True) for family in sorted(FAMILIES) if not STEPS[family].no_checkpointing])
@pytest.mark.parametrize("how", ["lora", "freeze"])
def test_what_fits_under_a_method_is_replayed_on_every_family(family: str, how: str, checkpointing: bool) -> None:
    """#54: a method's fits come from replaying its own allocation order (checked against peft's model, event by
    event, in tests/test_allocation_order.py), never from the peak rule, on every family; with checkpointing
    too, where the family's classes checkpoint (transformers refuses it on the others: refused by name)."""
    head = "token-classification"
    config = BertConfig(head=head, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=1000).as_family(family)
    targets = FAMILIES[family].lora_targets or OWN_TARGETS[family]
    chosen = method(config, {"lora": {"r": 4, "target_modules": list(targets)}} if how == "lora" else
                    {"freeze": {"layers": 0 if family == "albert" else 1, "embeddings": True}})
    run = Workload(8, 64, precision="amp-bf16", attention="sdpa", device="cuda", checkpointing=checkpointing)
    result = compute(config, run, method=chosen)
    assert result.replayed and not_replayed(result) is None
    if not checkpointing:  # (a method keeps fewer gradients, optimizer states and activations; checkpointing keeps
        # the embeddings' output and its gradient for it, which on so small a model outweighs what it saves)
        full = compute(config, run)
        assert all(ours.max_batch > theirs.max_batch for ours, theirs in zip(result.fits, full.fits, strict=True))


def test_lora_dropout_from_the_command_line_keeps_a_mask_and_a_copy_per_adapted_module() -> None:
    """`--lora-dropout P` is peft's lora_dropout: the method says it, and the step keeps each adapted module's
    dropout mask and dropped input (the same step as an adapter folder with lora_dropout > 0)."""
    argv = ("compute", "bert-base-uncased", "--head", "sequence-classification", "--batch", "8", "--seq", "64",
            "--precision", "amp-bf16", "--lora-r", "8")
    plain, dropped = run_json(*argv), run_json(*argv, "--lora-dropout", "0.1")
    assert dropped["method"] == "LoRA r=8 on query, value, dropout 0.1"
    config = BertConfig(head="sequence-classification")
    with_dropout = method(config, {"lora": {"r": 8, "lora_dropout": 0.1}})
    expected = compute(config, Workload(8, 64, precision="amp-bf16", attention="sdpa", device="cuda"),
                       method=with_dropout)
    assert dropped["memory_bytes"]["activations"] == expected.activations
    assert dropped["memory_bytes"]["activations"] > plain["memory_bytes"]["activations"]


def test_ia3_computes_from_flags_or_its_adapter_folder_and_its_fits_are_replayed() -> None:
    """IA3 (peft's defaults for BERT: key, value, output.dense scaled on its input) from `--ia3` or an IA3 adapter
    folder: the same method, its trainable count peft's, its fits the replay's."""
    flags = run_json("compute", "bert-base-uncased", "--head", "sequence-classification", "--batch", "8", "--seq",
                     "64", "--ia3")
    config = BertConfig(head="sequence-classification")
    peft = adapt_ia3(build_tree(config), config, Ia3())
    assert flags["trainable"] == peft.trainable and flags["fits_allocator"]["model"] == "replayed"
    assert flags["method"].startswith("IA3")
    folder = run_json("compute", str(FIXTURES / "adapters" / "bert-seqcls-ia3"), "--batch", "4", "--seq", "16")
    assert folder["method"].startswith("IA3") and folder["fits_allocator"]["model"] == "replayed"


def test_the_fixture_measures_ia3_on_every_family_and_head() -> None:
    seen = {(c["config"].get("model_type", "bert"), c["config"]["head"], c["workload"]["precision"])
            for c in cases() if "ia3" in c["method"]}
    for family in STEPS:
        heads = HEADS if family == "bert" else FAMILIES[family].heads
        assert {head for f, head, _ in seen if f == family} == set(heads), family
    assert {precision for _, _, precision in seen} == {"fp32", "bf16", "amp-bf16"}


def test_ia3_on_a_square_module_s_input_or_output_are_two_methods() -> None:
    """The same vector's size whether it scales attention.output.dense's input or its output: the two steps keep
    different tensors, and neither answer is taken for the other (the methods differ, caches and all)."""
    config = BertConfig(head="sequence-classification", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=1000)
    on_input = method(config, {"ia3": {"target_modules": ["attention.output.dense"],
                                       "feedforward_modules": ["attention.output.dense"]}})
    on_output = method(config, {"ia3": {"target_modules": ["attention.output.dense"], "feedforward_modules": []}})
    assert on_input.trainable == on_output.trainable and on_input != on_output
    run = Workload(8, 64, precision="bf16", attention="sdpa", device="cuda")
    assert compute(config, run, method=on_input).activations != compute(config, run, method=on_output).activations


def test_dora_computes_from_flags_or_its_adapter_folder_and_its_fits_are_replayed() -> None:
    """DoRA (use_dora, no dropout) from `--dora` or a DoRA adapter folder: peft's trainable count, its fits the
    replay's; in float32 where a projection meets the residual as it is (DistilBERT's out_lin) and on ModernBERT's
    fused Wqkv too, where their gradients are summed apart (tests/test_engine_sums.py)."""
    flags = run_json("compute", "bert-base-uncased", "--head", "sequence-classification", "--batch", "8", "--seq",
                     "64", "--lora-r", "8", "--dora", "--precision", "amp-bf16")
    config = BertConfig(head="sequence-classification")
    assert flags["trainable"] == adapt(build_tree(config), config, Lora(r=8, use_dora=True)).trainable
    assert flags["method"].startswith("DoRA r=8") and flags["fits_allocator"]["model"] == "replayed"
    folder = run_json("compute", str(FIXTURES / "adapters" / "bert-seqcls-dora"), "--batch", "4", "--seq", "16")
    assert folder["method"].startswith("DoRA") and folder["fits_allocator"]["model"] == "replayed"
    distil = run_json("compute", "--preset", "distilbert-base-uncased", "--head", "mlm", "--batch", "4", "--seq", "16",
                      "--lora-r", "4", "--lora-targets", "q_lin,v_lin,out_lin", "--dora", "--precision", "fp32")
    assert distil["fits_allocator"]["model"] == "replayed"
    modern = run_json("compute", "--preset", "ModernBERT-base", "--head", "mlm", "--batch", "4", "--seq", "16",
                      "--lora-r", "4", "--lora-targets", "Wqkv", "--dora", "--precision", "fp32")
    assert modern["fits_allocator"]["model"] == "replayed"


def test_checkpointing_a_frozen_body_says_it_costs_more_than_it_saves() -> None:
    """#54: with nothing in the layers trained, checkpointing still runs every layer's backward (transformers'
    enable_input_require_grads) and recomputes it: the CLI says so, with the core's two figures."""
    from tui.core.units import short_flops

    from .clirun import run

    config = BertConfig(head="sequence-classification")
    chosen = method(config, {"freeze": {"body": True}})
    workload = Workload(batch=8, seq=64, device="cuda")
    with_it = compute(config, replace(workload, checkpointing=True), method=chosen, fits=False)
    without = compute(config, workload, method=chosen, fits=False)
    assert with_it.flops_step > 2 * without.flops_step
    argv = ["bert-base-uncased", "--head", "sequence-classification", "--batch", "8", "--seq", "64"]
    code, _, err = run("compute", *argv, "--freeze-body", "--checkpointing")
    said = " ".join(err.split())
    assert code == 0 and "every layer runs its backward and is recomputed" in said
    assert f"({short_flops(with_it.flops_step)} a step; without --checkpointing {short_flops(without.flops_step)})" \
        in said
    code, _, err = run("compute", *argv, "--freeze-layers", "3", "--checkpointing")  # (the layers after train)
    assert code == 0 and "every layer runs its backward" not in err


@pytest.mark.parametrize(("spec", "leaf"), [({"freeze": {"embeddings": True}}, True),
                                            ({"lora": {"r": 4, "target_modules": ["query", "value"]}}, True),
                                            ({"lora": {"r": 4, "target_modules": ["word_embeddings", "query"]}}, False),
                                            ({"freeze": {"layers": 1}}, False)])
def test_the_peak_rule_holds_the_embeddings_output_checkpointing_makes_a_leaf(spec: dict[str, Any],
                                                                               leaf: bool) -> None:
    """transformers' enable_input_require_grads: where the word table does not train (nor LoRA on it), its lookup's
    output (n·E, the weights' dtype) is a leaf held through the forward and the backward, and with its gradient
    through the optimizer's step in a loop that keeps the graph past it; not where the table trains."""
    config = BertConfig(head="sequence-classification", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=1000)
    chosen = method(config, spec)
    workload = Workload(batch=4, seq=16, device="cuda", checkpointing=True, loop="hand-written")
    expected = 4 * 16 * 64 * 4 if leaf else 0  # n·E float32 elements
    result = compute(config, workload, method=chosen, fits=False)
    held = {phase.name: dict(phase.held) for phase in phases(result)}  # (the rule's: the peak shown is derived)
    label = "the word embeddings' output, a leaf (checkpointing)"
    assert held["forward"].get(label, 0) == held["backward"].get(label, 0) == expected
    assert held["optimizer"].get(f"{label}'s gradient", 0) == expected
    plain = compute(config, replace(workload, checkpointing=False), method=chosen, fits=False)
    assert all(label not in dict(phase.held) for phase in phases(plain))


@pytest.mark.parametrize("head", ["sequence-classification", "mlm"])
@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_a_frozen_body_s_peak_holds_one_layer_running_as_inference_does(head: str, precision: str) -> None:
    """A frozen body's layers save nothing: each runs as an inference forward, its FFN's intermediate and the hidden
    states around it live at once, which the rule's "one hidden state in flight" left out (SC at 32 × 128 in
    float32: 30 % under). Against the derived allocation order (checked event by event against recorded runs,
    tests/test_allocation_order.py), its cuBLAS workspaces left out as `memory_bytes.peak` leaves them: within 5 %."""
    from tui.core.step import allocations
    from tui.core.step.allocator import replay

    config = BertConfig(head=head)
    chosen = method(config, {"freeze": {"body": True}})
    workload = Workload(batch=32, seq=128, precision=precision, device="cuda", loop="hand-written")
    run = allocations.emulator(config, workload, method=chosen)
    events = run.run(3)
    derived = replay(events).peak_allocated - allocations.workspaces_of(run)
    rule = max(phase.peak for phase in phases(compute(config, workload, method=chosen, fits=False, derive=False)))
    assert abs(rule / derived - 1) < 0.05


@pytest.mark.parametrize(("model", "target", "module"), [
    ("bert-base-uncased", "decoder", "cls.predictions.decoder"),  # its weight is the word table's
    ("xlm-roberta-base", "word_embeddings", "roberta.embeddings.word_embeddings"),  # the head's decoder owns it
    ("xlm-roberta-base", "decoder", "lm_head.decoder"),
])
def test_lora_on_a_module_holding_a_tied_tensor_is_counted_and_its_step_refused_by_name(model: str, target: str,
                                                                                        module: str) -> None:
    """peft adapts a module whose tensor is tied to another's (the count follows it: tests/fixtures/peft_params.json);
    the step is modelled for LoRA on the word table that owns the tie only, so it is refused naming the module."""
    from .clirun import run

    code, out, err = run("count", model, "--head", "mlm", "--lora-targets", target, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["lora"]["adapted"] == [module]
    code, out, err = run("compute", model, "--head", "mlm", "--lora-targets", target)
    assert code == 2 and not out and f"--lora-targets {module}: holds a tensor tied to another module's" in err, err
