"""Models named by their Hugging Face Hub id (`ORG/NAME`): the config and the checkpoint's headers, never weights.

- `config.json` is read from the user's Hugging Face cache (a model transformers downloaded opens with no
  network), else from what bert-tui kept of an earlier fetch, else fetched by one bounded request (`_download`)
  and kept once it has passed; `--offline` (or `HF_HUB_OFFLINE=1`) never touches the network. The library's
  session, URLs, token and typed errors are used; its download is not, because it cannot be bounded in bytes
  read or in total time. The token goes to the Hub's own host only, and is never printed.
- The safetensors headers are read by HTTP range requests: 8 bytes for the header's length, then the header,
  per file (a single `model.safetensors`, or every shard a `model.safetensors.index.json` names). Not one byte of
  a tensor is transferred. A checkpoint already in the cache (downloaded by transformers) is read from there.
  Fetched headers are kept (`hub_cache`) so that the same revision opens offline later.
- Every request is bounded before it starts (what its answer announces), while it comes (bytes read, as long as
  announced) and in total time (`BUDGET`, redirects followed hop by hop). Every failure is a `SourceError` with
  one line a user can act on: not found, gated, revision, not cached while offline, network unreachable
  (answered within `TIMEOUT` seconds, not after a long retry), too large, too slow, broke off, a web page.

`huggingface_hub` is imported only here, and this module only when a source is a model id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

from ..plain import printable
from .files import ReadError, parse_json
from .hf_config import MAX_CONFIG_BYTES, SourceError
from .hub_cache import (
    COMMIT,
    from_record,
    keep,
    keep_config,
    kept_config,
    kept_folder,
    read_kept,
)
from .safetensors import (
    Checkpoint,
    header_length,
    load_checkpoint,
    shard_names,
)

TIMEOUT = 5.0  # seconds to wait for the Hub to answer a request
BUDGET = 60.0  # seconds one request may take in all, hops and body (a drip answers every read in time)
SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"
MAX_INDEX_BYTES = 16 * 1024 * 1024  # a shard index, as a local one
MAX_ERROR_BYTES = 64 * 1024  # of an error answer's body, what the library reads for its message
MAX_REDIRECTS = 10  # hops a download may take (the Hub takes one, to its CDN)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
Progress = Callable[[str], None]


ADAPTER_CONFIG = "adapter_config.json"  # a PEFT adapter repository holds this, not config.json


def is_model_id(text: str) -> bool:
    """`ORG/NAME` as the Hub spells repository ids (checked before any network: `..` and the like are not)."""
    return bool(_ID.fullmatch(text)) and ".." not in text and not text.endswith((".", "-"))


@dataclass(frozen=True)
class HubModel:
    """A model on the Hub at one revision: its config file (in the cache), and what its repository stores."""

    repo_id: str
    revision: str | None  # as asked (None: the default branch)
    commit: str
    config_path: Path
    checkpoint: Checkpoint | None  # None: the repository holds no safetensors
    notes: tuple[str, ...]
    fetched_bytes: int  # header bytes transferred by this call (0 when read from a cache)

    @property
    def title(self) -> str:
        return f"{self.repo_id}@{self.revision or 'main'} ({self.commit[:7]})"


def open_repo(repo_id: str, revision: str | None = None, offline: bool = False,
              progress: Progress | None = None) -> HubModel:
    """The config and checkpoint headers of `repo_id` at `revision`, cache first."""
    hub = _hub()
    offline = offline or bool(hub.constants.HF_HUB_OFFLINE)
    say = progress or (lambda message: None)
    with _HubErrors(repo_id, revision, offline):
        config_path, commit, fresh = _model_config(hub, repo_id, revision, offline, say)
        notes: tuple[str, ...]
        if config_path.name == ADAPTER_CONFIG:  # its base model's checkpoint is the one to compare, not fetched here
            checkpoint, notes, fetched = None, ("a PEFT adapter: its adapter_config.json is read, not its weights",), 0
        else:
            checkpoint, notes, fetched = _checkpoint(hub, repo_id, commit, config_path.parent, offline, say)
        if fresh is not None:  # kept only once the whole answer held: a commit the Hub then denies keeps nothing
            config_path = keep_config(repo_id, revision, commit, fresh, config_path.name)
    return HubModel(repo_id, revision, commit, config_path, checkpoint, notes, fetched)


def _hub() -> Any:
    try:
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.utils
    except ImportError as error:  # a runtime dependency; a broken install says so in one line
        raise SourceError("huggingface_hub", None, f"cannot be imported ({error}): reinstall bert-tui") from None
    huggingface_hub.utils.disable_progress_bars()  # type: ignore[attr-defined]  # its bars would paint over the explorer; progress goes through ours
    return huggingface_hub


def _model_config(hub: Any, repo_id: str, revision: str | None, offline: bool,
                  say: Progress) -> tuple[Path, str, bytes | None]:
    """`_config` of the model's config.json, or of a PEFT adapter's adapter_config.json where the repository holds
    that instead (an adapter shared on the Hub: its base model is named inside)."""
    try:
        return _config(hub, repo_id, revision, offline, say)
    except (hub.utils.EntryNotFoundError, SourceError) as missing:
        if isinstance(missing, SourceError) and not offline:
            raise
        try:
            return _config(hub, repo_id, revision, offline, say, ADAPTER_CONFIG)
        except (hub.utils.EntryNotFoundError, SourceError):
            raise missing from None


def _config(hub: Any, repo_id: str, revision: str | None, offline: bool,
            say: Progress, name: str = "config.json") -> tuple[Path, str, bytes | None]:
    """(`name`, the commit it belongs to, its bytes when fetched now): from the Hugging Face cache (filled by
    transformers, say), from what bert-tui kept of an earlier fetch, else fetched by one bounded request (its path
    is where it will be kept, `keep_config`, once the rest of the answer holds)."""
    cached = hub.try_to_load_from_cache(repo_id, name, revision=revision)
    if isinstance(cached, str):
        return Path(cached), Path(cached).parent.name, None  # snapshots/<commit>/config.json
    kept = kept_config(repo_id, revision, name)
    if kept is not None:
        return (*kept, None)
    if offline:
        raise SourceError(repo_id, None, f"is not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) and the "
                          "network is off (--offline or HF_HUB_OFFLINE=1): open it once online, or give a local path")
    say(f"fetching {repo_id} {name} from {hub.constants.ENDPOINT}…")
    raw, commit = _download(hub, hub.hf_hub_url(repo_id, name, revision=revision),
                            f"{repo_id}/{name}", MAX_CONFIG_BYTES, "a config")
    try:
        parse_json(raw)  # kept only once it reads as JSON (what it configures is checked as a local file's is)
    except ReadError as problem:
        raise SourceError(f"{repo_id}/{name}", None, f"{problem}: not kept") from None
    return kept_folder(repo_id) / commit / name, commit, raw


def _download(hub: Any, url: str, where: str, limit: int, what: str) -> tuple[bytes, str]:
    """(the file at `url`, the commit the Hub names for it), bounded before it starts and while it comes: what
    the answer announces (a web page, a size over `limit`) is refused before its body is read; the body is read
    to `limit` bytes at most, within `BUDGET` seconds in all, and must be as long as announced. Nothing is
    written here: a file is kept only once it has passed (the library's own download cannot be bounded so)."""
    with _get(hub, url, {}) as (status, headers, chunks):
        _announced(headers, where, limit, what)
        body = _at_most(chunks, limit + 1, where)
    if len(body) > limit:
        raise SourceError(where, None, f"the Hub sent more than the {limit:,} bytes allowed for {what}: refused")
    announced = _header_int(headers, "Content-Length")
    if announced is not None and announced != len(body):
        raise SourceError(where, None, f"the Hub announced {announced:,} bytes and sent {len(body):,}: cut "
                          "short or mislabelled, refused")
    commit = headers.get("X-Repo-Commit") or ""
    if not COMMIT.fullmatch(commit):  # as huggingface_hub itself refuses such an answer
        raise SourceError(where, None, "the answer names no commit (no X-Repo-Commit header): not the Hub, or a "
                          "proxy that strips its headers? Check HF_ENDPOINT and the proxy")
    return body, commit


@contextmanager
def _get(hub: Any, url: str, extra: dict[str, str]) -> Iterator[tuple[int, Any, Iterator[bytes]]]:
    """GET `url` through the library's session (its token, its proxy settings), without retries: the library's
    own calls retry a refused connection for ~20 s. Redirects are followed here, hop by hop (the Hub sends large
    files to a CDN), never reading a redirect's body (the HTTP library reads it in full: an endless one never
    ended), at most `MAX_REDIRECTS` hops, the token sent to the Hub's own host only; all within `BUDGET`
    seconds. A 4xx/5xx answer raises the library's typed error, from a bounded part of its body. Yields
    (status, headers, body chunks)."""
    headers = {**_request_headers(hub), **extra}
    session = hub.get_session()
    first = url
    commit = ""  # the commit the first answer names (a CDN's answer names none)
    deadline = time.monotonic() + BUDGET  # one budget for the request, its hops and its body
    for _ in range(MAX_REDIRECTS + 1):
        if time.monotonic() > deadline:
            raise SourceError(first, None, f"no answer within {BUDGET:g} s (redirect after redirect): given up")
        with _send(session, url, headers, min(TIMEOUT, deadline - time.monotonic()), deadline) as (response, raw):
            chunks = _until(raw, deadline, first)
            status = response.status_code
            commit = commit or response.headers.get("X-Repo-Commit") or ""
            location = response.headers.get("Location") if status in (301, 302, 303, 307, 308) else None
            if location is None:
                if status >= 400:
                    _raise_for_status(hub, response, _at_most(chunks, MAX_ERROR_BYTES, url))
                answer = {key.title(): value for key, value in response.headers.items()}
                if commit:
                    answer["X-Repo-Commit"] = commit
                yield status, answer, chunks
                return
        url = urljoin(url, location)
        if urlsplit(url).scheme not in ("http", "https"):
            raise SourceError(first, None, f"the Hub redirects to {printable(url)[:80]!r}, not a web address")
        if urlsplit(url).netloc != urlsplit(first).netloc:  # the token stays with the Hub
            headers = {key: value for key, value in headers.items() if key.lower() != "authorization"}
    raise SourceError(first, None, f"the Hub's answers redirect in a loop (over {MAX_REDIRECTS} hops): a "
                      "misconfigured proxy or mirror?")


class _Watchdog:
    """Ends a request at its deadline whatever it waits for. The HTTP library bounds each read, not an answer: a
    server that sends its status line and headers a byte at a time, each within the read timeout, held a request
    for as long as it liked. httpx's `trace` extension hands over each connection's socket as it opens; at the
    deadline the socket is shut down, which wakes the blocked read (the request then fails, named too slow)."""

    def __init__(self, deadline: float) -> None:
        import threading

        self.expired = False
        self._sockets: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self._timer.daemon = True

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if name.endswith(("connect_tcp.complete", "connect_unix_socket.complete")):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                if sock is not None:
                    self._sockets.append(sock)
                    if self.expired:
                        self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: Any) -> None:
        import socket

        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed already
            pass

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _too_slow(where: str) -> SourceError:
    return SourceError(where, None, f"no complete answer from the Hub within {BUDGET:g} s: too slow, given up "
                       "(check the network or a proxy)")


@contextmanager
def _send(session: Any, url: str, headers: dict[str, str], timeout: float,
          deadline: float) -> Iterator[tuple[Any, Iterator[bytes]]]:
    """One request, its body not read yet, each wait at most `timeout` (what is left of the request's budget,
    so that a chain of slow hops ends within it too) and the whole answer, headers and body, ended at `deadline`
    (`_Watchdog`): httpx or httpx2 (huggingface_hub >= 1.0), or requests (each read bounded only)."""
    if callable(getattr(session, "stream", None)):  # requests has a bool there
        with _Watchdog(deadline) as watchdog:
            try:
                with session.stream("GET", url, headers=headers, timeout=timeout, follow_redirects=False,
                                    extensions={"trace": watchdog.trace}) as response:
                    yield response, response.iter_bytes()
            except Exception:
                if watchdog.expired:  # whatever the library made of a shut socket: the answer took too long
                    raise _too_slow(url) from None
                raise
        return
    with session.get(url, headers=headers, timeout=timeout, stream=True, allow_redirects=False) as response:
        yield response, response.iter_content(65536)


def _raise_for_status(hub: Any, response: Any, body: bytes) -> None:
    """The library's typed error for a 4xx/5xx answer, from the part of its body that was read."""
    if callable(getattr(response, "iter_bytes", None)):  # httpx: a new, read response with that body
        response = type(response)(response.status_code, headers=response.headers, content=body,
                                  request=response.request)
    else:  # requests: its body, read (bounded)
        response._content = body
    hub.utils.hf_raise_for_status(response)


def _request_headers(hub: Any) -> dict[str, str]:
    """The library's headers (its user agent, the user's token), the bytes as stored (no compression: sizes
    and ranges are the file's), and a connection of its own for each request: a server that sends more than it
    announced (Content-Length: 0, then a body a byte at a time) left those bytes on a kept-alive connection,
    and the next request over it read them as its answer's headers, each byte within the read timeout: no
    bound held (~200 s in a test). A new connection a request costs a handshake (tens of ms to the Hub)."""
    return {**hub.utils.build_hf_headers(), "Accept-Encoding": "identity", "Connection": "close"}


def _head(hub: Any, url: str) -> Any:
    """HEAD `url` once, without retries (see `_get`). A typed Hub error is raised for a 4xx/5xx answer."""
    session = hub.get_session()
    if callable(getattr(session, "stream", None)):  # httpx: the answer's headers within the budget too
        with _Watchdog(time.monotonic() + BUDGET) as watchdog:
            try:
                response = session.head(url, headers=_request_headers(hub), timeout=TIMEOUT,
                                        extensions={"trace": watchdog.trace})
            except Exception:
                if watchdog.expired:
                    raise _too_slow(url) from None
                raise
    else:
        response = session.head(url, headers=_request_headers(hub), timeout=TIMEOUT)
    if response.status_code >= 400:
        hub.utils.hf_raise_for_status(response)
    return response


def _announced(headers: Any, where: str, limit: int, what: str) -> None:
    """Refuse, before its body is read, a file the Hub says is larger than a local one may be, or a web page (a
    proxy's login page) where a JSON file should be."""
    kind = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if kind in ("text/html", "application/xhtml+xml"):
        raise SourceError(where, None, f"the answer is a web page ({kind}), not the file: a proxy or a login "
                          "page in the way? Not downloaded")
    for header in ("X-Linked-Size", "Content-Length"):
        size = _header_int(headers, header)
        if size is not None and size > limit:
            raise SourceError(where, None, f"the Hub announces {size:,} bytes, over the {limit:,} allowed for "
                              f"{what}: not downloaded")


def _header_int(headers: Any, name: str) -> int | None:
    """A header holding a whole number of bytes (ASCII digits, at most 19), or None when it is absent or not one."""
    value = headers.get(name) or ""
    return int(value) if value.isascii() and value.isdigit() and len(value) < 20 else None


def _checkpoint(hub: Any, repo_id: str, commit: str, snapshot: Path, offline: bool,
                say: Progress) -> tuple[Checkpoint | None, tuple[str, ...], int]:
    """What the repository stores: from a checkpoint in the cache, from kept headers, or fetched."""
    for name in (SINGLE, INDEX):
        if (snapshot / name).exists():  # downloaded already (by transformers, say): read its headers locally
            try:
                return load_checkpoint(snapshot / name), (), 0
            except SourceError:
                break  # a download cut short (an index without all its shards): the headers come from elsewhere
    kept = read_kept(repo_id, commit)
    if kept is not None:  # fetched before: the headers, or (None,) for a repository without safetensors
        return (kept[0], (), 0) if kept[0] is not None else (None, _NO_SAFETENSORS, 0)
    if offline:
        return None, (f"no safetensors headers of {repo_id}@{commit[:7]} in the cache (offline): counted from its "
                      "config only",), 0
    fetched = _fetch(hub, repo_id, commit, say)
    if fetched is None:
        keep(repo_id, commit, {"kind": "none"})
        return None, _NO_SAFETENSORS, 0
    checkpoint, record, size = fetched
    keep(repo_id, commit, record)
    return checkpoint, (), size


_NO_SAFETENSORS = ("the repository holds no safetensors weights (pytorch_model.bin only?): counted from its "
                   "config; headers of .bin files cannot be read without loading them",)


def _fetch(hub: Any, repo_id: str, commit: str, say: Progress) -> tuple[Checkpoint, dict[str, Any], int] | None:
    """The headers of the repository's safetensors files by range requests, or None when it has none."""
    errors = hub.utils
    try:
        _head(hub, hub.hf_hub_url(repo_id, SINGLE, revision=commit))
        files, index = [SINGLE], None
    except errors.EntryNotFoundError:
        try:
            raw_index, _ = _download(hub, hub.hf_hub_url(repo_id, INDEX, revision=commit), f"{repo_id}/{INDEX}",
                                     MAX_INDEX_BYTES, "a shard index")
        except errors.EntryNotFoundError:
            return None
        index = _parse_index(raw_index, repo_id)
        files = shard_names(index, f"{repo_id}/{INDEX}")
    record: dict[str, Any] = {"kind": "sharded" if index else "single", "index": index, "files": {}}
    fetched = 0
    for number, name in enumerate(files, 1):
        say(f"reading the header of {repo_id}/{name} ({number}/{len(files)})…")
        raw, size, transferred = _remote_header(hub, hub.hf_hub_url(repo_id, name, revision=commit), f"{repo_id}/{name}")
        record["files"][name] = {"size": size, "header": raw.decode("utf-8", "replace")}
        fetched += transferred
    return from_record(repo_id, record), record, fetched


def _parse_index(raw: bytes, repo_id: str) -> Any:
    try:
        return parse_json(raw)
    except ReadError as problem:
        raise SourceError(f"{repo_id}/{INDEX}", None, str(problem)) from None


def _remote_header(hub: Any, url: str, where: str) -> tuple[bytes, int, int]:
    """(header JSON bytes, file size, bytes transferred): two range requests, the length then the header."""
    head, size = _range(hub, url, 0, 7)
    if size is None:
        raise SourceError(where, None, "the Hub did not say the file's size (no Content-Range): cannot check its header")
    length = header_length(head, size, where)
    if length == 0:  # nothing to fetch; an empty header is refused by the parser, as a local one is
        return b"", size, len(head)
    raw, _ = _range(hub, url, 8, 8 + length - 1)
    if len(raw) != length:
        raise SourceError(where, None, f"the Hub sent {len(raw):,} header bytes of {length:,}: truncated")
    return raw, size, len(head) + len(raw)


def _range(hub: Any, url: str, first: int, last: int) -> tuple[bytes, int | None]:
    """Bytes `first`..`last` of `url` (never more, whatever the server sends) and the file's total size."""
    want = last - first + 1
    with _get(hub, url, {"Range": f"bytes={first}-{last}"}) as (status, headers, chunks):
        return _at_most(chunks, want, url), _total_size(headers, status, want)


def _at_most(chunks: Iterator[bytes], limit: int, where: str = "") -> bytes:
    """The first `limit` bytes of a stream (a server that ignores Range is cut off there); one that stops or
    hangs up part way is named as such, not as a network that cannot be reached."""
    data = bytearray()
    try:
        for chunk in chunks:
            data += chunk
            if len(data) >= limit:
                break
    except Exception as error:
        if isinstance(error, SourceError) or not _is_network_error(error):
            raise
        raise SourceError(where, None, f"the Hub's answer broke off after {len(data):,} bytes "
                          f"({type(error).__name__}): try again, or check a proxy") from None
    return bytes(data[:limit])


def _until(chunks: Iterator[bytes], deadline: float, where: str) -> Iterator[bytes]:
    """The chunks, until `deadline`: a server that sends a byte at a time, each within the read timeout, never
    times out by itself."""
    sent = 0
    for chunk in chunks:
        sent += len(chunk)
        yield chunk
        if time.monotonic() > deadline:
            raise SourceError(where, None, f"the Hub sent {sent:,} bytes in {BUDGET:g} s: too slow, given up "
                              "(check the network or a proxy)")


def _total_size(headers: Any, status: int, want: int) -> int | None:
    """The file's size: from `Content-Range: bytes a-b/TOTAL`, or Content-Length when the server sent it all."""
    content_range = headers.get("Content-Range") or ""
    match = re.fullmatch(r"bytes \d+-\d+/(\d{1,20})", content_range.strip())
    if match:
        return int(match.group(1))
    return _header_int(headers, "Content-Length") if status == 200 else None


# One line for every failure a user can act on.


class _HubErrors:
    """Turn huggingface_hub's and the HTTP library's exceptions into one `SourceError` line each."""

    def __init__(self, repo_id: str, revision: str | None, offline: bool) -> None:
        self.repo_id, self.revision, self.offline = repo_id, revision, offline

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> Literal[False]:
        if error is None or isinstance(error, (SourceError, KeyboardInterrupt)) or not isinstance(error, Exception):
            return False
        raise SourceError(self.repo_id, None, self._line(error)) from None

    def _line(self, error: Exception) -> str:
        hub = _hub()
        errors, name = hub.utils, self.repo_id
        endpoint = hub.constants.ENDPOINT
        if isinstance(error, errors.GatedRepoError):
            return (f"is gated: accept its terms at {endpoint}/{name}, then set HF_TOKEN or run `hf auth login` "
                    "(your token is used, never shown)")
        if isinstance(error, errors.RepositoryNotFoundError):
            return (f"no such repository on the Hub ({endpoint}), or it is private (set HF_TOKEN or log in); "
                    "no local path of that name exists either")
        if isinstance(error, errors.RevisionNotFoundError):
            return f"revision {printable(self.revision or 'main')!r} not found in the repository"
        if isinstance(error, errors.LocalEntryNotFoundError):
            if self.offline:
                return f"is not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) and the network is off"
            return _unreachable(endpoint)
        if isinstance(error, errors.EntryNotFoundError):
            return "has no config.json (nor a PEFT adapter's adapter_config.json): not a transformers model repository"
        if isinstance(error, errors.HfHubHTTPError):
            response = getattr(error, "response", None)
            status = getattr(response, "status_code", "?")
            retry = str(getattr(response, "headers", {}).get("Retry-After") or "")
            later = f" (it asks to retry after {printable(retry)[:40]}{' s' * retry.isdigit()})" if retry else ""
            return f"the Hub answered HTTP {status}{later}: {printable(str(error).splitlines()[0])[:120]}"
        if type(error).__name__ == "TooManyRedirects":  # httpx's and requests' own name for it
            return f"the Hub's answers redirect in a loop (at {endpoint}): a misconfigured proxy or mirror?"
        if _is_network_error(error):
            return _unreachable(endpoint)
        if isinstance(error, (OSError, ValueError)):
            return f"cannot be read from the cache ({error.__class__.__name__}: {printable(str(error))[:120]})"
        raise error


def _unreachable(endpoint: str) -> str:
    return (f"cannot reach the Hub at {endpoint} within {TIMEOUT:g} s: check the network, or use what is in your "
            "Hugging Face cache (--offline, or HF_HUB_OFFLINE=1)")


def _is_network_error(error: BaseException) -> bool:
    """Connection refused, DNS, timeouts: httpx's, requests' and the socket's own errors."""
    module = type(error).__module__.split(".")[0]
    return module in ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3") or isinstance(
        error, (ConnectionError, TimeoutError))
