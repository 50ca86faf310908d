"""A fake Hugging Face Hub on 127.0.0.1, started by the tests themselves: no test reaches the internet.

It answers what `huggingface_hub` asks for files (`HEAD`/`GET /{org}/{name}/resolve/{revision}/{path}`), with
`X-Repo-Commit`, `ETag`, `Content-Length`, `Range` (206 and `Content-Range`) and the `X-Error-Code` header the
client turns into its typed errors, and it counts every body byte it serves, per file.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str
    revisions: tuple[str, ...] = ("main",)
    gated: bool = False


@dataclass
class Misbehaviour:
    """How one file's answer goes wrong: any status, headers added or dropped, a body of any size (or one that
    never ends), sent at any pace, or a redirect to anywhere."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)  # sent as given ("" drops the header)
    size: int | None = None  # a body of this many bytes instead of the file's (filler)
    endless: bool = False  # a body that never ends (filler, until the client hangs up)
    drip: float = 0.0  # seconds between the body's chunks
    chunk: int = 65536
    location: str | None = None  # a redirect (3xx) to this URL
    pause: float = 0.0  # seconds between the headers and the body
    header_drip: float = 0.0  # seconds between the bytes of the status line and headers


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    served: Counter[str] = field(default_factory=Counter)  # body bytes served per "repo/file"
    requests: list[str] = field(default_factory=list)  # "METHOD /path [Range]"
    url: str = ""
    gate: threading.Event | None = None  # where given, each answer waits until it is set: a link held open,
    # for the explorer's cancel test
    headers: dict[str, dict[str, str]] = field(default_factory=dict)  # "repo/file" → headers it answers with
    loops: set[str] = field(default_factory=set)  # "repo/file" that redirects to itself
    drips: dict[str, float] = field(default_factory=dict)  # "repo/file" → seconds between its body's bytes
    misbehaving: dict[str, Misbehaviour] = field(default_factory=dict)  # "repo/file" → how its answer goes wrong

    def add(self, repo_id: str, folder: Path | None = None, *, files: dict[str, bytes] | None = None,
            gated: bool = False, revisions: tuple[str, ...] = ("main",)) -> Repo:
        content = dict(files or {})
        if folder is not None:
            content.update({p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()})
        commit = hashlib.sha1(repo_id.encode() + b"".join(sorted(content.values()))).hexdigest()
        repo = Repo(content, commit, revisions, gated)
        self.repos[repo_id] = repo
        return repo

    def bytes_served(self, repo_id: str, name: str) -> int:
        return self.served[f"{repo_id}/{name}"]


_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _error(self, status: int, code: str) -> None:
            message = f'{{"error": "{code}"}}'.encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(message)

        def _answer(self, body: bool) -> None:
            hub.requests.append(f"{self.command} {self.path} {self.headers.get('Range', '')}".strip())
            if hub.gate is not None:
                hub.gate.wait(timeout=60)  # (a guard: the test sets it)
            match = _RESOLVE.match(unquote(self.path.split("?")[0]))
            if not match:
                return self._error(404, "EntryNotFound")
            repo_id, revision, name = match.groups()
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._error(401, "RepoNotFound")
            if repo.gated and "authorization" not in {k.lower() for k in self.headers}:
                return self._error(401, "GatedRepo")
            if revision not in repo.revisions and revision != repo.commit:
                return self._error(404, "RevisionNotFound")
            if name not in repo.files:
                return self._error(404, "EntryNotFound")
            if f"{repo_id}/{name}" in hub.misbehaving:
                return self._misbehave(hub.misbehaving[f"{repo_id}/{name}"], repo, repo.files[name], body)
            if f"{repo_id}/{name}" in hub.loops:
                self.send_response(302)
                self.send_header("Location", self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            data = repo.files[name]
            status, part = 200, data
            wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if wanted:
                first = int(wanted.group(1))
                last = min(int(wanted.group(2)) if wanted.group(2) else len(data) - 1, len(data) - 1)
                status, part = 206, data[first:last + 1]
            self.send_response(status)
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            extra = hub.headers.get(f"{repo_id}/{name}", {})
            self.send_header("Content-Length", extra.get("Content-Length", str(len(part))))
            for key, value in extra.items():
                if key != "Content-Length":
                    self.send_header(key, value)
            if status == 206:
                self.send_header("Content-Range", f"bytes {first}-{first + len(part) - 1}/{len(data)}")
            self.end_headers()
            drip = hub.drips.get(f"{repo_id}/{name}", 0.0)
            if body:
                for start in range(0, len(part), 1 if drip else max(1, len(part))):
                    chunk = part[start:start + 1] if drip else part
                    try:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return None
                    hub.served[f"{repo_id}/{name}"] += len(chunk)
                    time.sleep(drip)

        def _misbehave(self, how: Misbehaviour, repo: Repo, data: bytes, body: bool) -> None:
            size = how.size if how.size is not None else len(data)
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                       "Content-Length": str(size), "Content-Type": "application/json"}
            if how.location is not None:
                headers["Location"] = how.location
            headers.update(how.headers)
            if how.header_drip:  # the header block a byte at a time, each byte within any read timeout
                lines = [f"HTTP/1.1 {how.status} {self.responses.get(how.status, ('',))[0]}",
                         *(f"{key}: {value}" for key, value in headers.items() if value), "Connection: close"]
                self.close_connection = True
                try:
                    for byte in ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"):
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(how.header_drip)
                except OSError:  # the client hung up
                    return None
            else:
                self.send_response(how.status)
                for key, value in headers.items():
                    if value:
                        self.send_header(key, value)
                if how.endless or "Content-Length" not in headers or not headers["Content-Length"]:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
            if not body:
                return None
            payload = data if how.size is None else b" " * size
            sent = 0
            try:
                time.sleep(how.pause)
                while how.endless or sent < len(payload):
                    chunk = payload[sent:sent + how.chunk] if not how.endless else b" " * how.chunk
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    sent += len(chunk)
                    if how.drip:
                        time.sleep(how.drip)
            except OSError:  # the client hung up
                return None
            return None

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:  # a client that hung up mid-answer
        pass


class Server:
    """The fake Hub in a thread with a random port; `stop()` ends it."""

    def __init__(self, hub: FakeHub) -> None:
        self.hub = hub
        self._server = _QuietServer(("127.0.0.1", 0), _handler(hub))
        hub.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # (it looks for `stop()` every 20 ms, not the default half second: 36 tests each wait for it)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
