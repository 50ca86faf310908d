"""Print the manual's table of one workload per family (docs/compute.md), from `compute`'s own JSON.

    python tests/family_table.py

tests/docs.py writes it into the page, and tests/test_docs.py fails when it is stale (it drifted in 8 of 11 rows once).
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui.cli import main

PRESETS = ("bert-base-uncased", "roberta-base", "xlm-roberta-base", "camembert-base", "distilbert-base-uncased",
           "electra-base-discriminator", "electra-small-discriminator", "albert-base-v2", "all-mpnet-base-v2",
           "deberta-v3-base", "ModernBERT-base")
WORKLOAD = ["--head", "sequence-classification", "--batch", "8", "--seq", "512", "--precision", "amp-bf16"]
HEADER = ["| preset | parameters | FLOPs per step | peak | largest batch on 24 GiB |", "|---|---:|---:|---:|---:|"]


def row(preset: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["compute", preset, *WORKLOAD, "--format", "json"])
    if code:
        why = err.getvalue().strip().split(": ", 2)[-1]
        if "are modelled for" in why:
            why = "its family is not modelled yet (refused by name)"
        return f"| {preset} | {why} | | | |"
    result = json.loads(out.getvalue())
    fits = {fit["gib"]: fit["max_batch"] for fit in result["fits"]}
    return (f"| {preset} | {result['parameters']:,} | {result['flops']['step'] / 1e12:.2f} TFLOP | "
            f"{result['memory_bytes']['peak'] / 2**30:.2f} GiB | {fits[24.0]} |")


def table() -> str:
    return "\n".join([*HEADER, *(row(preset) for preset in PRESETS)]) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
