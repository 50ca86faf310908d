"""The explorer in a web page: textual-serve's server, made safe to leave running (`bert-tui serve`).

textual-serve (the optional `serve` extra) serves a page whose terminal talks over a websocket to one explorer
process per page. What this adds to it:

- Its websocket refuses a foreign `Origin`. Browsers send the page's origin with every websocket handshake and
  let any page open one to any address, so without the check any site the user visits could open explorers on
  their localhost. A client that sends no `Origin` is not a browser page (it could say anything): let through.
- A bounded number of sessions: one more is refused (503) until a page closes.
- Each session's process is ended when its page closes: asked to quit (as textual-serve does), then terminated,
  then killed, its whole process group; every session is ended when the server stops.
- The command each session runs is fixed when the server starts (an argument list, no shell), never built from
  a request.

This module never imports Textual: the server runs no app of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

QUIT_GRACE = 3.0  # seconds a session's explorer has to quit when its page closes, before it is terminated
TERM_GRACE = 2.0  # seconds after SIGTERM before SIGKILL


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of `url`, as a browser writes it in an `Origin` header (no default port)."""
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = "" if parts.port in (None, default) else f":{parts.port}"
    return f"{parts.scheme}://{host}{port}"


def allowed_origins(host: str, port: int, public_url: str) -> frozenset[str]:
    """The origins a page of this server has: its public URL's, and on a loopback address each loopback name's
    (a page opened at http://localhost:PORT while the server says 127.0.0.1)."""
    origins = {origin_of(public_url)}
    if is_loopback(host):
        origins |= {origin_of(f"http://{name}:{port}") for name in ("localhost", "127.0.0.1", "[::1]")}
    return frozenset(origins)


class Session(AppService):
    """One page's explorer: its process started from the fixed argument list, and ended when the page closes."""

    def __init__(self, argv: Sequence[str], **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = tuple(argv)
        self.process: asyncio.subprocess.Process | None = None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        """As textual-serve starts it (its environment selects Textual's web driver), but from an argument list
        rather than a shell, in a process group of its own (so that ending it ends all it started)."""
        environment = self._build_environment(width=width, height=height)
        self.process = self._process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True)
        assert self.process.stdin is not None
        self._stdin = self.process.stdin
        return self.process

    async def stop(self) -> None:
        """Ask the explorer to quit; end its process group if it has not within `QUIT_GRACE` seconds."""
        try:
            await asyncio.wait_for(super().stop(), QUIT_GRACE)
        except (TimeoutError, asyncio.TimeoutError, ConnectionError, RuntimeError):
            pass
        await self.end()

    async def end(self) -> None:
        """Terminate, then kill, the session's process group, and reap its process."""
        process = self.process
        if process is None:
            return
        for sent, grace in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, None)):
            if process.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sent)
            if grace is not None:
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(process.wait(), grace)
        if process.returncode is None:
            await process.wait()


class ExplorerServer(Server):
    """textual-serve's server running `argv` for each page, with the checks above."""

    def __init__(self, argv: Sequence[str], *, host: str, port: int, public_url: str, max_sessions: int,
                 title: str = "bert-tui") -> None:
        super().__init__(shlex.join(argv), host=host, port=port, title=title, public_url=public_url)
        self.argv = tuple(argv)
        self.max_sessions = max_sessions
        self.origins = allowed_origins(host, port, public_url)
        self.sessions: set[Session] = set()

    async def on_startup(self, app: web.Application) -> None:
        """(textual-serve prints its banner here, before the server listens: the line below comes once it does.)"""

    def serve(self, debug: bool = False) -> None:
        """textual-serve's `serve`, saying where the explorer is once the server listens (aiohttp's `print`,
        called when its sites have started)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        said = f"bert-tui explorer at {self.public_url} (at most {self.max_sessions} sessions; ctrl+c stops)"
        web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                    print=lambda *_: print(said, file=sys.stderr, flush=True))

    async def on_shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(session.stop() for session in list(self.sessions)))

    def check(self, request: web.Request) -> None:
        """Refuse a websocket request from a foreign page (403), or one session too many (503)."""
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self.origins:
            raise web.HTTPForbidden(text=f"refused: a page from {origin} may not open an explorer here "
                                         f"(allowed: {', '.join(sorted(self.origins))})\n")
        if len(self.sessions) >= self.max_sessions:
            raise web.HTTPServiceUnavailable(text=f"refused: {self.max_sessions} explorer sessions are open, the "
                                                  "most this server runs (bert-tui serve --max-sessions); close "
                                                  "one and reload\n")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's handler, with the refusals and a session that ends its process."""
        self.check(request)
        websocket = web.WebSocketResponse(heartbeat=15)
        if not websocket.can_prepare(request).ok:  # a plain GET (curl, a crawler): no session, no traceback
            raise web.HTTPBadRequest(text="this address is the explorer's websocket, for its page: open "
                                          f"{self.public_url}/ in a browser\n")
        width = _size(request.query.get("width"), 80)
        height = _size(request.query.get("height"), 24)
        session = Session(self.argv, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                          close=websocket.close, download_manager=self.download_manager, debug=self.debug)
        self.sessions.add(session)
        try:
            await websocket.prepare(request)
            await session.start(width, height)
            await self._process_messages(websocket, session)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception:  # a client gone mid-message, a malformed message: that session ends, the server runs on
            pass
        finally:
            await session.stop()
            self.sessions.discard(session)
        return websocket


def _size(text: str | None, default: int) -> int:
    """A terminal size from the page's query: a number of cells within 10 … 1000, else `default`."""
    try:
        value = int(text or "")
    except ValueError:
        return default
    return value if 10 <= value <= 1000 else default
