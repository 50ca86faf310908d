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
from dataclasses import dataclass
from typing import Union

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


Spec = Union[P, M, Stack]


def linear(name: str, out_dim: str, in_dim: str, *, heads: bool = False) -> M:
    """`nn.Linear(in, out)`: weight [out, in], then bias [out]."""
    return M(name, (P("weight", (out_dim, in_dim), "weight", heads), P("bias", (out_dim,), "bias", heads)))


def layer_norm(name: str, dim: str = "H") -> M:
    return M(name, (P("weight", (dim,), "norm"), P("bias", (dim,), "norm")))


def embedding(name: str, rows: str, dim: str = "H", share: tuple[str, str | None] | None = None) -> M:
    return M(name, (P("weight", (rows, dim), "embedding", share=share),))


def build(title: str, parts: tuple[Spec, ...], values: Mapping[str, int], facts: Mapping[str, bool]) -> Module:
    """The root module (`title`: the class name) of `parts` for a config's symbol values and facts."""
    return _Engine(values, facts).root(title, parts)


class _Engine:
    def __init__(self, values: Mapping[str, int], facts: Mapping[str, bool]) -> None:
        self.values = values
        self.facts = facts
        self.owners: dict[str, str] = {}  # share group → the full name of the tensor registered first

    def holds(self, condition: str | None) -> bool:
        if condition is None:
            return True
        negated = condition.startswith("!")
        return self.facts[condition.removeprefix("!")] != negated

    def root(self, title: str, parts: tuple[Spec, ...]) -> Module:
        return Module("", title, tuple(self.children("", parts)))

    def children(self, prefix: str, specs: tuple[Spec, ...]) -> list[Node]:
        nodes: list[Node] = []
        for spec in specs:
            if isinstance(spec, Stack):
                raise ValueError(f"a Stack stands alone in its module: {prefix}{spec.name}")
            if spec.when is None or self.holds(spec.when):
                nodes.append(self.param(prefix, spec) if isinstance(spec, P) else self.module(prefix, spec))
        return nodes

    def module(self, prefix: str, spec: M) -> Module:
        name = f"{prefix}{spec.name}"
        match spec.children:
            case (Stack() as stack,):
                layer = stack.layer

                def build_layer(layer_name: str) -> Module:
                    return Module(layer_name, "layer." + layer_name.rsplit(".", 1)[-1],
                                  tuple(self.children(f"{layer_name}.", layer.children)))

                stack_name = f"{name}.{stack.name}"
                return Module(name, spec.name, LayerStack(stack_name, self.size(stack.length), build_layer))
        return Module(name, spec.name, tuple(self.children(f"{name}.", spec.children)))

    def param(self, prefix: str, spec: P) -> Param:
        name = f"{prefix}{spec.name}"
        shape = tuple(self.size(dim) for dim in spec.dims)
        tied_to = None
        if spec.share is not None and self.holds(spec.share[1]):
            tied_to = self.owners.setdefault(spec.share[0], name)
            tied_to = None if tied_to == name else tied_to
        return Param(name, spec.dims, shape, spec.kind, tied_to, self.values["A"] if spec.heads else 0)

    def size(self, dim: str) -> int:
        return self.values[dim] if dim in self.values else int(dim)
