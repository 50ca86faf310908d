"""The families counted, one record each (`record.Family`), in the order they are listed to a user.

A new family is a record in a module of its own here, its counting layout (`tui.core.count.families.LAYOUTS`),
its step layout (`tui.core.step.layouts.STEPS`) and a preset; `register` adds one made elsewhere (a test's)."""

from __future__ import annotations

from .albert import ALBERT
from .bert import BERT
from .deberta import DEBERTA
from .distilbert import DISTILBERT
from .electra import ELECTRA
from .modernbert import MODERNBERT
from .mpnet import MPNET
from .record import Family, Forward, StepKeys
from .roberta import CAMEMBERT, ROBERTA, XLM_ROBERTA

FAMILIES: dict[str, Family] = {family.name: family for family in (
    BERT, ROBERTA, XLM_ROBERTA, CAMEMBERT, DISTILBERT, ALBERT, ELECTRA, MPNET, MODERNBERT, DEBERTA)}
DEFAULT = BERT.name  # the family a config without a model_type is


def register(family: Family) -> None:
    """Add a family (its layouts are registered beside it, in their rooms)."""
    FAMILIES[family.name] = family


__all__ = ["DEFAULT", "FAMILIES", "Family", "Forward", "StepKeys", "register"]
