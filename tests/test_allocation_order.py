"""The step's allocation order derived by the core (`tui.core.step.allocations`) against runs recorded with CUDA
faked (tests/fixtures/allocation_order.json, `python tests/fixtures/generate_allocation.py --orders`): the same
allocations and releases, of the same sizes, in the same order (each run of releases in one order: autocast's cache
releases in its hash table's), for three steps; so the same replay through the caching allocator, under any cap."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.allocation.compare import as_recorded, normalized
from tests.test_fixtures_regenerate import script
from tui.core.config import FAMILIES, BertConfig
from tui.core.count.families import build_tree
from tui.core.count.lora import Lora
from tui.core.step import allocations
from tui.core.step.allocations import (
    _ops_at,
    carried,
    covers,
    events,
    events_at,
    replayed,
    runs,
    spare,
    steps_at,
)
from tui.core.step.allocator import (
    HANDED_ON_STEPS_LIMIT,
    CachingAllocator,
    allocation_size,
    prepare,
    replay,
    round_size,
)
from tui.core.step.method import Method, method_of
from tui.core.step.tape import is_contiguous, view_strides
from tui.core.step.workload import Workload

DERIVED = tuple(FAMILIES)  # every family's allocation order is derived

DATA = json.loads((Path(__file__).parent / "fixtures" / "allocation_order.json").read_text(encoding="utf-8"))
CASES = {case["case"]: case for case in DATA["cases"]}
GENERATE_METHODS = Path(__file__).parent / "fixtures" / "generate_methods.py"


def method_of_case(case: dict[str, Any]) -> Method | None:
    """The case's fine-tuning method (recorded with peft's model, or parts frozen), as the core takes it."""
    if "method" not in case:
        return None
    config = BertConfig(**case["config"])
    return method_of(build_tree(config), config, script(GENERATE_METHODS).how_of(case["method"]))


def derived(case: dict[str, Any]) -> list[tuple[str, int, int]]:
    """The case's derived order as a recording with fake tensors shows it: where the engine sums a gradient apart
    (its first a view, or kept by another holder), the recorder cannot tell and takes the sum for the first's
    (`as_recorded`; what the engine does is checked on real tensors: tests/test_engine_sums.py)."""
    config, workload = BertConfig(**case["config"]), Workload(**case["workload"])
    assert covers(config, workload, method_of_case(case)) is None
    run = allocations.emulator(config, workload, method=method_of_case(case))
    return as_recorded(run.run(case["steps"]), run.tape.sums)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_derived_order_is_the_recorded_one_event_by_event(name: str) -> None:
    case = CASES[name]
    ours, recorded = normalized(derived(case)), normalized(case["events"])
    first = next((i for i, (a, b) in enumerate(zip(ours, recorded)) if a != b), None)
    assert first is None, f"event {first}: derived {ours[first]}, recorded {recorded[first]}"
    assert len(ours) == len(recorded)


@pytest.mark.parametrize("name", sorted(CASES))
def test_its_replay_is_the_recorded_runs_under_any_cap(name: str) -> None:
    case = CASES[name]
    ours, recorded = derived(case), [tuple(event[:3]) for event in case["events"]]
    free = replay(recorded)
    assert replay(ours) == free
    for cap in (free.peak_reserved, free.peak_reserved - 1, 40 << 20):  # runs at its peak; one byte less, no
        assert replay(ours, cap) == replay(recorded, cap)


def test_what_is_not_derived_yet_is_refused_by_name() -> None:
    base, run = BertConfig(head="mlm"), Workload(8, 128, precision="fp32", attention="eager", device="cuda")
    assert covers(base, run) is None
    assert covers(base.as_family("roberta"), run) is None and covers(base.as_family("camembert"), run) is None
    assert covers(base.as_family("modernbert"), run) is None
    modern_choice = base.replace(head="multiple-choice").as_family("modernbert")
    assert "ModernBERT's multiple choice" in (covers(modern_choice, run) or "")
    mean = base.replace(head="sequence-classification").as_family("modernbert").replace(
        step_keys=(("classifier_pooling", "mean"),))
    assert "classifier_pooling: mean" in (covers(mean, run) or "")
    assert "untied decoder" in (covers(base.replace(tie_word_embeddings=False), run) or "")
    assert covers(base.replace(head="sequence-classification", tie_word_embeddings=False), run) is None
    assert covers(base.replace(head="causal-lm"), run) is None
    assert covers(base.replace(head="question-answering"), run) is None
    assert covers(base.replace(head="pretraining"), run) is None and covers(base.replace(head="none"), run) is None
    assert "num_labels = 3" in (covers(base.replace(head="question-answering", num_labels=3), run) or "")
    assert covers(base.as_family("deberta-v2"), run) is None
    deberta_classifier = base.replace(head="sequence-classification").as_family("deberta-v2")
    assert "nonzero()" in (covers(deberta_classifier, run) or "")
    assert covers(deberta_classifier.replace(num_labels=1), run) is None
    assert "convolution" in (covers(base.as_family("deberta-v2").replace(conv_kernel_size=3), run) or "")
    unread = base.as_family("deberta-v2").replace(relative_attention=True, share_att_key=True, pos_att_c2p=False,
                                                 pos_att_p2c=False)  # (no score reads the projections)
    lora = method_of(build_tree(unread), unread, Lora(r=4))  # (peft's default: query_proj, value_proj)
    assert "a projection nothing reads" in (covers(unread, run, lora) or "")
    assert covers(unread, run, method_of(build_tree(unread), unread, Lora(r=4, target_modules=("value_proj",)))) is None
    assert covers(unread.replace(pos_att_c2p=True), run, method_of(build_tree(unread), unread, Lora(r=4))) is None
    for precision in ("amp-bf16", "amp-fp16"):  # autocast: every family
        amp = replace(run, precision=precision)
        assert all(covers(base.as_family(family), amp) is None for family in DERIVED)
        assert covers(base.as_family("electra"), replace(amp, padding_mask=True)) is None
    checkpointed = replace(run, checkpointing=True)  # (every family whose classes checkpoint: not ALBERT, MPNet)
    assert [family for family in DERIVED if covers(base.as_family(family), checkpointed)] == ["albert", "mpnet"]
    assert "do not checkpoint" in (covers(base.as_family("albert"), checkpointed) or "")
    assert all(covers(base, replace(run, optimizer=optimizer)) is None for optimizer in ("sgd", "sgd-momentum"))
    inference = replace(run, mode="inference")  # (inference forwards: every family, every head)
    assert all(covers(base.as_family(family), inference) is None for family in DERIVED)
    assert covers(deberta_classifier, inference) is None  # (no loss, no nonzero())
    assert "multiple choice" in (covers(modern_choice, inference) or "")
    assert covers(base, replace(run, precision="bf16")) is None and covers(base, replace(run, precision="fp16")) is None
    padded = replace(run, padding_mask=True)
    assert covers(base, padded) is None and covers(base.as_family("electra"), padded) is None
    assert covers(base.replace(head="causal-lm"), padded) is None  # (create_causal_mask)
    assert covers(base.as_family("albert"), padded) is None and covers(base.as_family("mpnet"), padded) is None
    assert covers(base.as_family("modernbert"), padded) is None  # (both masks: the global and the window's)
    assert covers(base.as_family("deberta-v2"), padded) is None  # (the batch's int64 mask for the float ones)
    assert covers(base, replace(run, precision="bf16", attention="sdpa")) is None  # (cuDNN's attention)
    assert covers(base.as_family("deberta-v2"), replace(run, precision="fp16", attention="sdpa")) is None  # (eager)
    assert "device cuda only" in (covers(base, replace(run, device="cpu")) or "")
    assert "cross-attention" in (covers(base.replace(add_cross_attention=True), run) or "")
    with pytest.raises(ValueError, match="nonzero"):
        events(deberta_classifier, run)


def test_a_run_whose_blocks_walk_without_end_keeps_a_segment_of_its_largest_handed_on_block_to_spare() -> None:
    """A causal LM's inference forwards under the course's loop hand their key/value cache on to the next forward,
    which puts its own into the slots best fit leaves: the blocks can walk through the free slots without the
    allocator ever coming back to a state (RoBERTa-base under autocast: none in 1,500 forwards), and such a walk
    can ask a new segment late (BERT-base, s = 128, b = 64: a 478 MiB one at the 171st forward). Such a run,
    not settled by the limit, counts as running where it never ran out and one segment of its largest handed-on
    block (`spare`: the logits here) fits beside its most-pinned bytes."""
    config = BertConfig(head="causal-lm").as_family("roberta")
    workload = Workload(2, 510, precision="amp-bf16", attention="eager", device="cuda", mode="inference",
                        loop="course")
    first, step = steps_at(config, workload, 2)
    allocator, live, seen = CachingAllocator(), {}, set()
    for count in range(HANDED_ON_STEPS_LIMIT + 1):
        allocator.run(first if count == 0 else step, live)
        state = allocator.state(), tuple(allocator.where(live[key]) for key in carried(config, workload))
        assert state not in seen
        seen.add(state)
    run = replayed(config, workload, 2)
    assert not run.steady and run.steps == HANDED_ON_STEPS_LIMIT and run.out_of_memory is None
    margin = spare(config, workload, 2)
    assert margin == allocation_size(round_size(2 * 510 * config.vocab_size * 2))  # (the bfloat16 logits)
    assert runs(config, workload, 2, 1 << 40)
    room = run.peak_pinned + margin
    assert runs(config, workload, 2, room + (64 << 20)) and not runs(config, workload, 2, room - (64 << 20))
    hand = replace(workload, loop="hand-written")  # (one forward's outputs at a time: it settles)
    assert replayed(config, hand, 2).steady and spare(config, hand, 2) == 0


def test_views_and_copies_as_aten_computes_them() -> None:
    """`view_strides` is ATen's computeStride: a transposed (b, A, s, d) block cannot be merged into (b·A, s, d)
    unless a dimension of size one makes it so."""
    assert view_strides((2, 3, 4), (12, 4, 1), (6, 4)) == (4, 1)
    assert view_strides((2, 4, 3, 5), (60, 5, 20, 1), (8, 3, 5)) is None  # heads transposed: a copy
    assert view_strides((1, 4, 3, 5), (60, 5, 20, 1), (4, 3, 5)) == (5, 20, 1)  # one sequence: a view
    assert view_strides((2, 1, 3, 5), (15, 15, 5, 1), (2, 3, 5)) == (15, 5, 1)
    assert is_contiguous((2, 1, 3), (3, 99, 1)) and not is_contiguous((2, 3), (1, 2))


@pytest.mark.parametrize("name", ["bert-mlm-a", "bert-sc-b", "bert-sc-one", "bert-mlm-one", "roberta-sc-one",
                                  "xlm-roberta-sc-b-sdpa", "bert-clm-a", "bert-clm-one",
                                  "electra-mlm-a-e48", "electra-sc-b-e80", "distilbert-sc-b",
                                  "albert-mlm-b-groups-sdpa-trainer", "bert-qa-b", "xlm-roberta-qa-one",
                                  "mpnet-mlm-a", "mpnet-mlm-one-trainer", "modernbert-mlm-p-sdpa",
                                  "modernbert-qa-w", "modernbert-biases-sc-trainer", "deberta-v3-mlm",
                                  "deberta-v2-mc-one-trainer", "deberta-unread-qa-trainer",
                                  "bert-mc-a-c3", "xlm-roberta-mc-one-sdpa-trainer",
                                  "bert-pre-a", "electra-pre-b-e48", "bert-none-a",
                                  "albert-none-b-sdpa-trainer"])
@pytest.mark.parametrize("batch", [2, 3, 7, 64])
def test_the_program_read_off_one_symbolic_run_is_each_batchs_run(name: str, batch: int) -> None:
    """`events_at` reads every size as c + d·b off one run at a batch of 2⁶⁴: the same events, sizes and order
    as running the step at that batch."""
    case = CASES[name]
    config, workload = BertConfig(**case["config"]), Workload(**case["workload"])
    for workload in (workload, replace(workload, loop="trainer", attention="sdpa")):
        assert events_at(config, workload, batch) == events(config, replace(workload, batch=batch))


def test_a_larger_batch_is_the_same_program_with_larger_blocks() -> None:
    """The events' structure does not depend on the batch beyond the views that copy (b = 1 against b > 1)."""
    case = CASES["bert-mlm-a"]
    config, workload = BertConfig(**case["config"]), Workload(**case["workload"])
    two, five = events(config, workload), events(config, replace(workload, batch=5))
    assert [(kind, key) for kind, key, _ in two] == [(kind, key) for kind, key, _ in five]
    assert sum(nbytes for _, _, nbytes in five) > sum(nbytes for _, _, nbytes in two)


SMALL = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                   vocab_size=3000, max_position_embeddings=512, head="mlm")


@pytest.mark.parametrize(("config", "attention", "cap", "settles", "batch"), [
    (SMALL, "sdpa", 208 << 20, 4, 16),  # a cap that binds: the third step still gives back and asks again
    (SMALL.replace(head="token-classification").as_family("albert"), "eager", 128 << 20, 10, 12),  # a 32 MiB
    # segment given back and asked again each step lands one rank lower, until it can go no lower
    (SMALL, "sdpa", None, 3, 16),
])
def test_a_run_replays_until_it_settles_and_every_later_step_repeats(config: BertConfig, attention: str,
                                                                    cap: int | None, settles: int, batch: int
                                                                    ) -> None:
    """`replayed` replays step after step until one leaves the allocator as an earlier one did; the run's peaks
    are then those of any longer run (checked against the events of three steps more, replayed as they are)."""
    workload = Workload(4, 128, precision="fp32", attention=attention, device="cuda", loop="hand-written")
    first, step = steps_at(config, workload, batch)
    assert first + step == events_at(config, workload, batch, steps=2)
    run = replayed(config, workload, batch, cap)
    assert run.steady and run.steps == settles and run.out_of_memory is None
    longer = replay(events_at(config, workload, batch, steps=settles + 3), cap)
    assert (longer.peak_allocated, longer.peak_reserved, longer.peak_pinned, longer.stranded, longer.out_of_memory) \
        == (run.peak_allocated, run.peak_reserved, run.peak_pinned, run.stranded, None)
    assert runs(config, workload, batch, cap or 1 << 40)


@pytest.mark.parametrize("batch", [1, 2, 7, 300])
@pytest.mark.parametrize("config", [SMALL, SMALL.replace(head="causal-lm"), SMALL.as_family("deberta-v2")])
def test_the_ops_a_replay_reads_are_the_steps_events_rounded_to_their_pools(config: BertConfig, batch: int) -> None:
    """The replay reads each batch's ops from templates (the sizes the batch does not change worked out once):
    they are the events of `steps_at`, each request rounded to its block and sent to its pool."""
    workload = Workload(4, 128, precision="amp-bf16", attention="sdpa", device="cuda")
    ops = _ops_at(config, workload, batch)
    assert ops == tuple(prepare(events) for events in steps_at(config, workload, batch))
    assert {kind for kind, _, _ in ops[1]} == {"s", "l", "f", "m"}


@pytest.mark.parametrize(("config", "precision", "handed"), [
    (SMALL, "fp32", 2), (SMALL, "amp-bf16", 2),  # the logits, then the loss
    (SMALL.replace(head="none"), "fp32", 3),  # the last hidden state and the pooler's output, then the loop's sum
    (SMALL.as_family("modernbert"), "amp-bf16", 2),
    (SMALL.replace(head="token-classification").as_family("deberta-v2"), "fp32", 2),
])
def test_the_courses_loop_hands_its_outputs_on_to_the_next_step_and_still_settles(
        config: BertConfig, precision: str, handed: int) -> None:
    """Under the course's loop a step's outputs and loss live until the next step rebinds `out` and `loss`: the
    later step replayed again and again frees the blocks the step before handed on (`("m", id, new)` events),
    and its replay is that of any longer run of the same events with nothing handed on."""
    workload = Workload(4, 64, precision=precision, attention="sdpa", device="cuda", loop="course")
    first, step = steps_at(config, workload, 8)
    moves = [event for event in step if event[0] == "m"]
    assert len(moves) == handed and [event for event in first if event[0] == "m"][-1][2] == moves[-1][2]
    free = replayed(config, workload, 8)
    assert free.steady and free.steps >= 3 and free.out_of_memory is None
    for cap in (None, free.peak_pinned, free.peak_pinned - (2 << 20)):  # (the last two: a cap that binds)
        run = replayed(config, workload, 8, cap)
        longer = replay(events_at(config, workload, 8, steps=run.steps + 3), cap)
        assert (longer.peak_allocated, longer.peak_reserved, longer.peak_pinned, longer.stranded,
                longer.out_of_memory is None) == (run.peak_allocated, run.peak_reserved, run.peak_pinned,
                                                  run.stranded, run.out_of_memory is None)
    assert not [event for event in steps_at(config, replace(workload, loop="hand-written"), 8)[1] if event[0] == "m"]


@pytest.mark.parametrize(("batch", "handed"), [(1, 2), (2, 3), (3, 3)])
def test_one_tokens_start_and_end_logits_are_views_so_a_step_hands_on_what_its_own_batch_does(
        batch: int, handed: int) -> None:
    """Question answering's start and end logits are squeezed and made contiguous: copies, but for one token in all
    (b = s = 1), where they are views of the logits. Under the course's loop a step hands its outputs on: at one
    token the logits' block and the loss, else the two copies and the loss; a batch below 2 replays with its own
    (it crashed replaying with batch 2's ids: recorded as bert-qa-one-token-course)."""
    config = SMALL.replace(head="question-answering", num_labels=2)
    workload = Workload(batch, 1, precision="fp32", attention="sdpa", device="cuda", loop="course")
    first, step = steps_at(config, workload, batch)
    assert len([event for event in step if event[0] == "m"]) == handed
    run = replayed(config, workload, batch, 1 << 30)
    longer = replay(events_at(config, workload, batch, steps=run.steps + 3), 1 << 30)
    assert (longer.peak_allocated, longer.peak_reserved, longer.out_of_memory) == \
        (run.peak_allocated, run.peak_reserved, run.out_of_memory)


def test_a_search_whose_asker_cancelled_stops_before_its_next_replay() -> None:
    """`cancellable`: the explorer's superseded worker stops at its next replay (`Cancelled`), and nothing it
    did not finish is kept as an answer: the same question asked again is answered whole."""
    from tui.core.step.allocations import Cancelled, cancellable
    from tui.core.step.compute import compute

    config = BertConfig(hidden_size=48, num_hidden_layers=2, num_attention_heads=2, intermediate_size=96,
                        vocab_size=777, max_position_embeddings=64, head="mlm")  # (no cache holds it yet)
    workload = Workload(2, 16, precision="fp32", device="cuda")
    asked: list[int] = []
    with pytest.raises(Cancelled), cancellable(lambda: asked.append(1) is None and len(asked) > 1):
        compute(config, workload)
    assert len(asked) == 2  # the first replay ran, the second was refused
    result = compute(config, workload)
    assert result.replayed and all(fit.max_batch for fit in result.fits)


@pytest.mark.parametrize("name", ["lora-all-bert-mlm-b-bf16", "freeze-body-electra-sc-b-bf16",
                                  "lora-deberta-v3-mc-c3-ampbf16", "lora-modernbert-tok-p-ampbf16",
                                  "freeze-l1-roberta-mlm-b-ampbf16-sdpa", "lora-all-xlm-roberta-mc-a-bf16",
                                  "ckpt-lora-all-bert-mlm-b-bf16", "ckpt-freeze-body-modernbert-mlm-w-ampbf16",
                                  "ckpt-lora-deberta-v3-mc-c3-ampbf16", "ckpt-lora-bert-sc-b-bf16-sdpa-trainer"])
@pytest.mark.parametrize("batch", [3, 64])
def test_a_methods_program_read_off_one_symbolic_run_is_each_batchs_run(name: str, batch: int) -> None:
    case = CASES[name]
    config, workload, method = BertConfig(**case["config"]), Workload(**case["workload"]), method_of_case(case)
    assert events_at(config, workload, batch, method=method) == events(config, replace(workload, batch=batch),
                                                                       method=method)


def test_the_methods_recorded_cover_every_family_and_every_kind() -> None:
    """The method cases recorded with peft's model or parts frozen: every family under each kind (LoRA, DoRA, IA3,
    frozen parts; XLM-R and CamemBERT are RoBERTa's code), every precision kind."""
    methods = [case for case in CASES.values() if "method" in case]

    def kind(method: dict[str, Any]) -> str:
        name = next(iter(method))
        return "dora" if name == "lora" and method["lora"].get("use_dora") else name

    recorded = {(BertConfig(**case["config"]).family.name, kind(case["method"])) for case in methods}
    families = set(FAMILIES) - {"xlm-roberta", "camembert"}
    assert recorded >= {(family, kind) for family in families for kind in ("lora", "dora", "ia3", "freeze")}
    assert {case["workload"]["precision"] for case in methods} >= {"fp32", "bf16", "amp-bf16"}


def test_checkpointing_under_a_method_keeps_the_embeddings_output_until_the_graph_goes() -> None:
    """transformers' `enable_input_require_grads` under checkpointing: with the word table frozen, its lookup's
    output becomes a leaf that requires a gradient, kept (with the gradient it is given) until the step's graph
    goes, where without checkpointing it goes as the embeddings return (the recorded cases, `ckpt-*`, check the
    whole order)."""
    config = BertConfig(head="sequence-classification", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=1000)
    method = method_of(build_tree(config), config, script(GENERATE_METHODS).how_of({"lora": {"r": 4}}))
    run = Workload(2, 16, precision="fp32", attention="eager", device="cuda", checkpointing=True, loop="trainer")
    assert covers(config, run, method) is None
    words = 2 * 16 * 64 * 4  # the lookup's output, float32

    def lives(workload: Workload) -> int:
        """How many events the lookup's output (the step's first word-embedding-sized storage) lives."""
        events = allocations.emulator(config, workload, method=method).run(1)
        born, key = next((index, key) for index, (kind, key, nbytes, *_) in enumerate(events)
                         if kind == "a" and nbytes == words)
        return next(index for index, (kind, gone, *_) in enumerate(events) if kind == "f" and gone == key) - born
    assert lives(run) > 10 * lives(replace(run, checkpointing=False))


def test_lora_on_a_family_s_own_embeddings_is_refused_the_replay_by_name() -> None:
    """LoRA on the word embeddings is derived on BERT's code (`_lookup_lora`); DeBERTa's embeddings are its own: its
    fits say why they are the peak rule's."""
    how = script(GENERATE_METHODS).how_of({"lora": {"r": 2, "target_modules": ["word_embeddings", "query_proj"]}})
    config = BertConfig(head="token-classification", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=1000).as_family("deberta-v2")
    run = Workload(4, 16, precision="fp32", attention="eager", device="cuda")
    assert "deberta-v2's word embeddings" in (covers(config, run, method_of(build_tree(config), config, how)) or "")
    bert = config.as_family("bert")
    how = script(GENERATE_METHODS).how_of({"lora": {"r": 2, "target_modules": ["word_embeddings", "query"]}})
    assert covers(bert, run, method_of(build_tree(bert), bert, how)) is None


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("settings", [{"loop": "course", "precision": "amp-bf16", "checkpointing": True},
                                      {"loop": "trainer", "precision": "bf16", "padding_mask": True},
                                      {"loop": "course", "mode": "inference"}])
def test_a_shorter_runs_program_is_a_longer_ones_first_steps(family: str, settings: dict[str, Any]) -> None:
    """A run's steps do not look ahead: two steps run alone are the first two of three, event by event, with
    their step and phase ends (so one symbolic run serves the fits' replays and the phases' peaks)."""
    config = BertConfig(head="mlm", hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, vocab_size=300).as_family(family)
    workload = Workload(batch=2, seq=16, device="cuda", **settings)
    if allocations.covers(config, workload) is not None:
        workload = replace(workload, checkpointing=False)
    assert allocations._program(config, workload, 2) == allocations._program(config, workload, 3).first(2)
