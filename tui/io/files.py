"""Writing a file so that nothing is ever half-written: a temp file beside it, then an atomic rename."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` all at once: readers see the old file or the new one, never a part."""
    import tempfile  # here: only the explorer's writes need it, not the CLI's start

    path = path.expanduser()
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600; the file should look like any other the user writes
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_text_bounded(path: Path, limit: int, what: str) -> str:
    """A UTF-8 file refused before it is read when larger than `limit`; a ValueError says what is wrong."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise ValueError(f"is {size:,} bytes; {what} may be at most {limit:,}")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot be read ({error.__class__.__name__}: {error})") from None


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def check_writable_target(text: str) -> Path:
    """The path a user typed, checked before any prompt to overwrite: a ValueError says what is wrong."""
    if not text.strip():
        raise ValueError("type a file name, e.g. breakdown.json")
    path = Path(text.strip()).expanduser()
    if path.is_dir():
        raise ValueError(f"{path} is a folder; add a file name")
    if not path.parent.is_dir():
        raise ValueError(f"folder {path.parent} does not exist")
    return path
