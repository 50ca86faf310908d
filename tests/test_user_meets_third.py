"""#52, a new user's third round: each item a test that failed on the code before it."""

from __future__ import annotations

import json

import pytest

from tui.core.config import BertConfig
from tui.core.step.compute import compute
from tui.core.step.workload import Workload

from .clirun import completed as run


@pytest.mark.parametrize(("config", "workload"), [
    (BertConfig(head="sequence-classification", hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                intermediate_size=4096), Workload(32, 512, precision="amp-bf16", device="cuda")),
    (BertConfig(head="mlm"), Workload(32, 128, precision="fp32", device="cuda")),
])
def test_item_2_no_reserved_figure_is_below_the_allocated_peak(config: BertConfig, workload: Workload) -> None:
    """bert-large seq-cls 32 × 512 amp-bf16 printed `peak (at once) 22,099,897,756` above `reserved at worst
    22,074,621,952`: the allocator never reserves less than it allocates."""
    result = compute(config, workload)
    assert result.replayed and result.reserved_peak >= result.peak
    assert result.memory()["reserved_peak"] >= result.memory()["peak"]


def test_item_2_the_cli_says_the_reserved_figure_is_the_peak_where_the_replay_holds_less() -> None:
    done = run("compute", "--preset", "bert-large-uncased", "--head", "sequence-classification", "--batch", "32",
               "--seq", "512", "--precision", "amp-bf16", "--device", "cuda")
    lines = {line.split("  ")[1].strip(): line for line in done.stdout.splitlines()
             if line.startswith("  peak (at once)") or line.startswith("  reserved at worst")}
    peak = int(lines["peak (at once)"].split()[3].replace(",", ""))
    reserved = int(lines["reserved at worst"].split()[3].replace(",", ""))
    assert reserved >= peak and "the peak: the replay holds" in lines["reserved at worst"]
    data = json.loads(run("compute", "--preset", "bert-large-uncased", "--head", "sequence-classification",
                          "--batch", "32", "--seq", "512", "--precision", "amp-bf16", "--device", "cuda",
                          "--format", "json").stdout)
    assert data["memory_bytes"]["reserved_peak"] >= data["memory_bytes"]["peak"]


@pytest.mark.parametrize(("typed", "said"), [("24GB", "24 GB = 22.4 GiB; for a card of 24 GiB write 24GiB"),
                                             ("80 gb", "80 GB = 74.5 GiB; for a card of 80 GiB write 80GiB"),
                                             ("24GiB", None), ("24", None), ("24G", None)])
def test_item_9_a_size_in_gb_says_what_it_was_read_as_every_time(typed: str, said: str | None) -> None:
    """`--gpu-memory 24GB` was read as 22.35 GiB in silence (batch ≤ 100 where 24GiB gives 108)."""
    done = run("compute", "--preset", "bert-base-uncased", "--head", "mlm", "--batch", "8", "--seq", "128",
               "--gpu-memory", typed, "--format", "json")
    assert done.returncode == 0
    notes = [line for line in done.stderr.splitlines() if "--gpu-memory" in line]
    assert notes == ([f"bert-tui: note: --gpu-memory {said}"] if said else [])
    expected_bytes = {"24GB": 24 * 10**9, "80 gb": 80 * 10**9}.get(typed, 24 << 30)
    assert [fit["bytes"] for fit in json.loads(done.stdout)["fits"] if fit["asked"]] == [expected_bytes]


async def test_item_9_the_compute_pane_says_what_a_size_in_gb_was_read_as() -> None:
    from textual.widgets import Input

    from tui.explorer.app import make_app
    from tui.explorer.widgets.compute import ComputePane
    from tui.presets import load_catalog

    from .scenarios import settled
    from .test_compute_pane import result_text

    app = make_app(load_catalog())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        app.query_one(ComputePane).query_one("#gpu_memory", Input).value = "24GB"
        await settled(pilot)
        assert "GPU memory 24 GB = 22.4 GiB; for a card of 24 GiB write 24GiB" in result_text(app)
        app.query_one(ComputePane).query_one("#gpu_memory", Input).value = "24GiB"
        await settled(pilot)
        assert "GPU memory" not in result_text(app)
