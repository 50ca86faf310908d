"""Model layouts as data, and the one engine that turns a layout and a config into a parameter tree.

A layout says what transformers registers, in registration order: modules (`M`), their parameters (`P`,
dimensions written in the config's symbols: `("I", "H")`), a repeated layer (`Stack`, its length a
symbol), conditions on the config's facts (`when="pooler"`, `when="!tie"`), and shared tensors (`share`:
the first parameter of a share group registered is the tensor, the later ones are tied to it, and a
share holds only while its fact does). Nothing here is evaluated as code: dimensions are symbols or
literal sizes, conditions are fact names. What differs between families is data (`families.py`); what a
config means for a family (its symbols' values and its facts) is the family's only code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Union

from ..facts import holds
from ..poly import Poly
from ..poly import render as render_poly
from .tree import Kind, LayerStack, Module, Node, Param


@dataclass(frozen=True, slots=True)
class P:
    """A parameter: its attribute name, dimensions (symbols or literal sizes), and kind. `heads`: a Q/K/V
    tensor split into A per-head slices. `share`: (group, fact) — tied to the group's first tensor while
    the fact holds (`None`: always)."""

    name: str
    dims: tuple[str, ...]
    kind: Kind
    heads: bool = False
    share: tuple[str, str | None] | None = None
    when: str | None = None


@dataclass(frozen=True, slots=True)
class M:
    """A module: its attribute name and children in registration order (its own parameters first, as
    PyTorch registers them when the module assigns them before its submodules)."""

    name: str
    children: tuple[Spec, ...]
    when: str | None = None


@dataclass(frozen=True, slots=True)
class Stack:
    """A ModuleList of `length` (a symbol) identical layers, shown folded into its parent: `encoder.layer.N`."""

    name: str
    length: str
    layer: M


@dataclass(frozen=True, slots=True)
class B:
    """A module that registers no parameter (a dropout, an activation, an Identity): never a node of the tree,
    but a name in `named_modules()`, which peft's target matching reads (`bare`)."""

    name: str
    when: str | None = None


Spec = Union[P, M, Stack, B]


def _mentions(spec: Spec, fact: str) -> bool:
    """Whether a condition inside `spec` reads `fact` (a layer that reads `first` differs at index 0)."""
    if isinstance(spec, Stack):
        return _mentions(spec.layer, fact)
    if spec.when is not None and spec.when.removeprefix("!") == fact:
        return True
    return isinstance(spec, M) and any(_mentions(child, fact) for child in spec.children)


def linear(name: str, out_dim: str, in_dim: str, *, heads: bool = False, when: str | None = None) -> M:
    """`nn.Linear(in, out)`: weight [out, in], then bias [out]."""
    return M(name, (P("weight", (out_dim, in_dim), "weight", heads), P("bias", (out_dim,), "bias", heads)), when)


def layer_norm(name: str, dim: str = "H", *, when: str | None = None) -> M:
    return M(name, (P("weight", (dim,), "norm"), P("bias", (dim,), "norm")), when)


def embedding(name: str, rows: str, dim: str = "H", share: tuple[str, str | None] | None = None, *,
              when: str | None = None) -> M:
    return M(name, (P("weight", (rows, dim), "embedding", share=share),), when)


def build(title: str, parts: tuple[Spec, ...], values: Mapping[str, int], facts: Mapping[str, bool]) -> Module:
    """The root module (`title`: the class name) of `parts` for a config's symbol values and facts."""
    return _Engine(values, facts).root(title, parts)


def bare(parts: tuple[Spec, ...], values: Mapping[str, int], facts: Mapping[str, bool]) -> list[str]:
    """The full names of the modules without parameters (`B`), every layer's own, as `named_modules()` has
    them: what a target name can match beside the tree's modules."""
    found: list[str] = []

    def walk(prefix: str, specs: tuple[Spec, ...], engine: _Engine) -> None:
        for spec in specs:
            if isinstance(spec, Stack):
                distinct_first = _mentions(spec.layer, "first")
                for index in range(engine.size(spec.length)):
                    walk(f"{prefix}{spec.name}.{index}.", spec.layer.children,
                         engine.in_layer(index, distinct_first))
            elif not engine.holds(spec.when):
                continue
            elif isinstance(spec, B):
                found.append(f"{prefix}{spec.name}")
            elif isinstance(spec, M):
                walk(f"{prefix}{spec.name}.", spec.children, engine)

    walk("", parts, _Engine(values, facts))
    return found


class _Engine:
    def __init__(self, values: Mapping[str, int], facts: Mapping[str, bool]) -> None:
        self.values = values
        self.facts = facts
        self.owners: dict[str, str] = {}  # share group → the full name of the tensor registered first

    def holds(self, condition: str | None) -> bool:
        return condition is None or holds(self.facts, (condition,))

    def root(self, title: str, parts: tuple[Spec, ...]) -> Module:
        return Module("", title, tuple(self.children("", parts)))

    def children(self, prefix: str, specs: tuple[Spec, ...]) -> list[Node]:
        nodes: list[Node] = []
        for spec in specs:
            if isinstance(spec, Stack):  # beside other children: a module of its own (`encoder.layer`)
                nodes.append(Module(f"{prefix}{spec.name}", spec.name, self.stack(f"{prefix}{spec.name}", spec)))
            elif isinstance(spec, B):
                continue
            elif spec.when is None or self.holds(spec.when):
                nodes.append(self.param(prefix, spec) if isinstance(spec, P) else self.module(prefix, spec))
        return nodes

    def module(self, prefix: str, spec: M) -> Module:
        """A module; one whose only child is a Stack holds the layers itself (`encoder` → `layer.0 …`)."""
        name = f"{prefix}{spec.name}"
        match spec.children:
            case (Stack() as stack,):
                return Module(name, spec.name, self.stack(f"{name}.{stack.name}", stack))
        return Module(name, spec.name, tuple(self.children(f"{name}.", spec.children)))

    def in_layer(self, index: int, distinct_first: bool) -> _Engine:
        """The engine for layer `index` of a stack: the `first` fact holds in layer 0 where the layer reads it."""
        return _Engine(self.values, {**self.facts, "first": index == 0}) if distinct_first else self

    def stack(self, name: str, stack: Stack) -> LayerStack:
        """The layers, each built when first looked at (`LayerStack`); a layer may hold a Stack of its own."""
        layer = stack.layer

        distinct_first = _mentions(layer, "first")

        def build_layer(layer_name: str) -> Module:
            index = layer_name.rsplit(".", 1)[-1]
            engine = self.in_layer(int(index), distinct_first)
            match layer.children:
                case (Stack() as inner,):
                    return Module(layer_name, f"{stack.name}.{index}", engine.stack(f"{layer_name}.{inner.name}", inner))
            return Module(layer_name, f"{stack.name}.{index}", tuple(engine.children(f"{layer_name}.", layer.children)))

        return LayerStack(name, self.size(stack.length), build_layer, distinct_first)

    def param(self, prefix: str, spec: P) -> Param:
        name = f"{prefix}{spec.name}"
        shape = tuple(self.size(dim) for dim in spec.dims)
        tied_to = None
        if spec.share is not None and self.holds(spec.share[1]):
            tied_to = self.owners.setdefault(spec.share[0], name)
            tied_to = None if tied_to == name else tied_to
        return Param(name, spec.dims, shape, spec.kind, tied_to, self.values["A"] if spec.heads else 0)

    def size(self, dim: str) -> int:
        """A dimension: a symbol (`H`), a literal size (`2`), or a multiple of a symbol (`3H`: fused Q, K, V)."""
        if dim in self.values:
            return self.values[dim]
        coefficient, symbol = split_dim(dim)
        return coefficient * self.values[symbol] if symbol else coefficient


# Closed forms read from the same data: each parameter is the product of its dimensions, a Stack multiplies
# its layer by its length. The result is a sum per totals group of pieces `(multiplier, polynomial)`.

SYMBOL_ORDER = "VPDCTEHIARNGKL"  # counting's symbols, in the order its forms write them


def formula(parts: tuple[Spec, ...], facts: Mapping[str, bool]) -> list[tuple[str, tuple[str, ...], Poly]]:
    """(parameter name, multiplier symbols, polynomial) for every counted parameter, stacks factored out
    (`L·(4H² + …)`; a stacked layer's names keep no index); tied parameters count nothing, as in the tree."""
    engine = _Engine({}, facts)
    pieces: list[tuple[str, tuple[str, ...], Poly]] = []

    def walk(prefix: str, specs: tuple[Spec, ...], multiplier: tuple[str, ...]) -> None:
        for spec in specs:
            if isinstance(spec, B):
                continue
            if isinstance(spec, Stack):
                walk(f"{prefix}{spec.name}.", spec.layer.children, (*multiplier, spec.length))
            elif spec.when == "!first":  # in every layer but the first: (L − 1) of them
                walk_one(prefix, replace(spec, when=None), (*multiplier[:-1], f"({multiplier[-1]} − 1)"))
            elif spec.when == "first":
                walk_one(prefix, replace(spec, when=None), multiplier[:-1])
            elif spec.when is not None and not engine.holds(spec.when):
                continue
            else:
                walk_one(prefix, spec, multiplier)

    def walk_one(prefix: str, spec: P | M, multiplier: tuple[str, ...]) -> None:
        if spec.when is not None and not engine.holds(spec.when):
            return
        if isinstance(spec, M):
            walk(f"{prefix}{spec.name}.", spec.children, multiplier)
            return
        name = f"{prefix}{spec.name}"
        if spec.share is not None and engine.holds(spec.share[1]):
            if engine.owners.setdefault(spec.share[0], name) != name:
                return
        coefficient, symbols = 1, []
        for dim in spec.dims:
            factor, symbol = split_dim(dim)
            coefficient *= factor
            if symbol:
                symbols.append(symbol)
        monomial = tuple(sorted(symbols, key=SYMBOL_ORDER.index))
        pieces.append((name, multiplier, {monomial: coefficient}))

    walk("", parts, ())
    return pieces


def split_dim(dim: str) -> tuple[int, str]:
    """`3H` → (3, "H"); `H` → (1, "H"); `2` → (2, "")."""
    digits = len(dim) - len(dim.lstrip("0123456789"))
    return (int(dim[:digits]) if digits else 1), dim[digits:]


def render(poly: Poly) -> str:
    """`4H² + 2H·I + 9H + I`: highest degree first, as the hand-written forms read."""
    return render_poly(poly, SYMBOL_ORDER, times="")
