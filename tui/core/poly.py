"""Polynomials in the model's symbols: the one engine both rooms write their closed forms with (counting's
`4H² + 2H·I + 9H + I`, the step's `40·n·H + 12·b'·A·s²`). A monomial is its symbols in the room's order, each
repeated as often as its power: ("H", "H", "I") is H²·I. Each room keeps its own symbols and their order (the
step's `L` is the layers run, counting's the layers built) and says how it writes a form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import prod

Monomial = tuple[str, ...]
Poly = dict[Monomial, int]
SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def of_terms(terms: Iterable[tuple[int, Iterable[str]]], order: Sequence[str]) -> Poly:
    """The sum of `coefficient × Π factors` (a factor is a symbol of `order`, or a number), zero terms dropped."""
    result: Poly = {}
    for coefficient, factors in terms:
        numbers, symbols = 1, []
        for factor in factors:
            if factor.isdigit():
                numbers *= int(factor)
            else:
                symbols.append(factor)
        key = tuple(sorted(symbols, key=order.index))
        result[key] = result.get(key, 0) + coefficient * numbers
    return {key: value for key, value in result.items() if value}


def add(poly: Poly, other: Poly) -> Poly:
    out = dict(poly)
    for monomial, coefficient in other.items():
        out[monomial] = out.get(monomial, 0) + coefficient
    return out


def value(poly: Poly, values: Mapping[str, int]) -> int:
    return sum(coefficient * prod(values[symbol] for symbol in monomial) for monomial, coefficient in poly.items())


def render(poly: Poly, order: Sequence[str] | None = None, times: str = "·") -> str:
    """The form as written: `order` given, highest degree first and by symbol (counting's `4H² + 2H·I`), else as
    the terms came (the step's, in the module's order); `times` between a coefficient and its symbols
    (counting writes `4H²`, the step `4·n·H`); a negative term as ` − `."""
    items = list(poly.items())
    if order is not None:
        items.sort(key=lambda item: (-len(item[0]), [order.index(s) for s in item[0]]))
    text = ""
    for monomial, coefficient in items:
        powers: dict[str, int] = {}
        for symbol in monomial:
            powers[symbol] = powers.get(symbol, 0) + 1
        symbols = "·".join(s + (str(p).translate(SUPERSCRIPTS) if p > 1 else "") for s, p in powers.items())
        size = abs(coefficient)
        part = f"{size}" if not symbols else (symbols if size == 1 else f"{size}{times}{symbols}")
        sign = " − " if coefficient < 0 else " + "
        text = (text + sign + part) if text else ("−" + part if coefficient < 0 else part)
    return text or "0"
