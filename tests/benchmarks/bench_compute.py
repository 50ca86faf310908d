"""Compute benchmark: a workload's FLOPs and memory at 1,000 layers against a parameter count of the same config.

    python tests/benchmarks/bench_compute.py [--runs N]

Both in-process (the core alone, no start-up), medians of `--runs` repetitions. Goal (compute issue): computing
a workload costs no more than about a parameter count (ratio ≤ 2), so the Compute pane updates at every
keystroke as the totals do. Not part of the test suite: timings are not assertions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui.core import BertConfig, build_tree  # noqa: E402
from tui.core.count.lora import Lora  # noqa: E402
from tui.core.step.compute import compute  # noqa: E402
from tui.core.step.method import method_of  # noqa: E402
from tui.core.step.workload import Workload  # noqa: E402

Row = tuple[str, float, float, str]
CONFIG = BertConfig(num_hidden_layers=1000, head="sequence-classification")
# The family least like BERT (disentangled attention: the most modules a layer), the same depth.
DEBERTA = BertConfig(model_type="deberta-v2", num_hidden_layers=1000, head="sequence-classification",
                     type_vocab_size=0, relative_attention=True, position_buckets=256, norm_rel_ebd=True,
                     share_att_key=True, pos_att_c2p=True, pos_att_p2c=True, position_biased_input=False)
WORKLOAD = Workload(batch=32, seq=512, precision="amp-bf16", checkpointing=True, padding_mask=True, device="cuda")
# The terms and the peak rule's fits (CPU conventions: the caching allocator is replayed on CUDA only, and the
# replay at 1,000 layers is the rows below's subject, not these)
RULE = replace(WORKLOAD, device="cpu")
# What fits (#32): a deep LM-head model with every common card and one asked size, as `compute --gpu-memory` runs it.
DEEP_LM = BertConfig(num_hidden_layers=96, head="mlm")
# A run whose allocation order the core derives: its fits come from replaying the caching allocator.
REPLAYED = Workload(batch=32, seq=512, precision="fp32", attention="sdpa", device="cuda")


def median_seconds(work: Callable[[], object], runs: int, calls: int = 50) -> float:
    """Median over `runs` samples of the mean time of `calls` calls (one call is well under a millisecond)."""
    work()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def measure(runs: int) -> list[Row]:
    tree = build_tree(CONFIG)
    count = median_seconds(lambda: build_tree(CONFIG).total, runs)
    alone = median_seconds(lambda: compute(CONFIG, RULE).memory(), runs)
    batches = iter(range(10**9))  # the explorer's keystroke in the batch field: another batch each call
    beside = median_seconds(lambda: compute(CONFIG, replace(RULE, batch=1 + next(batches) % 512),
                                            tree=tree).memory(), runs)
    # The explorer's keystroke in a size field: a config not seen before each call (no term or fits table kept).
    fresh = iter(range(10**9))
    cold = median_seconds(lambda: compute(CONFIG.replace(vocab_size=30522 + next(fresh)), RULE).memory(), runs)
    cold_count = median_seconds(lambda: build_tree(CONFIG.replace(vocab_size=30522 + next(fresh))).total, runs)
    deberta_tree = build_tree(DEBERTA)
    deberta_count = median_seconds(lambda: build_tree(DEBERTA).total, runs)
    deberta = median_seconds(lambda: compute(DEBERTA, RULE, tree=deberta_tree).memory(), runs)
    lora_rows = []
    for config, label in ((BertConfig(head="sequence-classification"), "bert-base"), (CONFIG, "1,000 layers")):
        edits = iter(range(10**9))  # a config not seen before each call, as a size field's edit gives
        new_count = median_seconds(lambda: build_tree(config.replace(vocab_size=30522 + next(edits))).total, runs)
        with_lora = median_seconds(lambda: _lora_step(config.replace(vocab_size=30522 + next(edits))), runs,
                                   calls=50 if label == "bert-base" else 2)
        lora_rows += [(f"core: count {label}, a new config each call (baseline)", new_count, 1.0, ""),
                      (f"core: {label} under LoRA r=8 on query, value: the method and its step, a new config each "
                       "call", with_lora, with_lora / new_count, "a walk over every layer")]
    deep_count = median_seconds(lambda: build_tree(DEEP_LM).total, runs)
    # (checkpointing is replayed too: a new sequence length each call, or the fits table kept would be timed)
    lengths = iter(range(10**9))
    deep_fits = median_seconds(lambda: compute(DEEP_LM, replace(WORKLOAD, seq=448 + next(lengths) % 64),
                                               24 << 30).fits, max(3, runs // 4), calls=1)
    replayed_rows = []
    for layers in (12, 96):  # fits from the replayed allocation order (#32): float32 BERT MLM on CUDA
        config = BertConfig(num_hidden_layers=layers, head="mlm")
        seqs = iter(range(10**9))  # a workload not seen before each call: no fits table kept
        replayed = median_seconds(lambda: compute(config, replace(REPLAYED, seq=64 + next(seqs) % 448),
                                                  gpu_memory=24 << 30).fits, max(3, runs // 4), calls=1)
        replayed_rows.append((f"core: {layers} layers, MLM, float32 on CUDA, what fits replayed on every card (a "
                              "new sequence length each call)", replayed, replayed / deep_count,
                              "goal: well under a second"))
    # Inference forwards replayed (#32): BERT-base's causal LM under autocast and the course's loop, whose cache
    # can walk the free slots without settling (each such batch replays 64 forwards)
    causal = BertConfig(head="causal-lm")
    seqs = iter(range(10**9))
    inference = median_seconds(lambda: compute(causal, Workload(batch=8, seq=64 + next(seqs) % 448,
                                                                 precision="amp-bf16", attention="sdpa",
                                                                 device="cuda", mode="inference"),
                                               gpu_memory=24 << 30).fits, max(3, runs // 4), calls=1)
    label = ("core: 12 layers, causal LM inference, amp-bf16, the course's loop, what fits replayed on every card "
             "(a new sequence length each call)")
    replayed_rows.append((label, inference, inference / deep_count, "goal: well under a second"))
    return [
        ("core: count 96 layers, MLM (baseline)", deep_count, 1.0, ""),
        ("core: compute 96 layers, MLM, amp-bf16, checkpointing, padding mask: what fits replayed on every card "
         "(a new sequence length each call, 448 …)", deep_fits, deep_fits / deep_count,
         f"goal: well under a second ({deep_fits * 1000:.1f} ms)"),
        ("core: count 1,000 layers, seq-cls (baseline)", count, 1.0, ""),
        ("core: compute a step at 1,000 layers, tree counted (explorer: batch edits)", beside, beside / count,
         "goal ≤ 1.5× baseline"),
        ("core: compute a step at 1,000 layers, counting included (CLI)", alone, alone / count,
         "a count plus the step"),
        ("core: count 1,000 layers, a new config each call (baseline)", cold_count, 1.0, ""),
        ("core: compute at 1,000 layers, a new config each call (nothing kept)", cold, cold / cold_count,
         "a count plus the step"),
        ("core: DeBERTa-v3, count 1,000 layers (baseline)", deberta_count, 1.0, ""),
        ("core: DeBERTa-v3, compute a step at 1,000 layers, tree counted", deberta, deberta / deberta_count,
         "goal ≤ 1.5× its count"),
        *lora_rows,
        *replayed_rows,
    ]


def _lora_step(config: BertConfig) -> int:
    tree = build_tree(config)
    method = method_of(tree, config, Lora(r=8, target_modules=("query", "value")))
    return compute(config, replace(WORKLOAD, checkpointing=False), tree=tree, method=method).peak


def main() -> int:
    import bench_cli

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21, help="samples per figure, 50 calls each (default 21)")
    args = parser.parse_args()
    bench_cli.report(measure(args.runs), None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
