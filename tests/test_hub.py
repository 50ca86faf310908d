"""Models named by their Hub id, against a fake Hub the tests start on 127.0.0.1 (tests/fakehub.py).

The CLI runs as a user types it: in this process where huggingface_hub's constants point it at the fake Hub and
an empty cache (the `fake_hub` fixture), in a child process where the environment read at start-up is the point
(a token, offline mode, an unreachable endpoint, a hang bounded by a timeout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .clirun import completed
from .fakehub import FakeHub
from .test_io import CHECKPOINTS, FIXTURES, LIVE

REPO = "tiny-org/bert-pretraining"
SHARDED = "tiny-org/bert-sharded"


def cli(*argv: str, timeout: float | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """`bert-tui ARGV` against the fake Hub. In this process (tests/clirun.py: the fake Hub's address and cache
    are huggingface_hub's constants, set by the `fake_hub` fixture), unless the test sets the environment the
    Hub reads at start-up (a token, offline mode, an endpoint) or bounds a hang: then a child process, as a user
    starts it."""
    if not env and timeout is None:
        return completed(*argv)
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, check=False,
                          timeout=timeout or 30, env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert fragment in result.stderr, result.stderr


@pytest.fixture
def hub(fake_hub: FakeHub) -> FakeHub:
    fake_hub.add(REPO, CHECKPOINTS / "pretraining")
    fake_hub.add(SHARDED, CHECKPOINTS / "sharded")
    fake_hub.add("tiny-org/bin-only", files={"config.json": (CHECKPOINTS / "bertmodel" / "config.json").read_bytes(),
                                             "pytorch_model.bin": b"\0" * 4096})
    fake_hub.add("tiny-org/gated", CHECKPOINTS / "bertmodel", gated=True)
    fake_hub.add("google-bert/bert-base-uncased", files={"config.json": (FIXTURES / "hub" / "bert-base-uncased" /
                                                                         "config.json").read_bytes()})
    return fake_hub


def header_bytes(path: Path) -> int:
    data = path.read_bytes()
    return 8 + int.from_bytes(data[:8], "little")


def test_count_by_id_compares_the_config_with_the_repositorys_headers(hub: FakeHub) -> None:
    result = cli("count", REPO, "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["model"] == "BertForPreTraining" and data["total"] == LIVE["pretraining"]
    assert data["checkpoint"]["clean"] and data["checkpoint"]["held"] == LIVE["pretraining"]
    assert data["checkpoint"]["bytes_on_disk"] == (CHECKPOINTS / "pretraining" / "model.safetensors").stat().st_size
    # Only the header was transferred: its 8-byte length and its JSON, not one byte of a tensor.
    assert hub.bytes_served(REPO, "model.safetensors") == header_bytes(CHECKPOINTS / "pretraining" / "model.safetensors")
    table = cli("count", REPO)
    assert "matches the config" in table.stdout and f"{REPO}@main" in table.stdout


def test_a_sharded_repository_reads_every_shards_header_only(hub: FakeHub) -> None:
    result = cli("count", SHARDED, "--format", "json")
    data = json.loads(result.stdout)
    assert data["checkpoint"]["clean"] and len(data["checkpoint"]["files"]) == 4
    for shard in sorted((CHECKPOINTS / "sharded").glob("*.safetensors")):
        assert hub.bytes_served(SHARDED, shard.name) == header_bytes(shard)


def test_the_same_model_opens_offline_from_the_cache(hub: FakeHub) -> None:
    online = json.loads(cli("count", REPO, "--format", "json").stdout)
    served = sum(hub.served.values())
    for offline in (["--offline"], []):  # cache first: no request at all once it is there, offline or not
        again = cli("count", REPO, "--format", "json", *offline)
        assert again.returncode == 0 and json.loads(again.stdout) == online
    assert sum(hub.served.values()) == served
    assert json.loads(cli("count", REPO, "--format", "json", HF_HUB_OFFLINE="1").stdout) == online


def test_offline_without_the_model_in_the_cache_says_where_it_looked(hub: FakeHub) -> None:
    result = cli("count", REPO, "--offline")
    one_line_error(result, "is not in the Hugging Face cache (")
    assert os.environ["HF_HOME"] in result.stderr and hub.requests == []


def test_a_repository_without_safetensors_is_counted_from_its_config(hub: FakeHub) -> None:
    result = cli("count", "tiny-org/bin-only", "--format", "json")
    assert result.returncode == 0 and json.loads(result.stdout)["total"] == LIVE["bertmodel"]
    assert "holds no safetensors weights" in result.stderr and "checkpoint" not in json.loads(result.stdout)
    assert hub.bytes_served("tiny-org/bin-only", "pytorch_model.bin") == 0
    offline = cli("count", "tiny-org/bin-only", "--offline", "--format", "json")  # what was learnt is kept
    assert offline.returncode == 0 and "holds no safetensors weights" in offline.stderr


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["count", "tiny-org/nothing"], "no such repository on the Hub"),
        (["count", "tiny-org/gated"], "is gated: accept its terms"),
        (["count", REPO, "--revision", "v9"], "revision 'v9' not found"),
        (["count", "--revision", "v1"], "--revision goes with a Hub model id"),
        (["count", REPO, "--preset", "bert-tiny"], "name two sources"),
    ],
)
def test_errors_a_user_can_act_on(hub: FakeHub, argv: list[str], fragment: str) -> None:
    one_line_error(cli(*argv), fragment)


def test_a_gated_repository_opens_with_a_token_that_is_never_printed(hub: FakeHub) -> None:
    result = cli("count", "tiny-org/gated", "--format", "json", HF_TOKEN="hf_secret_token_123")
    assert result.returncode == 0 and json.loads(result.stdout)["total"] == LIVE["bertmodel"]
    assert "hf_secret" not in result.stdout + result.stderr


def test_an_unreachable_hub_answers_within_seconds(hub: FakeHub) -> None:
    result = cli("count", REPO, HF_ENDPOINT="http://127.0.0.1:9", timeout=15)
    one_line_error(result, "cannot reach the Hub at http://127.0.0.1:9")
    assert "--offline" in result.stderr


def test_a_path_that_exists_wins_over_an_id(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "tiny-org" / "bert-pretraining"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes((CHECKPOINTS / "bertmodel" / "config.json").read_bytes())
    result = subprocess.run([sys.executable, "-m", "tui", "count", REPO, "--format", "json"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=30, check=False)
    assert json.loads(result.stdout)["total"] == LIVE["bertmodel"] and hub.requests == []


def test_audit_diff_and_verify_take_ids(hub: FakeHub) -> None:
    audit = cli("audit", "110M", "google-bert/bert-base-uncased")
    assert audit.returncode == 0 and "BertForMaskedLM" in audit.stdout
    diff = cli("diff", "google-bert/bert-base-uncased", "bert-base-uncased", "--format", "json")
    assert diff.returncode == 1 and json.loads(diff.stdout)["total_a"] == 109_514_298  # MLM vs BertModel differ
    pytest.importorskip("transformers", reason="verify needs the [verify] extra")
    verify = cli("verify", REPO)
    assert verify.returncode == 0 and "agree:" in verify.stdout


def test_fetched_headers_are_checked_like_local_ones(fake_hub: FakeHub) -> None:
    evil = b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}'
    fake_hub.add("evil/bad-offsets", files={
        "config.json": (CHECKPOINTS / "bertmodel" / "config.json").read_bytes(),
        "model.safetensors": len(evil).to_bytes(8, "little") + evil + b"\0" * 8})
    one_line_error(cli("count", "evil/bad-offsets"), "fall outside")
    deep = b"[" * 10_000 + b"]" * 10_000
    fake_hub.add("evil/deep", files={"config.json": (CHECKPOINTS / "bertmodel" / "config.json").read_bytes(),
                                     "model.safetensors": len(deep).to_bytes(8, "little") + deep})
    one_line_error(cli("count", "evil/deep"), "nests deeper than")


# The explorer ------------------------------------------------------------------------------------------------


def status(app: object) -> str:
    return str(app.screen.query_one("#open-error").render())  # type: ignore[attr-defined]


async def settle(pilot: object, done: object, seconds: float = 10) -> None:
    """Let the app run until `done()` holds (a fetch in a worker thread takes real time)."""
    for _ in range(int(seconds / 0.05)):
        if done():  # type: ignore[operator]
            return
        await pilot.pause(0.05)  # type: ignore[attr-defined]


async def refused_in_the_prompt(pilot: Any, text: str) -> Any:
    """Open `text` with `o` and let the fetch end in the prompt's error line; the prompt's field."""
    from textual.widgets import Input

    await pilot.press("o")
    field = pilot.app.screen.query_one(Input)
    field.value = text
    await field.action_submit()
    await settle(pilot, lambda: "⚠" in status(pilot.app))
    return field


async def test_the_explorer_opens_an_id_in_a_worker_and_marks_what_the_repository_stores(hub: FakeHub) -> None:
    from tui.explorer.dialogs import OpenScreen

    from .test_app import app_for, summary

    app = app_for("bert-tiny")
    async with app.run_test(size=(120, 40)) as pilot:
        field = await refused_in_the_prompt(pilot, "tiny-org/nothing")
        assert isinstance(app.screen, OpenScreen)  # the error stays in the prompt
        assert "no such repository" in status(app)
        field.value = SHARDED
        await field.action_submit()
        await settle(pilot, lambda: not isinstance(app.screen, OpenScreen))
        await pilot.pause()
        assert not isinstance(app.screen, OpenScreen)
        assert app.main.model is not None and app.main.model.total == LIVE["sharded"]
        assert app.main.comparison is not None and app.main.comparison.clean
        assert f"{SHARDED}@main" in summary(app)


async def test_a_slow_fetch_keeps_the_explorer_answering_and_escape_cancels_it(
        hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading

    from textual.widgets import Input

    from tui.explorer import dialogs
    from tui.explorer.dialogs import OpenScreen

    from .test_app import app_for

    hub.gate = threading.Event()  # the Hub answers nothing until the test lets it
    finished = threading.Event()  # the fetch in its thread has returned (or raised)
    fetch = dialogs.open_hub

    def open_hub(*args: Any, **kwargs: Any) -> Any:
        try:
            return fetch(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(dialogs, "open_hub", open_hub)
    app = app_for("bert-tiny")
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            before = app.main.model
            await pilot.press("o")
            field = app.screen.query_one(Input)
            field.value = REPO
            await field.action_submit()
            await pilot.pause()
            shown = status(app)  # "fetching … config.json" or "reading the header of …", with how to cancel
            assert "tiny-org/bert-pretraining" in shown and "(Escape cancels)" in shown
            await pilot.press("x", "y", "backspace")  # typing goes on while it fetches
            assert isinstance(app.screen, OpenScreen)
            await pilot.press("escape")
            assert not isinstance(app.screen, OpenScreen)
            hub.gate.set()  # the Hub answers now: the fetch ends in its thread, and its result must be dropped
            assert await asyncio.get_running_loop().run_in_executor(None, finished.wait, 60)
            await pilot.pause()
            assert app.main.model is before and app.main.stored is None  # the cancelled fetch changed nothing
    finally:
        hub.gate.set()


def test_a_model_type_bert_tui_does_not_count_is_refused_by_name(fake_hub: FakeHub) -> None:
    fake_hub.add("microsoft/deberta-base", files={"config.json": b'{"model_type": "deberta"}'})
    one_line_error(cli("count", "microsoft/deberta-base"),
                   "model_type: 'deberta' is not supported; bert-tui counts: bert, roberta, xlm-roberta, camembert, "
                   "distilbert, albert, electra, mpnet, modernbert, deberta-v2")


def test_offline_from_a_cache_filled_as_transformers_fills_it(fake_hub: FakeHub) -> None:
    """The Hub's cache layout by hand (refs/main, snapshots/COMMIT/* as links into blobs/): config and the
    downloaded checkpoint are read from it, with no server and no header cache."""
    commit = "1234567890abcdef1234567890abcdef12345678"
    repo = Path(os.environ["HF_HOME"]) / "hub" / "models--cached-org--bert-sharded"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for number, file in enumerate(sorted((CHECKPOINTS / "sharded").iterdir())):
        (repo / "blobs" / f"blob{number}").write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / f"blob{number}")
    result = cli("count", "cached-org/bert-sharded", "--offline", "--format", "json", HF_ENDPOINT="http://127.0.0.1:9")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total"] == LIVE["sharded"] and data["checkpoint"]["clean"] and len(data["checkpoint"]["files"]) == 4
    assert fake_hub.requests == []


@pytest.mark.usefixtures("terminal")
def test_the_explorer_opens_on_an_id_from_the_command_line(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.cli import main
    from tui.explorer.app import BertTuiApp

    seen: dict[str, object] = {}

    def run(self: BertTuiApp, **kwargs: object) -> None:
        seen.update(title=self.main._source_title, stored=self.main.stored)

    monkeypatch.setattr(BertTuiApp, "run", run)
    assert main([REPO]) == 0
    assert str(seen["title"]).startswith(f"{REPO}@main (") and len(seen["stored"]) == 46  # type: ignore[arg-type]


def test_a_download_cut_short_in_the_cache_fetches_the_missing_headers(fake_hub: FakeHub) -> None:
    """The cache holds the index but not every shard (an interrupted download): headers come from the Hub."""
    commit = fake_hub.add(SHARDED, CHECKPOINTS / "sharded").commit
    snapshot = Path(os.environ["HF_HOME"]) / "hub" / "models--tiny-org--bert-sharded" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text(commit, encoding="utf-8")
    for name in ("config.json", "model.safetensors.index.json", "model-00001-of-00004.safetensors"):
        (snapshot / name).write_bytes((CHECKPOINTS / "sharded" / name).read_bytes())
    data = json.loads(cli("count", SHARDED, "--format", "json").stdout)
    assert data["checkpoint"]["clean"] and len(data["checkpoint"]["files"]) == 4
    assert fake_hub.bytes_served(SHARDED, "model-00002-of-00004.safetensors") == header_bytes(
        CHECKPOINTS / "sharded" / "model-00002-of-00004.safetensors")


def test_an_empty_header_from_the_hub_is_refused_as_a_local_one_is(fake_hub: FakeHub) -> None:
    fake_hub.add("evil/empty-header", files={"config.json": (CHECKPOINTS / "bertmodel" / "config.json").read_bytes(),
                                             "model.safetensors": (0).to_bytes(8, "little") + b"\0" * 16})
    one_line_error(cli("count", "evil/empty-header"), "not a safetensors file")


async def test_an_unreachable_hub_tells_the_explorer_user_what_to_do() -> None:
    """Its message names the ways that work for the explorer too (`bert-tui --offline`, HF_HUB_OFFLINE=1)."""
    from .test_app import app_for

    app = app_for("bert-tiny")
    async with app.run_test(size=(120, 40)) as pilot:
        await refused_in_the_prompt(pilot, "some-org/some-model")
        assert "cannot reach the Hub" in status(app) and "(--offline, or HF_HUB_OFFLINE=1)" in status(app)


@pytest.mark.parametrize(("headers", "loop", "words"), [
    ({"Content-Length": "3000000000"}, False, "announces 3,000,000,000 bytes, over the 1,048,576 allowed"),
    ({"X-Linked-Size": "3000000000"}, False, "announces 3,000,000,000 bytes"),
    ({"Content-Type": "text/html; charset=utf-8"}, False, "web page (text/html)"),
    ({}, True, "redirect in a loop"),
])
def test_a_hostile_hub_answer_is_refused_before_it_reaches_the_cache(
        hub: FakeHub, headers: dict[str, str], loop: bool, words: str) -> None:
    """A config.json the Hub says is 3 GB was downloaded in full into the cache before it was refused; a web page
    was "not valid JSON"; a redirect loop was "cannot reach the Hub"."""
    hub.add("evil/config", files={"config.json": (CHECKPOINTS / "bertmodel" / "config.json").read_bytes()})
    if headers:
        hub.headers["evil/config/config.json"] = headers
    if loop:
        hub.loops.add("evil/config/config.json")
    result = cli("count", "evil/config")
    one_line_error(result, words)
    assert not list(Path(os.environ["HF_HOME"]).rglob("config.json"))
    assert not list(Path(os.environ["XDG_CACHE_HOME"]).rglob("config.json"))


def test_a_header_sent_a_byte_at_a_time_is_given_up_within_its_budget(hub: FakeHub,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each byte came within the read timeout, so the read never timed out: a total budget ends it."""
    import time

    import tui.io.hub as hub_module
    from tui.io.hf_config import SourceError
    from tui.io.hub import open_repo

    monkeypatch.setattr(hub_module, "BUDGET", 1.0)
    hub.drips[f"{REPO}/model.safetensors"] = 0.05  # the header's JSON would take a minute
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"in 1 s: too slow, given up"):
        open_repo(REPO)
    assert time.monotonic() - started < 10


def test_a_peft_adapter_on_the_hub_opens_with_its_base(fake_hub: FakeHub, tmp_path: Path) -> None:
    """A repository with adapter_config.json and no config.json (an adapter shared on the Hub): its base by the
    Hub id it names, its head from the task type, counted and computed as the same folder on disk is."""
    adapters = FIXTURES / "adapters"
    config = json.loads((adapters / "roberta-token" / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = "tiny-org/base-roberta"
    fake_hub.add("tiny-org/base-roberta", files={"config.json": (adapters / "base-roberta" / "config.json")
                                                 .read_bytes()})
    fake_hub.add("tiny-org/roberta-lora", files={"adapter_config.json": json.dumps(config).encode()})
    by_id = cli("count", "tiny-org/roberta-lora", "--format", "json")
    local = cli("count", str(adapters / "roberta-token"), "--format", "json")
    assert by_id.returncode == 0, by_id.stderr
    assert (json.loads(by_id.stdout)["trainable"], json.loads(by_id.stdout)["total"]) == (
        json.loads(local.stdout)["trainable"], json.loads(local.stdout)["total"])
    assert "a PEFT adapter: its adapter_config.json is read" in by_id.stderr
    step = cli("compute", "tiny-org/roberta-lora", "--batch", "2", "--seq", "8", "--format", "json")
    assert step.returncode == 0 and json.loads(step.stdout)["method"] == "LoRA r=2 on query, value"
    offline = cli("count", "tiny-org/roberta-lora", "--offline", "--format", "json")  # what was fetched is kept
    assert offline.returncode == 0 and json.loads(offline.stdout)["total"] == json.loads(by_id.stdout)["total"]
    fake_hub.add("tiny-org/empty", files={"README.md": b"nothing"})
    one_line_error(cli("count", "tiny-org/empty"), "has no config.json (nor a PEFT adapter's adapter_config.json)")
