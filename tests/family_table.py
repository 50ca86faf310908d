"""Print README's table of one workload per family, from `bert-tui compute`'s own JSON output.

    python tests/family_table.py
"""

from __future__ import annotations

import json
import subprocess
import sys

PRESETS = ("bert-base-uncased", "roberta-base", "xlm-roberta-base", "camembert-base", "distilbert-base-uncased",
           "electra-base-discriminator", "electra-small-discriminator", "albert-base-v2", "all-mpnet-base-v2",
           "deberta-v3-base", "ModernBERT-base")
WORKLOAD = ["--head", "sequence-classification", "--batch", "8", "--seq", "512", "--precision", "amp-bf16"]


def row(preset: str) -> str:
    run = subprocess.run([sys.executable, "-c", "import sys, tui.cli; sys.exit(tui.cli.main(sys.argv[1:]))", "compute",
                          preset, *WORKLOAD, "--format", "json"],
                         capture_output=True, text=True, check=False)
    if run.returncode:
        why = run.stderr.strip().split(": ", 2)[-1]
        if "are modelled for" in why:
            why = "its family is not modelled yet (refused by name)"
        return f"| {preset} | {why} | | | |"
    result = json.loads(run.stdout)
    fits = {fit["gib"]: fit["max_batch"] for fit in result["fits"]}
    return (f"| {preset} | {result['parameters']:,} | {result['flops']['step'] / 1e12:.2f} TFLOP | "
            f"{result['memory_bytes']['peak'] / 2**30:.2f} GiB | {fits[24.0]} |")


if __name__ == "__main__":
    print("| preset | parameters | FLOPs per step | peak | largest batch on 24 GiB |")
    print("|---|---:|---:|---:|---:|")
    for preset in PRESETS:
        print(row(preset))
