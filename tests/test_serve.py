"""`bert-tui serve`: the explorer in a web page. What it refuses (a remote bind without the flag, a foreign
Origin, one session too many), that each page's explorer process ends with its page and with the server, and a
real headless Chromium (Debian's package) loading the page, reading the screen from the websocket's frames with a
terminal emulator (pyte), pressing keys and closing the page.

The server runs as a child process on a free port of 127.0.0.1; nothing leaves the machine (the page's web font
link fails quietly offline)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .clirun import run

pytest.importorskip("textual_serve", reason="the serve extra (textual-serve) is not installed")
aiohttp = pytest.importorskip("aiohttp")

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


# Refusals on the command line ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "says"), [
    (["--host", "0.0.0.0"], "--host 0.0.0.0: other machines could reach it, and the page has no login; add "
                            "--allow-remote"),
    (["--host", "192.168.1.20"], "--host 192.168.1.20: other machines could reach it"),
    (["--port", "0"], "--port 0: must be a whole number from 1 to 65535"),
    (["--port", "http"], "--port http: must be a whole number from 1 to 65535"),
    (["--max-sessions", "0"], "--max-sessions 0: must be a whole number from 1 to 64"),
    (["--preset", "no-such-model"], "--preset no-such-model: no such preset"),
    (["--host", "::", "--allow-remote", "--public-url", "lab:8000"], "--public-url lab:8000: must start with http://"),
])
def test_what_serve_refuses_before_it_listens(argv: list[str], says: str) -> None:
    code, out, err = run("serve", *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"bert-tui serve: error: {says}") and err.count("\n") == 1, err


def test_without_textual_serve_one_line_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # an import of it fails as if it were absent
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)
    monkeypatch.delitem(sys.modules, "tui.serve", raising=False)
    code, _, err = run("serve")
    assert code == 2
    assert err.startswith("bert-tui serve: error: bert-tui serve needs textual-serve (textual_serve")
    assert err.endswith("did not import): pip install 'bert-tui[serve]'\n") and err.count("\n") == 1


def test_loopback_names_and_origins() -> None:
    from tui.serve import allowed_origins, is_loopback, origin_of

    assert all(is_loopback(host) for host in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "10.0.0.1", "example.org", ""))
    assert origin_of("http://Lab.example.org:80/x") == "http://lab.example.org"
    assert origin_of("https://[::1]:8443/") == "https://[::1]:8443"
    assert allowed_origins("127.0.0.1", 8000, "http://127.0.0.1:8000") == {
        "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"}
    assert allowed_origins("0.0.0.0", 8000, "http://lab:8000") == {"http://lab:8000"}


# A session's process ends, even when it will not quit ---------------------------------------------------------

@pytest.mark.parametrize("ignores_term", [False, True])
def test_a_session_that_does_not_quit_is_ended(ignores_term: bool, tmp_path: Path) -> None:
    """It is asked to quit (it does not), then terminated, then (where it ignores SIGTERM) killed; the session is
    stopped once the child is running with its signal handling in place (it leaves a file to say so)."""
    from tui.serve import Session

    up = tmp_path / "up"
    code = ("import signal, sys, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignores_term else "")
            + f"open({str(up)!r}, 'w').close()\nprint('__GANGLION__', flush=True)\ntime.sleep(60)\n")

    async def scenario() -> int | None:
        async def ignore(*_: object) -> None:
            return None

        from textual_serve.download_manager import DownloadManager

        session = Session([sys.executable, "-c", code], write_bytes=ignore, write_str=ignore, close=ignore,
                          download_manager=DownloadManager())
        await session.start(80, 24)
        while not up.exists():
            assert session.process is not None and session.process.returncode is None
            await asyncio.sleep(0.01)
        await session.stop()  # asks it to quit (it does not), then SIGTERM, then SIGKILL
        assert session.process is not None
        return session.process.returncode

    # (a guard against a hang, far above QUIT_GRACE + TERM_GRACE: not a speed target)
    returned = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert returned == (-signal.SIGKILL if ignores_term else -signal.SIGTERM)


# The server as a user runs it ------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sessions_of(server: int) -> list[int]:
    """The explorer processes `server` runs (its children running `serve --session`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == server and b"--session" in command:
            found.append(int(entry.name))
    return found


def wait_for(condition: object, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`bert-tui serve` on a free port (extra arguments from the test's `serve_args` mark), ready."""
    marker = request.node.get_closest_marker("serve_args")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tui", "serve", "--port", str(port),
                                *(marker.args if marker else ())],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stderr is not None
    line = process.stderr.readline()
    assert line == f"bert-tui explorer at http://127.0.0.1:{port} (at most " \
                   f"{marker.args[1] if marker else 4} sessions; ctrl+c stops)\n", line
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        process.stderr.close()


async def handshake(url: str, origin: str | None) -> tuple[int, str]:
    """A websocket handshake at `url`/ws: its status (101: a session) and, refused, the body."""
    headers = {"Origin": origin} if origin else {}
    async with aiohttp.ClientSession() as client:
        try:
            async with client.ws_connect(f"{url}/ws?width=80&height=24", headers=headers) as websocket:
                await websocket.receive(timeout=60)  # the explorer's first bytes
                return 101, ""
        except aiohttp.WSServerHandshakeError as refused:
            async with client.get(f"{url}/ws", headers={**headers, "Connection": "Upgrade", "Upgrade": "websocket",
                                                        "Sec-WebSocket-Version": "13",
                                                        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}) as again:
                return refused.status, await again.text()


def test_a_page_from_another_site_cannot_open_a_session(server: tuple[subprocess.Popen[str], str]) -> None:
    process, url = server
    status, text = asyncio.run(handshake(url, "http://evil.example"))
    assert status == 403
    assert text.startswith("refused: a page from http://evil.example may not open an explorer here (allowed: ")
    assert sessions_of(process.pid) == []
    assert asyncio.run(handshake(url, url.replace("127.0.0.1", "localhost")))[0] == 101  # this server's page


@pytest.mark.serve_args("--max-sessions", "1")
def test_one_session_too_many_is_refused_and_the_page_closing_ends_its_explorer(
        server: tuple[subprocess.Popen[str], str]) -> None:
    process, url = server

    async def scenario() -> tuple[int, str]:
        async with aiohttp.ClientSession() as client:
            async with client.ws_connect(f"{url}/ws", headers={"Origin": url}) as websocket:
                await websocket.receive(timeout=60)
                assert len(sessions_of(process.pid)) == 1
                return await handshake(url, url)

    status, text = asyncio.run(scenario())
    assert status == 503
    assert text.startswith("refused: 1 explorer sessions are open, the most this server runs")
    assert wait_for(lambda: sessions_of(process.pid) == []), "the explorer outlived its page"


def test_a_plain_get_of_the_websocket_is_answered_400_with_one_line_and_no_headers_logged(
        server: tuple[subprocess.Popen[str], str]) -> None:
    """#52 item 21: `curl http://127.0.0.1:PORT/ws` killed the connection and logged a traceback that dumped every
    request header (a cookie, a token). It is answered 400, saying where the page is; the log says nothing of
    the request's headers, and the server goes on serving."""
    process, url = server

    async def plain_get() -> tuple[int, str]:
        async with aiohttp.ClientSession() as client:
            async with client.get(f"{url}/ws", headers={"Cookie": "session=SECRET-COOKIE",
                                                        "Authorization": "Bearer SECRET-TOKEN"}) as response:
                return response.status, await response.text()

    status, text = asyncio.run(plain_get())
    assert status == 400 and text == f"this address is the explorer's websocket, for its page: open {url}/ in a " \
                                     "browser\n"
    assert sessions_of(process.pid) == []
    assert asyncio.run(handshake(url, url))[0] == 101  # (still serving)
    process.send_signal(signal.SIGINT)
    assert process.wait(20) == 0
    assert process.stderr is not None
    logged = process.stderr.read()
    assert "SECRET" not in logged and "Traceback" not in logged, logged


def test_stopping_the_server_ends_every_session(server: tuple[subprocess.Popen[str], str]) -> None:
    process, url = server

    async def scenario() -> list[int]:
        async with aiohttp.ClientSession() as client:
            async with client.ws_connect(f"{url}/ws", headers={"Origin": url}) as websocket:
                await websocket.receive(timeout=60)
                explorers = sessions_of(process.pid)
                process.send_signal(signal.SIGINT)
                assert process.wait(20) == 0
                return explorers

    explorers = asyncio.run(scenario())
    assert len(explorers) == 1
    assert wait_for(lambda: not Path(f"/proc/{explorers[0]}").exists() or
                    (Path(f"/proc/{explorers[0]}/stat").read_text().split()[2] == "Z"))


# In a real browser --------------------------------------------------------------------------------------------

@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium); .ci/run installs it")
def test_in_headless_chromium_the_explorer_shows_its_total_takes_keys_resizes_and_ends_with_the_page(
        server: tuple[subprocess.Popen[str], str]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    pyte = pytest.importorskip("pyte", reason="pyte is in the test extra")
    process, url = server
    screen = pyte.Screen(200, 60)
    stream = pyte.ByteStream(screen)

    def shown() -> str:
        return "\n".join(screen.display)

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 640})
            page.on("websocket", lambda websocket: websocket.on(
                "framereceived", lambda payload: stream.feed(payload) if isinstance(payload, bytes) else None))
            page.goto(url, wait_until="domcontentloaded")

            def until(text: str) -> bool:
                for _ in range(300):  # events reach the frames only while Playwright waits
                    if text in shown():
                        return True
                    page.wait_for_timeout(100)
                return False

            assert until("109,482,240"), shown()  # bert-base-uncased, the explorer's default
            assert len(sessions_of(process.pid)) == 1
            page.locator("textarea").first.focus()  # the terminal's keyboard input (xterm.js)
            page.keyboard.press("Tab")  # from the preset select to the vocabulary: typing replaces it
            page.keyboard.type("1000")
            assert until("86,809,344"), shown()  # 109,482,240 − (30,522 − 1,000) × 768
            assert "Adam train" not in shown()  # 111 columns: the panes are tabs (the form's shown)
            page.set_viewport_size({"width": 1400, "height": 820})  # the page tells the explorer its new size
            assert until("Adam train"), shown()  # 155 columns: form, tree and totals side by side
            if os.environ.get("BERT_TUI_SERVE_SCREENSHOT"):
                page.screenshot(path=os.environ["BERT_TUI_SERVE_SCREENSHOT"])
            page.close()
        finally:
            browser.close()
    assert wait_for(lambda: sessions_of(process.pid) == []), "the explorer outlived its page"
