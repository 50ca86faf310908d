"""CLI benchmark: cold `bert-tui count` against baselines measured in the same run.

    python tests/benchmarks/bench_cli.py [--runs N] [--json PATH]

Each command runs in a fresh process `--runs` times (after one warm-up that fills the .pyc cache); the
table shows medians and ratios. Goals (issue 2): the CLI within 3× of `python -c "import json, yaml"`, and
at least 20× faster than building `BertModel` on the meta device and summing `numel()` (that baseline needs
the `verify` extra; without it the row says so). Not part of the test suite: timings are not assertions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PRESET_SIZES = "vocab_size=30522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096"
HF_SCRIPT = (
    "import torch, transformers\n"
    f"config = transformers.BertConfig({PRESET_SIZES})\n"
    "with torch.device('meta'):\n"
    "    model = transformers.BertModel(config)\n"
    "print(sum(p.numel() for p in model.parameters()))\n"
)


def bert_tui_command() -> list[str]:
    """The installed console script beside this interpreter, else `python -m tui`."""
    script = Path(sys.executable).with_name("bert-tui")
    found = str(script) if script.exists() else shutil.which("bert-tui")
    return [found] if found else [sys.executable, "-m", "tui"]


def median_seconds(command: list[str], runs: int) -> float:
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)  # warm-up: .pyc files, page cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()

    cli = [*bert_tui_command(), "count", "--preset", "bert-large-uncased", "--format", "json"]
    baseline = median_seconds([sys.executable, "-c", "import json, yaml"], args.runs)
    ours = median_seconds(cli, args.runs)
    rows = [
        ("python -c 'import json, yaml' (baseline)", baseline, 1.0, ""),
        ("bert-tui count --preset bert-large-uncased --format json", ours, ours / baseline, "goal ≤ 3× baseline"),
    ]
    if importlib.util.find_spec("transformers") and importlib.util.find_spec("torch"):
        hf = median_seconds([sys.executable, "-c", HF_SCRIPT], max(3, args.runs // 3))
        rows.append(("transformers BertModel on meta + sum(numel)", hf, hf / baseline, f"bert-tui is {hf / ours:.1f}× faster (goal ≥ 20×)"))
    else:
        rows.append(("transformers BertModel on meta + sum(numel)", float("nan"), float("nan"), "skipped: pip install '.[verify]'"))

    print(f"{'command':<58} {'median':>9} {'× base':>7}  note")
    for name, seconds, ratio, note in rows:
        print(f"{name:<58} {seconds * 1000:>7.1f}ms {ratio:>7.2f}  {note}")
    if args.json:
        figures = [{"command": n, "median_s": s, "ratio_to_baseline": r, "note": note} for n, s, r, note in rows]
        args.json.write_text(json.dumps({"runs": args.runs, "python": sys.version, "rows": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
