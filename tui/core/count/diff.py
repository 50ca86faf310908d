"""Compare two counted models: total, per group and per parameter.

Parameters are matched by role: by name without the body prefix (`bert.`, so a head class compares with
BertModel), each family's names read as BERT's (`role_name`: DistilBERT's `q_lin` is BERT's `self.query`).
`rows` folds the encoder's layers: one row per parameter of a layer and per kind of change, with the range
of layers it covers (`encoder.layer.{0..11}.attention.self.query.weight  [768, 768] → [1024, 1024]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import DEFAULT
from .families import role_name
from .tree import Module, Node, ParamTree, strip_body

_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.")


@dataclass(frozen=True, slots=True)
class ParamDelta:
    name: str
    shape_a: tuple[int, ...] | None  # None: absent from A
    shape_b: tuple[int, ...] | None
    count_a: int
    count_b: int

    @property
    def delta(self) -> int:
        return self.count_b - self.count_a


@dataclass(frozen=True, slots=True)
class FoldedDelta:
    """Parameters that changed the same way in a range of layers (or one parameter outside the encoder)."""

    name: str  # with `{first..last}` for a range of layers
    shape_a: tuple[int, ...] | None
    shape_b: tuple[int, ...] | None
    times: int
    delta: int


@dataclass(frozen=True, slots=True)
class Diff:
    total_a: int
    total_b: int
    groups: dict[str, tuple[int, int]]  # group → (A, B)
    params: tuple[ParamDelta, ...]  # only the parameters that differ, in B's order then A's leftovers
    families: tuple[str, str] = (DEFAULT, DEFAULT)  # the model types compared (names matched by role when they differ)

    @property
    def delta(self) -> int:
        return self.total_b - self.total_a

    def rows(self) -> list[FoldedDelta]:
        folded: dict[tuple[str, tuple[int, ...] | None, tuple[int, ...] | None], list[tuple[int, int]]] = {}
        for p in self.params:
            match = _LAYER.match(p.name)
            layer = int(match.group(1)) if match else -1
            pattern = _LAYER.sub("encoder.layer.{}.", p.name) if match else p.name
            folded.setdefault((pattern, p.shape_a, p.shape_b), []).append((layer, p.delta))
        rows = []
        for (pattern, shape_a, shape_b), items in folded.items():
            layers = [layer for layer, _ in items]
            span = f"{{{min(layers)}..{max(layers)}}}" if len(layers) > 1 else str(layers[0])
            rows.append(FoldedDelta(pattern.replace("{}", span), shape_a, shape_b, len(items), sum(d for _, d in items)))
        return rows


def diff(a: ParamTree, b: ParamTree) -> Diff:
    """What changes from A to B."""
    params_a = {role_name(strip_body(p.name), a.config): p for p in a.unique_params()}
    params_b = {role_name(strip_body(p.name), b.config): p for p in b.unique_params()}
    changed = []
    for name in [*params_b, *(n for n in params_a if n not in params_b)]:
        pa, pb = params_a.get(name), params_b.get(name)
        shape_a, shape_b = (pa.shape if pa else None), (pb.shape if pb else None)
        if shape_a != shape_b:
            changed.append(ParamDelta(name, shape_a, shape_b, pa.count if pa else 0, pb.count if pb else 0))
    groups_a, groups_b = a.groups(), b.groups()
    groups = {g: (groups_a.get(g, 0), groups_b.get(g, 0)) for g in [*groups_a, *(g for g in groups_b if g not in groups_a)]}
    return Diff(a.total, b.total, groups, tuple(changed), (a.config.model_type, b.config.model_type))


def counterpart(tree: ParamTree, key: str, baseline: ParamTree) -> Node | None:
    """The node of `baseline` that stands where `key` stands in `tree`, matched as `diff` matches parameters: by
    name without either's body prefix (a head class's `bert.encoder` is BertModel's `encoder`; its body module,
    `bert`, is BertModel itself, or the other head class's `bert`); the root is the root. None: the baseline has
    no such module (a head the baseline's class lacks)."""
    if key == "":
        return baseline.root
    prefix = tree.config.body_prefix
    if prefix and key == prefix[:-1]:  # the body module: the baseline's body (its root where it has no prefix)
        other = baseline.config.body_prefix
        return baseline.find(other[:-1]) if other else baseline.root
    rest = key[len(prefix):] if prefix and key.startswith(prefix) else key
    inside = not prefix or key.startswith(prefix)  # (a head's modules stand beside the body: matched as named)
    found = baseline.find(baseline.config.body_prefix + rest) if inside else baseline.find(key)
    return found if found is not None else baseline.find(key)


def delta_against(tree: ParamTree, key: str, baseline: ParamTree) -> int | None:
    """How much the node at `key` changed against its `counterpart` in `baseline` (None: the baseline has none)."""
    node = tree.find(key) if key else tree.root  # (`key`: the node's own name, as `named_parameters()` has it)
    before = counterpart(tree, key, baseline)
    if node is None or before is None:
        return None
    return node.count - before.count


def gone(tree: ParamTree, key: str, baseline: ParamTree) -> list[tuple[str, int]]:
    """The modules under the node at `key`'s counterpart in `baseline` that `tree` has no counterpart of (a pooler
    a head class drops), with their counts: where they are, a parent's change is its children's and theirs."""
    before = counterpart(tree, key, baseline)
    if not isinstance(before, Module):
        return []
    return [(child.name, child.count) for child in before.children  # (a layer stack's layers one by one)
            if isinstance(child, Module) and counterpart(baseline, child.name, tree) is None]
