"""Hostile input, second round: every example of the hostile-input issue as a regression test, then generated
input (hypothesis, seeded) driving the readers, the CLI and the explorer's dialogs.

Each CLI run must end within a time bound with exit 0, 1 or 2, one line on stderr when it refuses, no
traceback, and nothing from the file reaching the terminal raw (no ESC, no forged line).
"""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import Input

from tui.cli import main
from tui.explorer.dialogs import ConfirmScreen, ExportScreen, OpenScreen
from tui.io.files import MAX_DEPTH, ReadError, parse_json, parse_yaml, write_atomic
from tui.presets import PresetError, find_preset, load_catalog, load_preset

from .clirun import run
from .test_app import app_for

FIXTURES = Path(__file__).parent / "fixtures"
CHECKPOINTS = FIXTURES / "checkpoints"
HUB_CONFIG = FIXTURES / "hub" / "bert-base-uncased" / "config.json"
LONG = "x" * 300  # one path component over the 255-byte limit
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def cli(*argv: str, timeout: float = 20, **env: str) -> subprocess.CompletedProcess[str]:
    """The real command in a child process: a hang fails the test (TimeoutExpired) instead of blocking."""
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, check=False,
                          timeout=timeout, env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def refused(result: subprocess.CompletedProcess[str] | tuple[int, str, str], fragment: str = "") -> str:
    code, stdout, stderr = (result.returncode, result.stdout, result.stderr) if not isinstance(result, tuple) else result
    assert code == 2, (code, stdout, stderr)
    assert stderr.count("\n") == 1 and "Traceback" not in stderr and "\x1b" not in stderr, stderr
    assert fragment in stderr, stderr
    return stderr


def header_file(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


# Readers trust nothing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--config", "--preset-file", "--checkpoint"])
def test_a_fifo_is_refused_by_name_not_read_forever(tmp_path: Path, flag: str) -> None:
    fifo = tmp_path / ("f.safetensors" if flag == "--checkpoint" else "f.json" if flag == "--config" else "f.yaml")
    os.mkfifo(fifo)
    refused(cli("count", flag, str(fifo), timeout=10), "is a FIFO (named pipe), not a regular file")


@pytest.mark.parametrize("flag", ["--config", "--preset-file", "--checkpoint"])
def test_a_character_device_is_refused(flag: str) -> None:
    refused(cli("count", flag, "/dev/zero", timeout=10), "is a character device, not a regular file")


def test_a_fifo_in_the_user_presets_folder_leaves_the_others(isolated_user_presets: Path) -> None:
    isolated_user_presets.mkdir(parents=True)
    os.mkfifo(isolated_user_presets / "stuck.yaml")
    (isolated_user_presets / "broken.yaml").write_text("name: [unclosed", encoding="utf-8")
    (isolated_user_presets / "mine.yaml").write_text("name: mine\nconfig: {num_hidden_layers: 2}\n", encoding="utf-8")
    result = cli("presets", "--format", "json", timeout=10)
    assert result.returncode == 0
    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"mine", "bert-base-uncased"} <= names
    assert "stuck.yaml: is a FIFO" in result.stderr and "broken.yaml" in result.stderr
    assert json.loads(cli("count", "--preset", "mine", "--format", "json").stdout)["config"]["num_hidden_layers"] == 2


@pytest.mark.parametrize("where", ["config", "preset", "header", "index"])
def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path, where: str) -> None:
    deep = deep_json(100_000)
    if where == "config":
        (tmp_path / "config.json").write_text('{"a": ' + deep + "}", encoding="utf-8")
        result = cli("count", "--config", str(tmp_path / "config.json"))
    elif where == "preset":
        (tmp_path / "p.yaml").write_text("config: " + "[" * 5000 + "]" * 5000, encoding="utf-8")
        result = cli("count", "--preset-file", str(tmp_path / "p.yaml"))
    elif where == "header":
        result = cli("count", "--checkpoint", str(header_file(tmp_path / "m.safetensors", ('{"a": ' + deep + "}").encode())))
    else:
        (tmp_path / "config.json").write_bytes(HUB_CONFIG.read_bytes())
        (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": ' + deep + "}", encoding="utf-8")
        result = cli("count", "--checkpoint", str(tmp_path))
    refused(result, f"nests deeper than {MAX_DEPTH} levels")


def test_huge_integers_are_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"hidden_size": ' + "7" * 5000 + "}", encoding="utf-8")
    refused(cli("count", "--config", str(tmp_path / "config.json")), "integer of 5,000 digits")
    (tmp_path / "p.yaml").write_text("config: {hidden_size: " + "7" * 5000 + "}\n", encoding="utf-8")
    refused(cli("count", "--preset-file", str(tmp_path / "p.yaml")), "integer of 5,000 digits")


def test_yaml_aliases_are_refused_billion_laughs(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}] " for i in range(8)]
    (tmp_path / "lol.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    refused(cli("count", "--preset-file", str(tmp_path / "lol.yaml"), timeout=10), "aliases (*name) are not allowed")


def test_mapping_keys_that_are_not_text_are_refused(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("config: {1: 2, vocab_size: 3}\n", encoding="utf-8")
    refused(cli("count", "--preset-file", str(tmp_path / "p.yaml")), "mapping key '1' is not text")


def test_shard_names_must_be_plain_file_names(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(HUB_CONFIG.read_bytes())
    for shard in ["a\x00b.safetensors", "../x.safetensors", "/etc/passwd", LONG + ".safetensors"]:
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}), encoding="utf-8")
        refused(cli("count", "--checkpoint", str(tmp_path)), "is not a plain file name beside the index")


@pytest.mark.parametrize("flag", ["--config", "--checkpoint", "--preset-file"])
def test_names_over_255_bytes_are_one_line(tmp_path: Path, flag: str) -> None:
    refused(cli("count", flag, str(tmp_path / LONG)), "name too long")


def test_a_long_xdg_folder_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    result = cli("presets", XDG_CONFIG_HOME=str(tmp_path / LONG))
    assert result.returncode == 0 and "bert-base-uncased" in result.stdout and "name too long" in result.stderr
    assert json.loads(cli("count", "--format", "json", XDG_CONFIG_HOME=str(tmp_path / LONG)).stdout)["total"] > 0


@pytest.mark.parametrize("value", ["²", "١٢", "12\x00", "1e3"])
def test_digits_int_refuses_are_a_usage_error(value: str) -> None:
    refused(run("count", "--hidden-size", value), "must be a whole number")


def test_a_dtype_written_as_a_list(tmp_path: Path) -> None:
    path = header_file(tmp_path / "m.safetensors", b'{"w": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4)
    refused(cli("count", "--checkpoint", str(path)), "unknown dtype ['F32']")


# Markup and escapes ------------------------------------------------------------------------------------------


def test_a_path_longer_than_the_table_is_printed_whole(tmp_path: Path) -> None:
    """The count's heading was the table's title, wrapped at the table's width: a long path was cut in two
    (found when the suite ran in parallel workers, whose temporary folders are longer)."""
    folder = tmp_path / ("a-long-folder-name-" * 6)
    folder.mkdir()
    (folder / "config.json").write_bytes(HUB_CONFIG.read_bytes())
    result = cli("count", "--config", str(folder), COLUMNS="400")
    assert result.returncode == 0 and str(folder) in result.stdout.splitlines()[0]


def test_markup_in_a_path_is_shown_as_written(tmp_path: Path) -> None:
    folder = tmp_path / "[/]x[b]"  # "[" holding "]x[b]": the path reads [/]x[b]
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(HUB_CONFIG.read_bytes())
    result = cli("count", "--config", str(folder), COLUMNS="200")
    assert result.returncode == 0 and "[/]x[b]" in result.stdout
    result = cli("audit", "110M", "--config", str(folder))
    assert result.returncode == 0 and "[/]x[b]" in result.stdout
    assert cli("diff", str(folder), "bert-tiny").returncode == 1  # they differ


def test_tensor_names_with_escapes_cannot_reach_the_terminal(tmp_path: Path) -> None:
    evil = {"\x1b]52;c;cHduZWQ=\x07w": 1, "x\n  matches the config: every tensor present": 1, "\x1b[31mred": 1}
    header, offset = {}, 0
    for name, n in evil.items():
        header[name] = {"dtype": "F32", "shape": [n], "data_offsets": [offset, offset + 4 * n]}
        offset += 4 * n
    path = header_file(tmp_path / "model.safetensors", json.dumps(header).encode(), b"\0" * offset)
    (tmp_path / "config.json").write_bytes(HUB_CONFIG.read_bytes())
    result = cli("count", "--checkpoint", str(path))
    assert result.returncode == 1 and "\x1b" not in result.stdout and "\x07" not in result.stdout  # it differs
    assert "\\x1b]52;c;" in result.stdout
    assert not any(line.startswith("  matches the config") for line in result.stdout.splitlines())


def test_a_preset_name_with_markup_is_refused_and_titles_are_shown_as_written(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("name: '[b]x[/]'\n", encoding="utf-8")
    with pytest.raises(PresetError, match="not a plain preset name"):
        load_preset(tmp_path / "m.yaml")
    (tmp_path / "t.yaml").write_text("name: t\ntitle: '[/]\\e[31m'\nconfig: {num_hidden_layers: 1}\n", encoding="utf-8")
    result = cli("count", "--preset-file", str(tmp_path / "t.yaml"))
    assert result.returncode == 0 and "\x1b" not in result.stdout


# Nothing silently wrong --------------------------------------------------------------------------------------


def test_an_hf_config_given_as_a_preset_says_use_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(HUB_CONFIG.read_bytes())  # JSON is YAML
    refused(cli("count", "--preset-file", str(path)), "is a Hugging Face config.json, not a preset: open it with --config")


def test_a_misspelt_top_level_key_is_named(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: p\nconifg: {num_hidden_layers: 2}\n", encoding="utf-8")
    refused(cli("count", "--preset-file", str(tmp_path / "p.yaml")), "conifg: unknown key")


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_preset_name_is_refused(name: str) -> None:
    refused(run("count", "--preset", name), "unknown preset")


def test_shadowing_is_the_same_in_every_command(isolated_user_presets: Path) -> None:
    isolated_user_presets.mkdir(parents=True)
    (isolated_user_presets / "other-file-name.yaml").write_text(
        "name: bert-base-uncased\nconfig: {num_hidden_layers: 3}\n", encoding="utf-8")
    listed = {row["name"]: row for row in json.loads(run("presets", "--format", "json")[1])}
    counted = json.loads(run("count", "--preset", "bert-base-uncased", "--format", "json")[1])
    assert listed["bert-base-uncased"]["config"]["num_hidden_layers"] == counted["config"]["num_hidden_layers"] == 3
    assert find_preset("bert-base-uncased").config == load_catalog().get("bert-base-uncased").config


def test_a_tensor_in_two_shards_is_counted_once_and_reported(tmp_path: Path) -> None:
    source = CHECKPOINTS / "sharded"
    for file in source.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    first = tmp_path / "model-00001-of-00004.safetensors"
    raw = first.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    name = next(n for n in header if n != "__metadata__")
    second = tmp_path / "model-00002-of-00004.safetensors"
    raw2 = second.read_bytes()
    (length2,) = struct.unpack("<Q", raw2[:8])
    header2, data2 = json.loads(raw2[8:8 + length2]), raw2[8 + length2:]
    entry = header[name]
    size = entry["data_offsets"][1] - entry["data_offsets"][0]
    header2[name] = {**entry, "data_offsets": [len(data2), len(data2) + size]}
    header_file(second, json.dumps(header2).encode(), data2 + b"\0" * size)
    result = json.loads(cli("count", "--checkpoint", str(tmp_path), "--format", "json").stdout)
    assert result["checkpoint"]["duplicates"] == [name]
    assert result["checkpoint"]["clean"] and result["checkpoint"]["held"] == result["total"]
    assert f"stored in more than one shard, counted once: {name}" in cli("count", "--checkpoint", str(tmp_path)).stdout


def test_a_sharded_checkpoint_in_the_hub_cache_layout(tmp_path: Path) -> None:
    """Shards in the Hugging Face cache are symbolic links into blobs/."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / ("0" * 40)
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for number, file in enumerate(sorted((CHECKPOINTS / "sharded").iterdir())):
        (blobs / f"blob{number}").write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(Path("../..") / "blobs" / f"blob{number}")
    result = cli("count", "--checkpoint", str(snapshot), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["checkpoint"]["clean"]


# Output and environment --------------------------------------------------------------------------------------


def test_a_full_disk_on_stdout_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "tui", "count", "--format", "json"], stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=20, check=False)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "cannot write the output: No space left on device" in result.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_an_ascii_stdout_gets_escaped_text_not_a_traceback(fmt: str) -> None:
    result = cli("count", "--format", fmt, PYTHONIOENCODING="ascii")
    assert result.returncode == 0 and result.stderr == ""
    expected = {"table": "109,482,240", "markdown": "109,482,240", "json": "109482240", "csv": "\\xd7 H = 768"}
    assert expected[fmt] in result.stdout


def test_an_unexpected_exception_is_one_line_and_a_distinct_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.cli.presets
    from tui.cli.common import EXIT_INTERNAL

    def broken(argv: object) -> int:
        raise KeyError("boom")

    monkeypatch.setattr(tui.cli.presets, "run", broken)
    code, _, err = run("presets")
    assert code == EXIT_INTERNAL and err.count("\n") == 1 and "internal error: KeyError" in err


# The explorer ------------------------------------------------------------------------------------------------


async def test_a_crash_in_the_explorer_exits_non_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_for("bert-tiny")

    def explode() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(app, "action_help", explode)
    with pytest.raises(RuntimeError, match="boom"):  # run_test re-raises what ended the app
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("f1")
            await pilot.pause()
    assert app.return_code == 1


@pytest.mark.usefixtures("terminal")
def test_the_cli_returns_the_explorers_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.explorer.app

    def crashed_run(self: tui.explorer.app.BertTuiApp, **kwargs: object) -> None:
        self._return_code = 1  # what Textual sets after it restored the terminal and printed the error

    monkeypatch.setattr(tui.explorer.app.BertTuiApp, "run", crashed_run)
    assert main(["--preset", "bert-tiny"]) == 1


def test_without_a_terminal_the_explorer_prints_the_count_and_exits() -> None:
    piped = subprocess.run([sys.executable, "-m", "tui", "--preset", "example-40k"], capture_output=True, text=True,
                           timeout=20, stdin=subprocess.DEVNULL, check=False)
    assert piped.returncode == 0 and "88,409,856" in piped.stdout and "\x1b[" not in piped.stdout
    with open(os.devnull, "w") as nowhere:  # output to a terminal but no keyboard: one line, exit 2
        script = "import sys; sys.stdout.isatty = lambda: True; from tui.cli import main; sys.exit(main([]))"
        keyless = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 stdout=nowhere, text=True, timeout=20, check=False)
    assert keyless.returncode == 2 and "the explorer needs a terminal" in keyless.stderr


async def submit(app: object, screen_type: type, typed: str) -> str:
    """Type `typed` into the open dialog's input (set at once: a 300-character path typed key by key is slow)."""
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, screen_type)
    field = screen.query_one(Input)
    field.value = typed
    await field.action_submit()
    return typed


@pytest.mark.parametrize("typed", ["~nosuchuser/x.json", "{fifo}", "/dev/zero", "{long}", "a\x00b", "[/]x[b]"])
async def test_the_open_prompt_survives_hostile_paths(tmp_path: Path, typed: str) -> None:
    os.mkfifo(tmp_path / "fifo.json")
    typed = typed.format(fifo=tmp_path / "fifo.json", long=tmp_path / LONG)
    app = app_for("bert-tiny")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("o")
        await submit(app, OpenScreen, typed)
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)  # the error stays in the prompt; the app answers keys
        await pilot.press("escape")
        assert not isinstance(app.screen, OpenScreen)
    assert app.return_code in (None, 0)


@pytest.mark.parametrize("typed", ["~nosuchuser/x.json", "{long}.json", "{tmp}/[/]x[b].txt", "{fifo}"])
async def test_the_export_prompt_survives_hostile_paths(tmp_path: Path, typed: str) -> None:
    os.mkfifo(tmp_path / "fifo.json")
    typed = typed.format(tmp=tmp_path, fifo=tmp_path / "fifo.json", long=tmp_path / LONG)
    before = sorted(p.name for p in tmp_path.iterdir())
    app = app_for("bert-tiny")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x")
        await submit(app, ExportScreen, typed)
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
    assert sorted(p.name for p in tmp_path.iterdir()) == before and app.return_code in (None, 0)


async def test_a_245_character_export_name_is_written(tmp_path: Path) -> None:
    target = tmp_path / ("e" * 240 + ".json")
    app = app_for("bert-tiny")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x")
        await submit(app, ExportScreen, str(target))
        await pilot.pause()
        assert not isinstance(app.screen, ExportScreen)
    assert json.loads(target.read_text(encoding="utf-8"))["total"] > 0
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


async def test_an_export_over_a_symlink_writes_its_target_and_keeps_its_mode(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old", encoding="utf-8")
    real.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    app = app_for("bert-tiny")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("x")
        await submit(app, ExportScreen, str(link))
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
    assert link.is_symlink() and json.loads(real.read_text(encoding="utf-8"))["total"] > 0
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_write_atomic_refuses_a_link_to_a_device(tmp_path: Path) -> None:
    (tmp_path / "null.json").symlink_to("/dev/null")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "null.json", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.json"]


# Generated hostile input -------------------------------------------------------------------------------------

HOSTILE_TEXT = st.one_of(
    st.sampled_from(["[/]", "[b]", "[bold red]x[/bold red]", "\x1b[2J", "\x1b]52;c;eA==\x07", "a\nb", "\r", "\x00",
                     "²", "١", "\u202e", "x" * 300, "~nosuchuser/", "../..", "%s", "{}", "\\"]),
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False), HOSTILE_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(HOSTILE_TEXT, inner, max_size=4)),
    max_leaves=20,
)
KEYS = st.sampled_from(["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                        "max_position_embeddings", "type_vocab_size", "model_type", "architectures", "id2label",
                        "num_labels", "weight_map", "name", "config", "expected_total", "claims", "title"])
OBJECTS = st.dictionaries(st.one_of(KEYS, HOSTILE_TEXT), JSON_VALUES, max_size=6)
RAW = st.one_of(OBJECTS.map(json.dumps), st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
                st.integers(1, 200).map(deep_json))


def assert_clean(code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and "\x1b" not in out + err
    if code == 2:
        assert err.count("\n") == 1, err


@SETTINGS
@given(text=RAW)
def test_generated_config_json(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_clean(*run("count", "--config", str(path), "--format", "json"))


@SETTINGS
@given(data=st.one_of(OBJECTS, JSON_VALUES))
def test_generated_presets(tmp_path: Path, data: object) -> None:
    import yaml

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert_clean(*run("count", "--preset-file", str(path)))


@SETTINGS
@given(header=st.one_of(st.dictionaries(HOSTILE_TEXT, st.fixed_dictionaries(
    {"dtype": st.one_of(st.sampled_from(["F32", "BF16", "Q7"]), JSON_VALUES),
     "shape": st.one_of(st.lists(st.integers(-1, 5), max_size=3), JSON_VALUES),
     "data_offsets": st.one_of(st.lists(st.integers(-1, 80), min_size=2, max_size=2), JSON_VALUES)}), max_size=4),
    JSON_VALUES), data=st.binary(max_size=80), claimed=st.one_of(st.none(), st.integers(0, 2**64 - 1)))
def test_generated_safetensors_headers(tmp_path: Path, header: object, data: bytes, claimed: int | None) -> None:
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw) if claimed is None else claimed) + raw + data)
    (tmp_path / "config.json").write_bytes(HUB_CONFIG.read_bytes())
    assert_clean(*run("count", "--checkpoint", str(path)))


@SETTINGS
@given(index=st.one_of(st.fixed_dictionaries({"weight_map": st.dictionaries(HOSTILE_TEXT, st.one_of(HOSTILE_TEXT, JSON_VALUES),
                                                                              max_size=4)}), JSON_VALUES))
def test_generated_shard_indexes(tmp_path: Path, index: object) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    (tmp_path / "config.json").write_bytes(HUB_CONFIG.read_bytes())
    assert_clean(*run("count", "--checkpoint", str(tmp_path)))


@SETTINGS
@given(name=HOSTILE_TEXT, flag=st.sampled_from(["--config", "--preset-file", "--checkpoint", "--preset"]),
       command=st.sampled_from(["count", "audit", "diff"]))
def test_generated_hostile_names(name: str, flag: str, command: str) -> None:
    argv = {"count": ["count", flag, name], "audit": ["audit", name, flag, name], "diff": ["diff", name, "bert-tiny"]}
    assert_clean(*run(*argv[command]))


@given(text=RAW)
@settings(max_examples=200, deadline=None, derandomize=True)
def test_the_readers_raise_only_read_errors(text: str) -> None:
    for parse in (parse_json, parse_yaml):
        try:
            parse(text)
        except ReadError:
            pass


@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(names=st.lists(st.tuples(HOSTILE_TEXT, st.sampled_from(["o", "x", "s"])), min_size=12, max_size=12,
                      unique_by=lambda pair: pair[0]))  # the first list: twelve of the simplest, the next drawn
def test_generated_names_in_the_explorers_dialogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  names: list[tuple[str, str]]) -> None:
    """Generated names typed into the open, export and save dialogs of one running explorer, twelve in a row:
    each ends in a message or a file of that name, never a crash, a temporary file or any other file."""
    import asyncio

    async def drive() -> int | None:
        app = app_for("bert-tiny")
        async with app.run_test(size=(80, 24)) as pilot:
            for index, (typed, dialog) in enumerate(names):
                folder = Path(tempfile.mkdtemp(dir=tmp_path))  # a folder of its own (tmp_path is the examples')
                monkeypatch.chdir(folder)  # a relative export name lands here
                await pilot.press(dialog)
                await pilot.pause()
                field = app.screen.query_one(Input)
                field.value = typed
                await field.action_submit()
                await pilot.pause()
                await pilot.press("escape", "escape")
                await pilot.pause()
                while len(app.screen_stack) > 1:  # an overwrite question over the save dialog, say
                    await app.pop_screen()
                after = sorted(p.name for p in folder.iterdir())
                assert not any(name.startswith(".bert-tui-") for name in after), (index, typed)  # no temporary file
                assert set(after) <= {typed.strip()}, (index, typed)  # nothing written but what was asked for
                assert app.is_running, (index, typed)
        return app.return_code

    assert asyncio.run(drive()) in (None, 0)


# The last crashes, by their class ---------------------------------------------------------------------------

# Every character class where Python's int() and str.isdigit disagree, or either takes what a CLI should not.
NUMBER_TEXT = st.text(alphabet=st.sampled_from(list("0123456789_+- \t") + ["²", "٧", "７", "①", "⁹", "𝟗", "x", "."]),
                      max_size=12)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(NUMBER_TEXT)
def test_override_strings_end_in_a_count_or_one_line(text: str) -> None:
    """`1__0`, `_768` and the like passed the CLI's own check and ended in int()'s ValueError (exit 70)."""
    for argv in (["count", "--hidden-size", text, "--format", "json"],
                 ["audit", "110M", "--num-hidden-layers", text],
                 ["diff", "bert-tiny", "bert-tiny", "--num-hidden-layers", text, "--format", "json"],
                 ["compute", "--batch", text, "--seq", "8", "--format", "csv"]):
        code, out, err = run(*argv)
        assert code in (0, 1, 2) and "internal error" not in err and "Traceback" not in err, (argv, err)
        if code == 2:
            assert err.count("\n") == 1


SHAPES = st.one_of(st.just([]), st.lists(st.integers(0, 3), min_size=1, max_size=12),
                   st.lists(st.sampled_from([0, 1, 4, 2**40]), min_size=1, max_size=3))
TENSOR_NAMES = st.sampled_from([
    "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight", "encoder.layer.0.intermediate.dense.weight",
    "encoder.layer.0.attention.self.query.weight", "encoder.layer.3.output.dense.bias", "classifier.weight",
    "qa_outputs.weight", "pooler.dense.weight", "cls.predictions.bias", "bert.embeddings.LayerNorm.gamma"])


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(TENSOR_NAMES, SHAPES, min_size=1, max_size=4))
def test_checkpoint_shapes_of_any_rank_end_in_a_count_or_one_line(tmp_path: Path,
                                                                   tensors: dict[str, list[int]]) -> None:
    """A 0-d tensor where a matrix was expected, with no config beside it, ended in IndexError (exit 70)."""
    from tui.sources import SourceError, open_model

    base = {"embeddings.word_embeddings.weight": [10, 4], "encoder.layer.0.attention.self.query.weight": [4, 4]}
    header, offset = {}, 0
    for name, shape in {**base, **tensors}.items():
        count = 1
        for size in shape:
            count *= size
        size_bytes = 4 * count if count < 2**20 else 4
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size_bytes]}
        offset += size_bytes
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    path = header_file(folder / "model.safetensors", json.dumps(header).encode(), b"\0" * offset)
    for argv in (["count", "--checkpoint", str(path)], ["audit", "110M", "--checkpoint", str(path)],
                 ["diff", str(folder), "bert-tiny"]):
        code, _, err = run(*argv)
        assert code in (0, 1, 2) and "internal error" not in err, (argv, err)
    try:  # the explorer's open prompt goes this way
        open_model(str(folder))
    except SourceError:
        pass
