"""What the manual (README.md and docs/) says in prose of the tool's figures is what the tool says. (Its blocks of
command output and its tables are generated: tests/test_docs.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tui.core.units import short_bytes

from .clirun import run
from .manual import TEXT as README


def test_the_loops_and_the_allocators_share_on_an_lm_example_is_what_compute_says() -> None:
    from tui.core import BertConfig
    from tui.core.step.compute import compute
    from tui.core.step.peak import KEPT, phases
    from tui.core.step.workload import Workload

    config, size = BertConfig(head="mlm"), 24 * 2**30
    kept, trainer = (compute(config, Workload(batch=32, seq=512, precision="amp-bf16", device="cuda", loop=loop), size)
                     for loop in ("hand-written", "trainer"))
    logits = dict(phases(kept)[1].held)[KEPT]  # (the bytes of the logits kept: the rule names them)
    fits = [next(fit.max_batch for fit in result.fits if fit.asked) for result in (kept, trainer)]
    said = " ".join(README.split())
    assert kept.replayed and trainer.replayed  # (autocast's order is derived: the rule's segment is only named)
    assert f"keeps {short_bytes(logits)} of bf16 logits, a {short_bytes(kept.peak)} peak against " \
           f"{short_bytes(trainer.peak)} with the Trainer's, and the rule would add a whole `n·V·4` segment " \
           f"({short_bytes(config.vocab_size * 32 * 512 * 4)})" in said  # (in GiB, as the tool prints: #52 item 19)
    assert f"its replay strands {short_bytes(kept.stranded)} and reserves {short_bytes(kept.reserved_peak)}, and a " \
           f"24 GiB card takes batch {fits[0]} ({fits[1]} with the Trainer's loop)" in said


def test_the_replayed_lm_example_is_what_compute_says() -> None:
    from tui.core import BertConfig
    from tui.core.step.compute import compute
    from tui.core.step.workload import Workload

    config, size = BertConfig(head="mlm"), 24 * 2**30
    kept, trainer = (compute(config, Workload(batch=32, seq=512, precision="fp32", device="cuda", loop=loop), size)
                     for loop in ("hand-written", "trainer"))
    assert kept.replayed and trainer.replayed
    fits = [next(fit.max_batch for fit in result.fits if fit.asked) for result in (kept, trainer)]
    said = " ".join(README.split())
    assert f"the hand-written loop peaks at {short_bytes(kept.peak)} ({short_bytes(trainer.peak)} with the " \
           f"Trainer's: the {short_bytes(kept.peak - trainer.peak)} of logits it keeps), the replay reserves " \
           f"{short_bytes(kept.reserved_peak - kept.peak)} more with {short_bytes(kept.stranded)} stranded, and " \
           f"a 24 GiB card takes batch {fits[0]} ({fits[1]} with the Trainer's loop)" in said


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


def finetune_rows() -> list[str]:
    """The README's full-versus-LoRA table, from the core."""
    from dataclasses import replace

    from tui.core.count.families import build_tree
    from tui.core.count.lora import Lora
    from tui.core.step.compute import compute
    from tui.core.step.method import method_of
    from tui.core.step.workload import Workload
    from tui.core.units import short_bytes, short_flops
    from tui.presets import find_preset

    rows = []
    for name in ("bert-base-uncased", "roberta-base"):
        config = replace(find_preset(name).config, head="sequence-classification")
        for lora in (None, Lora(r=8, target_modules=("query", "value"))):
            method = None if lora is None else method_of(build_tree(config), config, lora)
            result = compute(config, Workload(batch=32, seq=256, precision="amp-bf16", device="cuda"), 24 * 2**30,
                             method=method)
            fits = next(fit.max_batch for fit in result.fits if fit.asked)
            label = "full fine-tuning" if method is None else method.label
            rows.append(f"| {name}, {label} | {result.trained[0]:,} | {short_flops(result.flops_step)} | "
                        f"{short_bytes(result.peak)} | {fits:,} |")
    return rows


def test_the_fine_tuning_prose_holds() -> None:
    """'the largest batch grows by less than half' and the count of measured steps."""
    import json

    batches = [int(row.rsplit("|", 2)[1].replace(",", "")) for row in finetune_rows()]
    assert all(1 < lora / full < 1.5 for full, lora in zip(batches[::2], batches[1::2]))
    cases = json.loads((Path(__file__).parent / "fixtures" / "compute_methods.json").read_text(encoding="utf-8"))
    assert f"on {len(cases['cases'])} measured steps" in " ".join(README.split())


def test_the_peft_case_count_the_readme_states_is_the_fixtures() -> None:
    import json

    cases = json.loads((Path(__file__).parent / "fixtures" / "peft_params.json").read_text(encoding="utf-8"))["cases"]
    lora = sum(1 for case in cases if case.get("method") != "ia3")
    ia3 = len(cases) - lora
    said = " ".join(README.split())
    assert f"on {lora} configurations over every family, and {ia3} IA3 ones" in said


def test_the_recorded_allocation_orders_the_compute_manual_counts_are_the_fixtures() -> None:
    import json

    cases = json.loads((Path(__file__).parent / "fixtures" / "allocation_order.json").read_text(encoding="utf-8"))
    runs = cases["cases"]
    said = " ".join((Path(__file__).parents[1] / "docs" / "compute.md").read_text(encoding="utf-8").split())
    course = sum(1 for run in runs if run["workload"]["mode"] == "train" and run["workload"]["loop"] == "course")
    assert (f"{len(runs)} runs, {sum('method' in run for run in runs)} of them under a fine-tuning method, {course} "
            f"training under the course's loop, {sum(run['workload']['mode'] == 'inference' for run in runs)} "
            f"inference, {sum(run['workload']['checkpointing'] for run in runs)} with checkpointing") in said


def test_the_course_loop_example_is_what_compute_says() -> None:
    from tui.core import BertConfig
    from tui.core.step.compute import compute
    from tui.core.step.workload import Workload

    config, size = BertConfig(head="causal-lm"), 16 * 2**30
    fits = {}
    for loop in ("course", "hand-written", "trainer"):
        result = compute(config, Workload(batch=32, seq=512, precision="amp-bf16", device="cuda", loop=loop), size)
        assert result.replayed
        fits[loop] = next(fit.max_batch for fit in result.fits if fit.asked)
    assert Workload(batch=1, seq=1).loop == "course"
    said = " ".join(README.split())
    assert f"on a 16 GiB card takes batch {fits['course']} with the course's loop, {fits['hand-written']} with " \
           f"`del out` and {fits['trainer']} with the Trainer's" in said


def test_prose_quotes_sizes_as_the_tool_prints_them_and_a_batch_with_its_command() -> None:
    """#52 item 19: README mixed GB and GiB ("a 14.4 GB peak against 13.4 GB") and quoted ELECTRA's generator's
    "137" without the flags that give it. Sizes in the prose are binary, as the tool prints them (the decimal
    GB of a card's box is named as such); the batch comes with its command, and that command prints it."""
    said = " ".join(README.split())
    decimal = [match for match in re.findall(r"\d+(?:\.\d+)? GB\b", said)]
    assert decimal == ["24 GB"], decimal  # (the one place that quotes a card's box: 24 GB = 22.4 GiB)
    command = "bert-tui compute electra-base-generator --head mlm --seq 128 --precision fp32 --attention eager " \
              "--loop hand-written"
    assert f"so the answer is 137 (`{command}`" in said
    code, out, _ = run(*shlex.split(command)[1:])
    assert code == 0 and re.search(r"16 GiB {2}batch ≤ 137\n", out)
