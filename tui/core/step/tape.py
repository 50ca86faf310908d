"""The allocation order's engine: storages and their views, autograd's nodes and tape, the backward's order
(`torch/csrc/autograd/engine.cpp`), checkpointing's frames, ATen's stride rules and the kernels' workspaces —
what every family's forward runs on (`emulation`, its op rules in `emulation_ops`).

- **Autograd's engine**: a node runs when every gradient it waits for has arrived, the ready node created last
  first (`CompareNodeTaskTime`: the highest sequence number; a parameter's AccumulateGrad before all). A node
  allocates its outputs, then its input gradient goes, then what it saved (`release_variables`), then its
  outputs go to the next nodes' buffers; a second gradient for one buffer is added into the first and released
  (`InputBuffer::accumulate`), unless the first is a view (`Tape.view`: a Linear's input gradient viewed back to
  3-D, a weight's transposed, a broadcast operand's summed down) or another holder keeps it
  (`can_accumulate_inplace`): then the sum is a new block and both are released (`Tape.sums` logs each sum).
  The gradient of the loss lives until the backward ends.
- cuBLAS workspaces: a thread's first product allocates 32 MiB and its first `addmm` 1 MiB more, never freed
  (the backward runs on a thread of its own).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

Event = tuple[str, int, int]
CUBLAS_WORKSPACE = 32 * 1024 * 1024
CUBLASLT_WORKSPACE = 1024 * 1024
MASK_ALIGNMENT = 8  # sdpa pads a float bias whose rows are not a multiple of this many columns (`preprocess_mask`)
FLOAT = 4
LONG = 8


class Storage:
    """A block of device memory and the references that keep it."""

    __slots__ = ("id", "nbytes", "refs")

    def __init__(self, sid: int, nbytes: int) -> None:
        self.id, self.nbytes, self.refs = sid, nbytes, 1


class View(Storage):
    """A view of another storage (a sum's gradient expanded back to its input's shape): holding or releasing it
    holds or releases its base; `nbytes` is the view's own extent, what a sum with it must allocate."""

    __slots__ = ("base",)

    def __init__(self, base: Storage, nbytes: int) -> None:
        super().__init__(base.id, nbytes)
        self.base = base


Rule = Callable[["Tape", Storage, "Node"], Sequence["Storage | None"]]


@dataclass(eq=False)
class Node:
    """An autograd node (or a chain of nodes created one after the other): what it waits for, what it saved."""

    seq: float
    edges: list[Edge]  # where its outputs go, in order
    saved: list[Storage]
    rule: Rule | None = None  # what its backward does, given its input gradient; None: a parameter's AccumulateGrad
    buffer: Storage | None = None
    grad: Storage | None = None  # a parameter's gradient, once accumulated
    inputs: int = 1  # gradients it takes (more than one: its rule is given the list)
    buffers: list[Storage | None] = field(default_factory=list)
    frame: Frame | None = None  # the checkpoint that packed what it saved (`Tape.packing`): recomputed at its run
    live: bool = True  # whether it is in the graph: a frozen parameter's, or an op none of whose inputs needs a
    # gradient, is not (no node: nothing saved, no backward)
    needs: tuple[bool, ...] = ()  # which of its edges want a gradient (`should_compute_output`; empty: all)

    def wants(self, index: int) -> bool:
        """Whether its output `index` goes to a node in the graph (an input that needs a gradient)."""
        return not self.needs or self.needs[index]


@dataclass(eq=False)
class Frame:
    """A layer run under `torch.utils.checkpoint` (non-reentrant, transformers' default: `_CheckpointFrame`).
    Its forward saves nothing (each saved tensor packed as a holder: `Tape.packing`), and the frame keeps the
    layer's inputs; the backward's first node to unpack recomputes the layer (`recompute`) until the last tensor
    the forward packed is made again (early stop), each held for the node that saved it, which releases it when
    it has run; the inputs go as the last such node is released."""

    recompute: Callable[[Frame], None]
    args: list[Storage]
    nodes: list[Node] = field(default_factory=list)  # those that packed, in the order they were created
    pending: int = 0  # of them, not released yet
    recomputed: bool = False


class StopRecomputation(Exception):  # (torch's `_StopRecomputationError`, as the early stop raises it)
    """The recomputation made the last tensor its layer's forward packed."""


@dataclass(eq=False)
class Recomputation:
    """A checkpointed layer's forward run again in the backward: the storages it makes, the nodes that save."""

    frame: Frame
    made: list[Storage] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)


Edge = Node | tuple[Node, int]  # a node, or one of its inputs where it takes several (a split's gradients)
Saved: TypeAlias = Storage | tuple[Storage, int]  # what a node saves; (storage, i): where its edge i wants a gradient


def alive(edge: Edge) -> bool:
    """Whether the edge leads to a node in the graph (its input needs a gradient)."""
    return (edge[0] if isinstance(edge, tuple) else edge).live
Head = tuple["Storage | None", tuple["Storage", ...], Node]  # the loss (None: inference), the outputs a loop
# keeps, the loss's node


@dataclass
class Tape:
    """The events so far, the storages' references, and the nodes' sequence numbers."""

    events: list[Event] = field(default_factory=list)
    count: int = 0
    seq: int = 0
    workspaces: set[str] = field(default_factory=set)
    grad: bool = True  # grad mode: under `no_grad` (inference) a node saves nothing
    packing: Frame | None = None  # a checkpointed layer's forward: its nodes pack what they save (hold nothing)
    recomputing: Recomputation | None = None  # its recomputation in the backward
    thread: str = "main"  # the thread products run on (a recomputation: the backward's)
    sums: list[tuple[int, int, int]] = field(default_factory=list)  # each second gradient summed into a first
    # that is its storage's whole: (how many events came before, the first, the sum: 0 where it was added into the
    # first, a new block where the first is a view or another holder keeps it) — what a run recorded with fake
    # tensors cannot tell apart (`tests/fixtures/allocation/compare.py`'s `as_recorded`)

    def new(self, nbytes: int) -> Storage:
        storage = self._allocate(nbytes)
        if self.recomputing is not None:
            self.recomputing.made.append(storage)
        return storage

    def _allocate(self, nbytes: int) -> Storage:
        self.count += 1
        self.events.append(("a", self.count, nbytes))
        return Storage(self.count, nbytes)

    @staticmethod
    def hold(storage: Storage) -> Storage:
        (storage.base if isinstance(storage, View) else storage).refs += 1
        return storage

    def drop(self, *storages: Storage | None) -> None:
        for storage in storages:
            if storage is not None:
                if isinstance(storage, View):
                    storage = storage.base
                storage.refs -= 1
                if storage.refs == 0:
                    self.events.append(("f", storage.id, 0))

    @staticmethod
    def view(storage: Storage) -> View:
        """`storage`, a gradient just made, handed on as a view of itself, as PyTorch hands on a Linear's input
        gradient (viewed back to 3-D), a weight's (transposed) and a broadcast operand's (summed with keepdim,
        viewed down): its base lives with it, so the engine cannot sum a second gradient into it
        (`can_accumulate_inplace` wants the storage's only user) and sums the two into a new block."""
        return View(storage, storage.nbytes)

    def product(self, thread: str, addmm: bool = False) -> None:
        """A matrix product on `thread`: its first asks cuBLAS for a workspace (and its first addmm, cuBLASLt)."""
        if f"cublas {thread}" not in self.workspaces:
            self.workspaces.add(f"cublas {thread}")
            self._allocate(CUBLAS_WORKSPACE)
        if addmm and f"cublasLt {thread}" not in self.workspaces:
            self.workspaces.add(f"cublasLt {thread}")
            self._allocate(CUBLASLT_WORKSPACE)

    def node(self, rule: Rule, edges: Sequence[Edge | None], saved: Sequence[Saved] = (), inputs: int = 1) -> Node:
        """A node created now (the next sequence number), holding what it saved (under `no_grad`, or where no
        input needs a gradient, none is made: what autograd would have saved goes with its last name). A saved
        entry `(storage, i)` is saved only where `edges[i]` needs a gradient (PyTorch's codegen saves a tensor
        only one input's formula reads only when that input's gradient is wanted: `should_compute_output`)."""
        self.seq += 1
        wanted = [edge is not None and alive(edge) for edge in edges]
        if not self.grad or not any(wanted):
            return Node(self.seq, [], [], rule, inputs=inputs, live=False)
        kept = [entry[0] if isinstance(entry, tuple) else entry for entry in saved
                if not isinstance(entry, tuple) or wanted[entry[1]]]
        needs = tuple(want for edge, want in zip(edges, wanted, strict=True) if edge is not None)
        return self._made(rule, [edge for edge in edges if edge is not None], needs, kept, inputs)

    def _made(self, rule: Rule, to: list[Edge], needs: tuple[bool, ...], saved: list[Storage], inputs: int
              ) -> Node:
        """`node`'s node, in the graph: its edges (`needs`: which want a gradient), what it keeps (packed under a
        checkpoint, held for the node that saved it in a recomputation)."""
        frame = self.packing
        if frame is not None:  # (a checkpoint's pack hook: a holder for each, the tensors not kept)
            node = Node(self.seq, to, [], rule, inputs=inputs, frame=frame if saved else None,
                        needs=() if all(needs) else needs)
            if saved:
                frame.nodes.append(node)
                frame.pending += 1
            return node
        for storage in saved:
            self.hold(storage)
        node = Node(self.seq, to, list(saved), rule, inputs=inputs, needs=() if all(needs) else needs)
        again = self.recomputing
        if again is not None and saved:  # (the recomputation's pack hook: each kept for the node that saved it,
            original = again.frame.nodes[len(again.nodes)]  # unless that node is gone: a graph nothing read)
            if original.frame is not None:
                original.saved = [self.hold(storage) for storage in saved]
            again.nodes.append(node)
            if len(again.nodes) == len(again.frame.nodes):
                raise StopRecomputation
        return node

    def release(self, node: Node) -> None:
        """`release_variables`: what the node saved, in the order it saved it (the last node of a checkpoint to
        go lets its frame go, and the layer's inputs it kept)."""
        self.drop(*node.saved)
        node.saved = []
        frame, node.frame = node.frame, None
        if frame is not None:
            frame.pending -= 1
            if frame.pending == 0:
                self.drop(*frame.args)


def backward(tape: Tape, root: Node, grad: Storage) -> None:
    """Autograd's engine on one thread from `root`, whose input gradient is `grad` (held until the end)."""
    waits: dict[int, int] = {}
    stack, seen = [root], {id(root)}
    while stack:
        node = stack.pop()
        for edge in node.edges:
            dest = edge[0] if isinstance(edge, tuple) else edge
            if not dest.live:
                continue
            waits[id(dest)] = waits.get(id(dest), 0) + 1
            if id(dest) not in seen:
                seen.add(id(dest))
                stack.append(dest)
    root.buffer = tape.hold(grad)
    ready: list[tuple[float, int, Node]] = [(-root.seq, 0, root)]
    pushed = 0
    while ready:
        node = heapq.heappop(ready)[2]
        given, node.buffer = node.buffer, None
        if node.frame is not None and not node.frame.recomputed:  # its first unpack: the layer recomputed
            node.frame.recomputed = True
            node.frame.recompute(node.frame)
        if node.rule is None:  # AccumulateGrad: the parameter keeps the gradient (set_to_none before)
            node.grad = given
            continue
        # (a node of several inputs is given their list: its rule is written for that, `_cat_backward`)
        outputs = node.rule(tape, node.buffers if node.inputs > 1 else given, node)  # type: ignore[arg-type]
        unwanted = []  # (a kernel that makes every gradient: those no input wants go as the node's run ends)
        for edge, output in zip(node.edges, outputs, strict=True):
            dest, slot = edge if isinstance(edge, tuple) else (edge, 0)
            if not dest.live:
                unwanted.append(output)
                continue
            if output is not None:
                if dest.inputs > 1:
                    dest.buffers = dest.buffers or [None] * dest.inputs
                    if dest.buffers[slot] is None:
                        dest.buffers[slot] = output
                    else:
                        tape.drop(output)
                elif dest.buffer is None:
                    dest.buffer = output
                elif isinstance(dest.buffer, View) or dest.buffer.refs > 1:  # (a view, or a first another
                    # holder keeps, cannot take the sum: `can_accumulate_inplace`; a new one, both released)
                    first, dest.buffer = dest.buffer, tape.new(dest.buffer.nbytes)
                    if not isinstance(first, View) or first.nbytes == first.base.nbytes:
                        tape.sums.append((len(tape.events) - 1, first.id, dest.buffer.id))
                    tape.drop(output, first)
                else:  # added into the first, then released
                    tape.sums.append((len(tape.events), dest.buffer.id, 0))
                    tape.drop(output)
            waits[id(dest)] -= 1
            if waits[id(dest)] == 0:
                pushed += 1
                heapq.heappush(ready, (-dest.seq, pushed, dest))
        tape.drop(*unwanted)
    tape.drop(grad)

def view_strides(sizes: tuple[int, ...], strides: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of `shape` as a view of a tensor of `sizes` and `strides`, or None where only a copy can give
    it (ATen's `computeStride`: each run of dimensions the view merges or splits must be contiguous)."""
    new = [0] * len(shape)
    view_d = len(shape) - 1
    chunk_stride = strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(sizes) - 1, -1, -1):
        tensor_numel *= sizes[tensor_d]
        if tensor_d == 0 or (sizes[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                new[view_d] = view_numel * chunk_stride
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_stride, tensor_numel, view_numel = strides[tensor_d - 1], 1, 1
    return tuple(new) if view_d == -1 else None


def contiguous(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def is_contiguous(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """As `Tensor.is_contiguous`: a dimension of size 1 may have any stride."""
    return all(size == 1 or stride == expected
               for size, stride, expected in zip(sizes, strides, contiguous(sizes), strict=True))


Layout = tuple[tuple[int, ...], tuple[int, ...]]  # sizes, strides


def transposed(sizes: tuple[int, ...], strides: tuple[int, ...], a: int, b: int) -> Layout:
    sizes_, strides_ = list(sizes), list(strides)
    sizes_[a], sizes_[b] = sizes_[b], sizes_[a]
    strides_[a], strides_[b] = strides_[b], strides_[a]
    return tuple(sizes_), tuple(strides_)


class AttentionCopies:
    """Where eager attention's reshapes copy (the heads' layout (b, A, s, d) against the tokens' (b, s, A, d)),
    in the forward (matmul's operands, the context made contiguous) and in the backward (the gradients' way back
    through the same views)."""

    def __init__(self, b: int, heads: int, s: int, d: int) -> None:
        h = heads * d
        tokens = (b, s, heads, d)
        q = transposed(tokens, contiguous(tokens), 1, 2)  # (b, A, s, d), as q, k and v are
        self.q_forward = view_strides(*q, (b * heads, s, d)) is None
        self.k_forward = view_strides(*transposed(*q, 2, 3), (b * heads, d, s)) is None
        heads_out = (b, heads, s, d)
        self.merge_forward = not is_contiguous(*transposed(heads_out, contiguous(heads_out), 1, 2))
        back = transposed(tokens, contiguous(tokens), 1, 2)  # the context's gradient, back to (b, A, s, d)
        self.merge_backward = view_strides(*back, (b * heads, s, d)) is None
        self.q_backward = self._back(transposed(heads_out, contiguous(heads_out), 1, 2), b, s, h)
        k_heads = (b, heads, d, s)
        k_back = transposed(*transposed(k_heads, contiguous(k_heads), 2, 3), 1, 2)
        self.k_backward = self._back(k_back, b, s, h)

    @staticmethod
    def _back(grad: Layout, b: int, s: int, h: int) -> int:
        """Whether a gradient of this layout, viewed back to (b, s, H) and then (b·s, H), needs a copy, and where:
        `HEADS_VIEW` (back to the tokens' (b, s, H): the projection's output viewed to the heads), `FLAT_VIEW`
        (then to (b·s, H): a Linear's own view of its output), 0 (none)."""
        tokens = view_strides(*grad, (b, s, h))
        if tokens is None:
            return HEADS_VIEW
        return FLAT_VIEW if view_strides((b, s, h), tokens, (b * s, h)) is None else 0


HEADS_VIEW, FLAT_VIEW = 1, 2  # where a q, k or v gradient is copied (`AttentionCopies._back`)


def efficient_backward_workspace(b: int, heads: int, rows: int, dim: int, block: int = 64) -> int:
    """The memory-efficient backward's gradient-of-Q accumulator on sm_80+ for float32 (`workspace_size` in
    PyTorch's mem_eff_attention kernel_backward.h): per batch and head, ceil(s/64)² tiles of 64×64 floats and a
    16-byte header, rounded to 4 floats."""
    tiles = -(-rows // block) * -(-rows // block)
    floats = tiles * (16 + block * block * 4) // 4
    return b * heads * ((floats + 3) // 4 * 4) * 4


class Param:
    """A parameter: its storage and its AccumulateGrad node (a frozen one's is out of the graph); LoRA's
    adapters on its Linear, if any (`adapters`: A's and B's)."""

    def __init__(self, tape: Tape | None, nbytes: int, element: int = 0, data: Storage | None = None) -> None:
        """A new parameter of `nbytes` on `tape`; or, given `data` (no tape), a tensor read as a frozen weight
        that is no parameter of its own (DoRA's float32 copy of a 16-bit base weight)."""
        self.data = data if data is not None else tape.new(nbytes)  # type: ignore[union-attr]
        self.node = Node(float("inf"), [], [], None, live=data is None)
        self.adapters: tuple[Param, Param] | None = None
        self.ia3: tuple[Param, bool] | None = None  # IA3's vector on its Linear, and whether it scales the input
        self.lookup_adapters: tuple[Param, Param] | None = None  # LoRA's on its embedding (not on a Linear that
        # shares the table: a tied decoder)
        self.magnitude: Param | None = None  # DoRA's magnitude vector beside the adapters on its Linear
        self.element = element  # its bytes an element where they are not the model's (LoRA's float32 adapters)

    @classmethod
    def leaf(cls, output: Storage) -> Param:
        """A tensor made a leaf that requires a gradient (`output.requires_grad_(True)` where no input needed
        one): its AccumulateGrad keeps it, and the gradient it is given, until the graph goes."""
        leaf = cls(None, 0, data=output)
        leaf.node.live = True
        return leaf

    @property
    def trains(self) -> bool:
        return self.node.live

    def freeze(self) -> None:
        self.node.live = False


Pair = tuple[Param, "Param | None"]  # a Linear's or a LayerNorm's weight and bias (None: built without one)
Biased = tuple[Param, Param]  # (the families whose Linears and LayerNorms all have biases)
