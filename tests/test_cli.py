"""`bert-tui count` and `bert-tui presets` as users script them: formats, the JSON contract, bad input."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.cli import main
from tui.core import build_tree
from tui.presets import load_catalog

from .clirun import completed
from .hf_cases import hf_total, load_hf_cases


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_for_bert_base(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "count", "--preset", "bert-base-uncased", "--format", "json")
    data = json.loads(out)
    assert (code, err) == (0, "")
    assert data["model"] == "BertModel" and data["total"] == 109_482_240 == hf_total("bert-base-uncased/none")
    assert data["config"] == {
        "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2,
        "head": "none", "pooler": True, "num_labels": 2, "model_type": "bert", "tie_word_embeddings": True,
    }
    hf_params = next(c["params"] for c in load_hf_cases() if c["id"] == "bert-base-uncased/none")
    assert len(data["parameters"]) == 199
    assert [[p["name"], p["shape"]] for p in data["parameters"]] == hf_params
    assert data["parameters"][0] == {
        "name": "embeddings.word_embeddings.weight", "shape": [30522, 768], "count": 23_440_896, "kind": "embedding",
    }
    assert data["groups"] == {"embeddings": 23_837_184, "encoder": 85_054_464, "pooler": 590_592}
    assert data["tied"] == []
    assert data["memory_bytes"]["float32"] == 4 * data["total"]


@pytest.mark.parametrize(
    ("argv", "case_id"),
    [
        (["--head", "mlm"], "bert-base-uncased/mlm"),
        (["--head", "pretraining", "--preset", "bert-large-uncased"], "bert-large-uncased/pretraining"),
        (["--no-pooler", "--preset", "example-40k"], "example-40k/none-no-pooler"),
        (["--head", "multiple-choice", "--preset", "bert-tiny"], "bert-tiny/multiple-choice"),
    ],
)
def test_heads_and_no_pooler_count_as_transformers(capsys: pytest.CaptureFixture[str], argv: list[str], case_id: str) -> None:
    code, out, _ = run(capsys, "count", *argv, "--format", "json")
    case = next(c for c in load_hf_cases() if c["id"] == case_id)
    data = json.loads(out)
    assert code == 0 and data["total"] == case["total"] and data["model"] == case["class"]
    assert {t["name"]: t["tied_to"] for t in data["tied"]} == case["tied"]


def test_overrides_apply_on_top_of_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", "--preset", "example-40k", "--num-hidden-layers", "9", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["config"]["vocab_size"] == 40000
    assert data["total"] == hf_total("example-40k/none") + 7_087_872


def test_csv_lists_every_parameter_with_tied_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "count", "--head", "mlm", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 204  # 202 unique + 2 tied
    assert sum(int(r["count"]) for r in rows) == hf_total("bert-base-uncased/mlm")
    decoder = next(r for r in rows if r["name"] == "cls.predictions.decoder.weight")
    assert (decoder["count"], decoder["tied_to"]) == ("0", "bert.embeddings.word_embeddings.weight")


def test_markdown_and_table_show_the_exact_total(capsys: pytest.CaptureFixture[str]) -> None:
    _, markdown, _ = run(capsys, "count", "--preset", "bert-large-uncased", "--format", "markdown")
    assert "**Total: 335,141,888** (335.14 M)" in markdown
    assert "| `encoder.layer.23.output.LayerNorm.bias` | [1024] | 1,024 | H = 1,024 |" in markdown
    code, table, _ = run(capsys, "count", "--preset", "example-40k")
    assert code == 0 and "88,409,856" in table and "encoder.layer.0 … 7" in table
    assert max(len(line) for line in table.splitlines()) <= 80


def test_presets_lists_every_preset_with_its_core_total(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "presets", "--format", "json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0 and set(rows) == set(load_catalog().presets)
    assert rows["bert-large-uncased"]["total"] == hf_total("bert-large-uncased/none")
    _, table, _ = run(capsys, "presets")
    assert "example-40k" in table and "88,409,856" in table


def test_preset_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nconfig:\n  num_hidden_layers: 1\n", encoding="utf-8")
    code, out, _ = run(capsys, "count", "--preset-file", str(path), "--format", "json")
    assert code == 0 and json.loads(out)["total"] == build_tree(load_catalog().get("bert-base-uncased").config.replace(num_hidden_layers=1)).total


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--hidden-size", "770"], "--hidden-size 770: must be a multiple of num_attention_heads (12)"),
        (["--vocab-size", "-3"], "--vocab-size -3: must be between 1 and"),
        (["--num-attention-heads", "0"], "--num-attention-heads 0: must be between 1"),
        (["--intermediate-size", "1.5"], "--intermediate-size 1.5: must be a whole number"),
        (["--type-vocab-size", "abc"], "--type-vocab-size abc: must be a whole number"),
        (["--vocab-size", str(10**30)], "must be between 1 and 2,147,483,647"),
        (["--preset", "bert-huge"], "unknown preset 'bert-huge' (did you mean roberta-large, bert-medium?); known presets: albert-base-v2, albert-large-v2"),
        (["--head", "lm"], "argument --head: invalid choice: 'lm'"),
        (["--head", "sequence-classification", "--no-pooler"], "--no-pooler: BertForSequenceClassification always builds"),
        (["--preset-file", "/no/such/file.yaml"], "/no/such/file.yaml: does not exist"),
        (["--format", "xml"], "argument --format: invalid choice"),
        (["--preset", "a", "--preset-file", "b"], "not allowed with argument"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(argv: list[str], fragment: str) -> None:
    result = cli("count", *argv)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and fragment in result.stderr and "Traceback" not in result.stderr


cli = completed  # the command in this process: its code, output and error as a child's


def child(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real command in a fresh interpreter, as a user's shell runs it (its entry point included)."""
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    "text", ["name: x\nconfig: !!python/object/apply:os.system ['echo pwned']\n", "{{{", "name: x\nconfig:\n  hidden_size: 7.5\n"]
)
def test_broken_preset_file_exits_2_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    result = cli("count", "--preset-file", str(path))
    assert result.returncode == 2 and result.stdout == "" and "pwned" not in result.stdout
    assert str(path) in result.stderr and "Traceback" not in result.stderr


def test_help_explains_flags_in_hf_terms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["count", "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    for text in ("--num-hidden-layers", "HF num_hidden_layers", "BertForMaskedLM", "--no-pooler", "add_pooling_layer"):
        assert text in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--preset", "bert-huge"], "unknown preset 'bert-huge' (did you mean roberta-large, bert-medium?); known presets: albert-base-v2, albert-large-v2"),
        (["--num-attention-heads", "7"], "--hidden-size 768: must be a multiple of num_attention_heads (7)"),
        (["--preset-file", "/no/such.yaml"], "/no/such.yaml: does not exist"),
        (["counts"], "unknown command 'counts'; did you mean `bert-tui count`?"),
    ],
)
def test_explorer_refuses_bad_input_before_opening(argv: list[str], fragment: str) -> None:
    result = cli(*argv)
    assert result.returncode == 2 and fragment in result.stderr and "Traceback" not in result.stderr


def test_explorer_help_lists_the_commands() -> None:
    result = child("--help")
    assert result.returncode == 0
    for text in ("count", "presets", "--preset", "--hidden-size", "opens the explorer"):
        assert text in result.stdout


def test_verify_without_the_extra_says_how_to_install() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
        pytest.skip("the verify extra is installed here: tests/test_live_transformers.py runs verify instead")
    result = child("verify")
    assert result.returncode == 3 and "pip install 'bert-tui[verify]'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.usefixtures("terminal")
@pytest.mark.parametrize(("env", "escdelay", "mouse"), [({"SSH_CONNECTION": "1 2 3 4"}, "250", False), ({}, "100", True),
                                                         ({"SSH_TTY": "/dev/pts/1", "BERT_TUI_MOUSE": "1"}, "250", True)])
def test_explorer_over_ssh_waits_longer_for_escapes_and_leaves_the_mouse_alone(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], escdelay: str, mouse: bool
) -> None:
    from tui.explorer.app import BertTuiApp

    for key in ("SSH_CONNECTION", "SSH_TTY", "ESCDELAY", "BERT_TUI_MOUSE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    seen: dict[str, object] = {}
    monkeypatch.setattr(BertTuiApp, "run", lambda self, **kwargs: seen.update(kwargs))
    assert main(["--preset", "bert-tiny"]) == 0
    import os

    assert os.environ["ESCDELAY"] == escdelay and seen == {"mouse": mouse}


@pytest.mark.parametrize(("argv", "code"), [
    (["diff", "bert-base-uncased", "bert-large-uncased"], 1),
    (["diff", "bert-base-uncased", "bert-base-uncased"], 0),
    (["count", "--checkpoint", "tests/fixtures/checkpoints/legacy", "--hidden-size", "32"], 1),
    (["count", "--checkpoint", "tests/fixtures/checkpoints/legacy"], 0),
])
def test_differences_exit_1_as_diff_does(argv: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """`diff` and a checkpoint that differs from its config exit 1 (they exited 0), as diff(1) does."""
    assert main(argv) == code


@pytest.mark.parametrize("command", [["presets"], ["audit", "110M"], ["diff", "bert-base-uncased", "bert-tiny"]])
@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_presets_audit_and_diff_take_counts_formats(command: list[str], fmt: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    main([*command, "--format", fmt])
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert ("," in first and not first.startswith("#")) if fmt == "csv" else first.startswith("## ")


def test_an_unused_num_labels_and_a_defaulted_workload_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", "--head", "none", "--num-labels", "5", "--format", "json"]) == 0
    assert "--num-labels 5 is unused" in capsys.readouterr().err
    assert main(["compute", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "--batch 32 and --seq 128" in captured.err
    assert json.loads(captured.out)["workload"]["batch"] == 32


@pytest.mark.parametrize("columns", ["80", "100", "200"])
def test_presets_keep_every_name_whole(columns: str) -> None:
    """At 80 columns `bert-base-multilingual-cased` broke in two; names and totals stay whole, the family column
    goes first."""
    result = subprocess.run([sys.executable, "-m", "tui", "presets"], capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": columns}, check=True)
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    for name in load_catalog().presets:
        assert any(f" {name} " in line for line in lines), name


@pytest.mark.parametrize(("argv", "says"), [
    (["--head", "mlm", "--device", "cuda"], "the CUDA caching allocator replayed"),
    (["--head", "mlm", "--device", "cpu"], "working out the step"),
])
def test_a_slow_compute_says_what_it_is_working_out(argv: list[str], says: str, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A compute still running after `NOTICE_AFTER` says so on stderr (`progress`: where a person watches);
    what it says is what is slow: the allocator's replay where the fits are replayed, else the step."""
    import threading

    import tui.cli.compute as command
    import tui.core.step.compute as core

    said: list[str] = []
    noticed = threading.Event()
    monkeypatch.setattr(command, "NOTICE_AFTER", 0.0)
    monkeypatch.setattr(command, "progress", lambda message: (said.append(message), noticed.set()))
    real = core.compute

    def slow(*args: object, **kwargs: object) -> object:  # (as slow as the notice needs: until it is given)
        noticed.wait(5)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(core, "compute", slow)
    code, _, _ = run(capsys, "compute", "--preset", "bert-base-uncased", "--num-hidden-layers", "2", *argv)
    assert code == 0 and len(said) == 1 and says in said[0]


@pytest.mark.parametrize("columns", [None, "", "0", "-3", "wide", "57", "300"])
def test_help_is_as_wide_as_shutil_says_the_terminal_is(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The help's width is read without shutil (2-3 ms of `count`'s ~90 ms start), the way shutil reads it: COLUMNS
    when a positive number, else standard output's terminal, else 80."""
    import shutil

    from tui.cli.common import _terminal_width

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _terminal_width() == shutil.get_terminal_size().columns
