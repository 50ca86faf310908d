"""Conditions on facts, read the same way by counting and by the step: a condition names facts of the config (or
of the step's workload), a leading `!` negates one, and all must hold (`("amp", "!fused")`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def holds(facts: Mapping[str, bool], when: Iterable[str]) -> bool:
    """Whether every fact of `when` holds (`!fact`: does not)."""
    return all(facts[fact.removeprefix("!")] != fact.startswith("!") for fact in when)
