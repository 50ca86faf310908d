"""safetensors checkpoints, read header-only: names, dtypes and shapes, never a tensor's bytes.

The format (https://github.com/huggingface/safetensors): 8 bytes, a little-endian u64 N; N bytes of JSON
mapping each tensor name to {dtype, shape, data_offsets}, plus an optional `__metadata__`; then the data.
A small reader of that documented layout is used rather than the `safetensors` package: it needs no
dependency (the package's `safe_open` also maps the file and wants numpy or torch for anything but keys),
it bounds what it reads, and it refuses a header that claims more bytes than the file holds.

Also: sharded checkpoints (`model.safetensors.index.json` and its shards) and model folders.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

from .files import NAME_MAX, ReadError, open_regular, os_problem, parse_json
from .hf_config import SourceError, read_json

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the format's own limit
MAX_SHARDS = 1000
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
               "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


@dataclass(frozen=True, slots=True)
class StoredTensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    file: str  # the file (a path, or a file name in a Hub repository) that holds it

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a checkpoint holds: its files with their sizes, and every stored tensor once, in file order.

    `duplicates` names tensors that a sharded checkpoint stores in more than one shard: counted once (the
    first shard's), reported."""

    path: str
    files: tuple[str, ...]
    tensors: tuple[StoredTensor, ...]
    file_sizes: tuple[int, ...] = ()
    duplicates: tuple[str, ...] = ()

    @property
    def bytes_on_disk(self) -> int:
        return sum(self.file_sizes)

    def dtypes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for tensor in self.tensors:
            counts[tensor.dtype] = counts.get(tensor.dtype, 0) + tensor.numel
        return counts


def load_checkpoint(path: Path) -> Checkpoint:
    """A `.safetensors` file, a `model.safetensors.index.json`, or a folder holding either."""
    try:
        if path.is_dir():
            path = _in_folder(path)
    except (OSError, ValueError) as error:
        raise SourceError(path, None, os_problem(error)) from None
    if path.name.endswith(".index.json"):
        return _sharded(path)
    tensors, size = read_header(path)
    return Checkpoint(str(path), (str(path),), tuple(tensors), (size,))


def _in_folder(folder: Path) -> Path:
    for name in ("model.safetensors", "model.safetensors.index.json"):
        if (folder / name).exists():
            return folder / name
    found = sorted(folder.glob("*.safetensors"))
    if len(found) == 1:
        return found[0]
    raise SourceError(folder, None, "holds no model.safetensors nor model.safetensors.index.json")


def header_length(head: bytes, file_size: int, where: str | Path) -> int:
    """The header length a file's first 8 bytes declare, refused when it cannot fit the file."""
    if len(head) < 8:
        raise SourceError(where, None, f"is {file_size} bytes: too short for a safetensors file")
    length: int = struct.unpack("<Q", head[:8])[0]
    if length > MAX_HEADER_BYTES or length > file_size - 8:
        raise SourceError(where, None, f"header claims {length:,} bytes but the file has {file_size - 8:,} after "
                          f"its length field (limit {MAX_HEADER_BYTES:,}): not a safetensors file, or truncated")
    return length


def read_header(path: Path) -> tuple[list[StoredTensor], int]:
    """The tensors one local file declares, and the file's size; refuses anything that does not fit it."""
    try:
        with open_regular(path) as (handle, size):
            length = header_length(handle.read(8), size, path)
            raw = handle.read(length)
    except ReadError as problem:
        raise SourceError(path, None, str(problem)) from None
    if len(raw) < length:
        raise SourceError(path, None, "ended inside its header: truncated")
    return parse_header(raw, size - 8 - length, str(path)), size


def parse_header(raw: bytes, data_size: int, where: str) -> list[StoredTensor]:
    """The tensors a header's JSON declares, checked against the `data_size` bytes that follow it."""
    try:
        header = parse_json(raw, "JSON in a safetensors header")
    except ReadError as problem:
        raise SourceError(where, None, f"{problem}: not a safetensors file") from None
    if not isinstance(header, dict):
        raise SourceError(where, None, "header is not a JSON object: not a safetensors file")
    return [_tensor(where, name, entry, data_size) for name, entry in header.items() if name != "__metadata__"]


def _tensor(where: str, name: str, entry: Any, data_size: int) -> StoredTensor:
    if not isinstance(entry, dict):
        raise SourceError(where, name, "entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise SourceError(where, name, f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise SourceError(where, name, f"shape {shape!r} is not a list of sizes")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(n, int) for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size):
        raise SourceError(where, name, f"data_offsets {offsets!r} fall outside the file's {data_size:,} data bytes")
    nbytes = offsets[1] - offsets[0]
    if nbytes != prod(shape) * DTYPE_BYTES[dtype]:
        raise SourceError(where, name, f"holds {nbytes:,} bytes, but {dtype} {shape} needs {prod(shape) * DTYPE_BYTES[dtype]:,}")
    return StoredTensor(name, tuple(shape), dtype, nbytes, where)


def shard_names(index: Any, where: str | Path) -> list[str]:
    """The shard file names an index's `weight_map` names, in order; each must be a plain file name."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise SourceError(where, "weight_map", "must map tensor names to shard file names")
    shards = sorted(set(weight_map.values()))
    if len(shards) > MAX_SHARDS:
        raise SourceError(where, "weight_map", f"names {len(shards):,} shards (limit {MAX_SHARDS:,})")
    for shard in shards:
        if (not shard or shard in (".", "..") or any(c in shard for c in "/\\\x00")
                or len(shard.encode("utf-8", "surrogatepass")) > NAME_MAX):
            raise SourceError(where, "weight_map", f"shard {shard!r} is not a plain file name beside the index")
    return shards


def join_shards(where: str, index: Any, shards: list[tuple[str, list[StoredTensor], int]]) -> Checkpoint:
    """One checkpoint from its shards' headers: each tensor once (the first shard's), duplicates reported,
    every tensor the index names present."""
    tensors: dict[str, StoredTensor] = {}
    duplicates: list[str] = []
    for _, stored, _ in shards:
        for tensor in stored:
            if tensor.name in tensors:
                duplicates.append(tensor.name)
            else:
                tensors[tensor.name] = tensor
    missing = sorted(set(index["weight_map"]) - set(tensors))
    if missing:
        raise SourceError(where, "weight_map", f"{missing[0]!r} is not in its shard ({len(missing)} missing)")
    return Checkpoint(where, tuple(name for name, _, _ in shards), tuple(tensors.values()),
                      tuple(size for _, _, size in shards), tuple(sorted(set(duplicates))))


def _sharded(index_path: Path) -> Checkpoint:
    index = read_json(index_path)
    shards = []
    for shard in shard_names(index, index_path):
        # Not resolved: in the Hugging Face cache each shard is a symbolic link into blobs/.
        tensors, size = read_header(index_path.parent / shard)
        shards.append((str(index_path.parent / shard), tensors, size))
    return join_shards(str(index_path), index, shards)
