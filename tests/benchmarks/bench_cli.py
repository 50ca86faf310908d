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
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PRESET_SIZES = ("vocab_size=30522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, "
                "intermediate_size=4096")
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


# As on a user's machine: bytecode is cached (some sandboxes set PYTHONDONTWRITEBYTECODE, which makes every
# run recompile every module and measures the compiler instead).
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def median_seconds(command: list[str], runs: int, cwd: Path | None = None) -> float:
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True, env=ENV, cwd=cwd)  # warm-up: .pyc, page cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True, env=ENV, cwd=cwd)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


Row = tuple[str, float, float, str]  # (what, seconds, ratio to its baseline, goal or note)


def measure(runs: int) -> list[Row]:
    cli = [*bert_tui_command(), "count", "--preset", "bert-large-uncased", "--format", "json"]
    baseline = median_seconds([sys.executable, "-c", "import json, yaml"], runs)
    ours = median_seconds(cli, runs)
    rows = [
        ("python -c 'import json, yaml' (baseline)", baseline, 1.0, ""),
        ("bert-tui count --preset bert-large-uncased --format json", ours, ours / baseline, "goal ≤ 3× baseline"),
    ]
    if importlib.util.find_spec("transformers") and importlib.util.find_spec("torch"):
        hf = median_seconds([sys.executable, "-c", HF_SCRIPT], max(3, runs // 3))
        rows.append(("transformers BertModel on meta + sum(numel)", hf, hf / baseline, f"bert-tui is {hf / ours:.1f}× faster (goal ≥ 20×)"))
    else:
        rows.append(("transformers BertModel on meta + sum(numel)", float("nan"), float("nan"), "skipped: pip install '.[verify]'"))
    return rows


def report(rows: list[Row], path: Path | None) -> None:
    """Print the rows as a table (times in ms, sizes in MiB) and write them to `path` as JSON."""
    print(f"{'measure':<58} {'median':>10} {'× base':>7}  goal / note")
    for name, value, ratio, note in rows:
        shown = f"{value:>7.1f}MiB" if note.startswith("MiB") else f"{value * 1000:>8.1f}ms"
        print(f"{name:<58} {shown:>10} {ratio:>7.2f}  {note.removeprefix('MiB').strip()}")
    if path is not None:
        figures = [{"measure": n, "value": v, "ratio_to_baseline": r, "note": note} for n, v, r, note in rows]
        path.write_text(json.dumps({"python": sys.version, "rows": figures}, indent=2) + "\n")
        print(f"\nwrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command (default 15)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    report(measure(args.runs), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
