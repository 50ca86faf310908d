"""safetensors checkpoints, read header-only: names, dtypes and shapes, never a tensor's bytes.

The format (https://github.com/huggingface/safetensors): 8 bytes, a little-endian u64 N; N bytes of JSON
mapping each tensor name to {dtype, shape, data_offsets}, plus an optional `__metadata__`; then the data.
A small reader of that documented layout is used rather than the `safetensors` package: it needs no
dependency (the package's `safe_open` also maps the file and wants numpy or torch for anything but keys),
it bounds what it reads, and it refuses a header that claims more bytes than the file holds.

Also: sharded checkpoints (`model.safetensors.index.json` and its shards) and model folders.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

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
    file: Path

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a checkpoint holds: its files and every stored tensor, in file order."""

    path: Path
    files: tuple[Path, ...]
    tensors: tuple[StoredTensor, ...]

    @property
    def bytes_on_disk(self) -> int:
        return sum(file.stat().st_size for file in self.files)

    def dtypes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for tensor in self.tensors:
            counts[tensor.dtype] = counts.get(tensor.dtype, 0) + tensor.numel
        return counts


def load_checkpoint(path: Path) -> Checkpoint:
    """A `.safetensors` file, a `model.safetensors.index.json`, or a folder holding either."""
    if path.is_dir():
        path = _in_folder(path)
    if not path.is_file():
        raise SourceError(path, None, "does not exist")
    if path.name.endswith(".index.json"):
        return _sharded(path)
    return Checkpoint(path, (path,), tuple(read_header(path)))


def _in_folder(folder: Path) -> Path:
    for name in ("model.safetensors", "model.safetensors.index.json"):
        if (folder / name).is_file():
            return folder / name
    found = sorted(folder.glob("*.safetensors"))
    if len(found) == 1:
        return found[0]
    raise SourceError(folder, None, "holds no model.safetensors nor model.safetensors.index.json")


def read_header(path: Path) -> list[StoredTensor]:
    """The tensors one file declares; refuses anything that does not fit the file."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise SourceError(path, None, f"is {size} bytes: too short for a safetensors file")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES or length > size - 8:
                raise SourceError(path, None, f"header claims {length:,} bytes but the file has {size - 8:,} after "
                                  f"its length field (limit {MAX_HEADER_BYTES:,}): not a safetensors file, or truncated")
            raw = handle.read(length)
    except OSError as error:
        raise SourceError(path, None, f"cannot be read ({error.__class__.__name__}: {error})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SourceError(path, None, "header is not valid JSON: not a safetensors file") from None
    if not isinstance(header, dict):
        raise SourceError(path, None, "header is not a JSON object: not a safetensors file")
    data_size = size - 8 - length
    return [_tensor(path, name, entry, data_size) for name, entry in header.items() if name != "__metadata__"]


def _tensor(path: Path, name: str, entry: Any, data_size: int) -> StoredTensor:
    if not isinstance(entry, dict):
        raise SourceError(path, name, "entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise SourceError(path, name, f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise SourceError(path, name, f"shape {shape!r} is not a list of sizes")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(n, int) for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size):
        raise SourceError(path, name, f"data_offsets {offsets!r} fall outside the file's {data_size:,} data bytes")
    nbytes = offsets[1] - offsets[0]
    if nbytes != prod(shape) * DTYPE_BYTES[str(dtype)]:
        raise SourceError(path, name, f"holds {nbytes:,} bytes, but {dtype} {shape} needs {prod(shape) * DTYPE_BYTES[str(dtype)]:,}")
    return StoredTensor(name, tuple(shape), str(dtype), nbytes, path)


def _sharded(index: Path) -> Checkpoint:
    data = read_json(index)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise SourceError(index, "weight_map", "must map tensor names to shard file names")
    shards = sorted(set(weight_map.values()))
    if len(shards) > MAX_SHARDS:
        raise SourceError(index, "weight_map", f"names {len(shards):,} shards (limit {MAX_SHARDS:,})")
    files, tensors = [], []
    for shard in shards:
        file = (index.parent / shard).resolve()
        if file.parent != index.parent.resolve() or not file.is_file():
            raise SourceError(index, "weight_map", f"shard {shard!r} is not a file beside the index")
        files.append(file)
        tensors += read_header(file)
    stored = {t.name for t in tensors}
    missing = sorted(set(weight_map) - stored)
    if missing:
        raise SourceError(index, "weight_map", f"{missing[0]!r} is not in its shard ({len(missing)} missing)")
    return Checkpoint(index, tuple(files), tuple(tensors))
