"""The Hub's headers and configs kept on disk (`header_cache_dir()`): one JSON file of every shard's header a
revision, and each fetched config.json under its commit with `refs/REVISION` naming it (as the Hugging Face cache
lays them out), so that the same revision opens offline later. A damaged or unwritable cache costs a fetch, never
a wrong count: what is read back is checked as a local file is."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .files import ReadError, parse_json, read_bytes, write_atomic
from .hf_config import SourceError
from .safetensors import (
    MAX_HEADER_BYTES,
    Checkpoint,
    StoredTensor,
    join_shards,
    parse_header,
)

MAX_CACHE_BYTES = 256 * 1024 * 1024  # a header cache file (every shard's header of one revision)
COMMIT = re.compile(r"[0-9a-f]{40}")  # a commit as the Hub names it (X-Repo-Commit, snapshot folders)
INDEX = "model.safetensors.index.json"



def header_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/bert-tui/hub-headers` (`~/.cache/...` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bert-tui" / "hub-headers"


def _kept_path(repo_id: str, commit: str) -> Path:
    safe_commit = commit if COMMIT.fullmatch(commit) else "unknown"
    return kept_folder(repo_id) / f"{safe_commit}.json"


def kept_folder(repo_id: str) -> Path:
    return header_cache_dir() / f"models--{repo_id.replace('/', '--')}"


def _kept_ref(repo_id: str, revision: str | None) -> Path:
    """The file naming the commit a revision was at when its config was kept (`refs/REV`, as the HF cache)."""
    return kept_folder(repo_id) / "refs" / quote(revision or "main", safe="")


def keep_config(repo_id: str, revision: str | None, commit: str, raw: bytes, name: str = "config.json") -> Path:
    """Keep a fetched config.json (`<commit>/config.json`, and `refs/<revision>` naming the commit, as the
    Hugging Face cache lays them out) so that the same revision opens offline; its path. A cache that cannot be
    written leaves the file in a temporary folder for this run."""
    path = kept_folder(repo_id) / commit / name
    ref = _kept_ref(repo_id, revision)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, raw)
        ref.parent.mkdir(exist_ok=True)
        write_atomic(ref, commit)
    except OSError:
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="bert-tui-")) / name
        path.write_bytes(raw)
    return path


def kept_config(repo_id: str, revision: str | None, name: str = "config.json") -> tuple[Path, str] | None:
    """(`name`, commit) kept from an earlier fetch of `revision`, or None."""
    try:
        commit = read_bytes(_kept_ref(repo_id, revision), 64, "a kept ref").decode("ascii", "replace").strip()
    except ReadError:
        return None
    path = kept_folder(repo_id) / commit / name
    return (path, commit) if COMMIT.fullmatch(commit) and path.is_file() else None


def keep(repo_id: str, commit: str, record: dict[str, Any]) -> None:
    import json

    path = _kept_path(repo_id, commit)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record))
    except OSError:
        pass  # a cache that cannot be written costs a fetch next time, nothing more


def read_kept(repo_id: str, commit: str) -> tuple[Checkpoint | None] | None:
    """Headers kept from an earlier fetch, as a 1-tuple: `(None,)` when the repository had no safetensors;
    None when nothing usable is kept."""
    path = _kept_path(repo_id, commit)
    if not path.is_file():
        return None
    try:
        record = parse_json(read_bytes(path, MAX_CACHE_BYTES, "a header cache file"))
        return (None,) if record.get("kind") == "none" else (from_record(repo_id, record),)
    except (ReadError, SourceError, AttributeError, KeyError, TypeError, ValueError):
        return None  # a damaged cache entry is fetched again


def from_record(repo_id: str, record: dict[str, Any]) -> Checkpoint:
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
