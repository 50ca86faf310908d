"""The parameter tree: every weight and bias of a BERT class, named and shaped as `named_parameters()`.

The tree mirrors the HF module hierarchy. Leaves (`Param`) carry their shape in symbols and in numbers, so
each can explain itself (`I × H = 3072 × 768 = 2,359,296`). Tied parameters (the MLM decoder) are leaves
that count 0 and name what they are tied to, as HF counts them once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Literal, Union

from ..config import FAMILIES, BertConfig

Kind = Literal["weight", "bias", "embedding", "norm"]
GROUPS: tuple[str, ...] = ("embeddings", "encoder", "pooler", "head")


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter tensor. `dims` are the formula symbols of `shape` (`("I", "H")` for `[3072, 768]`)."""

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    kind: Kind
    tied_to: str | None = None
    heads: int = 0  # > 0 for Q/K/V: the tensor is split into this many per-head slices

    @property
    def label(self) -> str:
        """The last two name parts (`query.weight`), as a tree shows it under its module."""
        return ".".join(self.name.split(".")[-2:])

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def count(self) -> int:
        """What this leaf adds to the total: 0 when tied (HF's `parameters()` yields a tied tensor once)."""
        return 0 if self.tied_to else self.numel

    @property
    def group(self) -> str:
        return group_of(self.name)

    @property
    def formula_symbols(self) -> str:
        return " × ".join(self.dims)

    @property
    def formula_numbers(self) -> str:
        factors = " × ".join(str(n) for n in self.shape)
        return f"{factors} = {self.numel:,}" if len(self.shape) > 1 else f"{self.numel:,}"

    @property
    def formula(self) -> str:
        """Symbols and numbers in one line: `I × H = 3072 × 768 = 2,359,296`."""
        if len(self.shape) == 1:
            return f"{self.formula_symbols} = {self.numel:,}"
        return f"{self.formula_symbols} = {self.formula_numbers}"

    @property
    def head_split(self) -> str | None:
        """The per-head view of a Q/K/V tensor: `12 heads × [64, 768]`, or None for other tensors."""
        if not self.heads:
            return None
        per_head = [self.shape[0] // self.heads, *self.shape[1:]]
        return f"{self.heads} heads × [{', '.join(str(n) for n in per_head)}]"


class LayerStack(Sequence["Module"]):
    """The encoder's layers, built on first access: identical in shape, so their count is one layer's × L.

    A 1,000-layer config is counted without building 16,000 parameters; iterating builds them all (the
    JSON export does), and looking one up (`ParamTree.find`) builds only its own layer.
    """

    def __init__(self, name: str, length: int, build: Callable[[str], Module], distinct_first: bool = False) -> None:
        self.name = name  # the ModuleList's full name (`bert.encoder.layer`): layer i is `{name}.{i}`
        self._length = length
        self._build = build
        self._built: dict[int, Module] = {}
        self.distinct_first = distinct_first and length > 1  # layer 0 differs (ModernBERT: no attention norm)
        rest = self[1] if self.distinct_first else self[0] if length else None
        first = self[0] if length else None
        # not `count`: Sequence has count()
        self.param_count = first.count + (length - 1) * rest.count if first and rest else 0
        self.tensors = first.tensors + (length - 1) * rest.tensors if first and rest else 0
        self.tied = first.tied + (length - 1) * rest.tied if first and rest else 0

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Module:  # type: ignore[override]
        if not 0 <= index < self._length:
            raise IndexError(index)
        if index not in self._built:
            self._built[index] = self._build(self.item_name(index))
        return self._built[index]

    def item_name(self, index: int) -> str:
        return f"{self.name}.{index}"

    def item_title(self, index: int) -> str:
        """`layer.3`: the ModuleList's attribute and the index, as the tree shows a layer."""
        return f"{self.name.rsplit('.', 1)[-1]}.{index}"

    def index_of(self, name: str) -> int | None:
        """The layer that `name` (a layer or anything inside one) belongs to, or None."""
        rest = name.removeprefix(f"{self.name}.")
        if rest == name:
            return None
        digits = rest.split(".", 1)[0]
        return int(digits) if digits.isdigit() and int(digits) < self._length else None


@dataclass(frozen=True, slots=True)
class Module:
    """A module of the HF hierarchy: its full dotted name ("" for the root) and its children in model order."""

    name: str
    title: str
    children: Sequence[Node]
    count: int = field(init=False)
    tensors: int = field(init=False)  # untied parameter tensors below (what named_parameters() yields)
    tied: int = field(init=False)  # tied leaves below

    def __post_init__(self) -> None:
        children = self.children
        if isinstance(children, LayerStack):
            count, tensors, tied = children.param_count, children.tensors, children.tied
        else:
            count = sum(c.count for c in children)
            tensors = sum(c.tensors if isinstance(c, Module) else not c.tied_to for c in children)
            tied = sum(c.tied if isinstance(c, Module) else bool(c.tied_to) for c in children)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "tensors", tensors)
        object.__setattr__(self, "tied", tied)

    def child_toward(self, name: str) -> Node | None:
        """The child that is `name` or contains it (without building sibling layers)."""
        if isinstance(self.children, LayerStack):
            index = self.children.index_of(name)
            return None if index is None else self.children[index]
        for child in self.children:
            if child.name == name or (isinstance(child, Module) and name.startswith(f"{child.name}.")):
                return child
        return None

    @property
    def label(self) -> str:
        return self.title

    def params(self) -> Iterator[Param]:
        """Every leaf below, in model order (tied leaves included)."""
        for child in self.children:
            if isinstance(child, Param):
                yield child
            else:
                yield from child.params()

    def modules(self) -> Iterator[Module]:
        yield self
        for child in self.children:
            if isinstance(child, Module):
                yield from child.modules()


Node = Union[Module, Param]


# The totals group of a body's top-level module (ELECTRA's projection counts with the embeddings).
GROUP_OF_PART = {"embeddings": "embeddings", "embeddings_project": "embeddings", "encoder": "encoder",
                 "transformer": "encoder", "layers": "encoder", "final_norm": "encoder", "pooler": "pooler"}


def strip_body(name: str) -> str:
    """A name without the head classes' body prefix (`bert.`, `roberta.`, `distilbert.`, ...)."""
    first, dot, rest = name.partition(".")
    return rest if dot and first in body_names() else name


def body_names() -> frozenset[str]:
    """The attributes that hold a base model under a head class, every family's (its record's `body`)."""
    return frozenset(family.body for family in FAMILIES.values())


def group_of(name: str) -> str:
    """The totals group of a parameter name: embeddings, encoder, pooler, or head."""
    return GROUP_OF_PART.get(strip_body(name).split(".", 1)[0], "head")


@dataclass(frozen=True, slots=True)
class ParamTree:
    """The counted model: its config, its root module, and the derived totals every view shows."""

    config: BertConfig
    root: Module

    @property
    def total(self) -> int:
        return self.root.count

    def unique_params(self) -> list[Param]:
        """What `named_parameters()` yields: every untied parameter, in model order."""
        return [p for p in self.root.params() if not p.tied_to]

    def tied_params(self) -> list[Param]:
        return [p for p in self.root.params() if p.tied_to]

    def groups(self) -> dict[str, int]:
        """Count per group; `pooler` is always present (0 when not built), `head` only with a head class."""
        # A family that never builds a pooler (DistilBERT, ELECTRA, ModernBERT) has no pooler group.
        poolers = self.config.family.heads.values()
        totals = dict.fromkeys(GROUPS[:3] if any(pooler is not False for pooler in poolers) else GROUPS[:2], 0)
        if self.config.head != "none":
            totals["head"] = 0
        for part in self.root.children:
            for top in part.children if part.name == self.config.body and isinstance(part, Module) else (part,):
                totals[group_of(top.name)] += top.count
        return totals

    def find(self, name: str) -> Node | None:
        """The module or parameter called `name` (HF's full name; "" is the root), building only its layer."""
        node: Node | None = self.root
        while node is not None and node.name != name:
            node = node.child_toward(name) if isinstance(node, Module) else None
        return node
