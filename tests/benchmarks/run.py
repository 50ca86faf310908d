"""The whole benchmark suite in one command: CLI cold start, compute, explorer start-up, edit latency, memory.

    python tests/benchmarks/run.py            # prints the table, writes tests/benchmarks/results.json

Every figure is a ratio against a baseline measured in the same run on the same machine (see bench_cli.py
and bench_explorer.py for what each one measures). Not part of the test suite: timings are not assertions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_cli  # noqa: E402
import bench_compute  # noqa: E402
import bench_explorer  # noqa: E402
import bench_fits  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11, help="fresh processes per start-up figure (default 11)")
    parser.add_argument("--edits", type=int, default=40, help="edits per latency scenario (default 40)")
    parser.add_argument("--json", type=Path, default=HERE / "results.json", help="where to write the figures")
    args = parser.parse_args()
    rows = bench_cli.measure(args.runs) + bench_compute.measure(21) + bench_explorer.measure(args.runs, args.edits)
    rows += bench_fits.measure(5, list(bench_fits.SOME))  # (every preset: python tests/benchmarks/bench_fits.py)
    bench_cli.report(rows, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
