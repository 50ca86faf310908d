"""A published parameter count as written ("110M", "186,828,288", "0.11B"): its grammar, its value and the
significant figures it was written with. Apart from the audit that explains a claim, so that reading a preset's
claims does not load the search over conventions."""

from __future__ import annotations

import re
from dataclasses import dataclass

SCOPES = ("model", "layer")  # what a claim counts: the whole model, or one encoder layer


class ClaimError(ValueError):
    """A claimed count that cannot be read as a number of parameters."""

    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__(f"claim {text!r}: write a count as 186828288, 186,828,288 (commas between thousands), "
                         "110M, 0.11B or 340K")


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed count: its value and, for a short form like '110M', the significant figures written."""

    text: str
    value: int
    figures: int | None  # None: exact

    def matches(self, count: int) -> bool:
        return count == self.value if self.figures is None else round_figures(count, self.figures) == self.value


_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
_CLAIM = re.compile(r"^\s*([0-9][0-9,_]*(?:\.[0-9]+)?|\.[0-9]+)\s*([KMBGT]?)\s*$", re.IGNORECASE)
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,3}(?:_[0-9]{3})+")  # thousands, one separator throughout


def parse_claim(text: str) -> Claim:
    """'186828288', '186,828,288' (exact); '110M', '0.11B', '1.1e8'-free short forms (at their precision)."""
    match = _CLAIM.match(text)
    if not match or len(text) > 40:
        raise ClaimError(text)
    from decimal import (  # here: the CLI's cold start need not pay for it
        Decimal,
        InvalidOperation,
    )

    whole = match.group(1).partition(".")[0]
    if ("," in whole or "_" in whole) and not _GROUPED.fullmatch(whole):
        raise ClaimError(text)  # '110,00' is a typo, not 11,000
    digits, suffix = match.group(1).replace(",", "").replace("_", ""), match.group(2).upper()
    try:
        number = Decimal(digits) * _SUFFIXES[suffix]
    except InvalidOperation:
        raise ClaimError(text) from None
    if number != number.to_integral_value() or number <= 0:
        raise ClaimError(text)
    if not suffix and "." not in digits:
        return Claim(text, int(number), None)
    significant = digits.replace(".", "").lstrip("0").rstrip("0") or "0"
    return Claim(text, int(number), max(1, len(significant)))


def round_figures(n: int, figures: int) -> int:
    """`n` rounded (half up) to `figures` significant figures: 109482240, 2 → 110000000."""
    if n == 0:
        return 0
    drop = max(0, len(str(abs(n))) - figures)
    scale: int = 10**drop
    return (n + scale // 2) // scale * scale
