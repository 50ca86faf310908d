"""Human-readable numbers: the short forms every view shares (109.48 M, 417.6 MiB)."""

from __future__ import annotations


def short_count(n: int) -> str:
    """109482240 → '109.48 M'; below a thousand, the number itself."""
    for size, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= size:
            return f"{n / size:.2f} {suffix}"
    return str(n)


def short_bytes(n: int) -> str:
    """437928960 → '417.6 MiB' (binary units, as memory is sized)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")

