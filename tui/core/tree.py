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

from .config import LM_HEADS, BertConfig

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

    def __init__(self, name: str, length: int, build: Callable[[str], Module]) -> None:
        self.name = name
        self._length = length
        self._build = build
        self._built: dict[int, Module] = {}
        self.param_count = length * self[0].count if length else 0  # not `count`: Sequence has count()
        self.tensors = length * self[0].tensors if length else 0
        self.tied = length * self[0].tied if length else 0

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Module:  # type: ignore[override]
        if not 0 <= index < self._length:
            raise IndexError(index)
        if index not in self._built:
            self._built[index] = self._build(f"{self.name}.layer.{index}")
        return self._built[index]

    def index_of(self, name: str) -> int | None:
        """The layer that `name` (a layer or anything inside one) belongs to, or None."""
        rest = name.removeprefix(f"{self.name}.layer.")
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


BODY_PREFIXES = ("bert.", "roberta.")


def strip_body(name: str) -> str:
    """A name without the head classes' `bert.` / `roberta.` prefix."""
    for prefix in BODY_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def group_of(name: str) -> str:
    """The totals group of a parameter name: embeddings, encoder, pooler, or head."""
    first = strip_body(name).split(".", 1)[0]
    return first if first in ("embeddings", "encoder", "pooler") else "head"


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
        totals = dict.fromkeys(GROUPS[:3], 0)
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


def build_tree(config: BertConfig) -> ParamTree:
    """The parameter tree of `config.hf_class` built from `config`."""
    return ParamTree(config, _Builder(config).root())


class _Builder:
    """Builds modules in HF registration order; each parameter gets its shape from the config's symbols."""

    def __init__(self, config: BertConfig) -> None:
        self.config = config
        self.values = config.symbol_values()
        # XLM-RoBERTa and CamemBERT register their head before the body (their generated classes do).
        self._head_first = config.model_type in ("xlm-roberta", "camembert")
        # The LM decoder shares the word embeddings (weight) and the head's own bias unless the config unties them.
        self._tied_decoder = config.head in LM_HEADS and config.tie_word_embeddings

    def root(self) -> Module:
        config = self.config
        prefix = "" if config.head == "none" else f"{config.body}."
        body: list[Node] = [self.embeddings(f"{prefix}embeddings"), self.encoder(f"{prefix}encoder")]
        if config.has_pooler:
            body.append(self.module(f"{prefix}pooler", self.linear(f"{prefix}pooler.dense", "H", "H")))
        children: list[Node] = body if not prefix else [self.module(config.body, *body)]
        head = self.head(config.head) if config.model_type == "bert" else self.roberta_head(config.head)
        return Module("", config.hf_class, tuple([*head, *children] if self._head_first else [*children, *head]))

    def param(self, name: str, dims: tuple[str, ...], kind: Kind, tied_to: str | None = None, heads: int = 0) -> Param:
        """A leaf; a dim is a symbol (V, H, ...) or a literal size ("2")."""
        shape = tuple(self.values[d] if d in self.values else int(d) for d in dims)
        return Param(name, dims, shape, kind, tied_to, heads)

    @staticmethod
    def module(name: str, *children: Node, title: str | None = None) -> Module:
        return Module(name, title or name.rsplit(".", 1)[-1], children)

    def linear(self, name: str, out_dim: str, in_dim: str, per_head: bool = False) -> Module:
        heads = self.config.num_attention_heads if per_head else 0
        weight = self.param(f"{name}.weight", (out_dim, in_dim), "weight", heads=heads)
        return self.module(name, weight, self.param(f"{name}.bias", (out_dim,), "bias", heads=heads))

    def layer_norm(self, name: str) -> Module:
        return self.module(name, self.param(f"{name}.weight", ("H",), "norm"), self.param(f"{name}.bias", ("H",), "norm"))

    def embeddings(self, name: str) -> Module:
        def table(attr: str, rows: str) -> Module:
            return self.module(f"{name}.{attr}", self.param(f"{name}.{attr}.weight", (rows, "H"), "embedding"))

        word, position, token_type = table("word_embeddings", "V"), table("position_embeddings", "P"), table("token_type_embeddings", "T")
        if self._head_first and self._tied_decoder:  # lm_head.decoder is registered first: it owns the tensor
            word = self.module(f"{name}.word_embeddings", self.param(f"{name}.word_embeddings.weight", ("V", "H"),
                                                                      "embedding", tied_to="lm_head.decoder.weight"))
        if self.config.model_type == "bert":
            return self.module(name, word, position, token_type, self.layer_norm(f"{name}.LayerNorm"))
        # RobertaEmbeddings registers its position table last.
        return self.module(name, word, token_type, self.layer_norm(f"{name}.LayerNorm"), position)

    def encoder(self, name: str) -> Module:
        """The encoder; its layers appear as `layer.0 … layer.N-1` (HF's ModuleList level is folded in)."""
        return Module(name, "encoder", LayerStack(name, self.config.num_hidden_layers, self.layer))

    def layer(self, name: str) -> Module:
        attention = f"{name}.attention"
        qkv = (self.linear(f"{attention}.self.{part}", "H", "H", per_head=True) for part in ("query", "key", "value"))
        attention_output = (self.linear(f"{attention}.output.dense", "H", "H"), self.layer_norm(f"{attention}.output.LayerNorm"))
        return self.module(
            name,
            self.module(attention, self.module(f"{attention}.self", *qkv), self.module(f"{attention}.output", *attention_output)),
            self.module(f"{name}.intermediate", self.linear(f"{name}.intermediate.dense", "I", "H")),
            self.module(f"{name}.output", self.linear(f"{name}.output.dense", "H", "I"), self.layer_norm(f"{name}.output.LayerNorm")),
            title="layer." + name.rsplit(".", 1)[-1],
        )

    def head(self, head: str) -> list[Node]:
        """The modules a head class adds after `bert`, in registration order."""
        if head == "none":
            return []
        if head in LM_HEADS:
            cls = [self.lm_predictions("cls.predictions")]
            if head == "pretraining":
                cls.append(self.linear("cls.seq_relationship", "2", "H"))
            return [self.module("cls", *cls)]
        if head == "next-sentence":
            return [self.module("cls", self.linear("cls.seq_relationship", "2", "H"))]
        if head == "multiple-choice":
            return [self.linear("classifier", "1", "H")]
        return [self.linear("qa_outputs" if head == "question-answering" else "classifier", "N", "H")]

    def roberta_head(self, head: str) -> list[Node]:
        """The head modules of the RoBERTa-style classes (no NSP; a two-layer classifier)."""
        if head == "none":
            return []
        if head in LM_HEADS:
            name = "lm_head"
            decoder = self.decoder(f"{name}.decoder", "roberta.embeddings.word_embeddings.weight", f"{name}.bias")
            return [self.module(name, self.param(f"{name}.bias", ("V",), "bias"), self.linear(f"{name}.dense", "H", "H"),
                                self.layer_norm(f"{name}.layer_norm"), decoder)]
        if head == "sequence-classification":
            return [self.module("classifier", self.linear("classifier.dense", "H", "H"), self.linear("classifier.out_proj", "N", "H"))]
        return self.head(head)

    def lm_predictions(self, name: str) -> Module:
        """BertLMPredictionHead: its own `bias` (registered first), the transform, and the decoder tied to both."""
        transform = (self.linear(f"{name}.transform.dense", "H", "H"), self.layer_norm(f"{name}.transform.LayerNorm"))
        decoder = self.decoder(f"{name}.decoder", "bert.embeddings.word_embeddings.weight", f"{name}.bias")
        return self.module(name, self.param(f"{name}.bias", ("V",), "bias"), self.module(f"{name}.transform", *transform), decoder)

    def decoder(self, name: str, embeddings: str, bias: str) -> Module:
        """The LM decoder: tied to the word embeddings and the head's bias, or (tie_word_embeddings false) a
        weight and bias of its own. Where the head is registered first, the decoder owns the shared weight."""
        tied = self._tied_decoder
        weight_tie = embeddings if tied and not self._head_first else None
        return self.module(name, self.param(f"{name}.weight", ("V", "H"), "weight", tied_to=weight_tie),
                           self.param(f"{name}.bias", ("V",), "bias", tied_to=bias if tied else None))
