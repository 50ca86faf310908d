"""The step's allocation order, derived op by op: what a training run asks of the CUDA caching allocator, and when
it gives each block back, as eager PyTorch runs transformers' forward, autograd's backward and the optimizer.

The events are those `tests/fixtures/allocation/record.py` records with CUDA faked (`("a", id, bytes)`: a new
storage; `("f", id, 0)`: its release), so that `allocator.replay` can replay either. What decides the order:

- **Python's references** in the forward: an op's output lives while a variable of transformers' code holds it
  or autograd saved it; a rebound variable releases its old value at once, a function's locals at its return
  (in the order the function first names them).
- **Autograd's engine** (`torch/csrc/autograd/engine.cpp`): a node runs when every gradient it waits for has
  arrived, the ready node created last first (`CompareNodeTaskTime`: the highest sequence number; a parameter's
  AccumulateGrad before all). A node allocates its outputs, then its input gradient goes, then what it saved
  (`release_variables`), then its outputs go to the next nodes' buffers; a second gradient for one buffer is
  added into the first and released (`InputBuffer::accumulate`, as the recorder's rule takes it). The gradient
  of the loss lives until the backward ends.
- Nodes created one after the other in a chain (a Linear's views and product) run one after the other in the
  backward, nothing in between: each such chain is one `Node` here, which frees and releases in its own order.
- cuBLAS workspaces: a thread's first product allocates 32 MiB and its first `addmm` 1 MiB more, never freed
  (the backward runs on a thread of its own).
- The optimizer (foreach AdamW): its states at the first step, parameter by parameter (`exp_avg`, then
  `exp_avg_sq`), and each step `_foreach_sqrt`'s temporaries, released in reverse order (SGD with momentum: its
  buffers at the first step; SGD: nothing);
  `zero_grad(set_to_none=True)` releases the gradients in parameter order.

Covered so far: BERT, the RoBERTa code (`roberta`, `xlm-roberta`, `camembert`: positions made from the ids, its
classification head, the head assigned first in the generated classes) and ELECTRA (embeddings of width E
projected to H, the generator's head, gelu in its classification head) and DistilBERT (no token types, no
dropout after the attention's projection, which its attention runs itself) and ALBERT (G groups of K stored layers
run L·K times, their parameters' gradients accumulated; gelu_new written out; no dropout but the classifier's)
and MPNet (eager attention only; a relative position bias made once a forward, op by op, added to every layer's
scores) and ModernBERT (`allocations_modernbert`: rotary positions, a fused Wqkv, a gated MLP, pre-norm layers,
the local layers' sliding-window mask; no multiple choice yet) and DeBERTa-v2 (`allocations_deberta`:
disentangled attention, every switch; sequence classification with one label only) with a sequence-classification,
masked-LM, causal-LM (eager attention's causal mask, the shifted labels), token-classification or
question-answering head (start and end logits split, copied, their gradients concatenated) or multiple-choice
head (b·C sequences, one logit a choice), pre-training (BERT's MLM + next sentence, ALBERT's MLM + sentence
order, ELECTRA's discriminator), next-sentence head or none (the bare model, its loss the sum of its
outputs), in float32 (eager attention or sdpa's memory-efficient kernel) or with the model in bfloat16 or float16
(eager attention or sdpa's cuDNN kernel: every size at the model's element (`self.f`), but LayerNorm's mean and
rstd and the tables and buckets computed in float32, and where a loss casts the logits up or meets float32
labels, or ModernBERT computes its rotary embedding and softmax in float32, the casts and their gradients' casts
back), or a float32 model under autocast (BERT's code, RoBERTa's, ELECTRA's, DistilBERT's, ModernBERT's: every
Linear on 16-bit copies, `_dense` and `_cast`, the parameters' cached until the forward leaves autocast,
`_leave_autocast`; a 16-bit input's float32 copy for LayerNorm, softmax and the losses; elements `self.lp`), no
padding mask (or one: BERT's code's `_padding_mask`, a causal LM's too, ModernBERT's and DeBERTa's their own),
every loop (the course's: the last step's outputs and loss released as `out` and `loss` are rebound,
`_returned`), a tied decoder; anything else is refused by name (`allocations.covers`, which also gives the order
to the search for what fits).

Inference (`mode: inference`, `_forwards`): eval mode, each forward under `no_grad`: no node saves anything
(`Tape.grad`), so a tensor goes with its last name; dropout gives its input back; no labels, no loss; sdpa's
memory-efficient kernel makes no log-sum-exp; eager attention's weights are returned and live until the layer
returns; a causal LM's key/value cache (`use_cache`: two `cat` copies a layer, (b, A, s, d), which eager attention
reads as they are) is returned with the logits; the hand-written loop lets each forward's outputs go, the
course's keeps them until the next forward returns.

Checkpointing (`workload.checkpointing`, `_checkpointed`): `torch.utils.checkpoint` as transformers calls it
(non-reentrant): a layer's forward saves nothing (`Tape.packing`: each saved tensor packed, `Frame`), its frame
keeps the layer's inputs, and the backward's first node to unpack recomputes the layer (`Recomputation`) until the
last tensor the forward packed is made again (`StopRecomputation`), each kept for the node that saved it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from ..config import BertConfig
from .symbols import attention_run
from .workload import Workload

Event = tuple[str, int, int]
CUBLAS_WORKSPACE = 32 * 1024 * 1024
CUBLASLT_WORKSPACE = 1024 * 1024
MASK_ALIGNMENT = 8  # sdpa pads a float bias whose rows are not a multiple of this many columns (`preprocess_mask`)
FLOAT = 4
LONG = 8
# A layer's Linear: (inputs, outputs) from H and I.
LAYER_LINEARS: dict[str, Callable[[int, int], tuple[int, int]]] = {
    "q": lambda h, i: (h, h), "k": lambda h, i: (h, h), "v": lambda h, i: (h, h), "o": lambda h, i: (h, h),
    "up": lambda h, i: (h, i), "down": lambda h, i: (i, h)}
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")  # one modeling code: positions from the ids, its own heads
HEAD_FIRST = ("xlm-roberta", "camembert")  # generated classes that assign the head before the body
# the families whose allocation order is derived


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

    def product(self, thread: str, addmm: bool = False) -> None:
        """A matrix product on `thread`: its first asks cuBLAS for a workspace (and its first addmm, cuBLASLt)."""
        if f"cublas {thread}" not in self.workspaces:
            self.workspaces.add(f"cublas {thread}")
            self._allocate(CUBLAS_WORKSPACE)
        if addmm and f"cublasLt {thread}" not in self.workspaces:
            self.workspaces.add(f"cublasLt {thread}")
            self._allocate(CUBLASLT_WORKSPACE)

    def node(self, rule: Rule, edges: Sequence[Edge | None], saved: Sequence[Storage] = (), inputs: int = 1) -> Node:
        """A node created now (the next sequence number), holding what it saved (under `no_grad` none is made:
        what autograd would have saved goes with its last name)."""
        self.seq += 1
        if not self.grad:
            return Node(self.seq, [], [], rule, inputs=inputs)
        to = [edge for edge in edges if edge is not None]
        frame = self.packing
        if frame is not None:  # (a checkpoint's pack hook: a holder for each, the tensors not kept)
            node = Node(self.seq, to, [], rule, inputs=inputs, frame=frame if saved else None)
            if saved:
                frame.nodes.append(node)
                frame.pending += 1
            return node
        for storage in saved:
            self.hold(storage)
        node = Node(self.seq, to, list(saved), rule, inputs=inputs)
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
        for edge, output in zip(node.edges, outputs, strict=True):
            dest, slot = edge if isinstance(edge, tuple) else (edge, 0)
            if output is not None:
                if dest.inputs > 1:
                    dest.buffers = dest.buffers or [None] * dest.inputs
                    if dest.buffers[slot] is None:
                        dest.buffers[slot] = output
                    else:
                        tape.drop(output)
                elif dest.buffer is None:
                    dest.buffer = output
                elif isinstance(dest.buffer, View):  # a view cannot take the sum: a new one, both released
                    first, dest.buffer = dest.buffer, tape.new(dest.buffer.nbytes)
                    tape.drop(output, first)
                else:  # added into the first, then released
                    tape.drop(output)
            waits[id(dest)] -= 1
            if waits[id(dest)] == 0:
                pushed += 1
                heapq.heappush(ready, (-dest.seq, pushed, dest))
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
    def _back(grad: Layout, b: int, s: int, h: int) -> bool:
        """Whether a gradient of this layout, viewed back to (b, s, H) and then (b·s, H), needs a copy."""
        tokens = view_strides(*grad, (b, s, h))
        if tokens is None:
            return True
        return view_strides((b, s, h), tokens, (b * s, h)) is None


def efficient_backward_workspace(b: int, heads: int, rows: int, dim: int, block: int = 64) -> int:
    """The memory-efficient backward's gradient-of-Q accumulator on sm_80+ for float32 (`workspace_size` in
    PyTorch's mem_eff_attention kernel_backward.h): per batch and head, ceil(s/64)² tiles of 64×64 floats and a
    16-byte header, rounded to 4 floats."""
    tiles = -(-rows // block) * -(-rows // block)
    floats = tiles * (16 + block * block * 4) // 4
    return b * heads * ((floats + 3) // 4 * 4) * 4


class Param:
    """A parameter: its storage and its AccumulateGrad node."""

    def __init__(self, tape: Tape, nbytes: int) -> None:
        self.data = tape.new(nbytes)
        self.node = Node(float("inf"), [], [], None)


Pair = tuple[Param, "Param | None"]  # a Linear's or a LayerNorm's weight and bias (None: built without one)
Biased = tuple[Param, Param]  # (the families whose Linears and LayerNorms all have biases)

class BertRun:
    """BertFor{SequenceClassification,MaskedLM}'s or BertLMHeadModel's run, op by op, or RoBERTa's (the same
    encoder)."""

    embedding_norm: Pair
    pooler: Pair
    transform: Pair
    transform_norm: Pair
    classifier: Pair

    def __init__(self, config: BertConfig, workload: Workload, batch: int | None = None) -> None:
        self.c, self.w = config, workload
        self.f = 2 if workload.precision in ("bf16", "fp16") else FLOAT  # the model's element: weights, activations
        # autocast (amp-bf16, amp-fp16): a float32 model whose products run in 16 bits, `lp` bytes an element (the
        # model's element elsewhere); each parameter's 16-bit copy is cached until the forward leaves autocast
        self.amp = workload.precision.startswith("amp-")
        self.lp = 2 if self.amp else self.f
        self.casts: dict[int, tuple[Storage, Node]] = {}
        self.weights: Storage | None = None  # eager attention's float32 probabilities under autocast (`_`)
        self.tape = Tape()
        self.choices = config.head == "multiple-choice"
        self.discriminator = config.head == "pretraining" and config.model_type == "electra"  # replaced tokens
        self.bare = config.head == "none"  # the model without a head: its loss the sum of its outputs
        self.pretraining = config.head == "pretraining" and not self.discriminator  # BERT's MLM + NSP, ALBERT's + SOP
        self.sentences = self.pretraining or config.head == "next-sentence"  # a classifier on the pooled state
        self.sentence_classes = config.num_labels if config.model_type == "albert" else 2  # ALBERT's order: N
        self.regression = config.head == "sequence-classification" and config.num_labels == 1  # MSE
        self.examples = workload.batch if batch is None else batch  # (batch: the program's symbolic one)
        self.b, self.s = self.examples * (workload.choices if self.choices else 1), workload.seq  # (b·C sequences)
        self.n = self.b * self.s
        self.h, self.i = config.hidden_size, config.intermediate_size
        self.heads = config.num_attention_heads
        self.mlm = config.head in ("mlm", "causal-lm")  # the LM head (the decoder tied to the word table)
        self.causal = config.head == "causal-lm"
        self.tokens = config.head == "token-classification"
        self.qa = config.head == "question-answering"
        self.roberta = config.model_type in ROBERTA_LIKE
        self.head_first = config.model_type in HEAD_FIRST  # the class assigns its head before its body
        self.electra = config.model_type == "electra"
        self.distil = config.model_type == "distilbert"
        self.albert = config.model_type == "albert"  # shared layers, gelu_new, no dropout but the classifier's
        self.mpnet = config.model_type == "mpnet"  # a relative position bias; eager attention only
        self.eager = attention_run(config, workload).attention == "eager"
        self.train = workload.mode == "train"  # else inference: `model.eval()`, forwards under `no_grad`
        self.checkpointing = workload.checkpointing and self.train
        self.tape.grad = self.train
        # hidden and attention dropout (ALBERT's configs: p = 0, which runs nothing; in eval mode none runs)
        self.dropout = not self.albert and self.train
        self.e = config.embedding_width  # E: the embeddings' width
        self.projected = (self.electra and self.e != self.h) or self.albert  # E → H after the embeddings
        self.qa_loss_function = False  # question answering's loss in `self.loss_function` (not written inline)
        self.lm_upcast = False  # the masked LM's loss casts 16-bit logits to float32 first (`ForMaskedLMLoss`)
        self.cache: list[Storage] = []  # a causal LM's key/value cache in inference (use_cache), this forward's
        # the model's locals until it returns: its attention mask, the embeddings' output (`embedding_output`)
        self.model_locals: tuple[Storage | None, ...] = ()

    # Setup: parameters and buffers moved to the device (children first), then the batch -----------------------
    def _setup(self) -> None:
        """The parameters and buffers moved to the device as `Module.to` moves them (children first, in the order
        they were assigned; a tied tensor once, where first met), and the optimizer's parameter order (the
        same walk, a module's own parameters before its children's)."""
        t, h, i, c, e = self.tape, self.h, self.i, self.c, self.e

        def linear(inputs: int, outputs: int) -> Biased:
            return Param(t, outputs * inputs * self.f), Param(t, outputs * self.f)

        def norm(width: int = h) -> Biased:
            return Param(t, width * self.f), Param(t, width * self.f)

        def lm_head() -> list[Param]:
            if self.electra or self.albert:  # the LayerNorm assigned first, then dense (H → E), then the
                self.transform_norm, self.transform = norm(e), linear(h, e)  # decoder's bias (its weight tied);
                self.decoder_bias = Param(t, c.vocab_size * self.f)  # ALBERT's head owns that bias
                if self.albert:
                    return [self.decoder_bias, *self.transform_norm, *self.transform]
                return [*self.transform_norm, *self.transform, self.decoder_bias]
            # the transform, then the decoder (its weight the word table, then its own bias)
            self.transform, self.transform_norm = linear(h, h), norm()
            if not hasattr(self, "word"):  # (a head assigned before the body owns the tied table)
                self.word = Param(t, c.vocab_size * h * self.f)
            self.decoder_bias = Param(t, c.vocab_size * self.f)
            owned = [self.word] if self.head_first else []
            if self.distil:  # (vocab_transform, vocab_layer_norm, vocab_projector: modules of the model)
                return [*self.transform, *self.transform_norm, self.decoder_bias]
            return [self.decoder_bias, *self.transform, *self.transform_norm, *owned]  # (its own bias first)

        # The body's pooler (multiple choice, the bare model) is made just before the head's own parameters, or
        # at the body's end where a class assigns its head first
        late_pooler = self.head_first and (self.choices or self.bare)

        def pooler() -> list[Param]:
            self.pooler = linear(h, h)
            return [*self.pooler]

        def head() -> list[Param]:
            if self.mlm:
                return lm_head()
            if self.bare:  # the body's pooler, if it has one
                return pooler() if c.has_pooler and not late_pooler else []
            if self.discriminator:  # discriminator_predictions: dense, dense_prediction (one logit a token)
                self.transform, self.classifier = linear(h, h), linear(h, 1)
                return [*self.transform, *self.classifier]
            if self.sentences:  # the body's pooler, (pre-training) the LM head, the sentence classifier
                pooled = pooler()
                lm = lm_head() if self.pretraining else []
                self.classifier = linear(h, self.sentence_classes)
                return [*pooled, *lm, *self.classifier]
            if self.tokens or self.qa:  # a classifier on every token's state (qa_outputs: start and end)
                self.classifier = linear(h, 2 if self.qa else c.num_labels)
                return [*self.classifier]
            # BERT's pooler and classifier; RoBERTa's and ELECTRA's classification head (dense, out_proj);
            # multiple choice: one logit a choice
            pooled = [] if late_pooler else pooler()
            self.classifier = linear(h, 1 if self.choices else c.num_labels)
            return [*pooled, *self.classifier]

        def body() -> list[Param]:
            owned = not hasattr(self, "word")
            if owned:
                self.word = Param(t, c.vocab_size * e * self.f)
            table = [self.word] if owned else []
            if self.roberta:  # (RoBERTa assigns its position table last, with a padding index)
                self.types = Param(t, c.type_vocab_size * e * self.f)
                self.embedding_norm = norm(e)
                self.position = Param(t, c.max_position_embeddings * e * self.f)
                params = [*table, self.types, *self.embedding_norm, self.position]
            elif self.distil or self.mpnet:  # no token types
                self.position = Param(t, c.max_position_embeddings * e * self.f)
                self.embedding_norm = norm(e)
                params = [*table, self.position, *self.embedding_norm]
            else:
                self.position = Param(t, c.max_position_embeddings * e * self.f)
                self.types = Param(t, c.type_vocab_size * e * self.f)
                self.embedding_norm = norm(e)
                params = [*table, self.position, self.types, *self.embedding_norm]
            self.position_ids = t.new(c.max_position_embeddings * LONG)
            if not (self.distil or self.mpnet):
                self.type_ids = t.new(c.max_position_embeddings * LONG)
            if self.projected:  # ELECTRA's embeddings_project, ALBERT's embedding_hidden_mapping_in (E → H)
                self.projection = linear(e, h)
                params += self.projection
            self.layers: list[dict[str, Biased]] = []
            # ALBERT's layer assigns its output LayerNorm first; it stores G groups of K layers
            keys = ("norm2", "q", "k", "v", "o", "norm1", "up", "down") if self.albert else (
                "q", "k", "v", "o", "norm1", "up", "down", "norm2")
            stored = c.num_hidden_groups * c.inner_group_num if self.albert else c.num_hidden_layers
            for _ in range(stored):
                made = {key: norm() if key.startswith("norm") else linear(*LAYER_LINEARS[key](h, i)) for key in keys}
                self.layers.append(made)
                for key in keys:
                    params += made[key]
            if self.mpnet:  # the encoder's relative_attention_bias: buckets × heads
                self.relative = Param(t, c.relative_attention_num_buckets * c.num_attention_heads * self.f)
                params.append(self.relative)
            if late_pooler and (self.choices or c.has_pooler):
                params += pooler()
            return params

        if self.head_first:
            first = head()
            self.params: list[Param] = first + body()
        else:
            self.params = body() + head()
        self._inputs()

    def _inputs(self) -> None:
        """The batch moved to the device: the ids, then the labels the head reads."""
        t = self.tape
        self.ids = t.new(self.n * LONG)
        if self.w.padding_mask:  # the attention mask, as given (int64)
            t.new(self.n * LONG)
        rows = self.n if self.mlm or self.tokens or self.pretraining or self.discriminator else self.examples
        if not self.bare and self.train:  # (the bare model: no labels; inference: none)
            self.labels = t.new(rows * (FLOAT if self.regression else LONG))  # (regression: float32 labels)
        if self.pretraining and self.train:  # the sentences' labels
            self.sentence_labels = t.new(self.b * LONG)
        if self.qa and self.train:  # start and end positions
            self.ends = t.new(self.b * LONG)
        self.states: list[Storage] = []

    def run(self, steps: int) -> list[Event]:
        """The events of `steps` training steps, or inference forwards (`step_ends`: how many events each step's
        end has seen)."""
        self._setup()
        if not self.train:
            return self._forwards(steps)
        t = self.tape
        trainer, course = self.w.loop == "trainer", self.w.loop == "course"
        self.step_ends: list[int] = []
        self.last_outputs: tuple[Storage, ...] = ()  # (the course's loop: the last step's, until `out` is rebound)
        last_loss: Storage | None = None
        for _ in range(steps):
            loss, logits, root = self._forward()  # out = model(**batch); loss = out.loss
            assert loss is not None  # (training: the head's loss)
            self._returned()
            self._leave_autocast()
            t.drop(last_loss)  # (the course's loop: `loss = out.loss` rebound)
            if trainer:  # del out: the logits go before the backward
                t.drop(*logits)
            grad = t.new(loss.nbytes)  # loss.backward(): ones_like(loss)
            backward(t, root, grad)
            if trainer or self.bare and not course:  # del loss (the bare model's: computed outside it)
                t.drop(loss)
            self._optimizer()
            for param in self.params:  # zero_grad(set_to_none=True)
                t.drop(param.node.grad)
                param.node.grad = None
            if course:  # nothing deleted: the outputs and the loss live on into the next step
                self.last_outputs, last_loss = tuple(logits), loss
            elif not trainer:  # out = None, after the optimizer's step
                t.drop(None if self.bare else loss, *logits)
            self.step_ends.append(len(t.events))
        return t.events

    def _forwards(self, steps: int) -> list[Event]:
        """Inference: `out = model(**batch)` under `no_grad` (and autocast), again and again; the hand-written
        loop lets each forward's outputs go before the next (`out = None`), the course's keeps them until the next
        forward returns and `out` is rebound."""
        t = self.tape
        course = self.w.loop == "course"
        self.step_ends = []
        self.last_outputs = ()
        for _ in range(steps):
            _, outputs, _ = self._forward()
            self._returned()
            self._leave_autocast()
            if course:
                self.last_outputs = outputs
            else:
                t.drop(*outputs)
            self.step_ends.append(len(t.events))
        return t.events

    def _returned(self) -> None:
        """The model's forward returned and `out` is rebound: the course's loop releases the last step's outputs
        (their loss lives on in `loss` until that is rebound too)."""
        self.tape.drop(*self.last_outputs)
        self.last_outputs = ()

    def _leave_autocast(self) -> None:
        """Leaving `autocast` clears its cache: the 16-bit copies no backward saved go (the order is the cache's
        hash order on a GPU, which no replay can tell from another: frees one after the other)."""
        self.tape.drop(*(copy for copy, _ in self.casts.values()))
        self.casts = {}

    # Forward ------------------------------------------------------------------------------------------------
    def _forward(self) -> Head:
        self.cache = []
        x, x_node = self._embeddings()
        embedded = self.tape.hold(x)
        mask: Storage | None = None
        if self.w.padding_mask:
            mask = self._padding_mask(self._element(x))
        elif self.causal and self.eager:
            mask = self._causal_mask(self._element(x))
        if self.albert:  # (its encoder projects the embeddings: after the model made its mask)
            x, x_node = self._project(x, x_node)
        self.bias = self._position_bias() if self.mpnet else None
        for layer in self._runs():
            if self.checkpointing:
                x, x_node = self._checkpointed(partial(self._layer, layer, x_node=x_node, mask=mask), x, mask)
            else:
                x, x_node = self._layer(layer, x, x_node, mask)
        self.tape.drop(self.bias[0] if self.bias else None)  # (the encoder's local, as its forward returns)
        self.model_locals = mask, embedded  # they go as the model returns, after the body's pooler if any
        if not self.c.has_pooler:
            self.tape.drop(*self.model_locals)
        return self._head(x, x_node)

    def _head(self, x: Storage, x_node: Node) -> Head:
        """The head on the encoder's output, its loss, the outputs the loop keeps."""
        if self.mlm:
            return self._mlm(x, x_node)
        if self.sentences:
            return self._sentences(x, x_node)
        if self.discriminator:
            return self._discriminator(x, x_node)
        if self.bare:
            return self._bare(x, x_node)
        if self.tokens:
            return self._token_classifier(x, x_node)
        if self.qa:
            return self._question_answering(x, x_node)
        return self._sequence_head(x, x_node)

    def _sequence_head(self, x: Storage, x_node: Node) -> Head:
        """Sequence classification or multiple choice: RoBERTa's classification head (ELECTRA's, MPNet's), or the
        pooler and a classifier."""
        if (self.roberta or self.electra or self.mpnet) and not self.choices:
            return self._roberta_classifier(x, x_node)
        return self._classifier(x, x_node)

    def _classifier(self, x: Storage, x_node: Node) -> Head:
        """The pooler (the first token's state, a view; a Linear; tanh: BERT's pooler, DistilBERT's
        pre_classifier with ReLU, ELECTRA's sequence summary with gelu, which saves its input), dropout, the
        classifier; for multiple choice one logit an example's choice, cross-entropy over the choices."""
        t, rows = self.tape, self.b
        classes = 1 if self.choices else self.c.num_labels
        act, act_node = self._pooler(x, x_node)
        dropped, drop_node = self._dropout(act, act_node, self.lp)
        if self.electra:
            t.drop(act)
        logits, head = self._dense(self.classifier, dropped, drop_node, rows, classes)
        t.drop(dropped, act)  # (tanh's output: saved by its own backward)
        if not self.train:
            t.drop(x)
            return None, (logits,), head
        if self.choices:  # the logits viewed as (b, C)
            loss, loss_node = self._cross_entropy(head, self.examples, self.w.choices)
        else:
            loss, loss_node = self._classification_loss(head, rows, classes, logits)
        t.drop(x)  # the encoder's output: the body's output holds it until the head's forward returns
        return loss, (logits,), loss_node

    def _pooler(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The first token's state (a view), a Linear, tanh (ELECTRA's summary: gelu, saving its input)."""
        t, rows, h = self.tape, self.b, self.h
        pooled, dense = self._dense(self.pooler, x, x_node, rows, h, select=self.n * h)
        act = t.new(rows * h * self.lp)
        act_node = t.node(self._grads(rows * h * self.lp), [dense], [pooled if self.electra else act])
        t.drop(pooled)
        if self.c.has_pooler:  # (the body's pooler: the model returns, its locals go)
            t.drop(*self.model_locals)
        return act, act_node

    def _sentences(self, x: Storage, x_node: Node) -> Head:
        """Next-sentence prediction (BERT's seq_relationship on the pooled state), and with pre-training the LM
        head first, their two cross-entropies summed (ALBERT's sentence-order head: behind dropout)."""
        t, b = self.tape, self.b
        pooled, pooled_node = self._pooler(x, x_node)
        kept = []
        if self.pretraining:
            logits, decoder_node = self._lm_logits(x, x_node)
            kept.append(logits)
        if self.albert:
            dropped, drop_node = self._dropout(pooled, pooled_node, self.lp)
        else:
            dropped, drop_node = t.hold(pooled), pooled_node
        classes = self.sentence_classes
        sentence, sentence_node = self._dense(self.classifier, dropped, drop_node, b, classes)
        t.drop(dropped, pooled)
        kept.append(sentence)
        if not self.train:
            t.drop(x)
            return None, tuple(kept), sentence_node
        if not self.pretraining:
            loss, loss_node = self._cross_entropy(sentence_node, b, classes)
            t.drop(x)  # (the body's output holds the encoder's until the head returns)
            return loss, tuple(kept), loss_node
        words, words_node = self._cross_entropy(decoder_node, self.n, self.c.vocab_size)
        sentences, sentences_node = self._cross_entropy(sentence_node, b, classes, self.sentence_labels)
        total = t.new(self.f)
        total_node = t.node(self._add_backward(), [words_node, sentences_node])
        t.drop(words, sentences, x)
        return total, tuple(kept), total_node

    def _bare(self, x: Storage, x_node: Node) -> Head:
        """The bare model (BertModel): its outputs (the last hidden state, the pooler's if it has one) kept, the
        loss their sum (`tui.reference.measure.loss_of`), whose gradient is the loss's own, expanded: a view."""
        t = self.tape
        kept = [x]
        if self.c.has_pooler:
            pooled, pooled_node = self._pooler(x, x_node)
            kept.append(pooled)
        if not self.train:
            return None, tuple(kept), x_node
        self._returned()
        self._leave_autocast()  # (the sums are the loop's, after the model's forward)
        total = t.new(self.f)
        total_node = t.node(self._sum_backward(x.nbytes), [x_node])
        if not self.c.has_pooler:
            return total, tuple(kept), total_node
        second = t.new(self.lp)  # (the pooler's 16-bit output under autocast: its sum too, the total float32)
        second_node = t.node(self._sum_backward(pooled.nbytes), [pooled_node])
        summed = t.new(self.f)
        node = t.node(self._add_backward(narrow=(0, self._narrowed(1))), [total_node, second_node])
        t.drop(second, total)
        return summed, tuple(kept), node

    def _sum_backward(self, size: int) -> Rule:
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            t.hold(given)
            self._finish(t, given, node)
            return [View(given.base if isinstance(given, View) else given, size)]
        return rule

    def _discriminator(self, x: Storage, x_node: Node) -> Head:
        """ELECTRA's discriminator: dense, gelu, one logit a token; binary cross-entropy with logits against the
        labels as floats (it saves both; its backward: sigmoid, minus the target, times the gradient); under
        autocast on a float32 copy of the logits (its backward casts the gradient back)."""
        t, n, h = self.tape, self.n, self.h
        act, act_node = self._dense_activation(self.transform, x, x_node, n, h, h, keep=True)
        logits, logits_node = self._dense(self.classifier, act, act_node, n, 1)
        t.drop(act)
        if not self.train:
            t.drop(x)
            return None, (logits,), logits_node
        target = t.new(n * FLOAT)  # labels.float()
        wide, wide_node = self._upcast(logits_node, n) if self.amp else (None, logits_node)
        loss = t.new(FLOAT)  # (16-bit logits against float32 labels: the loss, float32)
        loss_node = t.node(self._bce_backward(n, FLOAT if wide else self.f), [wide_node], [wide or logits, target])
        t.drop(target, wide, x)  # (x: the body's output holds the encoder's until the head returns)
        return loss, (logits,), loss_node

    def _bce_backward(self, n: int, element: int) -> Rule:
        """sigmoid(logits) in their dtype (`element` bytes), minus the float32 target, times the gradient
        (float32), cast back to 16-bit logits' dtype where they are."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            sigmoid = t.new(n * element)
            minus = t.new(n * FLOAT)
            t.drop(sigmoid)
            grad = t.new(n * FLOAT)
            t.drop(minus)
            if element != FLOAT:
                cast = t.new(n * element)
                t.drop(grad)
                grad = cast
            self._finish(t, given, node)
            return [grad]
        return rule

    def _roberta_classifier(self, x: Storage, x_node: Node) -> Head:
        """RobertaClassificationHead (ElectraClassificationHead: gelu for tanh): the first token's state (a
        view), dropout, dense, tanh, dropout, out_proj; the encoder's output goes as the model's forward
        returns."""
        t, b, h, labels = self.tape, self.b, self.h, self.c.num_labels
        if self.train:
            dropped, mask = t.new(b * h * self.f), t.new(b * h)
            drop_node = t.node(self._grads(b * h * self.f, select=self.n * h * self.f), [x_node], [mask])
            t.drop(mask)
            dense, dense_node = self._dense(self.pooler, dropped, drop_node, b, h)
        else:  # (eval: the first token's state, a view, as it is)
            dropped, drop_node = t.hold(x), x_node
            dense, dense_node = self._dense(self.pooler, dropped, drop_node, b, h, select=self.n * h)
        t.drop(dropped)
        act = t.new(b * h * self.lp)  # RoBERTa's tanh saves its output; ELECTRA's gelu, its input
        act_node = t.node(self._grads(b * h * self.lp), [dense_node], [dense if self.electra else act])
        t.drop(dense)
        logits, head = self._classify(act, act_node, b, labels)
        if not self.train:
            t.drop(x)
            return None, (logits,), head
        loss, loss_node = self._classification_loss(head, b, labels, logits)
        t.drop(x)
        return loss, (logits,), loss_node

    def _classify(self, x: Storage, x_node: Node, rows: int, classes: int) -> tuple[Storage, Node]:
        """Dropout (its input's name released), then the classifier: the logits and their node (`x`: a
        product's activation, 16-bit under autocast)."""
        t = self.tape
        dropped, drop_node = self._dropout(x, x_node, self.lp)
        t.drop(x)
        logits, head = self._dense(self.classifier, dropped, drop_node, rows, classes)
        t.drop(dropped)
        return logits, head

    def _token_classifier(self, x: Storage, x_node: Node) -> Head:
        """Token classification: dropout, a classifier on every token's state, cross-entropy over the n rows;
        the encoder's output goes as the model's forward returns."""
        t, n, labels = self.tape, self.n, self.c.num_labels
        dropped, drop_node = self._dropout(x, x_node)
        logits, head = self._dense(self.classifier, dropped, drop_node, n, labels)
        if not self.train:
            t.drop(x, dropped)
            return None, (logits,), head
        loss, loss_node = self._cross_entropy(head, n, labels)
        t.drop(x, dropped)  # (the head's locals as it returns: the body's output, then the dropped states)
        return loss, (logits,), loss_node

    def _question_answering(self, x: Storage, x_node: Node) -> Head:
        """qa_outputs on every token (DistilBERT's behind dropout), split into start and end logits, each
        squeezed and made contiguous (copies: the loop keeps them), the positions clamped, two cross-entropies,
        their mean; the split's backward concatenates the two gradients."""
        t, n, b, s = self.tape, self.n, self.b, self.s
        hidden, hidden_node = self._dropout(x, x_node) if self.distil else (t.hold(x), x_node)
        logits, qa_node = self._dense(self.classifier, hidden, hidden_node, n, 2)
        split = t.node(self._cat_backward(n * 2 * self.lp), [qa_node], inputs=2)
        start, end = t.new(n * self.lp), t.new(n * self.lp)
        start_node, end_node = t.node(self._pass(), [(split, 0)]), t.node(self._pass(), [(split, 1)])
        if not self.train:
            t.drop(x, hidden, logits)
            return None, (start, end), start_node
        starts, ends = t.new(b * LONG), t.new(b * LONG)  # clamp(0, s)
        start_loss, start_loss_node = self._cross_entropy(start_node, b, s, starts)
        end_loss, end_loss_node = self._cross_entropy(end_node, b, s, ends)
        summed = t.new(self.f)
        add = t.node(self._add_backward(), [start_loss_node, end_loss_node])
        loss = t.new(self.f)
        loss_node = t.node(self._grads(self.f), [add])  # / 2
        t.drop(summed)
        if self.qa_loss_function:  # ForQuestionAnsweringLoss's locals as it returns, then the forward's
            t.drop(start_loss, end_loss, starts, ends, x, hidden, logits)
        else:  # the forward's locals, as it returns
            t.drop(x, hidden, logits, start_loss, end_loss, starts, ends)
        return loss, (start, end), loss_node

    def _cat_backward(self, size: int) -> Rule:
        """A split's backward: its outputs' gradients concatenated, then released in order."""
        def rule(t: Tape, given: Sequence[Storage | None], node: Node) -> Sequence[Storage | None]:
            whole = t.new(size)
            t.drop(*given)
            t.release(node)
            return [whole]
        return rule  # type: ignore[return-value]  # (given its inputs' list: see `backward`)

    def _classification_loss(self, head: Node, rows: int, classes: int, logits: Storage, element: int = 0
                             ) -> tuple[Storage, Node]:
        """Cross-entropy; one label: regression, MSE (which saves the logits and the float labels; `element`:
        the logits' bytes, the model's unless cast to the labels' float32 first)."""
        if not self.regression:
            return self._cross_entropy(head, rows, classes)
        t = self.tape
        wide = None
        if self.amp and element != FLOAT:  # (autocast runs mse_loss on a float32 copy of 16-bit logits)
            wide, head = self._upcast(head, rows)
            logits, element = wide or logits, FLOAT
        loss = t.new(FLOAT)  # (against float32 labels: float32)
        node = t.node(self._promoted_backward(rows, element or self.f), [head], [logits, self.labels])
        t.drop(wide)
        return loss, node

    def _promoted_backward(self, rows: int, element: int) -> Rule:
        """A loss of logits against float32 labels (MSE): its gradient in float32, cast back to 16-bit logits'
        dtype."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            grad = t.new(rows * FLOAT)
            if element != FLOAT:
                cast = t.new(rows * element)
                t.drop(grad)
                grad = cast
            self._finish(t, given, node)
            return [grad]
        return rule

    def _cross_entropy(self, head: Node, rows: int, classes: int, target: Storage | None = None, element: int = 0
                       ) -> tuple[Storage, Node]:
        """log_softmax (saves its output), nll_loss (saves the target, the labels unless given, and the total
        weight), in the logits' dtype (`element` bytes: the model's unless a loss cast them up first); under
        autocast log_softmax runs on the 16-bit logits and nll_loss on a float32 copy of its output (which it
        saves; its backward casts the gradient back)."""
        t, size = self.tape, element or self.lp
        logp = t.new(rows * classes * size)
        logp_node = t.node(self._grads(rows * classes * size), [head], [logp])
        t.drop(logp)
        wide, logp_node = self._upcast(logp_node, rows * classes) if self.amp and size != FLOAT else (None, logp_node)
        size = FLOAT if wide else size
        saved = [target or self.labels] if wide is None else [wide, target or self.labels]
        loss, total = t.new(size), t.new(size)
        loss_node = t.node(self._grads(rows * classes * size), [logp_node], [*saved, total])
        t.drop(total, wide)
        return loss, loss_node

    def _upcast(self, head: Node, size: int) -> tuple[Storage | None, Node]:
        """`x.float()` on `size` elements (logits a loss casts up, ModernBERT's q and k): a float32 copy of a
        16-bit tensor (its backward casts the gradient back), nothing for a float32 one."""
        if self.lp == FLOAT:
            return None, head
        t = self.tape
        return t.new(size * FLOAT), t.node(self._grads(size * self.lp), [head])

    def _lm_logits(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The LM head: transform (Linear, gelu, LayerNorm), the decoder (the word table and its own bias)."""
        t, n, h, vocab = self.tape, self.n, self.e, self.c.vocab_size  # (ELECTRA's generator: H → E)
        gelu, gelu_node = self._dense_activation(self.transform, x, x_node, n, self.h, h, keep=True)
        normed, norm_node = self._layer_norm(gelu, gelu_node, self.transform_norm, h)
        t.drop(gelu)
        logits, decoder_node = self._dense((self.word, self.decoder_bias), normed, norm_node, n, vocab, inputs=h)
        t.drop(normed)
        return logits, decoder_node

    def _mlm(self, x: Storage, x_node: Node) -> Head:
        """cls.predictions: transform (Linear, gelu, LayerNorm), the decoder (the word table and its own bias),
        cross-entropy over the vocabulary (log_softmax saves its b·s·V output)."""
        t, n, vocab = self.tape, self.n, self.c.vocab_size
        logits, decoder_node = self._lm_logits(x, x_node)
        if not self.train:  # (a causal LM returns its key/value cache too)
            t.drop(x)
            return None, (logits, *self.cache), decoder_node
        if not self.causal:
            upcast, decoder_node = self._upcast(decoder_node, n * vocab) if self.lm_upcast else (None, decoder_node)
            element = FLOAT if upcast else logits.nbytes // (n * vocab)  # (autocast: DeBERTa's float32 bias makes
            # its logits float32)
            loss, loss_node = self._cross_entropy(decoder_node, n, vocab, element=element)
            t.drop(upcast, x)  # (the encoder's output: the body's output holds it until the head returns)
            return loss, (logits,), loss_node
        # ForCausalLMLoss: the logits as float32, the labels padded by one (b, s + 1), shifted as
        # `[..., 1:].contiguous()` (a copy, but a view of one sequence), the cross-entropy's target; the float32
        # logits and the padded labels go as it returns
        upcast, decoder_node = self._upcast(decoder_node, n * vocab)
        padded = t.new(self.b * (self.s + 1) * LONG)
        shifted = t.new(n * LONG) if self.b > 1 else t.hold(padded)
        loss, loss_node = self._cross_entropy(decoder_node, n, vocab, shifted, FLOAT)
        t.drop(upcast, padded, shifted, x)
        return loss, (logits,), loss_node

    def _position_ids(self) -> Storage:
        """RoBERTa's positions from the ids (`create_position_ids_from_input_ids`): `ne(pad).int()`, `cumsum`
        (int64), `type_as`, `+ 0` (MPNet's has no offset), `* mask`, `long()`, `+ pad`, each a new (b, s)
        tensor."""
        t, n = self.tape, self.n
        ne = t.new(n)
        mask = t.new(n * 4)
        t.drop(ne)
        summed = t.new(n * LONG)
        cast = t.new(n * 4)
        t.drop(summed)
        if not self.mpnet:
            shifted = t.new(n * 4)
            t.drop(cast)
            cast = shifted
        masked = t.new(n * 4)
        t.drop(cast)
        wide = t.new(n * LONG)
        positions = t.new(n * LONG)
        t.drop(wide, mask, masked)
        return positions

    def _embeddings(self) -> tuple[Storage, Node]:
        t, n, h, s = self.tape, self.n, self.e, self.s  # (the embeddings' width: E)
        from_ids = self.roberta or self.mpnet
        position_ids = self._position_ids() if from_ids else self.position_ids
        if self.distil or self.mpnet:  # no token types: the word embeddings are the sum so far
            summed = words = t.new(n * h * self.f)
            sum_node = t.node(self._grads(self.word.data.nbytes), [self.word.node], [self.ids])
            types = None
        else:
            type_ids = t.new((n if self.roberta else s) * LONG)  # the token-type buffer gathered at the positions
            words = t.new(n * h * self.f)
            words_node = t.node(self._grads(self.word.data.nbytes), [self.word.node], [self.ids])
            types = t.new(n * h * self.f)
            types_node = t.node(self._grads(self.types.data.nbytes), [self.types.node], [type_ids])
            summed = t.new(n * h * self.f)
            sum_node = t.node(self._add_backward(), [words_node, types_node])
        positions = t.new((n if from_ids else s) * h * self.f)
        positions_node = t.node(self._grads(self.position.data.nbytes), [self.position.node], [position_ids])
        total = t.new(n * h * self.f)
        # (BERT's positions (1, s, H) broadcast over the batch: their gradient summed over it)
        total_node = t.node(self._add_backward(broadcast=s * h * self.f if self.b > 1 and not from_ids else 0),
                            [sum_node, positions_node])
        if types is not None:
            t.drop(summed)
        normed, norm_node = self._layer_norm(total, total_node, self.embedding_norm, h)
        t.drop(total)
        out, out_node = self._dropout(normed, norm_node) if self.dropout else (t.hold(normed), norm_node)
        t.drop(normed)
        # the function's locals, as it returns (the token types gathered: the backward's in training)
        t.drop(None if self.distil or self.mpnet else type_ids, words, types, positions)
        if from_ids:
            t.drop(position_ids)
        if self.projected and not self.albert:  # ELECTRA's embeddings_project: E → H (the model's mask after it)
            return self._project(out, out_node)
        return out, out_node

    def _project(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """E → H: ELECTRA's embeddings_project, ALBERT's embedding_hidden_mapping_in (its encoder's first op)."""
        t = self.tape
        projected, node = self._dense(self.projection, x, x_node, self.n, self.h, inputs=self.e)
        t.drop(x)
        return projected, node

    def _position_bias(self) -> tuple[Storage, Node]:
        """MPNet's relative position bias (MPNetEncoder.compute_position_bias), once a forward: the positions'
        differences (s × s, int64), their buckets as `relative_position_bucket` computes them op by op (no
        gradient), the bias table looked up (s × s × A), permuted and expanded to the batch, made contiguous:
        (b, A, s, s) float32, added to every layer's scores. Its backward sums the layers' gradients over the
        batch, then into the table."""
        t, s, b, heads = self.tape, self.s, self.b, self.heads
        pair, pair_bool, pair_float = s * s * LONG, s * s, s * s * FLOAT
        context, memory = t.new(s * LONG), t.new(s * LONG)
        relative = t.new(pair)
        n = t.new(pair)  # -relative
        negative = t.new(pair_bool)
        wide = t.new(pair)
        t.drop(negative)
        offset = t.new(pair)  # * num_buckets
        t.drop(wide)
        ret = t.new(pair)  # 0 + …
        t.drop(offset)
        distance = t.new(pair)  # abs
        t.drop(n)
        small = t.new(pair_bool)
        steps = [t.new(pair_float)]  # float(), / max_exact, log, / log(…), * (…): each releases the one before
        for _ in range(4):
            steps.append(t.new(pair_float))
            t.drop(steps[-2])
        large = t.new(pair)  # .to(long)
        t.drop(steps[-1])
        shifted = t.new(pair)  # max_exact + …
        t.drop(large)
        full = t.new(pair)
        least = t.new(pair)  # torch.min
        t.drop(full, shifted)
        chosen = t.new(pair)  # where(is_small, n, large), added into ret in place
        t.drop(chosen, distance, small, least)  # (relative_position_bucket's locals, as it returns)
        values = t.new(s * s * heads * self.f)
        # (s, s, A) permuted to (A, s, s), unsqueezed, expanded to (b, A, s, s): a copy unless that is contiguous
        expanded = (b, heads, s, s), (0 if b > 1 else heads * s * s, 1, s * heads, heads)
        bias = t.hold(values) if is_contiguous(*expanded) else t.new(b * heads * s * s * self.f)
        node = t.node(self._bias_backward(), [self.relative.node], [ret])
        t.drop(values, context, memory, relative, ret)  # (compute_position_bias's locals, as it returns)
        return bias, node

    def _bias_backward(self) -> Rule:
        """The position bias's chain: the copy's gradient summed over the batch (none for one sequence), then the
        table's gradient (the buckets, saved, go)."""
        heads, s = self.heads, self.s

        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            summed = t.new(heads * s * s * self.f) if self.b > 1 else t.hold(given)
            t.drop(given)
            table = t.new(self.relative.data.nbytes)
            t.drop(summed)
            t.release(node)
            return [table]
        return rule

    def _runs(self) -> list[dict[str, Biased]]:
        """The layers in the order they run: each once, or ALBERT's groups, layer i running group
        `int(i / (L / G))`'s K layers (AlbertTransformer.forward)."""
        c = self.c
        if not self.albert:
            return self.layers
        k = c.inner_group_num
        return [self.layers[int(i / (c.num_hidden_layers / c.num_hidden_groups)) * k + j]
                for i in range(c.num_hidden_layers) for j in range(k)]

    def _element(self, x: Storage) -> int:
        """The element of the embeddings' output, whose dtype the model's float masks take (16-bit under autocast
        where a Linear projected them, ELECTRA's)."""
        return x.nbytes // (self.n * (self.h if self.projected and not self.albert else self.e))

    def _causal_mask(self, element: int) -> Storage:
        """transformers' causal mask for eager attention (`masking_utils`: sdpa gets none, `is_causal` instead):
        the batch, head, query and key positions as aranges (offsets added), `kv ≤ q` as a (1, 1, s, s) bool,
        then `where(mask, 0.0, min)` over the mask expanded to the batch: a (b, 1, s, s) float32 tensor."""
        t, b, s = self.tape, self.b, self.s
        batch, head = t.new(b * LONG), t.new(LONG)
        aranged = []
        for _ in range(2):  # the keys' positions, then the queries': each arange + offset
            arange = t.new(s * LONG)
            aranged.append(t.new(s * LONG))
            t.drop(arange)
        allowed = t.new(s * s)
        t.drop(batch, head, *aranged)
        zero, least = t.new(element), t.new(element)
        mask = t.new(b * s * s * element)
        t.drop(least, zero, allowed)
        return mask

    def _layer(self, layer: Mapping[str, Pair], x: Storage, x_node: Node,
               mask: Storage | None) -> tuple[Storage, Node]:
        t, n, h = self.tape, self.n, self.h
        b, heads, s = self.b, self.heads, self.s
        eager = self.eager
        copies = AttentionCopies(b, heads, s, h // heads)
        qkv = []
        for key in ("q", "k", "v"):
            copy = eager and (copies.k_backward if key == "k" else copies.q_backward)
            qkv.append(self._dense(layer[key], x, x_node, n, h, copy=copy))
        (q, q_node), (k, k_node), (v, v_node) = qkv
        cached = self.causal and not self.train
        if cached:  # use_cache: the cache's keys and values, `cat` copies (b, A, s, d)
            keys, values = t.new(n * h * self.lp), t.new(n * h * self.lp)
            self.cache += [t.hold(keys), t.hold(values)]
            t.drop(k, v)
            k, v = keys, values
        if eager:
            merged, merge = self._eager_attention(q, q_node, k, k_node, v, v_node, copies, mask,
                                                  v_copy=False if cached else None, k_copy=False if cached else None)
        else:
            bias = self._mask_bias(mask) if mask is not None else None
            merged, merge = self._fused_attention(q, q_node, k, k_node, v, v_node, bias)
            t.drop(bias)
        # the attention's locals as it returns (saved where the backward reads them): DistilBERT's after its
        # output projection, which it runs itself
        # output projection, which it runs itself; ALBERT's after the LayerNorm, which it runs too
        locals_ = (q, k, v)
        if self.mpnet:  # its attention runs the output projection, then returns: q, k, v and the scores go
            attention, attention_node = self._mpnet_output(layer, merged, merge, x, x_node, (*locals_, self.scores))
        if not (self.distil or self.albert or self.mpnet):
            t.drop(*locals_)
        # the attention's output: Linear, dropout, LayerNorm(· + x) (ALBERT: LayerNorm(x + ·))
        if not self.mpnet:
            attention, attention_node = self._output(layer["o"], layer["norm1"], merged, merge, h, x, x_node,
                                                     dropout=self.dropout and not self.distil,
                                                     then=(*locals_, merged) if self.distil else
                                                     (merged,) if self.albert else (), residual_first=self.albert)
        if self.albert:
            t.drop(*locals_)
        if not (self.distil or self.albert or self.mpnet):  # (DistilBERT's and MPNet's: their attention's local,
            t.drop(merged)  # gone as it returns; ALBERT's rebound to the projection's output)
        up, up_node = self._dense(layer["up"], attention, attention_node, n, self.i)
        gelu, gelu_node = self._activation(up, up_node)
        t.drop(up)
        # (ALBERT's feed-forward rebinds its activation to the output projection's: it goes then)
        out, out_node = self._output(layer["down"], layer["norm2"], gelu, gelu_node, self.i, attention,
                                     attention_node, dropout=self.dropout,
                                     then=(gelu,) if self.albert or self.distil else ())
        # the layer's locals as it returns (`_`: the attention's weights)
        t.drop(None if self.albert or self.distil else gelu, self.weights, attention)
        self.weights = None
        t.drop(x)
        return out, out_node

    def _checkpointed(self, layer: Callable[[Storage], tuple[Storage, Node]], x: Storage,
                      *inputs: Storage | None) -> tuple[Storage, Node]:
        """`layer(x)` (a layer's forward, which lets `x` go as it returns) under `torch.utils.checkpoint`
        (`Frame`): it packs what it saves, and the frame keeps the layer's inputs (`x`, then the other tensors it
        is given: a mask, a rotary table) for the recomputation."""
        t = self.tape

        def recompute(frame: Frame) -> None:
            """The layer's forward again, on the backward's thread under a fresh autocast, until it made the last
            tensor the forward packed (`StopRecomputation`); then what held the rest goes at once: autocast's
            cache as the recomputation leaves autocast, its own graph and the forward's locals as its frames go."""
            again = Recomputation(frame)
            t.recomputing, t.thread, casts, self.casts = again, "backward", self.casts, {}
            try:
                layer(t.hold(x))
            except StopRecomputation:
                pass
            t.recomputing, t.thread = None, "main"
            t.drop(*(copy for copy, _ in self.casts.values()))
            self.casts, self.weights = casts, None
            for node in again.nodes:
                t.release(node)
            kept = [storage.id for node in frame.nodes for storage in node.saved]
            for storage in again.made:
                t.drop(*[storage] * (storage.refs - kept.count(storage.id)))
            t.drop(x)  # (the layer's argument)

        frame = Frame(recompute, [t.hold(x), *(t.hold(held) for held in inputs if held is not None)])
        t.packing = frame
        out = layer(x)
        t.packing = None
        return out

    def _padding_mask(self, element: int) -> Storage:
        """The padding mask as `masking_utils.create_bidirectional_mask` makes it: the mask as booleans, the batch
        and head aranges, the keys' and queries' positions (arange + offset), kv ≥ 0 and-ed with ones, the mask
        gathered at (batch, kv), and-ed into a boolean (b, 1, s, s); eager attention's as a float bias. A causal
        LM's (`create_causal_mask`): kv ≤ q, an (s, s) boolean, where kv ≥ 0 was (s)."""
        t, b, s, n = self.tape, self.b, self.s, self.n
        cast = t.new(n)
        positions = self._mask_positions()
        ones = t.new(1)
        pairs = s * s if self.causal else s
        valid = t.new(pairs)
        both = t.new(pairs)
        t.drop(valid, ones)
        gathered = t.new(n)
        mask = t.new(b * s * s)
        t.drop(gathered, both)
        t.drop(*positions)
        return self._float_bias(mask, cast, element)

    def _float_bias(self, mask: Storage, cast: Storage | None, element: int) -> Storage:
        """A boolean mask as attention takes it: as it is for sdpa (the mask's booleans released); for eager
        attention `where(mask, 0, min)`, a float (b, 1, s, s) of `element` bytes, the boolean one released."""
        t = self.tape
        if not self.eager:
            t.drop(cast)
            return mask
        zero, least = t.new(element), t.new(element)
        bias = t.new(self.b * self.s * self.s * element)
        t.drop(least, zero, mask, cast)
        return bias

    def _mask_positions(self) -> list[Storage]:
        """`masking_utils`' indices: the batch and head aranges, then the keys' and the queries' positions (each
        an arange plus the offset, the arange released)."""
        t, s = self.tape, self.s
        made = [t.new(self.b * LONG), t.new(LONG)]
        for _ in range(2):
            arange = t.new(s * LONG)
            made.append(t.new(s * LONG))
            t.drop(arange)
        return made

    def _mask_bias(self, mask: Storage) -> Storage:
        """sdpa given a boolean mask: `where(mask, 0, -inf)` over (b, 1, s, s) in q's dtype, padded to a
        multiple of 8 columns for the memory-efficient kernel (`preprocess_mask`; cuDNN's takes it as it is)."""
        t, b, s = self.tape, self.b, self.s
        zero, least = t.new(self.lp), t.new(self.lp)
        bias = t.new(b * s * s * self.lp)
        t.drop(least, zero)
        if s % MASK_ALIGNMENT and self.lp == FLOAT:
            padded = t.new(b * s * -(-s // MASK_ALIGNMENT) * MASK_ALIGNMENT * self.lp)
            t.drop(bias)
            bias = padded
        return bias

    def _fused_attention(self, q: Storage, q_node: Node, k: Storage, k_node: Node, v: Storage, v_node: Node,
                         bias: Storage | None = None) -> tuple[Storage, Node]:
        """sdpa's fused kernel: the memory-efficient one in float32, cuDNN's in 16 bits (sm_90)."""
        if self.lp == FLOAT:
            return self._efficient_attention(q, q_node, k, k_node, v, v_node, bias)
        return self._cudnn_attention(q, q_node, k, k_node, v, v_node, bias)

    def _cudnn_attention(self, q: Storage, q_node: Node, k: Storage, k_node: Node, v: Storage, v_node: Node,
                         bias: Storage | None = None) -> tuple[Storage, Node]:
        """sdpa's cuDNN kernel (16 bits): its output laid out as the tokens', a float32 log-sum-exp per row, the
        philox seed and offset (one int64 each); q, k, v read in place (a bias too, where a mask is given)."""
        t, b, heads, s = self.tape, self.b, self.heads, self.s
        out = t.new(self.n * self.h * self.lp)
        lse = t.new(b * heads * s * FLOAT)
        seed, offset = t.new(LONG), t.new(LONG)
        saved = [k, q, v, lse, out, offset, seed] if bias is None else [bias, k, q, v, lse, out, offset, seed]
        node = t.node(self._cudnn_backward(), [q_node, k_node, v_node], saved)
        t.drop(lse, seed, offset)
        return out, node

    def _cudnn_backward(self) -> Rule:
        """cuDNN's backward: the gradients of q, k, v, then its float32 dQ accumulator and softmax sum (one block
        allocated and freed inside the kernel)."""
        b, heads, s, d = self.b, self.heads, self.s, self.h // self.heads

        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            grads = [t.new(self.n * self.h * self.lp) for _ in range(3)]
            t.drop(t.new(b * heads * s * d * FLOAT + b * heads * s * FLOAT))
            self._finish(t, given, node)
            return grads
        return rule

    def _efficient_attention(self, q: Storage, q_node: Node, k: Storage, k_node: Node, v: Storage, v_node: Node,
                             bias: Storage | None = None) -> tuple[Storage, Node]:
        """sdpa's memory-efficient kernel (float32 on sm_80+): its output, laid out as the tokens' (so no copy to
        merge the heads), and the log-sum-exp per row (rows rounded up to 32); q, k, v read in place (a float
        bias too, where a mask is given)."""
        t, b, heads, s = self.tape, self.b, self.heads, self.s
        out = t.new(self.n * self.h * self.f)
        if not self.train:  # (no log-sum-exp without a backward)
            return out, t.node(self._efficient_backward(), [])
        lse = t.new(b * heads * -(-s // 32) * 32 * FLOAT)
        saved = [k, q, v, lse, out] if bias is None else [bias, k, q, v, lse, out]
        node = t.node(self._efficient_backward(), [q_node, k_node, v_node], saved)
        t.drop(lse)  # (saved in the order the node releases them: the bias, key, query, value, log-sum-exp, output)
        return out, node

    def _efficient_backward(self) -> Rule:
        """The memory-efficient kernel's backward: the gradients of q, k, v, then what the kernel allocates and
        frees inside (float32: a copy of the output's gradient and its row sums, then the rows' delta, then the
        gradient-of-Q accumulator)."""
        b, heads, s, d = self.b, self.heads, self.s, self.h // self.heads

        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            grads = [t.new(self.n * self.h * self.f) for _ in range(3)]
            passing = [t.new(b * s * heads * d * FLOAT), t.new(b * s * heads * FLOAT)]
            delta = t.new(b * heads * s * FLOAT)
            t.drop(*reversed(passing))
            workspace = t.new(efficient_backward_workspace(b, heads, s, d))
            t.drop(delta, workspace)
            self._finish(t, given, node)
            return grads
        return rule

    def _eager_attention(self, q: Storage, q_node: Node, k: Storage, k_node: Node, v: Storage, v_node: Node,
                         copies: AttentionCopies, mask: Storage | None, v_copy: bool | None = None,
                         softmax32: bool = False, k_copy: bool | None = None) -> tuple[Storage, Node]:
        """softmax(q·kᵀ × scaling), dropout, · v, the heads merged back: matmul's reshapes copy where no view can
        (`AttentionCopies`; `v_copy`, `k_copy`: whether v's and k's do, where they are not laid out as q: a
        causal LM's cached keys and values are contiguous (b, A, s, d), viewed as they are; `softmax32`: the softmax
        in float32, `softmax(…, dtype=float32).to(q.dtype)`: 16-bit scores cast up first, the probabilities back).
        Under autocast the products run in 16 bits, a float32 mask makes the scores float32, softmax runs in
        float32 (on a copy of 16-bit scores) and so does dropout; the product with v takes a 16-bit copy of the
        probabilities, and the float32 ones stay the layer's (its `_` local) until it returns."""
        t, n, h, lp = self.tape, self.n, self.h, self.lp
        b, heads, s = self.b, self.heads, self.s
        pair = b * heads * s * s
        # scores: matmul(q, kᵀ) reshapes q and kᵀ to (b·A, s, d) and (b·A, d, s) blocks (copies where no view
        # can do), then bmm; × scaling
        q_operand = t.new(n * h * lp) if copies.q_forward else t.hold(q)
        k_operand = t.new(n * h * lp) if (copies.k_forward if k_copy is None else k_copy) else t.hold(k)
        q_pass = t.node(self._pass(), [q_node])
        k_pass = t.node(self._pass(), [k_node])
        t.product(t.thread)
        scores = t.new(pair * lp)
        bmm1 = t.node(self._bmm_backward(n * h * lp, n * h * lp), [q_pass, k_pass], [k_operand, q_operand])
        t.drop(q_operand, k_operand)
        scaled = t.new(pair * lp)
        mul = t.node(self._grads(pair * lp), [bmm1])
        t.drop(scores)
        element = lp  # the scores' element
        if self.bias is not None:  # MPNet: += the position bias, in place (its gradient goes to both; under
            # autocast the float32 bias's cast up)
            mul = t.node(self._add_backward(narrow=(0, pair * self.f if lp != self.f else 0)), [mul, self.bias[1]])
        if mask is not None:  # + the causal mask (which wants no gradient: the sum's passes through)
            # (the mask in the embeddings' dtype: under autocast a float32 one makes the sum float32, the
            # scores' gradient cast down)
            element = max(lp, mask.nbytes // (b * s * s))
            masked = t.new(pair * element)
            mul = t.node(self._grads(pair * lp) if element != lp else self._pass(), [mul])
            t.drop(scaled)
            scaled = masked
        if softmax32 and lp != FLOAT:
            # softmax's half_to_float (float32 out of half in, a half gradient), or float32 scores (autocast's
            # float32 mask added)
            if self.w.precision.endswith("fp16") or element == FLOAT:
                wide = t.new(pair * FLOAT)
                softmax = t.node(self._grads(pair * element), [mul], [wide])
            else:  # bfloat16 is cast up first (a copy), and its gradient back
                upcast = t.new(pair * FLOAT)
                up = t.node(self._grads(pair * lp), [mul])
                wide = t.new(pair * FLOAT)
                softmax = t.node(self._grads(pair * FLOAT), [up], [wide])
                t.drop(upcast)
            probs = t.new(pair * lp)
            softmax = t.node(self._grads(pair * FLOAT), [softmax])
            t.drop(wide)
            element = lp
        elif self.amp:
            probs, softmax = self._autocast_softmax(mul, pair, element)
            element = FLOAT
        else:
            probs = t.new(pair * self.f)
            softmax = t.node(self._grads(pair * self.f), [mul], [probs])
            element = self.f
        if not self.mpnet:  # (MPNet keeps its scores' name: they go as its attention returns)
            t.drop(scaled)
        if self.dropout:
            dropped, mask = t.new(pair * element), t.new(pair)
            drop = t.node(self._grads(pair * element), [softmax], [mask])
            t.drop(mask, probs)
        else:
            dropped, drop = probs, softmax
        weights = dropped
        if element != lp:  # (autocast) the product's 16-bit copy of the probabilities
            dropped = t.new(pair * lp)
            drop = t.node(self._grads(pair * element), [drop])
        v_operand = t.new(n * h * lp) if (copies.q_forward if v_copy is None else v_copy) else t.hold(v)
        v_pass = t.node(self._pass(), [v_node])
        t.product(t.thread)
        context = t.new(n * h * lp)
        bmm2 = t.node(self._bmm_backward(pair * lp, n * h * lp), [drop, v_pass],
                      [v_operand, dropped])  # (bmm saves its second operand first)
        saving = self.train and t.packing is None  # (else nothing saved: inference, a checkpointed forward)
        if not saving and weights is not dropped:  # (autocast's copy goes as the product returns)
            t.drop(dropped)
        t.drop(v_operand)
        # transpose(1, 2).contiguous(): a copy unless the heads' layout already is the tokens'
        merged = t.new(n * h * lp) if copies.merge_forward else t.hold(context)
        merge = t.node(self._grads(n * h * lp) if copies.merge_backward else self._pass(), [bmm2])
        if saving:
            t.drop(context, dropped)  # (the probabilities: saved by bmm)
            if weights is not dropped:
                self.weights = weights
        else:  # (the weights returned, the layer's `_` until it returns)
            t.drop(context)
            self.weights = weights
        if self.mpnet:
            self.scores = scaled
        return merged, merge

    def _autocast_softmax(self, scores: Node, pair: int, element: int) -> tuple[Storage, Node]:
        """Softmax under autocast (one of its float32 ops) over `pair` scores of `element` bytes: float32
        probabilities, from half scores at once (half_to_float: a half gradient), bfloat16 ones copied up first."""
        t = self.tape
        copied = t.new(pair * FLOAT) if element != FLOAT and self.w.precision == "amp-bf16" else None
        up = t.node(self._grads(pair * element), [scores]) if copied else scores
        probs = t.new(pair * FLOAT)
        softmax = t.node(self._grads(pair * (FLOAT if copied else element)), [up], [probs])
        t.drop(copied)
        return probs, softmax

    def _mpnet_output(self, layer: Mapping[str, Pair], merged: Storage, merge: Node, x: Storage,
                      x_node: Node, locals_: Sequence[Storage]) -> tuple[Storage, Node]:
        """MPNet's attention: its own output projection (then its locals go), and MPNetAttention's
        LayerNorm(dropout(o) + x), the dropped copy a temporary of the sum."""
        t, n, h = self.tape, self.n, self.h
        out, out_node = self._dense(layer["o"], merged, merge, n, h)
        t.drop(*locals_, self.weights, merged)  # (under autocast the float32 probabilities are its attention's
        # too; the heads merged last)
        self.weights = None
        dropped, drop_node = self._dropout(out, out_node, self.lp)
        summed = t.new(n * h * self.f)
        add = t.node(self._add_backward(narrow=(self._narrowed(n * h), 0)), [drop_node, x_node])
        t.drop(dropped)
        normed, norm_node = self._layer_norm(summed, add, layer["norm1"])
        t.drop(summed, out)
        return normed, norm_node

    def _output(self, dense: Pair, norm: Pair, x: Storage, x_node: Node,
                width: int, residual: Storage, residual_node: Node, dropout: bool = True,
                then: Sequence[Storage] = (), residual_first: bool = False) -> tuple[Storage, Node]:
        """BertSelfOutput / BertOutput: dense, dropout, LayerNorm(hidden + input) (DistilBERT's attention: no
        dropout; `then`: released after the dense; `residual_first`: LayerNorm(input + hidden))."""
        t, n, h = self.tape, self.n, self.h
        projected, dense_node = self._dense(dense, x, x_node, n, h, inputs=width)
        t.drop(*then)
        if dropout:
            dropped, drop_node = self._dropout(projected, dense_node, self.lp)
            t.drop(projected)
        else:
            dropped, drop_node = projected, dense_node
        # (autocast: a 16-bit sum where the residual is 16-bit too, ELECTRA's projected embeddings; float32
        # otherwise, the 16-bit input's gradient cast down)
        element = max(self.lp, residual.nbytes // (n * h))
        summed = t.new(n * h * element)
        narrow = (n * h * self.lp if self.lp != element else 0, 0)
        if residual_first:  # (the 16-bit input second)
            narrow = narrow[::-1]
        add = t.node(self._add_backward(narrow=narrow),
                     [residual_node, drop_node] if residual_first else [drop_node, residual_node])
        normed, norm_node = self._layer_norm(summed, add, norm)
        t.drop(summed, dropped)
        return normed, norm_node

    def _dense_activation(self, params: Pair, x: Storage, x_node: Node, rows: int, inputs: int, outputs: int,
                          select: int = 0, keep: bool = False) -> tuple[Storage, Node]:
        """A Linear on `x` (`addmm` with a bias, `mm` without; `x`'s name released, unless the caller `keep`s it),
        then the activation (its input's name released)."""
        t = self.tape
        dense, dense_node = self._dense(params, x, x_node, rows, outputs, inputs=inputs, select=select)
        if not keep:
            t.drop(x)
        act, act_node = self._activation(dense, dense_node)
        t.drop(dense)
        return act, act_node

    def _activation(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """gelu (one op, saving its input), or ALBERT's gelu_new written out in Python (NewGELUActivation:
        `0.5 * x * (1.0 + tanh(sqrt(2 / π) * (x + 0.044715 * pow(x, 3.0))))`), op by op."""
        t, size = self.tape, x.nbytes
        if not self.albert:
            out = t.new(size)
            return out, t.node(self._grads(size), [x_node], [x])
        # (under autocast pow runs in float32, on a copy of the 16-bit x: from there on every op is float32)
        wide = size // self.lp * FLOAT if self.amp else size
        half = t.new(size)
        half_node = t.node(self._grads(size), [x_node])  # (a product with a number saves nothing)
        copied, powered_node = self._upcast(x_node, size // self.lp) if self.amp else (None, x_node)
        cube = t.new(wide)
        cube_node = t.node(self._pow_backward(wide), [powered_node], [copied or x])
        t.drop(copied)
        scaled = t.new(wide)
        scaled_node = t.node(self._grads(wide), [cube_node])
        t.drop(cube)
        inner = t.new(wide)
        inner_node = t.node(self._add_backward(narrow=(size if wide != size else 0, 0)), [x_node, scaled_node])
        t.drop(scaled)
        arg = t.new(wide)
        arg_node = t.node(self._grads(wide), [inner_node])
        t.drop(inner)
        tanh = t.new(wide)
        tanh_node = t.node(self._grads(wide), [arg_node], [tanh])
        t.drop(arg)
        one = t.new(wide)
        one_node = t.node(self._pass(), [tanh_node])  # (+ 1.0)
        t.drop(tanh)  # (a temporary of the expression: saved in training)
        out = t.new(wide)
        node = t.node(self._mul_backward(wide, size), [half_node, one_node], [one, half])  # (released: other, self)
        t.drop(half, one)
        return out, node

    def _layer_norm(self, x: Storage, x_node: Node, norm: Pair, width: int = 0, rows: int = 0
                    ) -> tuple[Storage, Node]:
        """LayerNorm over `rows` (default n) of `width` (default H): its output, mean and rstd; its backward the
        input's gradient, the weight's, the bias's (if it has one)."""
        t, n, h = self.tape, rows or self.n, width or self.h
        weight, bias = norm
        # (autocast runs it on a float32 copy of a 16-bit input)
        wide, x_node = self._upcast(x_node, n * h) if self.amp and x.nbytes == n * h * self.lp else (None, x_node)
        x = wide or x
        out, mean, rstd = t.new(n * h * self.f), t.new(n * FLOAT), t.new(n * FLOAT)  # (mean, rstd: float32)
        sizes = (n * h * self.f, h * self.f) + ((h * self.f,) if bias else ())
        node = t.node(self._grads(*sizes), [x_node, weight.node, bias.node if bias else None], [x, mean, rstd])
        t.drop(mean, rstd, wide)
        return out, node

    def _dropout(self, x: Storage, x_node: Node, element: int = 0) -> tuple[Storage, Node]:
        """Dropout of `x`, whose elements are `element` bytes (default the model's), keeping a byte mask (in eval
        mode none: `x` itself)."""
        t = self.tape
        if not self.train:
            return t.hold(x), x_node
        out, mask = t.new(x.nbytes), t.new(x.nbytes // (element or self.f))
        node = t.node(self._grads(x.nbytes), [x_node], [mask])
        t.drop(mask)
        return out, node

    # Backward rules -------------------------------------------------------------------------------------------
    @staticmethod
    def _finish(t: Tape, given: Storage, node: Node) -> None:
        t.drop(given)
        t.release(node)

    @staticmethod
    def _applied(t: Tape, node: Node) -> None:
        """The node's apply returns: a checkpointed node's tensors (unpacked, the recomputation's: its locals) go
        now, before the engine checks its outputs (a broadcast's gradient summed down, a cast), where a node that
        kept them releases them only after (`_finish`, as it lets the checkpoint's frame go)."""
        if node.frame is not None:
            t.drop(*node.saved)
            node.saved = []

    def _pass(self) -> Rule:
        """Views and copies whose backward hands the gradient on as it is."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            t.hold(given)
            self._finish(t, given, node)
            return [given]
        return rule

    def _grads(self, *sizes: int, select: int = 0) -> Rule:
        """New gradients of these sizes, in order (a pointwise op's, softmax's, dropout's, the loss's: one of
        its input's size; a view that copies a gradient that is not contiguous; LayerNorm's input, weight and
        bias; an embedding's table), then the input gradient and what the op saved go; `select`: the op's
        input was a select view, whose gradient is zeros of the whole (these bytes) with the first's in it."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            grads = [t.new(nbytes) for nbytes in sizes]
            self._finish(t, given, node)
            if select:
                whole = t.new(select)
                t.drop(grads[0])
                grads[0] = whole
            return grads
        return rule

    def _narrowed(self, elements: int) -> int:
        """The bytes the engine casts a 16-bit input's gradient down to where autocast summed it with float32
        (`_add_backward`'s `narrow`); 0 where nothing is cast."""
        return elements * self.lp if self.lp != self.f else 0

    def _add_backward(self, broadcast: int = 0, narrow: Sequence[int] = (0, 0)) -> Rule:
        """The same gradient to both inputs (summed down to the second's shape where it was broadcast); `narrow`:
        the bytes of an input that was 16-bit in a float32 sum (autocast; 0: not), whose gradient the engine
        casts down as it hands it on."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            # (the engine checks the outputs in order: each cast or summed down, then the input gradient goes)
            grads = [t.new(narrow[i]) if narrow[i] else t.new(broadcast) if i and broadcast else t.hold(given)
                     for i in range(2)]
            self._finish(t, given, node)
            return grads
        return rule

    def _mul_backward(self, size: int, narrow: int = 0) -> Rule:
        """A product of two tensors: the second's gradient first, then the first's (`narrow`: the first was a
        16-bit tensor in a float32 product, its gradient then cast down to these bytes)."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            second, first = t.new(size), t.new(size)
            if narrow and narrow != size:  # (the engine casts it as it checks the outputs, before the releases)
                cast = t.new(narrow)
                t.drop(first)
                first = cast
            self._finish(t, given, node)
            return [first, second]
        return rule

    def _pow_backward(self, size: int) -> Rule:
        """`pow(x, 3.0)`: `grad · 3 · pow(x, 2)` as three new tensors, the two temporaries released last first."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            squared, tripled, grad = t.new(size), t.new(size), t.new(size)
            t.drop(tripled, squared)
            self._finish(t, given, node)
            return [grad]
        return rule

    def _bmm_backward(self, first: int, second: int) -> Rule:
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            t.product("backward")
            grads = [t.new(second), t.new(first)]  # bmm's backward: the second input's gradient first
            self._finish(t, given, node)
            return grads[::-1]
        return rule

    def _dense(self, params: Pair, x: Storage, x_node: Node, rows: int, outputs: int, inputs: int = 0,
               copy: bool = False, select: int = 0) -> tuple[Storage, Node]:
        """A Linear on `rows` rows of `inputs` (default H): `addmm` with a bias, `mm` without; its output and node
        chain (`_linear`). Under autocast it runs on 16-bit copies: the bias's and the weight's (cached, `_cast`),
        then the input's where it is float32 (a select view: the rows it picks, its own node before the copy)."""
        t, inputs = self.tape, inputs or self.h
        if not self.amp:  # (its node saves its inputs before the product runs: a recomputation can stop there)
            node = self._linear(params, x_node, x, rows, inputs, outputs, copy=copy, select=select)
            t.product(t.thread, addmm=params[1] is not None)
            return t.new(rows * outputs * self.f), node
        weight, bias = params
        if select:  # (the view is taken before the Linear runs)
            x_node = t.node(self._grads(select * FLOAT), [x_node])
        bias_copy, bias_node = self._cast(bias) if bias else (None, None)
        weight_copy, weight_node = self._cast(weight)
        wide = x.nbytes == (select or rows * inputs) * FLOAT
        if wide:
            x = t.new(rows * inputs * self.lp)
            x_node = t.node(self._grads(rows * inputs * FLOAT), [x_node])
        node = t.node(self._linear_backward(rows, inputs, outputs, copy, 0, bias is not None),
                      [bias_node, weight_node, x_node], [x, weight_copy])
        t.product(t.thread, addmm=bias is not None)
        out = t.new(rows * outputs * self.lp)
        if wide:
            t.drop(x)
        return out, node

    def _cast(self, param: Param) -> tuple[Storage, Node]:
        """Autocast's 16-bit copy of a float32 parameter, made at its first use in a forward and cached (its node
        shared: the gradients of every use are summed before it casts them back)."""
        if id(param) not in self.casts:
            copy = self.tape.new(param.data.nbytes // FLOAT * self.lp)
            self.casts[id(param)] = copy, self.tape.node(self._grads(param.data.nbytes), [param.node])
        return self.casts[id(param)]

    def _linear(self, params: Pair, x_node: Node, x: Storage, rows: int, inputs: int, outputs: int,
                copy: bool = False, select: int = 0) -> Node:
        """A Linear's node chain on `x` (saved for the weight's gradient), handing its gradients on as the engine
        does: addmm's own edge to the bias first, then the nodes created just before it run, the weight's
        transpose (created last) before the input's view."""
        weight, bias = params
        return self.tape.node(self._linear_backward(rows, inputs, outputs, copy, select, bias is not None),
                              [bias.node if bias else None, weight.node, x_node], [x])

    def _linear_backward(self, rows: int, inputs: int, outputs: int, copy: bool = False, select: int = 0,
                         bias: bool = True) -> Rule:
        """A Linear's chain: (a copy of a gradient that is not contiguous, for q, k, v) addmm's backward, the
        input's gradient first, then the weight's and the bias's (without a bias, mm's: the weight's, then the
        input's); a select's gradient (zeros of the whole). Handed on as `_linear` orders the edges (a shared
        parameter's second gradient goes at once)."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            if copy:
                copied = t.new(rows * outputs * self.lp)
                t.drop(given)
                given = copied
            t.product("backward")
            if bias:
                grad, weight = t.new(rows * inputs * self.lp), t.new(outputs * inputs * self.lp)
                self._applied(t, node)  # (the bias's gradient: summed down as the engine checks the outputs)
                grads = [t.new(outputs * self.lp), weight]
            else:
                grads = [t.new(outputs * inputs * self.lp)]
                grad = t.new(rows * inputs * self.lp)
            self._finish(t, given, node)
            if select:
                whole = t.new(select * self.f)
                t.drop(grad)
                grad = whole
            return [*grads, grad]
        return rule

    # The optimizer ------------------------------------------------------------------------------------------
    def _optimizer(self) -> None:
        """The optimizer's step (foreach): AdamW's states at the first step, then its `_foreach_sqrt` temporaries
        each step; SGD with momentum its buffers at the first step (a clone of each gradient, in place after);
        SGD nothing (every update in place)."""
        t = self.tape
        if self.w.optimizer != "adamw":
            if self.w.optimizer == "sgd-momentum" and not self.states:
                self.states = [t.new(param.data.nbytes) for param in self.params]
            return
        if not self.states:
            for param in self.params:
                self.states += [t.new(param.data.nbytes), t.new(param.data.nbytes)]
        roots = [t.new(param.data.nbytes) for param in self.params]  # _foreach_sqrt(exp_avg_sqs)
        t.drop(*reversed(roots))
