"""Models named by their Hugging Face Hub id (`ORG/NAME`): the config and the checkpoint's headers, never weights.

- `config.json` comes through `huggingface_hub` and the user's Hugging Face cache: a model already in the cache
  opens with no network at all; `--offline` (or `HF_HUB_OFFLINE=1`) never touches the network. The user's token
  (`HF_TOKEN`, a saved login) is used by the library as for any Hub call, and never printed.
- The safetensors headers are read by HTTP range requests: 8 bytes for the header's length, then the header,
  per file (a single `model.safetensors`, or every shard a `model.safetensors.index.json` names). Not one byte of
  a tensor is transferred. A checkpoint already in the cache (downloaded by transformers) is read from there.
  Fetched headers are kept (`header_cache_dir()`) so that the same revision opens offline later.
- Every failure is a `SourceError` with one line a user can act on: not found, gated, revision, not cached
  while offline, network unreachable (answered within `TIMEOUT` seconds, not after a long retry).

`huggingface_hub` is imported only here, and this module only when a source is a model id.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..plain import printable
from .files import ReadError, parse_json, read_bytes, write_atomic
from .hf_config import MAX_CONFIG_BYTES, SourceError
from .safetensors import (
    MAX_HEADER_BYTES,
    Checkpoint,
    StoredTensor,
    header_length,
    join_shards,
    load_checkpoint,
    parse_header,
    shard_names,
)

TIMEOUT = 5.0  # seconds to wait for the Hub to answer a request
BUDGET = 60.0  # seconds a header's bytes may take in all (a drip answers every read in time and never ends)
SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"
MAX_CACHE_BYTES = 256 * 1024 * 1024  # a header cache file (every shard's header of one revision)
MAX_INDEX_BYTES = 16 * 1024 * 1024  # a shard index, as a local one
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
Progress = Callable[[str], None]


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
        config_path = _config(hub, repo_id, revision, offline, say)
        commit = config_path.parent.name  # snapshots/<commit>/config.json
        checkpoint, notes, fetched = _checkpoint(hub, repo_id, commit, config_path.parent, offline, say)
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


def _config(hub: Any, repo_id: str, revision: str | None, offline: bool, say: Progress) -> Path:
    """config.json from the cache, else from the Hub (into the cache)."""
    cached = hub.try_to_load_from_cache(repo_id, "config.json", revision=revision)
    if isinstance(cached, str):
        return Path(cached)
    if offline:
        raise SourceError(repo_id, None, f"is not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) and the "
                          "network is off (--offline or HF_HUB_OFFLINE=1): open it once online, or give a local path")
    say(f"fetching {repo_id} config.json from {hub.constants.ENDPOINT}…")
    url = hub.hf_hub_url(repo_id, "config.json", revision=revision)
    # One quick request first: an unreachable Hub answers now, not after the library's retries, and what the
    # answer announces (its size, a web page) is refused before a byte of it reaches the cache.
    _announced(_head(hub, url), f"{repo_id}/config.json", MAX_CONFIG_BYTES, "a config")
    return Path(hub.hf_hub_download(repo_id, "config.json", revision=revision, etag_timeout=TIMEOUT))


def _head(hub: Any, url: str) -> Any:
    """HEAD `url` once, without retries: the library's own metadata call retries a refused connection for ~20 s
    (huggingface_hub 0.x always, later versions by default). A typed Hub error is raised for a 4xx/5xx answer."""
    headers = {**hub.utils.build_hf_headers(), "Accept-Encoding": "identity"}
    response = hub.get_session().head(url, headers=headers, timeout=TIMEOUT)
    if response.status_code >= 400:
        hub.utils.hf_raise_for_status(response)
    return response


def _announced(response: Any, where: str, limit: int, what: str) -> None:
    """Refuse, before downloading, a file the Hub says is larger than a local one may be, or a web page (a
    proxy's login page) where a JSON file should be."""
    kind = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if kind in ("text/html", "application/xhtml+xml"):
        raise SourceError(where, None, f"the answer is a web page ({kind}), not the file: a proxy or a login "
                          "page in the way? Not downloaded")
    for header in ("X-Linked-Size", "Content-Length"):
        size = response.headers.get(header) or ""
        if size.isascii() and size.isdigit() and len(size) < 20 and int(size) > limit:
            raise SourceError(where, None, f"the Hub announces {int(size):,} bytes, over the {limit:,} allowed for "
                              f"{what}: not downloaded")


def _checkpoint(hub: Any, repo_id: str, commit: str, snapshot: Path, offline: bool,
                say: Progress) -> tuple[Checkpoint | None, tuple[str, ...], int]:
    """What the repository stores: from a checkpoint in the cache, from kept headers, or fetched."""
    for name in (SINGLE, INDEX):
        if (snapshot / name).exists():  # downloaded already (by transformers, say): read its headers locally
            try:
                return load_checkpoint(snapshot / name), (), 0
            except SourceError:
                break  # a download cut short (an index without all its shards): the headers come from elsewhere
    kept = _read_kept(repo_id, commit)
    if kept is not None:  # fetched before: the headers, or (None,) for a repository without safetensors
        return (kept[0], (), 0) if kept[0] is not None else (None, _NO_SAFETENSORS, 0)
    if offline:
        return None, (f"no safetensors headers of {repo_id}@{commit[:7]} in the cache (offline): counted from its "
                      "config only",), 0
    fetched = _fetch(hub, repo_id, commit, say)
    if fetched is None:
        _keep(repo_id, commit, {"kind": "none"})
        return None, _NO_SAFETENSORS, 0
    checkpoint, record, size = fetched
    _keep(repo_id, commit, record)
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
            _announced(_head(hub, hub.hf_hub_url(repo_id, INDEX, revision=commit)), f"{repo_id}/{INDEX}",
                       MAX_INDEX_BYTES, "a shard index")
            index_path = hub.hf_hub_download(repo_id, INDEX, revision=commit, etag_timeout=TIMEOUT)
        except errors.EntryNotFoundError:
            return None
        index = _read_index(Path(index_path), repo_id)
        files = shard_names(index, f"{repo_id}/{INDEX}")
    record: dict[str, Any] = {"kind": "sharded" if index else "single", "index": index, "files": {}}
    fetched = 0
    for number, name in enumerate(files, 1):
        say(f"reading the header of {repo_id}/{name} ({number}/{len(files)})…")
        raw, size, transferred = _remote_header(hub, hub.hf_hub_url(repo_id, name, revision=commit), f"{repo_id}/{name}")
        record["files"][name] = {"size": size, "header": raw.decode("utf-8", "replace")}
        fetched += transferred
    return _from_record(repo_id, record), record, fetched


def _read_index(path: Path, repo_id: str) -> Any:
    try:
        return parse_json(read_bytes(path, MAX_INDEX_BYTES, "a shard index"))
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
    headers = {**hub.utils.build_hf_headers(), "Range": f"bytes={first}-{last}", "Accept-Encoding": "identity"}
    session = hub.get_session()
    if callable(getattr(session, "stream", None)):  # httpx (huggingface_hub >= 1.0); requests has a bool there
        with session.stream("GET", url, headers=headers, timeout=TIMEOUT, follow_redirects=True) as response:
            if response.status_code >= 400:
                response.read()
                hub.utils.hf_raise_for_status(response)
            body = _at_most(response.iter_bytes(), want, url)
            return body, _total_size(response.headers, response.status_code, want)
    response = session.get(url, headers=headers, timeout=TIMEOUT, stream=True, allow_redirects=True)  # requests (0.x)
    with response:
        if response.status_code >= 400:
            hub.utils.hf_raise_for_status(response)
        body = _at_most(response.iter_content(65536), want, url)
        return body, _total_size(response.headers, response.status_code, want)


def _at_most(chunks: Iterator[bytes], limit: int, where: str = "") -> bytes:
    """The first `limit` bytes of a stream; a server that ignores Range is cut off there, and one that sends
    them too slowly (a byte at a time, each within the read timeout) is given up after `BUDGET` seconds."""
    data = bytearray()
    deadline = time.monotonic() + BUDGET
    for chunk in chunks:
        data += chunk
        if len(data) >= limit:
            break
        if time.monotonic() > deadline:
            raise SourceError(where, None, f"the Hub sent {len(data):,} of {limit:,} bytes in {BUDGET:g} s: too slow, "
                              "given up (check the network or a proxy)")
    return bytes(data[:limit])


def _total_size(headers: Any, status: int, want: int) -> int | None:
    """The file's size: from `Content-Range: bytes a-b/TOTAL`, or Content-Length when the server sent it all."""
    content_range = headers.get("Content-Range") or ""
    match = re.fullmatch(r"bytes \d+-\d+/(\d{1,20})", content_range.strip())
    if match:
        return int(match.group(1))
    length = headers.get("Content-Length")
    return int(length) if status == 200 and length and length.isascii() and length.isdigit() and len(length) < 20 else None


# Kept headers: one JSON file a revision, so that the same model opens offline later.


def header_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/bert-tui/hub-headers` (`~/.cache/...` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bert-tui" / "hub-headers"


def _kept_path(repo_id: str, commit: str) -> Path:
    safe_commit = commit if re.fullmatch(r"[0-9a-f]{40}", commit) else "unknown"
    return header_cache_dir() / f"models--{repo_id.replace('/', '--')}" / f"{safe_commit}.json"


def _keep(repo_id: str, commit: str, record: dict[str, Any]) -> None:
    import json

    path = _kept_path(repo_id, commit)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record))
    except OSError:
        pass  # a cache that cannot be written costs a fetch next time, nothing more


def _read_kept(repo_id: str, commit: str) -> tuple[Checkpoint | None] | None:
    """Headers kept from an earlier fetch, as a 1-tuple: `(None,)` when the repository had no safetensors;
    None when nothing usable is kept."""
    path = _kept_path(repo_id, commit)
    if not path.is_file():
        return None
    try:
        record = parse_json(read_bytes(path, MAX_CACHE_BYTES, "a header cache file"))
        return (None,) if record.get("kind") == "none" else (_from_record(repo_id, record),)
    except (ReadError, SourceError, AttributeError, KeyError, TypeError, ValueError):
        return None  # a damaged cache entry is fetched again


def _from_record(repo_id: str, record: dict[str, Any]) -> Checkpoint:
    """A checkpoint from fetched (or kept) headers, checked exactly as a local file's."""
    shards = []
    for name, entry in record["files"].items():
        raw = str(entry["header"]).encode("utf-8")
        size = int(entry["size"])
        if len(raw) > MAX_HEADER_BYTES:
            raise SourceError(f"{repo_id}/{name}", None, "header over the format's limit")
        tensors: list[StoredTensor] = parse_header(raw, size - 8 - len(raw), f"{repo_id}/{name}")
        shards.append((f"{repo_id}/{name}", tensors, size))
    if record["kind"] == "sharded":
        return join_shards(f"{repo_id}/{INDEX}", record["index"], shards)
    where, tensors, size = shards[0]
    return Checkpoint(where, (where,), tuple(tensors), (size,))


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
            return "has no config.json: not a transformers model repository"
        if isinstance(error, errors.HfHubHTTPError):
            status = getattr(getattr(error, "response", None), "status_code", "?")
            return f"the Hub answered HTTP {status}: {printable(str(error).splitlines()[0])[:120]}"
        if type(error).__name__ == "TooManyRedirects":  # httpx's and requests' own name for it
            return f"the Hub's answers redirect in a loop (at {endpoint}): a misconfigured proxy or mirror?"
        if _is_network_error(error):
            return _unreachable(endpoint)
        if isinstance(error, (OSError, ValueError)):
            return f"cannot be read from the cache ({error.__class__.__name__}: {printable(str(error))[:120]})"
        raise error


def _unreachable(endpoint: str) -> str:
    return (f"cannot reach the Hub at {endpoint} within {TIMEOUT:g} s: check the network, or use what is in your "
            "Hugging Face cache (`--offline` on the command line; `HF_HUB_OFFLINE=1 bert-tui` for the explorer)")


def _is_network_error(error: BaseException) -> bool:
    """Connection refused, DNS, timeouts: httpx's, requests' and the socket's own errors."""
    module = type(error).__module__.split(".")[0]
    return module in ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3") or isinstance(
        error, (ConnectionError, TimeoutError))
