"""#52, a new user's third round: each item a test that failed on the code before it."""

from __future__ import annotations

import json
from typing import Any

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


def test_item_2_the_peak_and_the_reserved_figure_are_one_orders_where_it_is_derived() -> None:
    """#51's one peak: where the step's allocation order is derived, the peak is that order's allocated peak and
    the reserved figure the same order's replay, so it is never below the peak by construction; the rule's peak
    (22,099,897,756 here, above the replay's 22,074,621,952) no longer shows, nor the note that explained it."""
    argv = ("compute", "--preset", "bert-large-uncased", "--head", "sequence-classification", "--batch", "32",
            "--seq", "512", "--precision", "amp-bf16", "--device", "cuda")
    done = run(*argv)
    lines = {line.split("  ")[1].strip(): line for line in done.stdout.splitlines()
             if line.startswith(("  peak (at once)", "  reserved at worst"))}
    peak = int(lines["peak (at once)"].split()[3].replace(",", ""))
    reserved = int(lines["reserved at worst"].split()[3].replace(",", ""))
    assert peak < reserved and "stranded" in lines["reserved at worst"]
    assert "the peak rule's allocated peak" not in done.stdout and "22,099,897,756" not in done.stdout
    assert "by its derived allocation order" in done.stdout
    data = json.loads(run(*argv, "--format", "json").stdout)
    assert data["peak_model"] == "derived" and data["memory_bytes"]["peak"] == peak
    assert data["memory_bytes"]["reserved_peak"] == reserved


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
        # (#52 item 8: with a card typed, the pane's first line answers for it)
        assert result_text(app).splitlines()[0].startswith("on 24 GiB: batch 32 runs; the largest batch that ")


def test_item_3_count_under_lora_says_one_training_memory_in_its_table_its_line_and_its_json() -> None:
    """`count roberta-base --head sequence-classification --lora-r 8` printed `training 1.9 GiB` (every
    parameter at 16 bytes) in its table and `training memory … 251.3 MiB` below it."""
    from tui.core.units import short_bytes

    argv = ("count", "--preset", "roberta-base", "--head", "sequence-classification", "--lora-r", "8")
    data = json.loads(run(*argv, "--format", "json").stdout)
    trainable, total = data["trainable"], data["total"]  # peft's two figures (checked against peft elsewhere)
    expected = trainable * 16 + (total - trainable) * 2
    assert data["training_bytes"]["adam_mixed_precision"] == expected
    table = run(*argv).stdout
    memory = table[table.index("memory (LoRA r=8 on query, value (peft)"):]
    row = next(line for line in memory.splitlines() if "MiB" in line and "│" in line)
    assert row.rstrip(" │").split("│")[-1].strip() == short_bytes(expected)
    assert f"no activations): {short_bytes(expected)}" in " ".join(table.split())
    assert short_bytes(total * 16) not in memory  # (the full fine-tuning figure is gone)


def test_item_3_parts_frozen_reach_csv_and_markdown_and_ia3_is_titled_ia3() -> None:
    """`count --freeze-layers 3 --format csv` dropped the freeze; `count --ia3 --format markdown` was titled
    "with LoRA (peft)"."""
    import csv

    argv = ("count", "--preset", "bert-base-uncased", "--freeze-layers", "3")
    data = json.loads(run(*argv, "--format", "json").stdout)
    rows = list(csv.DictReader(run(*argv, "--format", "csv").stdout.splitlines()))
    frozen = {row["name"] for row in rows if row["trainable"] == "0"}
    assert frozen == set(data["frozen"]["parameters"]) and all(".layer.0." in name or ".layer.1." in name
                                                               or ".layer.2." in name for name in frozen)
    assert sum(int(row["count"]) for row in rows if row["trainable"] == "1") == data["trainable"]
    markdown = run(*argv, "--format", "markdown").stdout
    assert f"trains {data['trainable']:,} of {data['total']:,}" in markdown
    assert "| training (Adam), the first 3 layers frozen | " in markdown
    ia3 = run("count", "--preset", "bert-base-uncased", "--ia3", "--format", "markdown").stdout
    assert ia3.startswith("## bert-base-uncased with IA3 on ") and "LoRA" not in ia3.splitlines()[0]


def test_item_3_one_method_at_a_time() -> None:
    done = run("count", "--preset", "bert-base-uncased", "--lora-r", "8", "--freeze-layers", "3")
    assert done.returncode == 2 and "both say what trains: give one" in done.stderr


async def test_item_3_the_totals_pane_and_the_export_follow_the_compute_panes_method(tmp_path: Any) -> None:
    """With LoRA chosen in the Compute pane the Totals pane still said `Adam train 1.6 GiB … 16 bytes/parameter`;
    export with parts frozen wrote the full total as `trainable`."""
    from textual.widgets import Select, Switch

    from tui.core.count.trained import trained
    from tui.core.units import short_bytes
    from tui.explorer.app import make_app
    from tui.presets import load_catalog

    from .scenarios import settled
    from .test_app import text_of

    catalog = load_catalog()
    config = catalog.get("roberta-base").config
    app = make_app(catalog, config, title="roberta-base", preset="roberta-base")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        app.query_one("#method", Select).value = "lora"
        await settled(pilot)
        from tui.core import build_tree
        from tui.core.count.lora import Lora

        lora = trained(build_tree(config), config, Lora(r=8, target_modules=("query", "value")))
        totals = text_of(app, "#totals")
        assert f"Adam train {short_bytes(lora.training_bytes)}" in " ".join(totals.split())
        assert short_bytes(16 * build_tree(config).total) not in totals
        app.query_one("#method", Select).value = "freeze"
        await settled(pilot)
        assert app.query_one("#freeze_embeddings", Switch).value
        target = tmp_path / "out.json"
        await pilot.press("escape")
        app.main.action_export()
        await settled(pilot)
        from tui.explorer.dialogs import ExportScreen

        assert isinstance(app.screen, ExportScreen)
        app.screen.query_one("#path").value = str(target)
        await pilot.press("enter")
        await settled(pilot)
    data = json.loads(target.read_text(encoding="utf-8"))
    tree = build_tree(config)
    embeddings = tree.groups()["embeddings"]
    assert data["trainable"] == tree.total - embeddings and data["frozen"]["count"] == embeddings
    assert data["method"] == "embeddings frozen"


# Items 6, 25, 13: an adapter's base found as a user expects, named with --base, cycles refused ----------------

ADAPTERS = __import__("pathlib").Path(__file__).parent / "fixtures" / "adapters"


def adapter_at(folder: Any, base: object) -> Any:
    """peft's roberta-token adapter (tests/fixtures/adapters) copied to `folder`, its base named `base`."""
    import shutil

    shutil.copytree(ADAPTERS / "roberta-token", folder)
    config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = base
    (folder / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def base_at(folder: Any) -> Any:
    import shutil

    shutil.copytree(ADAPTERS / "base-roberta", folder)
    return folder


def counted(*argv: str) -> tuple[dict[str, Any], str]:
    done = run("count", *argv, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_item_6_a_base_relative_to_where_the_script_ran_is_found(tmp_path: Any, monkeypatch: Any) -> None:
    """peft writes base_model_name_or_path as the script passed it (`"base"`): relative to the directory it ran in."""
    base_at(tmp_path / "run" / "base")
    adapter = adapter_at(tmp_path / "run" / "out" / "adapter", "base")
    monkeypatch.chdir(tmp_path / "run")
    data, err = counted(str(adapter))
    assert data["model"] == "RobertaForTokenClassification" and data["adapter_file"]["clean"]
    assert "the adapter's base model: " in err and "('base', found relative to the working directory)" in err


def test_item_6_a_base_beside_the_adapter_folder_is_found_from_anywhere(tmp_path: Any, monkeypatch: Any) -> None:
    base_at(tmp_path / "work" / "base")
    adapter = adapter_at(tmp_path / "work" / "adapter", "base")
    monkeypatch.chdir(tmp_path)
    data, err = counted(str(adapter))
    assert data["adapter_file"]["clean"] and "found relative to the adapter folder's parent" in err
    inside = adapter_at(tmp_path / "other", "../work/base")  # (the repository's fixtures' own layout)
    assert "found relative to the adapter's folder" in counted(str(inside))[1]


def test_item_6_a_base_not_found_names_the_file_the_key_the_value_and_what_was_tried(tmp_path: Any) -> None:
    adapter = adapter_at(tmp_path / "adapter", "../../nowhere/base")
    done = run("count", str(adapter))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    said = done.stderr
    assert "adapter_config.json" in said and "base_model_name_or_path" in said and "'../../nowhere/base'" in said
    assert str(tmp_path / "adapter" / ".." / ".." / "nowhere" / "base") in said and "--base SOURCE" in said


def test_item_6_a_null_base_asks_for_base_and_base_names_it(tmp_path: Any) -> None:
    adapter = adapter_at(tmp_path / "adapter", None)
    done = run("count", str(adapter))
    assert done.returncode == 2 and "base_model_name_or_path" in done.stderr and "--base SOURCE" in done.stderr
    base = base_at(tmp_path / "somewhere" / "roberta")
    data, err = counted(str(adapter), "--base", str(base))
    assert data["adapter_file"]["clean"] and "(named by --base)" in err
    done = run("count", str(adapter), "--base", "roberta-base", "--format", "json")  # (a preset: its sizes, the
    data = json.loads(done.stdout)  # adapter's head; the adapter's file, made on a small model, differs: exit 1)
    assert data["model"] == "RobertaForTokenClassification" and data["config"]["hidden_size"] == 768
    assert done.returncode == 1 and not data["adapter_file"]["clean"]
    done = run("count", "--preset", "roberta-base", "--base", str(base))
    assert done.returncode == 2 and "--base names a PEFT adapter's base model" in done.stderr
    done = run("count", str(base), "--base", "roberta-base")
    assert done.returncode == 2 and "no adapter folder" in done.stderr


@pytest.mark.parametrize("cycle", ["self", "pair"])
def test_item_25_a_cycle_of_bases_is_refused_by_name_with_the_chain(tmp_path: Any, cycle: str) -> None:
    """An adapter whose base is itself (`"."`), or another adapter that names the first, crashed with a
    RecursionError (exit 70, "internal error")."""
    if cycle == "self":
        first = adapter_at(tmp_path / "a", ".")
    else:
        first = adapter_at(tmp_path / "a", "../b")
        adapter_at(tmp_path / "b", "../a")
    done = run("count", str(first))
    assert done.returncode == 2 and "a cycle of adapter bases: " in done.stderr, done.stderr
    assert "adapter_config.json" in done.stderr and "Traceback" not in done.stderr
    if cycle == "pair":
        assert f"{tmp_path / 'a'} → {tmp_path / 'b'} → {tmp_path / 'a'}" in done.stderr


async def test_items_13_and_6_the_open_dialog_takes_a_preset_name_and_an_adapters_base(tmp_path: Any) -> None:
    """The open dialog (`o`) refused `roberta-base`, which the command line accepts; and had no way to name an
    adapter's base."""
    from textual.widgets import Input

    from tui.explorer.app import make_app
    from tui.explorer.dialogs import OpenScreen
    from tui.presets import load_catalog

    from .scenarios import settled

    adapter = adapter_at(tmp_path / "adapter", None)
    base = base_at(tmp_path / "elsewhere")
    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("o")
        await settled(pilot)
        assert isinstance(app.screen, OpenScreen)
        app.screen.query_one("#open-path", Input).value = "roberta-base"
        await pilot.press("enter")
        await settled(pilot)
        assert not isinstance(app.screen, OpenScreen) and app.main.model.config.model_type == "roberta"
        await pilot.press("o")
        await settled(pilot)
        app.screen.query_one("#open-path", Input).value = str(adapter)
        await pilot.press("enter")
        await settled(pilot)
        assert isinstance(app.screen, OpenScreen)  # (no base: the error stays in the prompt, naming --base)
        assert "base_model_name_or_path" in str(app.screen.query_one("#open-error").render())
        app.screen.query_one("#open-base", Input).value = str(base)
        app.screen.query_one("#open-base", Input).focus()
        await pilot.press("enter")
        await settled(pilot)
        assert not isinstance(app.screen, OpenScreen)
        assert app.main.model.config.hf_class == "RobertaForTokenClassification" and app.main.adapter is not None


def test_item_25_an_adapter_keys_refusal_names_the_file_and_the_key_not_a_flag(tmp_path: Any) -> None:
    base_at(tmp_path / "base")
    adapter = adapter_at(tmp_path / "adapter", "../base")
    config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    config["target_modules"] = ["no_such_module"]
    (adapter / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    for command in ("count", "compute"):
        done = run(command, str(adapter))
        assert done.returncode == 2 and "target_modules" in done.stderr and "adapter_config.json" in done.stderr
        assert "--lora-targets" not in done.stderr, done.stderr


def test_item_8_the_answer_leads_and_brief_fits_a_24_line_terminal() -> None:
    """`compute … --gpu-memory 24GB` printed 131 lines, its answer at line 100."""
    argv = ("compute", "--preset", "bert-base-uncased", "--head", "mlm", "--batch", "32", "--seq", "128",
            "--gpu-memory", "24GiB")
    whole = run(*argv).stdout.splitlines()
    data = json.loads(run(*argv, "--format", "json").stdout)
    asked = next(fit for fit in data["fits"] if fit["asked"])
    answer = f"on 24 GiB: batch 32 {asked['at_batch']}; the largest batch that runs there: {asked['max_batch']:,}"
    assert whole.index(answer) <= 5
    brief = run(*argv, "--brief").stdout.splitlines()
    assert brief.index(answer) <= 5 and len(brief) <= 24 and any("(--gpu-memory)" in line for line in brief)
    # every size's row, how they were found said in a sentence (the whole table says it in a paragraph)
    rows = [line for line in whole if " GiB  batch" in line]
    assert rows and [line for line in brief if " GiB  batch" in line] == rows
    assert any("derived op by op" in line for line in whole) and not any("derived op by op" in line for line in brief)
    assert len(brief) <= len(whole) // 4


def test_item_20_options_that_change_nothing_are_said_so() -> None:
    done = run("compute", "--preset", "bert-base-uncased", "--head", "mlm", "--batch", "8", "--seq", "64",
               "--mode", "inference", "--optimizer", "sgd", "--choices", "3")
    assert done.returncode == 0
    assert "--choices 3: answers per example of a multiple-choice head; BertForMaskedLM has none" in done.stderr
    assert "--optimizer sgd: an inference forward runs no optimizer" in done.stderr
    quiet = run("compute", "--preset", "bert-base-uncased", "--head", "multiple-choice", "--batch", "8", "--seq",
                "64", "--choices", "3", "--optimizer", "sgd")
    assert "--choices" not in quiet.stderr and "--optimizer" not in quiet.stderr


@pytest.mark.parametrize("command", ["count", "compute"])
@pytest.mark.parametrize(("flags", "said"), [
    (("--lora-layers", "99"), "--lora-layers 99: holds none of the targets, which BertModel has in layers 0 … 11"),
    (("--lora-targets-regex", "("), "--lora-targets-regex (: is not a regular expression"),
    (("--lora-targets-regex", "zzz"), "--lora-targets-regex zzz: matches no module of BertModel"),
])
def test_item_11_a_refusal_names_the_flag_that_set_the_value(command: str, flags: tuple[str, str], said: str) -> None:
    """`--lora-layers 99` on 12 layers said `--lora-targets query, value: matches no module`; `--lora-targets-regex
    '('` reported itself as `--lora-targets`."""
    done = run(command, "--preset", "bert-base-uncased", "--lora-r", "8", *flags)
    assert done.returncode == 2 and done.stderr == f"bert-tui {command}: error: {said}" + done.stderr.split(said)[1]
    assert done.stderr.count("\n") == 1


def test_item_12_diff_names_each_sides_class() -> None:
    """`diff A A --head mlm` printed B without its class or "(edited)": two lines with the same name."""
    done = run("diff", "bert-base-uncased", "bert-base-uncased", "--head", "mlm")
    assert done.stdout.splitlines()[:2] == ["A: BertModel · bert-base-uncased  109,482,240",
                                            "B: BertForMaskedLM · bert-base-uncased  109,514,298"]
    data = json.loads(run("diff", "bert-base-uncased", "bert-base-uncased", "--head", "mlm", "--format",
                          "json").stdout)
    assert (data["model_a"], data["model_b"]) == ("BertModel", "BertForMaskedLM")


@pytest.mark.parametrize(("title", "name"), [
    ("cfgs/my_config.json", "my_config"), ("cfgs/my_config.json (edited)", "my_config-edited"),
    ("models/tiny/config.json", "tiny"), ("bert-base-uncased (edited)", "bert-base-uncased-edited"),
    ("ckpt/model.safetensors", "ckpt"), ("..", "my-preset"), ("x" * 100 + ".json", "x" * 64),
])
def test_item_16_a_saved_preset_is_named_after_the_file_not_its_path_and_suffix(title: str, name: str) -> None:
    """Saving an opened `my_config.json` suggested `cfgs-my_config.json` and wrote `….json.yaml`."""
    from tui.presets import check_preset_name, suggest_preset_name

    assert suggest_preset_name(title) == name == check_preset_name(name)


def test_item_17_compute_csv_has_the_workload_and_each_key_once() -> None:
    import csv

    done = run("compute", "--preset", "bert-base-uncased", "--batch", "8", "--seq", "64", "--gpu-memory", "24GiB",
               "--format", "csv")
    rows = list(csv.reader(done.stdout.splitlines()))[1:]
    keys = [key for key, _ in rows]
    assert len(keys) == len(set(keys))
    values = dict(rows)
    assert values["workload.batch"] == "8" and values["workload.seq"] == "64" and values["model"] == "BertModel"
    assert values["fits.gpu_memory.bytes"] == str(24 << 30)
    assert values["fits.gpu_memory.max_batch"] == values["fits.24GiB.max_batch"]


def test_item_4_a_pinned_baseline_of_another_class_is_matched_module_by_module() -> None:
    """Pin bert-large (BertModel), open a BertForTokenClassification config: `bert Δ +35,824,640` while its children
    said −14.9 M and −283 M. The body is the baseline's BertModel, its modules the baseline's own; a head the
    baseline lacks says so (None: the tree shows `Δ new`)."""
    from tui.core import build_tree
    from tui.core.count.diff import delta_against
    from tui.presets import load_catalog

    catalog = load_catalog()
    large = build_tree(catalog.get("bert-large-uncased").config)
    base = build_tree(catalog.get("bert-base-uncased").config.replace(head="token-classification"))
    embeddings = (30522 + 512 + 2 + 2) * 768 - (30522 + 512 + 2 + 2) * 1024  # (V + P + T)·H + 2H, each side
    layer = lambda h, i: 4 * h * h + 2 * h * i + 9 * h + i
    assert delta_against(base, "bert.embeddings", large) == embeddings
    assert delta_against(base, "bert.encoder", large) == 12 * layer(768, 3072) - 24 * layer(1024, 4096)
    assert delta_against(base, "bert.encoder.layer.0", large) == layer(768, 3072) - layer(1024, 4096)
    assert delta_against(base, "bert", large) == base.find("bert").count - large.total  # noqa: the body ↔ BertModel
    assert delta_against(base, "classifier", large) is None and delta_against(base, "", large) == \
        base.total - large.total
    assert delta_against(large, "embeddings", base) == -embeddings  # (and the other way round)
    assert delta_against(large, "pooler", base) is None  # (token classification has no pooler)


def test_item_5_the_sum_of_the_kinds_is_not_read_as_a_bound() -> None:
    """`sum … never all held at once` read as an upper bound, but under LoRA it is below the peak (bert-base
    32 × 128: sum 2.0 GiB, peak 2.2 GiB)."""
    from tui.core import build_tree
    from tui.core.count.lora import Lora
    from tui.core.step.method import method_of
    from tui.formats.compute import compute_text

    config = BertConfig()
    method = method_of(build_tree(config), config, Lora(r=8, target_modules=("query", "value")))
    result = compute(config, Workload(32, 128, device="cuda"), method=method)
    assert result.total < result.peak
    line = next(line for line in compute_text(result, "bert-base-uncased").splitlines() if "sum of the above" in line)
    assert line.endswith("not a bound on the peak") and "never all held" not in line


def test_item_18_an_unreachable_hub_id_points_at_the_built_in_preset_of_the_same_model() -> None:
    """Offline, `count google-bert/bert-base-uncased` failed without pointing at the built-in preset; the hint
    named an environment variable where --offline works too."""
    done = run("count", "google-bert/bert-base-uncased", "--offline")
    assert done.returncode == 2 and "the built-in preset bert-base-uncased holds its config" in done.stderr
    assert "HF_HUB_OFFLINE=1 bert-tui" not in done.stderr
    other = run("count", "someorg/no-such-model", "--offline")
    assert other.returncode == 2 and "built-in preset" not in other.stderr


def test_item_18_the_explorer_opens_on_the_default_and_shows_what_could_not_be_opened(monkeypatch: Any) -> None:
    """The explorer exited instead of opening on the default preset with the error shown."""
    from tui.cli import explore

    opened: dict[str, Any] = {}
    monkeypatch.setattr(explore, "terminal", lambda: (True, True))
    monkeypatch.setattr(explore, "explore", lambda selection, mouse, notice=None: opened.update(
        selection=selection, notice=notice) or 0)
    assert explore.run(["google-bert/bert-base-uncased", "--offline"]) == 0
    assert opened["selection"].title == "bert-base-uncased"
    assert opened["notice"].startswith("google-bert/bert-base-uncased: is not in the Hugging Face cache")
    assert opened["notice"].endswith("showing bert-base-uncased instead (o opens another model)")
    monkeypatch.setattr(explore, "terminal", lambda: (False, False))  # (a pipe: the error, exit 2, as before)
    from tui.cli.common import UsageError

    with pytest.raises(UsageError):
        explore.run(["google-bert/bert-base-uncased", "--offline"])


async def test_item_18_the_notice_is_shown_once_the_explorer_is_up() -> None:
    from tui.explorer.app import make_app
    from tui.presets import load_catalog

    from .scenarios import settled

    app = make_app(load_catalog(), notice="x/y: cannot be read: showing bert-base-uncased instead")
    shown: list[tuple[str, str]] = []
    notify = app.notify
    app.notify = lambda message, **kw: shown.append((message, kw.get("severity", ""))) or notify(message, **kw)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        assert ("x/y: cannot be read: showing bert-base-uncased instead", "error") in shown


async def test_item_15_zoomed_at_80x24_the_key_bar_stays_and_says_how_to_leave() -> None:
    from tui.explorer.app import make_app
    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.presets import load_catalog

    from .scenarios import settled
    from .test_app import text_of

    app = make_app(load_catalog())
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        await pilot.press("f3", "z")
        await settled(pilot)
        assert app.main.maximized is app.query_one(ParamTreeView)
        keybar = app.query_one("#keybar")
        assert keybar.display and keybar.region.height and keybar.region.y == 23
        assert "z Zoom" in text_of(app, "#keys")
        await pilot.press("escape")
        await settled(pilot)
        assert app.main.maximized is None


def test_item_14_a_cut_title_keeps_edited_whole() -> None:
    """At 80 columns the summary read `BertModel · bert-la…dited)`: the mark that the form changed it, cut."""
    from tui.plain import middle_ellipsis

    assert middle_ellipsis("bert-large-uncased (edited)", 14) == "bert-…(edited)"
    assert middle_ellipsis("bert-large-uncased (edited)", 27) == "bert-large-uncased (edited)"


def test_item_14_an_adapters_title_names_its_base_by_its_folder_not_its_whole_path(tmp_path: Any) -> None:
    """At 120 columns the adapter's name read `(LoRA on /…nu3/peft/base/config.json)`: the base by its folder
    in the title, its whole path in the note."""
    from tui.sources import open_model

    base_at(tmp_path / "deep" / "er" / "base")
    adapter = adapter_at(tmp_path / "adapter", str(tmp_path / "deep" / "er" / "base" / "config.json"))
    source, _ = open_model(str(adapter))
    assert source.name == f"{adapter} (LoRA on base)"
    assert any(str(tmp_path / "deep" / "er" / "base" / "config.json") in note for note in source.notes)


async def test_item_15_an_adapters_note_on_a_tensor_shows_in_the_detail_strip_at_80x24() -> None:
    """The tree's notes (an open adapter's `+ LoRA A …`) were visible only when zoomed at 80 columns: the detail
    strip of the highlighted tensor says them too."""
    from tui.explorer.app import make_app
    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.presets import load_catalog
    from tui.sources import open_model

    from .scenarios import settled
    from .test_app import text_of

    source, _ = open_model(str(ADAPTERS / "roberta-token"))
    app = make_app(load_catalog(), source.config, title=source.name, adapter=source.method)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        await pilot.press("f3")
        await settled(pilot)
        tree = app.query_one(ParamTreeView)
        marked = [name for name in ("roberta.encoder.layer.0.attention.self.query.weight", "classifier.weight")
                  if tree.mark_for(name)]
        assert marked, "the adapter marks its tensors"
        await pilot.press("e")  # expand all: every tensor's line is in the tree
        await settled(pilot)
        line = next(n for n in _walk(tree.root) if n.data == marked[-1])
        tree.move_cursor(line)
        await settled(pilot)
        assert (tree.mark_for(marked[-1]) or "?").strip() in " ".join(text_of(app, "#detail").split())


def _walk(node: Any) -> Any:
    yield node
    for child in node.children:
        yield from _walk(child)


async def test_item_14_the_full_fine_tuning_line_never_parts_a_size_from_its_unit() -> None:
    """The Compute pane's comparison line broke between a number and its unit (`24` / `GiB fits batch ≤ 281`):
    its fits clause starts a line of its own, short enough for any pane."""
    from textual.widgets import Select

    from tui.explorer.app import make_app
    from tui.presets import load_catalog

    from .scenarios import settled
    from .test_compute_pane import result_text

    catalog = load_catalog()
    app = make_app(catalog, catalog.get("roberta-base").config, title="roberta-base", preset="roberta-base")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f5")
        await settled(pilot)
        app.query_one("#method", Select).value = "lora"
        await settled(pilot)
        lines = result_text(app).splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("full fine-tuning: trains "))
        fits = lines[at + 1]
        assert fits.startswith("  24 GiB fits batch ≤ "), lines[at:at + 2]
        assert not any(line.rstrip().endswith((" 24", " 16", " 40")) for line in lines)


async def test_item_4_what_the_pinned_model_has_and_this_lacks_is_said_where_a_parents_change_includes_it() -> None:
    """Pin bert-large (BertModel), open its token classification at bert-base's sizes: the body's change includes
    the pinned pooler's going, which no child row shows; the detail strip says it."""
    from textual.widgets import Select

    from tui.explorer.app import make_app
    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.presets import load_catalog

    from .scenarios import settled
    from .test_app import text_of

    catalog = load_catalog()
    app = make_app(catalog, catalog.get("bert-large-uncased").config, title="bert-large-uncased",
                   preset="bert-large-uncased")
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot)
        await pilot.press("b")
        app.main.open_preset("bert-base-uncased")
        await settled(pilot)
        app.query_one("#head", Select).value = "token-classification"
        await settled(pilot)
        tree = app.query_one(ParamTreeView)
        body = next(node for node in tree.root.children if node.data == "bert")
        tree.move_cursor(body)
        await settled(pilot)
        detail = " ".join(text_of(app, "#detail").split())
        assert "not in this model, pinned has: pooler, -1,049,600" in detail, detail
