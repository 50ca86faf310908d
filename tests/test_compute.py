"""Compute and memory: the core against torch's own measurements, its closed forms, and `bert-tui compute`.

tests/fixtures/compute.json is written by tests/fixtures/generate_compute.py (the `verify` extra): FLOPs from
FlopCounterMode, activations from saved_tensors_hooks, optimizer states after one real step. Every figure must
match to the FLOP and to the byte.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from math import prod
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.cli import main
from tui.core import BertConfig, ConfigError
from tui.core.config import FAMILIES
from tui.core.poly import value as evaluate
from tui.core.step.allocations import DERIVED_HEADS, covers
from tui.core.step.compute import (
    bytes_form,
    compute,
    fits_replayed,
    flops_form,
    layer_times,
    peak_at,
)
from tui.core.step.workload import (
    ATTENTIONS,
    DEVICES,
    MAX_BATCH,
    OPTIMIZERS,
    PRECISIONS,
    Workload,
)
from tui.formats.compute import batch_says, convention_lines

DERIVED = tuple(FAMILIES)  # every family's allocation order is derived

FIXTURE = Path(__file__).parent / "fixtures" / "compute.json"


@cache
def cases() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"])


def case_id(case: dict[str, Any]) -> str:
    c, w = case["config"], case["workload"]
    flags = [w["mode"], w["precision"], w["attention"], w["optimizer"]]
    flags += [name for name in ("checkpointing", "padding_mask") if w[name]]
    return f"{c['head']}-L{c['num_hidden_layers']}-H{c['hidden_size']}-b{w['batch']}s{w['seq']}-" + "-".join(flags)


FAMILIES_FIXTURE = Path(__file__).parent / "fixtures" / "compute_families.json"


@cache
def family_cases() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(FAMILIES_FIXTURE.read_text(encoding="utf-8"))["cases"])


def family_case_id(case: dict[str, Any]) -> str:
    return f"{case['config']['model_type']}-{case_id(case)}"


def build(case: dict[str, Any]) -> Any:
    config = dict(case["config"])
    if "step_keys" in config:  # JSON has lists; the config keeps (key, value) pairs
        config["step_keys"] = tuple(tuple(pair) for pair in config["step_keys"])
    return compute(BertConfig(**config), Workload(**case["workload"]))


def test_the_fixture_covers_the_grid_the_issue_asks_for() -> None:
    seen = {(c["config"]["head"], c["workload"]["precision"], c["workload"]["attention"],
             c["workload"]["checkpointing"], c["workload"]["padding_mask"], c["workload"]["mode"]) for c in cases()}
    from tui.core.config import HEADS

    for head in HEADS:
        for precision in PRECISIONS:
            for attention in ATTENTIONS:
                for checkpointing in (False, True):
                    for mask in (False, True):
                        assert (head, precision, attention, checkpointing, mask, "train") in seen
    assert {c["workload"]["optimizer"] for c in cases()} == set(OPTIMIZERS)
    assert sum(1 for c in cases() if c["workload"]["mode"] == "inference") >= 18
    assert len({json.dumps(c["config"], sort_keys=True) for c in cases()}) >= 25  # 20+ random configs


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_core_matches_torch_to_the_flop_and_the_byte(case: dict[str, Any]) -> None:
    result, measured = build(case), case["measured"]
    assert result.flops_forward == measured["flops"]["forward"]
    assert result.flops_backward == measured["flops"]["backward"]
    ours = result.flops_by_component()
    theirs = measured["flops"]["forward_by_component"]
    layers = sum(v for k, v in theirs.items() if k.startswith("layer."))
    assert ours.get("layer", 0) == layers
    assert {k: v for k, v in ours.items() if k != "layer" and v} == {
        k: v for k, v in theirs.items() if not k.startswith("layer.")}
    assert result.weights == measured["weights"]
    assert result.gradients == measured["gradients"]
    assert result.optimizer == measured["optimizer"]
    assert result.recompute_peak == measured["activations"]["recompute_peak"]
    _activations_match(result, measured["activations"]["by_component"])


def test_every_family_with_a_step_is_measured_for_every_head_precision_attention_and_choice() -> None:
    """Every head class of every family but BERT (compute.json), in training under each precision × attention ×
    checkpointing × padding mask (XLM-R and CamemBERT, RoBERTa's modules, under fp32 and amp-bf16), and in
    inference; ELECTRA's pretraining without a padding mask (refused with one), ALBERT and MPNet without
    checkpointing (transformers refuses it)."""
    from tui.core.config import FAMILIES
    from tui.core.step.layouts import STEPS

    seen = {(c["config"]["model_type"], c["config"]["head"], c["workload"]["precision"], c["workload"]["attention"],
             c["workload"]["checkpointing"], c["workload"]["padding_mask"], c["workload"]["mode"])
            for c in family_cases()}
    for family in STEPS:
        if family == "bert":
            continue
        precisions = PRECISIONS if family not in ("xlm-roberta", "camembert") else ("fp32", "amp-bf16")
        for head in FAMILIES[family].heads:
            for attention in ATTENTIONS:
                assert (family, head, "fp32", attention, False, False, "inference") in seen
                for precision in precisions:
                    for checkpointing in (False, True) if family not in ("albert", "mpnet") else (False,):
                        for mask in (False, True):
                            if not (family == "electra" and head == "pretraining" and mask):
                                assert (family, head, precision, attention, checkpointing, mask, "train") in seen
    assert any(c["config"].get("embedding_size") == c["config"]["hidden_size"] for c in family_cases())


@cache
def family_groups() -> dict[str, list[dict[str, Any]]]:
    """The families' cases by family and head class (one test each: 1,696 cases as ~60 tests, a test's own cost
    being most of a case's), every failing case named in the failure."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for case in family_cases():
        groups.setdefault(f"{case['config']['model_type']}-{case['config']['head']}", []).append(case)
    return groups


@pytest.mark.parametrize("group", sorted(family_groups()))
def test_every_family_matches_torch_to_the_flop_and_the_byte(group: str) -> None:
    failures = []
    for case in family_groups()[group]:
        try:
            test_core_matches_torch_to_the_flop_and_the_byte(case)
        except AssertionError as error:
            failures.append(f"{family_case_id(case)}: {error}")
    assert not failures, f"{len(failures)} cases differ:\n" + "\n".join(failures[:8])


def _activations_match(result: Any, theirs: dict[str, int]) -> None:
    """Per component; torch gives the 4-D mask a checkpointed layer keeps to layer 0 (it saves it first)."""
    ours = result.activations_by_component()
    uneven = ("stored layers", "first layer", "rotary tables", "local layers")  # layers that differ: in sum
    if any(k in ours for k in uneven):  # (torch gives a shared tensor to the first layer that keeps it)
        layers = sum(v for k, v in theirs.items() if k.startswith("layer."))
        assert layers == sum(ours.get(k, 0) for k in ("layer", "attention mask", *uneven))
        theirs = {k: v for k, v in theirs.items() if not k.startswith("layer.")}
        ours = {k: v for k, v in ours.items() if k not in ("layer", "attention mask", *uneven)}
    per_layer = ours.get("layer", 0) // result.layer_runs
    for index in range(result.layer_runs):
        expected = per_layer + (ours.get("attention mask", 0) if index == 0 else 0)
        assert theirs.get(f"layer.{index}", 0) == expected, f"layer.{index}"
    for component in ("embeddings", "pooler", "head"):
        assert theirs.get(component, 0) == ours.get(component, 0), component


# Closed forms and properties -------------------------------------------------------------------------------------
sizes = st.integers(min_value=1, max_value=4096)


@st.composite
def configs_and_workloads(draw: st.DrawFn) -> tuple[BertConfig, Workload]:
    from tui.core.config import HEADS

    heads = draw(st.integers(1, 64))
    seq = draw(st.integers(1, 4096))
    config = BertConfig(vocab_size=draw(sizes), hidden_size=heads * draw(st.integers(1, 128)),
                        num_hidden_layers=draw(st.integers(1, 200)), num_attention_heads=heads,
                        intermediate_size=draw(sizes), max_position_embeddings=seq + draw(st.integers(0, 512)),
                        head=draw(st.sampled_from(list(HEADS))), num_labels=draw(st.integers(1, 20)))
    train = draw(st.booleans())
    workload = Workload(batch=draw(st.integers(1, 512)), seq=seq, mode="train" if train else "inference",
                        precision=draw(st.sampled_from(PRECISIONS)), optimizer=draw(st.sampled_from(OPTIMIZERS)),
                        checkpointing=train and draw(st.booleans()), attention=draw(st.sampled_from(ATTENTIONS)),
                        padding_mask=draw(st.booleans()), device=draw(st.sampled_from(DEVICES)),
                        choices=draw(st.integers(1, 8)))
    return config, workload


@st.composite
def family_configs_and_workloads(draw: st.DrawFn) -> tuple[BertConfig, Workload]:
    """Any family with a step, any of its heads, any sizes and workload (what a family refuses by name left out)."""
    from tui.core.config import FAMILIES
    from tui.core.step.layouts import STEPS

    config, workload = draw(configs_and_workloads())
    family = draw(st.sampled_from(sorted(STEPS)))
    head = draw(st.sampled_from(sorted(FAMILIES[family].heads)))
    changes: dict[str, Any] = {"model_type": family, "head": head,
                               "max_position_embeddings": config.max_position_embeddings + 2}
    if head == "question-answering":
        changes["num_labels"] = 2
    if family == "electra":
        changes["embedding_size"] = draw(sizes) if draw(st.booleans()) else config.hidden_size
    if family == "mpnet":  # no checkpointing (transformers refuses it)
        workload = replace(workload, checkpointing=False)
    if family == "modernbert":  # rotary embeddings need an even head width
        changes["hidden_size"] = config.num_attention_heads * 2 * draw(st.integers(1, 64))
    if family == "albert" and head == "pretraining":
        changes["num_labels"] = 2  # its sentence-order loss runs with 2 only
    if family == "deberta-v2":  # any flags; the convolution is refused by name
        changes.update({flag: draw(st.booleans()) for flag in (
            "relative_attention", "share_att_key", "pos_att_c2p", "pos_att_p2c", "norm_rel_ebd",
            "position_biased_input")})
        changes.update(conv_kernel_size=0, position_buckets=draw(st.sampled_from([0, draw(st.integers(2, 512))])),
                       max_relative_positions=draw(st.integers(0, 1024)), type_vocab_size=draw(st.integers(0, 4)))
        changes["embedding_size"] = draw(st.sampled_from([0, draw(sizes)]))
    if family == "albert":  # no checkpointing (transformers refuses it)
        changes["embedding_size"] = draw(sizes)
        changes["inner_group_num"] = draw(st.integers(1, 3))
        changes["num_hidden_groups"] = draw(st.integers(1, config.num_hidden_layers))
        workload = replace(workload, checkpointing=False)
    if family == "electra" and head == "pretraining":
        workload = replace(workload, padding_mask=False)
    return config.replace(**changes), workload


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.one_of(configs_and_workloads(), family_configs_and_workloads()))
def test_closed_forms_equal_the_per_component_sums(pair: tuple[BertConfig, Workload]) -> None:
    result = compute(*pair, fits=False, derive=False)  # (the terms; the fits table and peak have tests of their own)
    values = result.values
    runs = prod(values[symbol] for symbol in layer_times(result.config).split("·"))
    flops = result.flops_by_component()
    for component, total in flops.items():
        times = runs if component == "layer" else 1
        assert times * evaluate(flops_form(result, component), values) == total
    activations = result.activations_by_component()
    for component, total in activations.items():
        times = runs if component == "layer" else 1
        assert times * evaluate(bytes_form(result.saved_terms, component), values) == total
    assert evaluate(bytes_form(result.recompute_terms), values) == result.recompute_peak
    assert result.flops_step == result.flops_forward + result.flops_backward
    if result.workload.train:
        assert result.flops_backward == (2 * (result.flops_forward - result.flops_unused) + result.flops_recompute
                                         + result.flops_rescore)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.one_of(configs_and_workloads(), family_configs_and_workloads()))
def test_the_largest_batch_that_fits_is_the_largest(pair: tuple[BertConfig, Workload]) -> None:
    """The fits table by the reserved peak, under the headroom rule: the batch it names peaks within the usable
    memory, one more does not (each phase is affine in b from b = 2: checked here against the reserved peak
    computed afresh)."""
    from tui.core.step.peak import usable

    config, workload = affordable(*pair)
    result = compute(config, workload, gpu_memory=3 * 1024**3)
    assert peak_at(config, workload, workload.batch) == result.reserved_peak
    if result.replayed:
        assert_replayed_fits_are_the_largest(result)
        return
    for fit in result.fits:
        if fit.max_batch:
            assert peak_at(config, workload, fit.max_batch) <= usable(fit.bytes)
        if fit.max_batch < MAX_BATCH:
            assert peak_at(config, workload, fit.max_batch + 1) > usable(fit.bytes)


def test_checkpointing_keeps_less_and_recomputes_one_layer() -> None:
    config = BertConfig(num_hidden_layers=12)
    plain = compute(config, Workload(batch=8, seq=512))
    kept = compute(config, Workload(batch=8, seq=512, checkpointing=True))
    assert kept.activations < plain.activations / 5
    assert kept.flops_step == plain.flops_step + plain.flops_by_component()["layer"]
    assert kept.peak < plain.peak
    assert kept.recompute_peak < plain.activations_by_component()["layer"] / 12


def test_inference_keeps_nothing_for_backward() -> None:
    result = compute(BertConfig(), Workload(batch=8, seq=128, mode="inference"))
    assert result.activations == result.gradients == result.optimizer == result.flops_backward == 0
    assert result.flops_step == result.flops_forward


def test_bad_workloads_name_the_field() -> None:
    with pytest.raises(ConfigError, match="seq = 513: must be at most max_position_embeddings \\(512\\)"):
        compute(BertConfig(), Workload(batch=1, seq=513))
    with pytest.raises(ConfigError, match="batch"):
        Workload(batch=0, seq=1)
    with pytest.raises(ConfigError, match="precision = 'fp8'"):
        Workload(batch=1, seq=1, precision="fp8")
    with pytest.raises(ConfigError, match="checkpointing"):
        Workload(batch=1, seq=1, mode="inference", checkpointing=True)
    with pytest.raises(ConfigError, match="hidden_size = 18: ÷ num_attention_heads must be even"):
        compute(BertConfig(model_type="modernbert", hidden_size=18, num_attention_heads=2), Workload(batch=1, seq=1))
    with pytest.raises(ConfigError, match="checkpointing = True: albert"):
        compute(BertConfig(model_type="albert"), Workload(batch=1, seq=1, checkpointing=True))
    with pytest.raises(ConfigError, match="checkpointing = True: mpnet"):
        compute(BertConfig(model_type="mpnet"), Workload(batch=1, seq=1, checkpointing=True))
    with pytest.raises(ConfigError, match="num_labels = 3: AlbertForPreTraining"):
        compute(BertConfig(model_type="albert", head="pretraining", num_labels=3), Workload(batch=1, seq=1))
    with pytest.raises(ConfigError, match="position_buckets = 1: must not be 1"):
        compute(BertConfig(model_type="deberta-v2", relative_attention=True, position_buckets=1),
                Workload(batch=1, seq=1))
    with pytest.raises(ConfigError, match="embedding_size = 12: must equal hidden_size .* legacy: false"):
        compute(BertConfig(model_type="deberta-v2", head="mlm", hidden_size=8, num_attention_heads=1, embedding_size=12,
                           legacy=False), Workload(batch=1, seq=1))  # (tests/test_live_compute.py: transformers fails)
    with pytest.raises(ConfigError, match="conv_kernel_size = 3"):
        compute(BertConfig(model_type="deberta-v2", conv_kernel_size=3), Workload(batch=1, seq=1))
    with pytest.raises(ConfigError, match="padding_mask = True: ElectraForPreTraining"):
        compute(BertConfig(model_type="electra", head="pretraining"), Workload(batch=1, seq=4, padding_mask=True))
    with pytest.raises(ConfigError, match=r"seq = 511: .* − 2 \(roberta counts positions"):
        compute(BertConfig(model_type="roberta", max_position_embeddings=512), Workload(batch=1, seq=511))


def test_multiple_choice_runs_batch_times_choices_sequences() -> None:
    config = BertConfig(head="multiple-choice")
    two = compute(config, Workload(batch=4, seq=64, choices=2))
    four = compute(config, Workload(batch=4, seq=64, choices=4))
    assert four.values["n"] == 2 * two.values["n"] == 4 * 4 * 64
    assert four.flops_by_component()["layer"] == 2 * two.flops_by_component()["layer"]


# The CLI ----------------------------------------------------------------------------------------------------------
def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["compute", *argv, "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_compute_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "--preset", "bert-base-uncased", "--head", "sequence-classification",
                    "--batch", "32", "--seq", "128", "--precision", "amp-bf16", "--gpu-memory", "12GiB")
    assert data["model"] == "BertForSequenceClassification"
    assert data["config"]["head"] == "sequence-classification"
    workload = data["workload"]
    for key in ("batch", "seq", "mode", "precision", "optimizer", "checkpointing", "attention", "padding_mask",
                "device", "choices", "gpu_memory"):
        assert key in workload
    assert workload["gpu_memory"] == 12 * 1024**3
    assert data["flops"]["step"] == data["flops"]["forward"] + data["flops"]["backward"]
    memory = data["memory_bytes"]
    assert memory["total"] == sum(v for k, v in memory.items() if k not in ("total", "peak", "reserved_peak"))
    assert memory["reserved_peak"] >= memory["peak"]
    assert memory["peak"] == max(phase["peak"] for phase in data["phases"].values())
    assert data["peak_phase"] in data["phases"] and workload["attention"] == "sdpa"
    assert [fit["gib"] for fit in data["fits"]] == [16, 24, 40, 48, 80, 141, 12]
    assert all(isinstance(fit["max_batch"], int) for fit in data["fits"])
    assert all(isinstance(fit["runs_at_batch"], bool) for fit in data["fits"])
    assert {fit["at_batch"] for fit in data["fits"]} <= {"runs", "runs out", "not proven to run"}
    assert any("FlopCounterMode" in line or "flop_counter" in line for line in data["conventions"])
    config = BertConfig(head="sequence-classification")
    expected = compute(config, Workload(batch=32, seq=128, precision="amp-bf16", device="cuda"))
    assert memory["total"] == expected.total and data["flops"]["forward"] == expected.flops_forward


def test_compute_refuses_a_sequence_longer_than_the_positions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compute", "--batch", "1", "--seq", "1024"]) == 2
    err = capsys.readouterr().err
    assert "--seq 1024" in err and "max_position_embeddings (512)" in err and "Traceback" not in err


@pytest.mark.parametrize(("argv", "words"), [
    (["--batch", "0", "--seq", "8"], "--batch 0"),
    (["--batch", "x", "--seq", "8"], "--batch x: must be a whole number"),
    (["--batch", "2", "--seq", "8", "--gpu-memory", "lots"], "--gpu-memory 'lots'"),
    (["--batch", "2", "--seq", "8", "--mode", "inference", "--checkpointing"], "--checkpointing"),
    (["--batch", "2", "--seq", "8", "--model-type", "modernbert", "--hidden-size", "18", "--num-attention-heads",
      "2"], "must be even for a step"),
    (["--batch", "2", "--seq", "8", "--add-cross-attention"], "--add-cross-attention: compute and memory"),
])
def test_compute_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    assert main(["compute", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_compute_formats_show_the_core_figures(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    assert main(["compute", "--preset", "bert-large-uncased", "--batch", "8", "--seq", "512", "--format", fmt]) == 0
    out = capsys.readouterr().out
    result = compute(BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                intermediate_size=4096), Workload(batch=8, seq=512, device="cuda"))
    assert f"{result.flops_step:,}" in out or str(result.flops_step) in out
    assert f"{result.total:,}" in out or str(result.total) in out
    assert f"{result.peak:,}" in out or str(result.peak) in out


def test_the_manual_shows_the_worked_example_as_the_command_prints_it() -> None:
    """The manual's worked example (BERT-large, 32 × 512, amp-bf16, 24 GiB) is a generated block: tests/docs.py
    writes what the command prints and tests/test_docs.py fails when it is stale."""
    page = (Path(__file__).parents[1] / "docs" / "compute.md").read_text(encoding="utf-8")
    assert "<!-- generated -->\n```console\n$ bert-tui compute bert-large-uncased --head sequence-classification " \
           "--batch 32 --seq 512 \\\n      --precision amp-bf16 --gpu-memory 24GiB\n" in page


@settings(max_examples=60, deadline=None, derandomize=True)
@given(configs_and_workloads())
def test_the_compute_text_fits_80_columns(pair: tuple[BertConfig, Workload]) -> None:
    """Every line of `bert-tui compute`'s text fits an 80-column terminal (it ran to 123 and bars broke)."""
    from tui.formats.compute import compute_text

    text = compute_text(compute(*affordable(*pair), gpu_memory=3 * 1024**3), "bert-base-uncased")
    assert max(len(line) for line in text.splitlines()) <= 80


def affordable(config: BertConfig, workload: Workload) -> tuple[BertConfig, Workload]:
    """`config` at 6 layers at most where its fits are replayed: the search replays every card's boundary,
    seconds on the strategies' 200-layer configs, which the replay's own tests need not (those above: their
    subject is the rule or the text; the replay's, tests/test_allocation*.py and below, go deep enough)."""
    if fits_replayed(config, workload, None):
        return config.replace(num_hidden_layers=min(config.num_hidden_layers, 6)), workload
    return config, workload


@pytest.mark.parametrize(("device", "attention"), [("cuda", "sdpa"), ("cuda", "eager"), ("cpu", "sdpa")])
def test_adamws_step_counters_are_said_to_live_on_the_host_on_cuda_only(device: str, attention: str) -> None:
    result = compute(BertConfig(), Workload(batch=2, seq=8, device=device, attention=attention))
    said = any("step counters live on the host" in line for line in convention_lines(result))
    assert said == (device == "cuda")


@pytest.mark.parametrize(("model_type", "changes", "key"), [
    ("bert", {"hidden_act": "relu"}, "hidden_act relu"),
    ("bert", {"hidden_dropout_prob": 0.0}, "hidden_dropout_prob 0.0"),
    ("bert", {"attention_probs_dropout_prob": "x"}, "attention_probs_dropout_prob x"),
    ("albert", {"hidden_dropout_prob": 0.1}, "hidden_dropout_prob 0.1"),
    ("distilbert", {"activation": "relu"}, "activation relu"),
    ("modernbert", {"global_attn_every_n_layers": 2}, "global_attn_every_n_layers 2"),
    ("modernbert", {"local_attention": 64}, "local_attention 64"),
    ("modernbert", {"mlp_dropout": 0.1}, "mlp_dropout 0.1"),
])
def test_a_config_whose_step_is_not_modelled_is_counted_and_refused_by_compute(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], model_type: str, changes: dict[str, Any],
        key: str) -> None:
    """Activations and dropouts change what a step saves and no parameter: the count stands, compute names the
    file's key (the class defaults, as every preset has them, compute as usual)."""
    modelled = {"bert": {"hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
                "albert": {"hidden_act": "gelu_new", "hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0},
                "distilbert": {"activation": "gelu", "dropout": 0.1, "attention_dropout": 0.1},
                "modernbert": {"hidden_activation": "gelu", "classifier_pooling": "cls", "local_attention": 128,
                               "global_attn_every_n_layers": 3, "mlp_dropout": 0.0}}[model_type]
    for name, values in (("modelled", modelled), ("changed", {**modelled, **changes})):
        (tmp_path / f"{name}.json").write_text(json.dumps({"model_type": model_type, **values}), encoding="utf-8")
    assert main(["count", str(tmp_path / "changed.json")]) == 0
    assert main(["compute", str(tmp_path / "modelled.json"), "--batch", "2", "--seq", "8"]) == 0
    capsys.readouterr()
    assert main(["compute", str(tmp_path / "changed.json"), "--batch", "2", "--seq", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {key}: changes what a training step saves" in err, err


def test_every_family_counted_has_a_step() -> None:
    """Compute covers every model type the counts cover (each checked against torch by the fixtures)."""
    from tui.core.config import FAMILIES
    from tui.core.step.layouts import STEPS

    assert set(STEPS) == set(FAMILIES)
    assert {case["config"]["model_type"] for case in family_cases()} == set(FAMILIES) - {"bert"}


def test_modernbert_base_as_the_hub_has_it_computes_with_its_mean_pooling(capsys: pytest.CaptureFixture[str]) -> None:
    """Its config.json asks `classifier_pooling: mean`: modelled for the classifiers (measured in the fixture),
    no matter to the masked LM it names; a pooling compute does not model is refused where it matters only."""
    config = Path(__file__).parent / "fixtures" / "hub" / "ModernBERT-base" / "config.json"
    assert main(["compute", str(config), "--batch", "2", "--seq", "16"]) == 0
    assert main(["compute", str(config), "--head", "sequence-classification", "--batch", "2", "--seq", "16"]) == 0
    out = capsys.readouterr().out
    assert "ModernBertForSequenceClassification" in out
    from tui.core.step.compute import compute as core_compute
    from tui.io.hf_config import load_hf_config

    mean = load_hf_config(config).config.replace(head="sequence-classification")
    assert ("classifier_pooling", "mean") in mean.step_keys
    pooled = core_compute(mean, Workload(batch=2, seq=16))
    cls = core_compute(mean.replace(step_keys=()), Workload(batch=2, seq=16))
    assert pooled.activations_by_component()["head"] != cls.activations_by_component()["head"]
    with pytest.raises(ConfigError, match="classifier_pooling = 'max'"):
        core_compute(mean.replace(step_keys=(("classifier_pooling", "max"),)), Workload(batch=2, seq=16))
    core_compute(mean.replace(head="mlm", step_keys=(("classifier_pooling", "max"),)), Workload(batch=2, seq=16))


@pytest.mark.parametrize("family", DERIVED)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_model_in_16_bits_has_its_fits_replayed_too(family: str, precision: str) -> None:
    """The model in bfloat16 or float16 with eager attention: every family's fits come from the replay, half the
    float32 run's bytes and more than half its batch (LayerNorm's statistics and some losses stay float32)."""
    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                        head="mlm").as_family(family)
    workload = Workload(batch=8, seq=256, precision=precision, attention="eager", device="cuda")
    result = compute(config, workload, gpu_memory=5 * 1024**3)
    assert result.replayed
    assert_replayed_fits_are_the_largest(result)
    wide = compute(config, replace(workload, precision="fp32"), gpu_memory=5 * 1024**3)
    assert all(narrow.max_batch > fit.max_batch for narrow, fit in zip(result.fits, wide.fits, strict=True))


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "distilbert", "albert", "mpnet"])
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_with_a_padding_mask_fits_are_replayed(family: str, attention: str) -> None:
    """A padding mask (`masking_utils`): the fits come from the replay, never above the unpadded run's
    (the mask made once a forward; eager adds it to every layer's scores, sdpa makes a float bias a layer)."""
    from tui.core.step.allocations import events_at

    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                        head="mlm").as_family(family)
    workload = Workload(batch=8, seq=256, precision="fp32", attention=attention, device="cuda", padding_mask=True)
    result = compute(config, workload, gpu_memory=5 * 1024**3)
    assert result.replayed
    assert_replayed_fits_are_the_largest(result)
    plain = compute(config, replace(workload, padding_mask=False), gpu_memory=5 * 1024**3)
    assert all(padded.max_batch <= fit.max_batch for padded, fit in zip(result.fits, plain.fits, strict=True))
    assert len(events_at(config, workload, 8)) > len(events_at(config, plain.workload, 8))


def test_a_batch_whose_fourth_step_runs_out_is_not_claimed() -> None:
    """ELECTRA's generator, MLM at 128 tokens, on 16 GiB: three steps of batch 138 run, but the third still moved
    blocks and the fourth runs out of memory; the run is replayed until it settles, so 137 is the answer."""
    from tui.core.step.allocations import events_at, replayed
    from tui.core.step.allocator import replay
    from tui.core.step.peak import usable
    from tui.presets import find_preset

    config = find_preset("electra-base-generator").config.replace(head="mlm")
    workload = Workload(batch=8, seq=128, precision="fp32", attention="eager", device="cuda", loop="hand-written")
    room = usable(16 << 30)
    assert replay(events_at(config, workload, 138), room).out_of_memory is None  # three steps: no sign of it
    out = replayed(config, workload, 138, room)
    assert out.out_of_memory is not None and out.steps == 4
    assert replayed(config, workload, 137, room).out_of_memory is None
    assert compute(config, workload).fits[0].max_batch == 137


def test_modernbert_multiple_choice_is_refused_by_the_replay_and_fits_by_the_rule() -> None:
    """Its [CLS] rows are picked by a tensor index the recorder cannot run: not derived, said so, the peak rule
    answers (a ModernBERT masked LM at the same size is replayed)."""
    config = BertConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=2, intermediate_size=96,
                        head="multiple-choice").as_family("modernbert")
    workload = Workload(batch=2, seq=80, precision="fp32", device="cuda")
    assert "multiple choice" in (covers(config, workload) or "")
    assert not compute(config, workload, gpu_memory=2 * 1024**3).replayed
    assert compute(config.replace(head="mlm"), workload, gpu_memory=2 * 1024**3).replayed


@pytest.mark.parametrize(("head", "precision", "card", "largest", "below"), [
    ("mlm", "fp32", 80, 518, {484: "not proven to run", 490: "not proven to run", 496: "not proven to run"}),
    ("sequence-classification", "amp-bf16", 80, 1546, {1537: "runs out", 1545: "runs out"}),
])
def test_a_batch_below_the_largest_that_runs_can_fail_to_run_and_the_output_says_so_for_its_own(
        head: str, precision: str, card: int, largest: int, below: dict[int, str]) -> None:
    """Fragmentation is not monotone in the batch (README's "What fits"): BERT-base at 128 tokens runs at the
    table's batch and not at the next, nor at some batches below it (classification: they run out; the masked
    LM's never settle, and a segment of their logits to spare does not fit). The step's own batch is replayed
    on each card, not read off the table: its line says what it does there, and that a larger batch runs."""
    from tui.core.step.allocations import runs, verdict
    from tui.core.step.peak import usable

    config = BertConfig(head=head)
    workload = Workload(batch=32, seq=128, precision=precision, attention="sdpa", device="cuda")
    room = usable(card * 1024**3)
    fit = next(fit for fit in compute(config, workload).fits if fit.gib == card)
    assert fit.max_batch == largest and fit.runs_at_batch and fit.at_batch == "runs"
    assert runs(config, workload, largest, room) and verdict(config, workload, largest + 1, room) == "runs out"
    for batch, does in below.items():
        assert verdict(config, workload, batch, room) == does, batch
        shown = compute(config, replace(workload, batch=batch), gpu_memory=card * 1024**3)
        asked = next(fit for fit in shown.fits if fit.asked)
        assert asked.max_batch == largest and asked.at_batch == does and not asked.runs_at_batch
        said = " ".join(" ".join(batch_says(shown)).split())
        group = said.split(f"{does} on ")[1].split(";")[0].split(" (")[0].removesuffix(" GiB")
        assert str(card) in group.replace(" and ", ", ").split(", "), said
        assert f"a larger batch runs: {largest:,} on {card} GiB" in said


def test_the_batch_line_answers_every_card_as_the_replay_does() -> None:
    """`runs_at_batch` is the replay's answer at the step's own batch on every card (from the run without a cap
    where it never reserved more, else replayed under the card), and the rule's batch ≤ max_batch elsewhere."""
    from tui.core.step.allocations import replayed, runs
    from tui.core.step.peak import usable

    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                        head="mlm")
    answers = set()
    for batch in (8, 150, 400, 2000):
        workload = Workload(batch=batch, seq=256, precision="fp32", attention="sdpa", device="cuda")
        result = compute(config, workload)
        uncapped = replayed(config, workload, batch)
        for fit in result.fits:
            room = usable(fit.bytes)
            assert fit.runs_at_batch == runs(config, workload, batch, room), (batch, fit)
            assert fit.runs_at_batch == runs(config, workload, batch, room, uncapped), (batch, fit)
            answers.add((fit.runs_at_batch, uncapped.peak_reserved <= room))
    assert answers == {(True, True), (False, False)} | ({(True, False)} & answers)  # (both kinds of card met)
    cpu = compute(config, Workload(batch=300, seq=256, device="cpu"))
    assert [fit.at_batch for fit in cpu.fits] == ["fits" if 300 <= fit.max_batch else "does not fit"
                                                 for fit in cpu.fits]


def test_fits_by_the_peak_rule_on_cuda_say_why_they_are_not_replayed_and_what_the_rule_has_claimed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a config's order is not derived a CUDA step's fits are the peak rule's, and the output says so and
    why (a fine-tuning method's order is derived: its fits are replayed); the rule is not an allocator: where a
    step is replayed it has claimed more than runs (ModernBERT-base classification, float32, eager attention, the
    Trainer's loop)."""
    import tui.core.step.compute as step_compute
    from tui.core.count.families import build_tree
    from tui.core.count.lora import Lora
    from tui.core.step.compute import not_replayed
    from tui.core.step.method import method_of

    config = BertConfig(head="mlm")
    workload = Workload(batch=8, seq=128, precision="fp32", attention="sdpa", device="cuda")
    tree = build_tree(config)
    lora = compute(config, workload, tree=tree, method=method_of(tree, config, Lora(r=8)))
    assert lora.replayed and not_replayed(lora) is None
    data = json.loads(_cli_json(["compute", "--head", "mlm", "--batch", "8", "--lora-r", "8"]))
    assert data["fits_allocator"]["model"] == "replayed" and "not_replayed" not in data["fits_allocator"]
    assert not_replayed(compute(config, workload)) is None
    assert not_replayed(compute(config, replace(workload, device="cpu"))) is None
    untied = config.replace(tie_word_embeddings=False)
    assert not_replayed(compute(untied, workload)) == covers(untied, workload)

    modern = BertConfig(head="sequence-classification").as_family("modernbert")
    trainer = Workload(batch=8, seq=256, precision="fp32", attention="eager", device="cuda", loop="trainer")
    replayed_fits = [fit.max_batch for fit in compute(modern, trainer).fits]
    step_compute._fits.cache_clear()
    monkeypatch.setattr(step_compute, "fits_replayed", lambda *args: False)  # (the rule's answers, same step)
    rule_fits = [fit.max_batch for fit in compute(modern, trainer).fits]
    step_compute._fits.cache_clear()
    assert any(rule > replayed for rule, replayed in zip(rule_fits, replayed_fits, strict=True))


def _cli_json(argv: list[str]) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv + ["--format", "json"]) == 0
    return out.getvalue()


def assert_replayed_fits_are_the_largest(result: Any) -> None:
    from tui.core.step.allocations import runs
    from tui.core.step.peak import usable

    for fit in result.fits:
        room = usable(fit.bytes)
        if fit.max_batch:
            assert runs(result.config, result.workload, fit.max_batch, room), fit
        if fit.max_batch < MAX_BATCH:
            assert not runs(result.config, result.workload, fit.max_batch + 1, room), fit


FLOAT32_CASES = [(family, head) for family in DERIVED for head in DERIVED_HEADS if head in FAMILIES[family].heads
                 if covers(BertConfig(head=head).as_family(family), Workload(8, 256, precision="fp32", device="cuda"))
                 is None]
FLOAT32_RUNS = (("eager", "course"), ("sdpa", "course"), ("sdpa", "hand-written"), ("eager", "trainer"))


@pytest.mark.parametrize(("family", "head", "attention", "loop"), [
    (family, head, *FLOAT32_RUNS[(i + j) % 4]) for i, (family, head) in enumerate(FLOAT32_CASES) for j in (0, 2)])
def test_where_the_allocation_order_is_derived_fits_come_from_its_replay(family: str, head: str, attention: str,
                                                                           loop: str) -> None:
    """Every family whose allocation order is derived (`tui.core.step.allocations.covers`), in float32: every
    size's batch runs (every step, replayed through the caching allocator until it settles) within the usable
    bytes, one more runs out; the reserved peak is the replay's. Each family and head under two of the four
    attentions and loops, in turn (each order itself is checked against recorded ones in
    tests/test_allocation_order.py; what this checks is the search over it)."""
    from tui.core.step.allocations import replayed

    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                        head=head).as_family(family)
    workload = Workload(batch=8, seq=256, precision="fp32", attention=attention, device="cuda", loop=loop)
    result = compute(config, workload, gpu_memory=5 * 1024**3)
    assert result.replayed
    assert result.reserved_peak == replayed(config, workload, 8).peak_pinned
    assert_replayed_fits_are_the_largest(result)
    assert all(0 < fit.max_batch < MAX_BATCH for fit in result.fits)
    assert fits_replayed(config, replace(workload, precision="amp-bf16"), None)  # (autocast: derived too)


AMP_CASES = [(family, head) for family in DERIVED for head in DERIVED_HEADS if head in FAMILIES[family].heads
             if covers(BertConfig(head=head).as_family(family), Workload(8, 256, precision="amp-bf16", device="cuda"))
             is None]
AMP_RUNS = (("amp-bf16", "sdpa"), ("amp-fp16", "eager"))


@pytest.mark.parametrize(("family", "head", "precision", "attention"), [
    (family, head, *AMP_RUNS[i % 2]) for i, (family, head) in enumerate(AMP_CASES)])
def test_under_autocast_fits_come_from_the_replay_too(family: str, head: str, precision: str, attention: str) -> None:
    """Autocast (every family): every size's batch runs within the usable bytes, one more runs out; the reserved
    peak is the replay's (bf16 with sdpa, fp16 with eager, in turn)."""
    from tui.core.step.allocations import replayed

    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                        head=head).as_family(family)
    workload = Workload(batch=8, seq=256, precision=precision, attention=attention, device="cuda")
    result = compute(config, workload, gpu_memory=5 * 1024**3)
    assert result.replayed
    assert result.reserved_peak == replayed(config, workload, 8).peak_pinned
    assert_replayed_fits_are_the_largest(result)


INFERENCE_CASES = [(family, head) for family in DERIVED for head in DERIVED_HEADS if head in FAMILIES[family].heads
                   if covers(BertConfig(head=head).as_family(family),
                             Workload(8, 256, precision="fp32", device="cuda", mode="inference")) is None]
INFERENCE_RUNS = (("fp32", "sdpa", "course"), ("amp-bf16", "eager", "hand-written"), ("bf16", "sdpa", "course"))


@pytest.mark.parametrize(("family", "head", "precision", "attention", "loop"), [
    (family, head, *INFERENCE_RUNS[i % 3]) for i, (family, head) in enumerate(INFERENCE_CASES)])
def test_inference_fits_come_from_the_replay_of_its_forwards(family: str, head: str, precision: str, attention: str,
                                                             loop: str) -> None:
    """Inference (every family and head): forward after forward replayed, every size's batch runs within the
    usable bytes, one more runs out; the reserved peak is the replay's, and the run settles."""
    from tui.core.step.allocations import replayed

    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                        head=head).as_family(family)
    workload = Workload(batch=8, seq=256, precision=precision, attention=attention, device="cuda", loop=loop,
                        mode="inference")
    result = compute(config, workload, gpu_memory=2 * 1024**3)
    assert result.replayed
    run = replayed(config, workload, 8)
    assert result.reserved_peak == run.peak_pinned and run.steady
    assert_replayed_fits_are_the_largest(result)
    assert all(0 < fit.max_batch for fit in result.fits)


def test_without_fits_the_terms_are_the_full_answer_s() -> None:
    """`fits=False` skips the fits table and the allocator's replay, nothing else: every term is the same."""
    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, head="mlm")
    workload = Workload(batch=8, seq=128, precision="amp-bf16", device="cuda")
    full, terms = compute(config, workload), compute(config, workload, fits=False)
    assert full.replayed and full.fits and not terms.replayed and terms.fits == ()
    assert (terms.peak, terms.activations, terms.flops_step) == (full.peak, full.activations, full.flops_step)


def test_the_courses_loop_holds_the_last_steps_outputs_through_the_next_forward() -> None:
    """The course's loop deletes nothing: where the peak rule gives the fits (an untied decoder is not replayed),
    the forward holds the last step's logits beside its own, so its peak and fits are the hand-written loop's or
    worse; where the order is derived the replay hands them on (tests/test_allocation_order.py)."""
    from tui.core.step.peak import LAST

    config = BertConfig(head="mlm", tie_word_embeddings=False)
    runs = {loop: compute(config, Workload(batch=16, seq=512, device="cuda", checkpointing=True, loop=loop))
            for loop in ("hand-written", "course")}
    assert not any(result.replayed for result in runs.values())
    forward = {loop: next(phase for phase in result.phases if phase.name == "forward") for loop, result in runs.items()}
    assert dict(forward["course"].held)[LAST] == 16 * 512 * config.vocab_size * 4
    assert LAST not in dict(forward["hand-written"].held)
    assert forward["course"].peak == forward["hand-written"].peak + 16 * 512 * config.vocab_size * 4
    assert all(c.max_batch <= h.max_batch for c, h in zip(runs["course"].fits, runs["hand-written"].fits))
    assert runs["course"].reserved_peak >= runs["hand-written"].reserved_peak


def test_an_inference_forward_holds_what_its_loop_and_autocast_keep() -> None:
    """Inference (the peak rule, checked against recorded forwards in tests/fixtures/allocation.json): the
    course's loop keeps the last forward's logits through this one; autocast its 16-bit weight copies; a causal
    LM its key/value cache, which the course's loop keeps with the logits. The text says which loop."""
    from tui.core.step.peak import LAST, phases
    from tui.formats.compute import COURSE_INFERENCE, compute_text

    n, config = 8 * 128, BertConfig(head="mlm")
    held = {}
    for loop, precision, head in (("hand-written", "fp32", "mlm"), ("course", "fp32", "mlm"),
                                  ("course", "amp-bf16", "mlm"), ("course", "fp32", "causal-lm")):
        result = compute(config.replace(head=head), Workload(batch=8, seq=128, mode="inference", precision=precision,
                                                              device="cuda", loop=loop))
        held[loop, precision, head] = dict(phases(result)[0].held)  # (the rule's: the shown peak is derived)
        assert (COURSE_INFERENCE in compute_text(result, "BERT")) == (loop == "course")
    assert LAST not in held["hand-written", "fp32", "mlm"]
    assert held["course", "fp32", "mlm"][LAST] == n * config.vocab_size * 4
    copies = held["course", "amp-bf16", "mlm"]["autocast's 16-bit copies of the Linear weights"]
    assert 2 * 85_000_000 < copies < 2 * 110_000_000  # every Linear of BERT-base, the tied decoder's too
    cache = held["course", "fp32", "causal-lm"]["the key/value cache it returns (use_cache)"]
    assert cache == 2 * 12 * n * 768 * 4
    assert held["course", "fp32", "causal-lm"][LAST] == n * config.vocab_size * 4 + cache


@pytest.mark.parametrize(("family", "head"), [("modernbert", "sequence-classification"), ("bert", "causal-lm")])
def test_a_step_moved_across_one_sequence_is_the_step_measured_there(family: str, head: str) -> None:
    """Terms of one sequence only (ModernBERT's eager attention keeping Wqkv's whole output at batch 1, the
    causal-LM labels' view): the fits table's batches 2 and 3, read off a batch-1 step, are those steps measured
    afresh, and batch 1 read off batch 2 is batch 1's."""
    from tui.core.step.compute import at_batch
    from tui.core.step.peak import phases

    config = BertConfig(head=head, num_hidden_layers=2).as_family(family)
    for precision in ("fp32", "bf16"):
        one, two = (Workload(batch=b, seq=32, precision=precision, attention="eager", device="cuda") for b in (1, 2))
        for start, batch, fresh in ((one, 2, two), (one, 3, replace(two, batch=3)), (two, 1, one)):
            moved = at_batch(compute(config, start, fits=False), batch)
            measured = compute(config, fresh, fits=False)
            assert moved.activations == measured.activations
            assert moved.phase_peaks() == {phase.name: phase.peak for phase in phases(measured)}  # (the rule's)


def test_electra_pretraining_with_a_mask_is_refused_at_one_token_too() -> None:
    """ElectraForPreTraining's loss reads the attention mask whenever one is given (its active tokens: a boolean
    index kept for the backward), a single token included, where the mask pads nothing."""
    config = BertConfig(head="pretraining", num_hidden_layers=1).as_family("electra")
    for seq in (1, 4):
        with pytest.raises(ConfigError) as refused:
            compute(config, Workload(batch=1, seq=seq, padding_mask=True))
        assert refused.value.field == "padding_mask"
    assert compute(config, Workload(batch=1, seq=1, padding_mask=True, mode="inference")).activations == 0
