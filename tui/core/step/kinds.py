"""The kinds of module a step runs, each knowing its FLOPs and what it saves for backward: the one engine.

A family's step is data (`tui/core/steps.py`): for its embeddings, one encoder layer, the pooler and each head,
a tuple of the modules below in the order the forward runs them. Each yields its `Flop` terms (matrix products)
and its `Saved` terms (the tensors autograd keeps) under the workload's conventions; a condition (`when`) names
facts of the step (`amp`, `fused`, `padded`, …: `Step.facts`), a leading `!` negates one, and all must hold.
Element sizes are named by the `Conventions` field that decides them (`residual`, `compute`, `stats`, …) or given
in bytes (8 for int64 ids).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from math import prod
from typing import Protocol, Union

from ..facts import holds
from .workload import Conventions, Workload

Size = Union[str, int]
When = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Saved:
    """One tensor saved for backward: `coef × Π factors` elements of `size` bytes each."""

    component: str  # embeddings, layer, attention mask, pooler, head
    what: str
    factors: tuple[str, ...]
    size: int
    coef: int = 1
    batch_one: bool = False  # present only at batch 1 (the causal-LM labels' view, ModernBERT's eager q, k, v)

    def elements(self, values: dict[str, int]) -> int:
        return self.coef * prod(map(values.__getitem__, self.factors))

    def nbytes(self, values: dict[str, int]) -> int:
        return self.elements(values) * self.size


@dataclass(frozen=True, slots=True)
class Flop:
    """One matrix product of the forward: `2 × coef × Π factors` FLOPs."""

    component: str
    what: str
    factors: tuple[str, ...]
    coef: int = 1
    attention: bool = False  # a product of the attention itself (scores or context), fused by sdpa on CUDA
    backward: bool = True  # False: no gradient reaches its result (it is computed and not used)
    recomputed: bool = True  # False: checkpointing's recomputation stops before it (nothing after it saves)
    grads: int = 2  # the operands whose gradient the backward computes (one product each): both, but where a
    # part of the model does not train (`tui.core.step.flow`)

    def flops(self, values: dict[str, int]) -> int:
        return 2 * self.coef * prod(map(values.__getitem__, self.factors))

    @property
    def backward_products(self) -> int:
        """How many products of its size the backward runs for it."""
        return self.grads if self.backward else 0


@dataclass(frozen=True, slots=True)
class Step:
    """What a module needs to know of the step: the workload, its conventions and its facts."""

    workload: Workload
    c: Conventions
    facts: Mapping[str, bool]
    component: str = ""

    def holds(self, when: When) -> bool:
        return holds(self.facts, when)

    def size(self, size: Size) -> int:
        return size if isinstance(size, int) else int(getattr(self.c, size))

    def saved(self, what: str, factors: tuple[str, ...], size: Size, coef: int = 1,
              batch_one: bool = False) -> Saved:
        return Saved(self.component, what, factors, self.size(size), coef, batch_one)


class Walker(Protocol):
    """The walk of a step under a fine-tuning method (`tui.core.step.flow.Walk`): which tensors need a gradient.
    Each kind names the rule it walks by (`walk`): its FLOPs, its saved tensors and its walk are its own."""

    def keep(self, module: Keep, step: Step) -> None: ...
    def branch(self, module: Branch, step: Step) -> None: ...
    def lookup(self, module: Lookup, step: Step) -> None: ...
    def norm(self, module: Norm, step: Step) -> None: ...
    def linear(self, module: Linear, step: Step) -> None: ...
    def attention(self, module: Attention, step: Step) -> None: ...
    def product(self, module: Product, step: Step) -> None: ...
    def flows(self, module: Flows, step: Step) -> None: ...
    def projection(self, module: Projection, step: Step) -> None: ...
    def saved_if_flowing(self, module: SavesOnly, step: Step) -> None: ...


class SavesOnly:
    """A module without matrix products: it only saves tensors (a lookup, a norm, a mask, a loss). Under a method
    it saves them where the stream needs a gradient, unless its kind walks otherwise."""

    __slots__ = ()

    def flops(self, component: str) -> Iterator[Flop]:
        return iter(())

    def ops(self, step: Step) -> tuple[str, ...]:
        """The ops the forward runs for it, each the name of a rule of the allocation order (`emulation_ops.op`):
        none for a tensor kept, a mask or a branch; a kind that runs an op of its own says which."""
        return ()

    def saves(self, step: Step) -> Iterator[Saved]:  # pragma: no cover - each kind says what it saves
        raise NotImplementedError

    def walk(self, walker: Walker, step: Step) -> None:
        walker.saved_if_flowing(self, step)


@dataclass(frozen=True, slots=True)
class Keep(SavesOnly):
    """One tensor saved as it is (an index, an activation's input or output). Where only part of the model trains
    (`tui.core.step.flow`) it is saved when the stream needs a gradient, unless it is named as kept for the weight
    gradients of the Linears `for_weights` (once if any trains; `each`: one copy per Linear that trains) or as the
    16-bit copies of the weights of `copies_of` (one for each whose input needs a gradient). `storage`: the name of
    the tensor it is, where another module may save the same one (counted once)."""

    what: str
    factors: tuple[str, ...]
    size: Size = "compute"
    coef: int = 1
    when: When = ()
    for_weights: tuple[str, ...] = ()
    each: bool = False
    copies_of: tuple[str, ...] = ()
    storage: str = ""
    if_flows: tuple[str, ...] = ()  # (a method's walk) saved when one of these flows needs a gradient (DeBERTa's)

    def saves(self, step: Step) -> Iterator[Saved]:
        yield step.saved(self.what, self.factors, self.size, self.coef)

    def walk(self, walker: Walker, step: Step) -> None:
        walker.keep(self, step)


@dataclass(frozen=True, slots=True)
class Act(Keep):
    """An activation (GELU and gelu_new save their input, tanh and ReLU their output): one op, which saves what
    a `Keep` says (gelu_new's other pieces are `Keep`s beside it) and walks as one."""

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("activation",)


@dataclass(frozen=True, slots=True)
class Multiply(Keep):
    """An element-wise product of two tensors (one op), which saves what a `Keep` says: the operand the other's
    gradient needs (ModernBERT's gated MLP: the GELU's output; its other operand, the gate, is a view of a tensor
    kept already)."""

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("multiply",)


@dataclass(frozen=True, slots=True)
class Branch(SavesOnly):
    """The modules after it read another component's output (`source`: "encoder", the last layer's, or
    "pooler"), not the module before: the pre-training heads' two branches. It saves nothing."""

    source: str
    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        return iter(())

    def walk(self, walker: Walker, step: Step) -> None:
        walker.branch(self, step)


@dataclass(frozen=True, slots=True)
class Lookup(SavesOnly):
    """An embedding lookup in `module`: it keeps its indices (`what`, if they are a tensor of their own: a buffer's
    slice is not) for its table's gradient."""

    module: str
    what: str = ""
    factors: tuple[str, ...] = ()
    size: Size = 8
    when: When = ()
    feeds: str = "stream"  # what its output joins: the hidden state, or every layer's attention "scores" (MPNet's)
    op: str = "lookup"  # the op it runs: a lookup by ids (a buffer's slice too); where the table is read whole
    # (DeBERTa's relative embeddings, `feeds` "rel"), none, or "norm" for the LayerNorm that normalises it

    def saves(self, step: Step) -> Iterator[Saved]:
        if self.what:
            yield step.saved(self.what, self.factors, self.size)

    def ops(self, step: Step) -> tuple[str, ...]:
        return (self.op,) if self.op else ()

    def walk(self, walker: Walker, step: Step) -> None:
        walker.lookup(self, step)


@dataclass(frozen=True, slots=True)
class Norm(SavesOnly):
    """LayerNorm (`module`): its input, and its mean and rstd per row."""

    name: str
    rows: str = "n"
    width: str = "H"
    size: Size = "stream"
    when: When = ()
    module: str = ""
    layer_input: bool = False  # its input is the layer's: held already while checkpointing recomputes the layer

    def saves(self, step: Step) -> Iterator[Saved]:
        if not self.layer_input or step.holds(("layer_input",)):  # (held while checkpointing recomputes it)
            yield step.saved(f"{self.name} input", (self.rows, self.width), self.size)
        yield step.saved(f"{self.name} mean and rstd", (self.rows,), "stats", 2)

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("norm",)

    def walk(self, walker: Walker, step: Step) -> None:
        walker.norm(self, step)


@dataclass(frozen=True, slots=True)
class Drop(SavesOnly):
    """Dropout (p > 0 in training): a mask the shape of its input, 1 byte (CUDA) or the input's dtype (CPU)."""

    what: str
    factors: tuple[str, ...]
    of: Size = "compute"  # its input's dtype
    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        yield step.saved(self.what, self.factors, step.c.mask(step.size(self.of)))

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("dropout",) if step.workload.train else ()  # (in eval mode dropout is its input: no op)


@dataclass(frozen=True, slots=True)
class Linear:
    """`nn.Linear(in, out)` over `rows`: 2·rows·in·out FLOPs (`coef` of them side by side: Q, K, V). It saves its
    input (`input`, of dtype `size`) unless `held` (a fact: that storage is saved already); under autocast a
    16-bit copy of an input of another dtype (`copy`: its name), and a 16-bit copy of its weight (`weight`,
    unless the layer names its copies itself)."""

    what: str
    rows: str
    din: str
    dout: str
    coef: int = 1
    input: str | None = None  # None: its input is saved by the module before it (the attention's context)
    size: Size = "compute"
    held: str | None = None
    copy: str | None = None
    weight: str | None = "16-bit copy of its weight"
    recomputed: bool = True  # False: the layer's last product, which checkpointing's early stop never reruns
    when: When = ()
    names: tuple[str, ...] = ()  # its modules (`coef` of them; `a|b`: a or b, whichever the family has)
    reads: str = ""  # the tensor its input is, where the module before saves it (`input` None)
    x: Size | None = None  # its input's dtype, where it is not `size` (autocast casts a float32 input)
    layer_input: bool = False  # it reads the layer's input (`reads`), which a checkpoint holds already

    def flops(self, component: str) -> Iterator[Flop]:
        yield Flop(component, self.what, (self.rows, self.din, self.dout), self.coef, recomputed=self.recomputed)

    def ops(self, step: Step) -> tuple[str, ...]:
        # (one a module: a fused one runs its `coef // len(names)` products as one, ModernBERT's Wqkv and Wi)
        return ("linear",) * (len(self.names) or self.coef)

    def held_input(self, step: Step) -> bool:
        """Whether its input is held already, not kept again: the layer's, while checkpointing recomputes it."""
        return self.layer_input and not step.holds(("layer_input",))

    def saves(self, step: Step) -> Iterator[Saved]:
        # `held` names a fact only where the Linear saves its input itself (the walk of a method reads it too).
        held = self.input is not None and self.held is not None and step.facts[self.held]
        factors = (self.rows, self.din)
        if self.input is not None and step.workload.amp:
            if step.size(self.size) != step.c.compute:
                yield step.saved(self.copy or f"{self.input} (16-bit copy)", factors, "compute")
            elif not held:
                yield step.saved(self.input, factors, self.size)
        elif self.input is not None and not held:
            yield step.saved(self.input, factors, self.size)
        if step.workload.amp and self.weight is not None:
            yield step.saved(self.weight, (self.dout, self.din), "compute")

    def walk(self, walker: Walker, step: Step) -> None:
        walker.linear(self, step)


@dataclass(frozen=True, slots=True)
class Product:
    """A matrix product of the forward that saves nothing of its own (what it keeps is named beside it)."""

    what: str
    factors: tuple[str, ...]
    backward: bool = True
    when: When = ()
    grads_of: tuple[str, ...] = ()  # (a method's walk) the flows whose gradients its backward computes
    op: str = "product"  # a batched product, or "linear": a Linear the full step counts here (DeBERTa's position
    # projections, which a method's walk takes as `Projection`s)

    def flops(self, component: str) -> Iterator[Flop]:
        yield Flop(component, self.what, self.factors, backward=self.backward)

    def saves(self, step: Step) -> Iterator[Saved]:
        return iter(())

    def ops(self, step: Step) -> tuple[str, ...]:
        return (self.op,)

    def walk(self, walker: Walker, step: Step) -> None:
        walker.product(self, step)


@dataclass(frozen=True, slots=True)
class Attention:
    """Scaled dot-product attention over A heads: Q·Kᵀ and P·V, and what it saves by flavour (the math path of
    eager and of sdpa on CPU, or sdpa's fused CUDA kernels)."""

    dropout: bool = True  # attention dropout p > 0 (ALBERT's is 0: no mask, the probabilities used as they are)
    values_only: bool = False  # the queries and keys are kept by the modules before it (DeBERTa's)
    fused_qkv: bool = False  # one Q/K/V projection: a kernel keeps v as a view of its whole output (ModernBERT's)
    softmax32: bool = False  # eager softmax in float32 whatever the inputs, then cast back (ModernBERT's)
    when: When = ()

    def flops(self, component: str) -> Iterator[Flop]:
        yield Flop(component, "attention scores Q·Kᵀ", ("b'", "s", "s", "H"), attention=True)
        yield Flop(component, "attention context P·V", ("b'", "s", "s", "H"), attention=True)

    def saves(self, step: Step) -> Iterator[Saved]:
        c = step.c
        # Without dropout, CPU training takes sdpa's flash kernel too (its math path is for dropout only).
        cpu_flash = not self.dropout and not c.fused and step.workload.attention == "sdpa" and step.workload.train
        if cpu_flash:
            yield from self._kernel_qkv(step)
            yield step.saved("log-sum-exp of every row (float32)", ("b'", "A", "s"), 4)
            yield step.saved("attention context (output projection input)", ("n", "H"), "compute")
            if step.workload.padded:
                yield step.saved("padding mask as a float bias", ("b'", "s", "s"), "compute")
            return
        if not c.fused:
            if self.values_only:
                yield step.saved("values (split into heads)", ("n", "H"), "heads")
            elif self.fused_qkv and ((one := step.holds(("one_sequence",))) or step.holds(("one_head",))):
                # one sequence or one head: the products' reshapes are views, so v keeps the projection's whole
                # output, and q and k (the rotary embedding's outputs) are kept as they are
                yield step.saved("queries and keys (after the rotary embedding)", ("n", "H"), "heads", 2, one)
                yield step.saved("values: a view of the Q/K/V projection's whole output", ("n", "H"), "heads", 3,
                                 one)
            else:
                yield step.saved("queries, keys, values (split into heads)", ("n", "H"), "heads", 3)
            softmax = 4 if self.softmax32 else c.softmax
            yield step.saved("attention probabilities (softmax output)", ("b'", "A", "s", "s"), softmax)
            if self.dropout:
                yield step.saved("attention dropout mask", ("b'", "A", "s", "s"), c.mask(c.softmax))
            # What the context product keeps: the probabilities in the dtype of the values (a 16-bit copy if need be).
            if self.dropout or softmax != c.heads:
                name = ("attention probabilities after dropout" if self.dropout else
                        "attention probabilities (a copy in the values' dtype)")
                yield step.saved(name, ("b'", "A", "s", "s"), "heads")
            yield step.saved("attention context (output projection input)", ("n", "H"), "compute")
            return
        # sdpa's fused CUDA kernels (cuDNN for 16-bit inputs, memory-efficient for float32), as measured on an
        # H200: q, k, v and the output (the output projection's input, one storage), the float32 log-sum-exp of
        # every row (the memory-efficient kernel pads its rows to a multiple of 32: `kAlignLSE`), the dropout
        # RNG's seed and offset, and the padding mask as a float bias: sdpa converts the boolean mask at every
        # call, so every layer keeps its own (the memory-efficient kernel pads its rows to a multiple of 16).
        yield from self._kernel_qkv(step)
        yield step.saved("log-sum-exp of every row (float32)", ("b'", "A", "s₃₂" if c.compute == 4 else "s"), 4)
        if step.workload.train and self.dropout:
            yield step.saved("dropout RNG seed and offset", ("1",), 8, 2)
        yield step.saved("attention context (output projection input)", ("n", "H"), "compute")
        if step.workload.padded:
            yield step.saved("padding mask as a float bias", ("b'", "s", "s₁₆" if c.compute == 4 else "s"),
                             "compute")

    def _kernel_qkv(self, step: Step) -> Iterator[Saved]:
        """What a fused kernel keeps of q, k and v: the three, or q and k (new after a rotary embedding) and v as a
        view of the fused projection's whole output."""
        if self.fused_qkv:
            yield step.saved("queries and keys (after the rotary embedding)", ("n", "H"), "compute", 2)
            yield step.saved("values: a view of the Q/K/V projection's whole output", ("n", "H"), "compute", 3)
        else:
            yield step.saved("queries, keys, values (split into heads)", ("n", "H"), "compute", 3)

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("attention",)  # (eager or a fused kernel: the op's own rules choose)

    def walk(self, walker: Walker, step: Step) -> None:
        walker.attention(self, step)


@dataclass(frozen=True, slots=True)
class CrossEntropy(SavesOnly):
    """A cross-entropy loss over `classes` for `rows`: its log-probabilities (and under CUDA autocast its 16-bit
    input logits), the labels and the weight total. `upcast`: the loss casts its logits to float32 first (the
    causal LM's)."""

    rows: tuple[str, ...]
    classes: str
    prefix: str = ""
    upcast: bool = False
    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        c = replace(step.c, loss=4, compute=4) if self.upcast else step.c
        if c.keeps_16bit_logits:
            yield step.saved(f"{self.prefix}16-bit logits (autocast's cross-entropy input)", (*self.rows, self.classes),
                             c.compute)
        yield step.saved(f"{self.prefix}log-probabilities (cross-entropy)", (*self.rows, self.classes), c.loss)
        yield step.saved(f"{self.prefix}labels", self.rows, 8)
        yield step.saved(f"{self.prefix}loss weight total", ("1",), c.loss)

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("cross_entropy",) if step.workload.train else ()  # (a loss in training only)


@dataclass(frozen=True, slots=True)
class Regression(SavesOnly):
    """Mean squared error on one output per example: the output and its float32 targets."""

    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        yield step.saved("regression output (MSE)", ("b",), "loss")
        yield step.saved("regression targets (float32)", ("b",), 4)

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("mse",) if step.workload.train else ()


@dataclass(frozen=True, slots=True)
class BinaryCrossEntropy(SavesOnly):
    """Binary cross-entropy with logits, one a row (ELECTRA's discriminator): the logits and the labels as
    float32."""

    rows: str = "n"
    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        yield step.saved("logits (binary cross-entropy input)", (self.rows,), "loss")
        yield step.saved("labels as float32", (self.rows,), 4)

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("binary_cross_entropy",) if step.workload.train else ()


@dataclass(frozen=True, slots=True)
class SpanLoss(SavesOnly):
    """Question answering's loss: a cross-entropy over positions for the start and for the end."""

    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        for end in ("start", "end"):
            if step.c.keeps_16bit_logits:  # as `CrossEntropy` (not measured for this head)
                yield step.saved(f"{end} 16-bit logits (autocast's cross-entropy input)", ("b", "s"), "compute")
            yield step.saved(f"{end} log-probabilities over positions", ("b", "s"), "loss")
            yield step.saved(f"{end} positions", ("b",), 8)
            yield step.saved(f"{end} loss weight total", ("1",), "loss")

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("cross_entropy",) * 2 if step.workload.train else ()


@dataclass(frozen=True, slots=True)
class ShiftedLabels(SavesOnly):
    """The causal-LM loss pads the labels by one and shifts them; with one sequence the shifted view is already
    contiguous, so it keeps the padded storage (one label more): a term of one sequence only (`batch_one`)."""

    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        if step.workload.batch == 1:
            yield step.saved("padded label (one sequence: the shifted labels are a view)", ("1",), 8, batch_one=True)


@dataclass(frozen=True, slots=True)
class Flows(SavesOnly):
    """(A method's walk of DeBERTa's layer.) Where its disentangled attention reads which of its operands need a
    gradient: the queries, keys and values just projected, the relative embeddings; their dropout (its op, in
    training) keeps its mask when the relative embeddings need one."""

    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        return iter(())

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("dropout",) if step.workload.train and step.holds(("relative",)) else ()  # (the relative embeddings')

    def walk(self, walker: Walker, step: Step) -> None:
        walker.flows(self, step)


@dataclass(frozen=True, slots=True)
class Projection(SavesOnly):
    """(A method's walk only.) A Linear run again over the 2·D relative embeddings (DeBERTa's position keys or
    queries: the layer's own key/query projection when keys are shared, else one of its own): its output's flow
    is `flow`; `copy` names the 16-bit copy of its input autocast keeps; `used`: a score type reads it."""

    what: str
    names: tuple[str, ...]
    flow: str
    copy: str
    used: bool = True
    when: When = ()

    def saves(self, step: Step) -> Iterator[Saved]:
        return iter(())

    def ops(self, step: Step) -> tuple[str, ...]:
        return ("linear",)

    def walk(self, walker: Walker, step: Step) -> None:
        walker.projection(self, step)


Module = Union[Keep, Act, Multiply, Branch, Lookup, Norm, Drop, Linear, Product, Attention, CrossEntropy, Regression,
               BinaryCrossEntropy, SpanLoss, ShiftedLabels, Flows, Projection]


def ops(modules: tuple[Module, ...], step: Step) -> tuple[str, ...]:
    """The ops the forward runs for `modules` (those whose condition holds), in order: what the allocation order
    derives op by op (`tui.core.step.emulation_ops`) must run the same (tests/test_kinds.py)."""
    return tuple(op for module in modules if step.holds(module.when) for op in module.ops(step))


def flops(component: str, modules: tuple[Module, ...], step: Step) -> Iterator[Flop]:
    """The forward's matrix products of `modules` (those whose condition holds), named for `component`."""
    for module in modules:
        if step.holds(module.when):
            yield from module.flops(component)


def saves(component: str, modules: tuple[Module, ...], step: Step) -> Iterator[Saved]:
    """What `modules` save for backward, in the order they run."""
    here = Step(step.workload, step.c, step.facts, component)
    for module in modules:
        if here.holds(module.when):
            yield from module.saves(here)
