"""What README.md quotes the command line saying is what it says."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from .clirun import run

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


def quoted_errors() -> list[tuple[str, str]]:
    """The (command, line it prints) pairs of the README's block of bad input (`...` ends a line cut short)."""
    block = README.split("Bad input exits with code 2", 1)[1].split("```", 2)[1]
    lines = block.strip().splitlines()
    return [(command.removeprefix("$ "), said) for command, said in zip(lines[::2], lines[1::2], strict=True)]


def test_the_readme_quotes_three_refusals() -> None:
    assert len(quoted_errors()) == 3


@pytest.mark.parametrize(("command", "said"), quoted_errors())
def test_each_refusal_the_readme_quotes_is_what_the_command_says(command: str, said: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    *setup, command = command.split("; ")
    for step in setup:
        name = re.fullmatch(r"mkfifo (\S+)", step)
        assert name, step
        os.mkfifo(name.group(1))
    argv = shlex.split(command)
    assert argv[0] == "bert-tui"
    code, out, err = run(*argv[1:])
    assert (code, out) == (2, "")
    if said.endswith("..."):
        assert err.startswith(said.removesuffix("..."))
    else:
        assert err == said + "\n"


def test_the_loops_and_the_allocators_share_on_an_lm_example_is_what_compute_says() -> None:
    from tui.core import BertConfig
    from tui.core.step.compute import compute
    from tui.core.step.peak import KEPT
    from tui.core.step.workload import Workload

    config, size = BertConfig(head="mlm"), 24 * 2**30
    kept, trainer = (compute(config, Workload(batch=32, seq=512, precision="amp-bf16", device="cuda", loop=loop), size)
                     for loop in ("hand-written", "trainer"))
    logits = dict(kept.phases[1].held)[KEPT]
    fits = [next(fit.max_batch for fit in result.fits if fit.asked) for result in (kept, trainer)]
    said = " ".join(README.split())
    assert f"keeps {logits / 1e9:.1f} GB of bf16 logits, a {kept.peak / 1e9:.1f} GB peak against " \
           f"{trainer.peak / 1e9:.1f} GB, and the split segment adds {kept.stranded / 1e9:.1f} GB: a 24 GiB card " \
           f"takes batch {fits[0]} ({fits[1]} with the Trainer's loop)" in said


def test_the_cuda_peak_error_the_readme_states_is_the_recorded_one() -> None:
    """The range of `memory_bytes.peak` against the recorded CUDA steps (tests/fixtures/allocation.json), as the
    README says it."""
    import json

    from .test_allocation import peak_predicted

    cases = json.loads((Path(__file__).parent / "fixtures" / "allocation.json").read_text(encoding="utf-8"))["peaks"]
    errors = {case["case"]: peak_predicted(case["argv"]) / case["peak_allocated"] - 1 for case in cases}
    plain = [error for name, error in errors.items() if "ckpt" not in name]
    checkpointed = [error for name, error in errors.items() if "ckpt" in name]
    said = " ".join(README.split())
    assert f"{len(cases)} steps" in said
    assert (f"within {min(plain) * 100:+.1f} % to {max(plain) * 100:+.1f} % ({max(checkpointed) * 100:+.1f} % with "
            "checkpointing)").replace("-", "−") in said
