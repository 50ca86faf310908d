"""The one way in and the one way out for files.

In: every byte bert-tui reads from a file (config.json, preset YAML, safetensors headers, shard indexes)
goes through `open_regular` / `read_bytes` and, for text formats, `parse_json` / `parse_yaml`. They refuse
what is not a regular file by name (a FIFO would block forever, `/dev/zero` never ends), bound the size,
the nesting depth and the length of integers, refuse YAML aliases (billion laughs) and non-text mapping
keys, and turn every failure into a `ReadError` whose message the CLI and the explorer show as one line.

Out: `write_atomic` writes through a temporary file beside the target and renames it, so nothing a user
saved is ever half-written.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

MAX_DEPTH = 64  # nesting of JSON / YAML containers; real configs and headers nest 3 or 4 deep
MAX_INT_DIGITS = 40  # longer integers are no size bert-tui can count (Python refuses 4,300 digits anyway)
NAME_MAX = 255  # bytes in one path component on every common file system


class ReadError(ValueError):
    """A file that cannot be read as asked: the message says why, without the path (callers add it)."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def user_path(text: str) -> Path:
    """A path the user typed: `~` and `~user` expanded when they can be; a ReadError otherwise."""
    text = text.strip()
    if "\x00" in text:
        raise ReadError("a path cannot hold a NUL byte")
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~nosuchuser
        raise ReadError(f"{text.split('/', 1)[0]}: no such user's home folder") from None


def os_problem(error: OSError | ValueError) -> str:
    """One line for an OS-level failure, in the user's words rather than errno's."""
    if isinstance(error, ValueError):  # "embedded null byte" and its kin, from os functions
        return f"is not a usable path ({error})"
    if error.errno == errno.ENOENT:
        return "does not exist"
    if error.errno == errno.ENAMETOOLONG:
        return f"has a name too long for the file system (at most {NAME_MAX} bytes a name)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read: permission denied"
    if error.errno == errno.ELOOP:
        return "is a loop of symbolic links"
    if error.errno == errno.ENOTDIR:
        return "does not exist (a part of it is not a folder)"
    return f"cannot be read ({error.strerror or error})"


def probe(path: Path, test: Callable[[Path], bool]) -> bool:
    """`test(path)` (Path.exists, Path.is_dir, ...), False where the path cannot even be looked at (a name too
    long, a NUL byte, no permission): the reader then says why, in one line."""
    try:
        return test(path)
    except (OSError, ValueError):
        return False


@contextmanager
def open_regular(path: Path) -> Iterator[tuple[IO[bytes], int]]:
    """An open regular file and its size; anything else (FIFO, device, socket, folder) is refused by name
    before a byte is read. Opening does not block: O_NONBLOCK makes a FIFO open return at once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as error:
        raise ReadError(os_problem(error)) from None
    try:
        info = os.fstat(fd)
        for test, kind in _KINDS:
            if test(info.st_mode):
                raise ReadError(f"is {kind}, not a regular file")
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        try:
            yield handle, info.st_size
        except OSError as error:
            raise ReadError(os_problem(error)) from None


def read_bytes(path: Path, limit: int, what: str) -> bytes:
    """All of a regular file of at most `limit` bytes (checked before and while reading)."""
    with open_regular(path) as (handle, size):
        if size > limit:
            raise ReadError(f"is {size:,} bytes; {what} may be at most {limit:,}")
        data = handle.read(limit + 1)
    if len(data) > limit:  # a file that grew while it was read
        raise ReadError(f"is over {limit:,} bytes; {what} may be at most {limit:,}")
    return data


def read_text(path: Path, limit: int, what: str) -> str:
    """`read_bytes` decoded as UTF-8."""
    try:
        return read_bytes(path, limit, what).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ReadError(f"is not UTF-8 text (byte {error.start})") from None


# JSON: the nesting depth is measured before parsing (json recurses per level), integers are bounded as parsed.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def parse_json(data: bytes | str, what: str = "JSON") -> Any:
    """JSON with bounded nesting and integer length; a ReadError names what is wrong and where."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    _check_depth(_JSON_STRING.sub(b'""', raw).translate(None, _NOT_BRACKETS))
    try:
        return json.loads(raw, parse_int=_bounded_int, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ReadError(f"is not valid {what} (line {error.lineno}, column {error.colno}: {error.msg})") from None
    except UnicodeDecodeError:
        raise ReadError(f"is not valid {what} (not UTF-8 text)") from None
    except RecursionError:  # unreachable after the depth check; kept as the last guard
        raise ReadError(f"nests deeper than {MAX_DEPTH} levels") from None


def _check_depth(brackets: bytes) -> None:
    depth = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > MAX_DEPTH:
            raise ReadError(f"nests deeper than {MAX_DEPTH} levels")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ReadError(f"holds an integer of {len(text):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(name: str) -> float:
    raise ReadError(f"holds {name}, which JSON does not allow")


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load` with no aliases, bounded nesting, bounded integers and text keys only."""
    import yaml

    try:
        return yaml.load(text, Loader=_bounded_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        raise ReadError(f"is not valid YAML (safe YAML only): {' '.join(str(error).split())}") from None


_LOADER: type | None = None


def _bounded_loader() -> type:
    """A `yaml.SafeLoader` that refuses aliases, deep nesting, long integers and non-text mapping keys."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    class BoundedSafeLoader(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", event.start_mark)
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise yaml.composer.ComposerError(None, None, f"nests deeper than {MAX_DEPTH} levels",
                                                      self.peek_event().start_mark)  # type: ignore[no-untyped-call]
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            for key, _ in node.value:
                if key.tag != "tag:yaml.org,2002:str":
                    raise yaml.constructor.ConstructorError(None, None, f"mapping key {key.value!r} is not text",
                                                            key.start_mark)
            return super().construct_mapping(node, deep)

        def construct_yaml_int(self, node: Any) -> Any:
            digits = str(node.value).lstrip("+-").replace("_", "")
            if len(digits) > MAX_INT_DIGITS:
                raise yaml.constructor.ConstructorError(None, None, f"an integer of {len(digits):,} digits "
                                                        f"(at most {MAX_INT_DIGITS})", node.start_mark)
            return super().construct_yaml_int(node)

    BoundedSafeLoader.add_constructor("tag:yaml.org,2002:int", BoundedSafeLoader.construct_yaml_int)
    _LOADER = BoundedSafeLoader
    return _LOADER


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write `text` (str as UTF-8) to `path` all at once: readers see the old file or the new one, never a part.

    A symbolic link is written through: its target is replaced, the link stays. The temporary file has a
    short name of its own (a 255-byte target name must still work) and is created with the user's umask,
    or the replaced file's mode."""
    import secrets  # here: only the explorer's writes need it, not the CLI's start

    path = Path(os.path.realpath(path.expanduser()))
    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise IsADirectoryError(errno.EISDIR if stat.S_ISDIR(info.st_mode) else errno.EINVAL,
                                "not a regular file", str(path))
    tmp = path.parent / f".bert-tui-{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        if info is not None:
            os.fchmod(fd, stat.S_IMODE(info.st_mode))
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_writable_target(text: str) -> Path:
    """The path a user typed, checked before any prompt to overwrite: a ValueError says what is wrong."""
    if not text.strip():
        raise ValueError("type a file name, e.g. breakdown.json")
    path = user_path(text)
    try:
        if len(os.fsencode(path.name)) > NAME_MAX:
            raise ValueError(f"the name is {len(os.fsencode(path.name))} bytes; a file name may be at most {NAME_MAX}")
        if path.is_dir():
            raise ValueError(f"{path} is a folder; add a file name")
        if not path.parent.is_dir():
            raise ValueError(f"folder {path.parent} does not exist")
        if path.exists() and not path.is_file():
            raise ValueError(f"{path} is not a regular file")
    except OSError as error:
        raise ValueError(f"{path} {os_problem(error)}") from None
    return path
