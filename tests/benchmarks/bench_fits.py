"""What-fits benchmark: `bert-tui compute … --gpu-memory 24GiB` in a fresh process, the compiled replay of the
caching allocator against its Python reference, with `bert-tui count` of the same model as the baseline.

    python tests/benchmarks/bench_fits.py [--runs N] [--presets all|some]

Each command runs in a fresh process `--runs` times (median; one warm-up first), as a user types it: every
preset's masked LM (its fits replayed on every card and on the 24 GiB one asked), and 48- and 96-layer
configs. Goals (the native-replay issue): ≤ ~1 s each on a 2-core machine, ≤ 0.3 s for BERT-base (12 layers).
The compiled replay is what an install with a C compiler runs; `BERT_TUI_PURE_PYTHON=1` runs the reference. Not
part of the test suite: timings are not assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cli import ENV, Row, bert_tui_command, report

WORKLOAD = ["--head", "mlm", "--batch", "8", "--seq", "128", "--precision", "amp-bf16", "--device", "cuda"]
BASE = ["--preset", "bert-base-uncased"]
DEEP = {  # label: (the model, the step's own flags beside WORKLOAD's)
    "48 layers": ([*BASE, "--num-hidden-layers", "48"], []),
    "96 layers": ([*BASE, "--num-hidden-layers", "96"], []),
    "DeBERTa-v3-large at 48 layers, seq 512": (["--preset", "deberta-v3-large", "--num-hidden-layers", "48"],
                                               ["--seq", "512"]),
    "96 layers, seq 512, checkpointing, padding mask": ([*BASE, "--num-hidden-layers", "96"],
                                                        ["--seq", "512", "--checkpointing", "--padding-mask"]),
}
SOME = ("bert-base-uncased", "bert-large-uncased", "roberta-base", "deberta-v3-large", "ModernBERT-large",
        "albert-xxlarge-v2")


def seconds(command: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True, env=env)  # warm-up: .pyc, page cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def presets() -> list[str]:
    return sorted(path.stem for path in (HERE.parents[1] / "presets").glob("*.yaml"))


def measure(runs: int, names: list[str]) -> list[Row]:
    tool = bert_tui_command()
    compiled, reference = dict(ENV), {**ENV, "BERT_TUI_PURE_PYTHON": "1"}
    compiled.pop("BERT_TUI_PURE_PYTHON", None)
    rows: list[Row] = []
    models: dict[str, tuple[list[str], list[str]]] = {name: (["--preset", name], []) for name in names} | DEEP
    for label, (source, step) in models.items():
        count = seconds([*tool, "count", *source], runs, compiled)
        fits = [*tool, "compute", *source, *WORKLOAD, *step, "--gpu-memory", "24GiB"]  # (the step's --seq wins)
        fast = seconds(fits, runs, compiled)
        slow = seconds(fits, runs, reference)
        goal = "goal ≤ 0.3 s" if label == "bert-base-uncased" else "goal ≤ ~1 s"
        rows += [(f"bert-tui count {label} (baseline)", count, 1.0, ""),
                 (f"bert-tui compute {label} MLM amp-bf16 --gpu-memory 24GiB, compiled replay", fast, fast / count,
                  f"{goal} ({fast:.2f} s)"),
                 ("  the same, the Python reference", slow, slow / count, f"{slow / fast:.1f}× the compiled")]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure (default 5)")
    parser.add_argument("--presets", choices=("all", "some", "none"), default="all",
                        help=f"every preset, six ({', '.join(SOME)}), or none (the deep configs alone)")
    args = parser.parse_args()
    from tui.core.step.native import which

    print(f"caching allocator replay: {which()}", file=sys.stderr)
    if "BERT_TUI_PURE_PYTHON" in os.environ:
        print("(BERT_TUI_PURE_PYTHON is set here: the 'compiled' rows unset it)", file=sys.stderr)
    names = {"all": presets(), "some": list(SOME), "none": []}[args.presets]
    report(measure(args.runs, names), None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
