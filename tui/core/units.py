"""Human-readable numbers: the short forms every view shares (109.48 M, 417.6 MiB)."""

from __future__ import annotations


def short_count(n: int) -> str:
    """109482240 → '109.48 M'; below a thousand, the number itself."""
    for size, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= size:
            return f"{n / size:.2f} {suffix}"
    return str(n)


def short_flops(n: int) -> str:
    """3.2e13 → '32.16 TFLOP' (decimal prefixes, as FLOPs are quoted; G, not B, for 10⁹)."""
    for size, prefix in ((10**18, "E"), (10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if abs(n) >= size:
            return f"{n / size:.2f} {prefix}FLOP"
    return f"{n} FLOP"


def short_bytes(n: int) -> str:
    """437928960 → '417.6 MiB' (binary units, as memory is sized)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")



SIZE_UNITS = {"": 1024**3, "b": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
              "g": 1024**3, "gib": 1024**3, "gb": 1000**3, "t": 1024**4, "tib": 1024**4, "tb": 1000**4}
MAX_MEMORY = 1024**6  # an exbibyte: beyond any device, and keeps the arithmetic exact


DECIMAL_UNITS = {"kb": "KB", "mb": "MB", "gb": "GB", "tb": "TB"}  # their binary twins: KiB … TiB


def size_reading(text: str) -> str | None:
    """What a size in decimal units was read as, and how to write the binary size a card is sold in (its box
    says GB, its memory is GiB): "24 GB = 22.4 GiB; for a card of 24 GiB write 24GiB". None for binary units and
    bare numbers (GiB), which read as they say, and for text `parse_size` refuses."""
    try:
        nbytes = parse_size(text)
    except ValueError:
        return None
    cleaned = text.strip().lower().replace(" ", "").replace("_", "")
    number = cleaned.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = DECIMAL_UNITS.get(cleaned[len(number):])
    if unit is None:
        return None
    binary = unit[0] + "iB"
    return f"{number} {unit} = {short_bytes(nbytes)}; for a card of {number} {binary} write {number}{binary}"


def parse_size(text: str) -> int:
    """'24GiB', '24 G', '24' (GiB), '80GB' (decimal), '1.5TiB' → bytes; ValueError names what is allowed."""
    cleaned = text.strip().lower().replace(" ", "").replace("_", "")
    number = cleaned.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = cleaned[len(number):]
    allowed = "a size such as 24GiB, 24G, 80GB or 24 (GiB)"
    if unit not in SIZE_UNITS or not number or len(number) > 30:
        raise ValueError(allowed)
    try:
        from decimal import Decimal, InvalidOperation

        value = Decimal(number) * SIZE_UNITS[unit]
    except InvalidOperation:
        raise ValueError(allowed) from None
    if not value.is_finite() or not 1 <= value <= MAX_MEMORY:
        raise ValueError(f"{allowed}, between 1 byte and 1 EiB")
    return int(value)
