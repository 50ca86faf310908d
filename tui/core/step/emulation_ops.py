"""A run's state and the op kinds' allocation rules: what a Linear, a LayerNorm, a dropout, an activation, an
element-wise add or product, a batched product and a cast each allocate in the forward, save for the backward
and allocate and release in their backward (`Run`), under each precision (a 16-bit model; a float32 model under
autocast, its parameters' 16-bit copies cached). Each family's forward (`emulation.BertRun` and its subclasses)
is written with these; the attention kernels are `emulation_attention`'s, the heads and losses
`emulation_heads`'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..config import BertConfig
from .emulation_methods import adapt
from .method import Method
from .symbols import attention_run
from .tape import (
    FLOAT,
    Edge,
    Frame,
    Node,
    Pair,
    Param,
    Recomputation,
    Rule,
    StopRecomputation,
    Storage,
    Tape,
)
from .workload import Workload

R = TypeVar("R", bound=Callable[..., Any])


def op(name: str) -> Callable[[R], R]:
    """Marks a rule of the run as the op `name` of the step's kinds (`kinds.Module.ops`): the rule that derives
    that op's allocation events. A family's forward calls these (each outermost call one op), in the order its
    kinds name them (tests/test_kinds.py)."""
    def mark(rule: R) -> R:
        setattr(rule, "op", name)
        return rule
    return mark


# The layer classes whose code BERT's run follows (a family's record names its `forward.layer`): each differs
# from BertLayer in where its attention's locals go, and what it runs itself.
BERT_LAYER, DISTILBERT_LAYER, ALBERT_LAYER, MPNET_LAYER = "BertLayer", "TransformerBlock", "AlbertLayer", "MPNetLayer"


class Run:
    """A run's state (the config and workload read once: sizes, elements, the family's switches) and the op
    kinds' rules, which every part of a family's forward calls."""

    # Set by the family's `_setup` and `_inputs` (`emulation.BertRun` and its subclasses): the parameters and the
    # batch the parts read
    params: list[Param]  # the optimizer's order (`named_parameters()`, a tied tensor once)
    embedding_norm: Pair
    pooler: Pair
    transform: Pair
    transform_norm: Pair
    classifier: Pair
    word: Param
    decoder_bias: Param
    labels: Storage
    sentence_labels: Storage
    bias: tuple[Storage, Node] | None  # MPNet's relative position bias, made once a forward
    last_outputs: tuple[Storage, ...]  # the course's loop: the last step's outputs, until `out` is rebound

    def __init__(self, config: BertConfig, workload: Workload, batch: int | None = None,
                 method: Method | None = None) -> None:
        self.c, self.w, self.method = config, workload, method
        self.f = 2 if workload.precision in ("bf16", "fp16") else FLOAT  # the model's element: weights, activations
        # autocast (amp-bf16, amp-fp16): a float32 model whose products run in 16 bits, `lp` bytes an element (the
        # model's element elsewhere); each parameter's 16-bit copy is cached until the forward leaves autocast
        self.amp = workload.precision.startswith("amp-")
        self.lp = 2 if self.amp else self.f
        self.casts: dict[int, tuple[Storage, Node]] = {}
        self.weights: Storage | None = None  # eager attention's float32 probabilities under autocast (`_`)
        self.tape = Tape()
        self.choices = config.head == "multiple-choice"
        self.fw = fw = config.family.forward  # what the family's forward does (its record's traits)
        self.discriminator = config.head == "pretraining" and fw.discriminator  # replaced tokens
        self.bare = config.head == "none"  # the model without a head: its loss the sum of its outputs
        self.pretraining = config.head == "pretraining" and not self.discriminator  # BERT's MLM + NSP, ALBERT's + SOP
        self.sentences = self.pretraining or config.head == "next-sentence"  # a classifier on the pooled state
        self.sentence_classes = config.num_labels if fw.sentence_order else 2  # ALBERT's order: N
        self.regression = config.head == "sequence-classification" and config.num_labels == 1  # MSE
        self.examples = workload.batch if batch is None else batch  # (batch: the program's symbolic one)
        self.b, self.s = self.examples * (workload.choices if self.choices else 1), workload.seq  # (b·C sequences)
        self.n = self.b * self.s
        self.token_rows = {self.n}  # the rows of a Linear whose input is 3-D (its input's gradient a view)
        self.h, self.i = config.hidden_size, config.intermediate_size
        self.heads = config.num_attention_heads
        self.mlm = config.head in ("mlm", "causal-lm")  # the LM head (the decoder tied to the word table)
        self.causal = config.head == "causal-lm"
        self.tokens = config.head == "token-classification"
        self.qa = config.head == "question-answering"
        self.head_first = fw.head_first  # the class assigns its head before its body
        self.mpnet = fw.layer == MPNET_LAYER  # its attention runs its output projection; a relative position bias
        self.eager = attention_run(config, workload).attention == "eager"
        self.train = workload.mode == "train"  # else inference: `model.eval()`, forwards under `no_grad`
        self.checkpointing = workload.checkpointing and self.train
        self.tape.grad = self.train
        # hidden and attention dropout (ALBERT's configs: p = 0, which runs nothing; in eval mode none runs)
        self.dropout = fw.encoder_dropout and self.train
        self.e = config.embedding_width  # E: the embeddings' width
        # E → H: in the embeddings where E ≠ H (ELECTRA's), or the encoder's first op (ALBERT's)
        self.projected = (fw.projection == "E≠H" and self.e != self.h) or fw.projection == "always"
        self.qa_loss_function = False  # question answering's loss in `self.loss_function` (not written inline)
        self.lm_upcast = False  # the masked LM's loss casts 16-bit logits to float32 first (`ForMaskedLMLoss`)
        self.cache: list[Storage] = []  # a causal LM's key/value cache in inference (use_cache), this forward's
        # the model's locals until it returns: its attention mask, the embeddings' output (`embedding_output`)
        self.model_locals: tuple[Storage | None, ...] = ()
        self.leaves: list[Param] = []  # tensors made leaves that require a gradient (`_input_leaf`), this step's
        self.decoder: Param | None = None  # the LM decoder's weight where it is not the word table (`_adapt`)
        self.unreached: set[int] = set()  # (ids of) parameters no gradient reaches: no state, no gradient to free

    # A fine-tuning method ------------------------------------------------------------------------------------
    def _adapt(self) -> None:
        """The model as the method makes it (`emulation_methods.adapt`); the forward reads each
        `modules_to_save` copy where the run held its original."""
        if self.method is None:
            return
        self.params, copies, decoder = adapt(self.tape, self.params, self.f, self.method)
        if decoder is not None:  # (a saved LM head's copy: the decoder's weight of its own)
            self.decoder = decoder
        if not copies:
            return

        def swapped(value: object) -> object:
            if isinstance(value, Param):
                return copies.get(id(value), value)
            if isinstance(value, tuple) and value and all(isinstance(v, Param | None) for v in value):
                return tuple(swapped(v) for v in value)
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                return [{key: swapped(v) for key, v in layer.items()} for layer in value]
            return value

        for key, value in list(vars(self).items()):
            if key != "params":
                setattr(self, key, swapped(value))

    def _input_leaf(self, output: Storage, node: Node) -> Node:
        """transformers' `enable_input_require_grads`, which checkpointing turns on for every model read from
        input_ids (a hook on the input embeddings, peft's wrapper where it has one): their output requires a
        gradient. Where it has one already (the table, or LoRA on it, trains) that changes nothing; elsewhere the
        output is a leaf, kept by its AccumulateGrad with the gradient it is given while the graph lives
        (`_graph_gone`), and every op after it records its node."""
        if not self.checkpointing or node.live:
            return node
        leaf = Param.leaf(self.tape.hold(output))
        self.leaves.append(leaf)
        return leaf.node

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

    @property
    def trained(self) -> list[Param]:
        """The optimizer's parameters: those that train (and that a gradient reaches: AdamW and SGD skip a
        parameter whose gradient is None)."""
        return [param for param in self.params if param.trains and id(param) not in self.unreached]

    def _element(self, x: Storage) -> int:
        """The element of the embeddings' output, whose dtype the model's float masks take (16-bit under autocast
        where a Linear projected them, ELECTRA's)."""
        return x.nbytes // (self.n * (self.h if self.projected and self.fw.projection != "always" else self.e))

    @op("lookup")
    def _lookup(self, table: Param, ids: Storage | None, rows: int, width: int, rule: Rule | None = None
                ) -> tuple[Storage, Node]:
        """An embedding lookup: `rows` rows of `table`, `width` wide (its output in the model's dtype), the
        indices saved for the table's gradient (None: a slice of a buffer, no tensor of its own), which is a
        dense one, the table's size (`rule`: a chain of the lookup's own, where what follows it is folded in)."""
        t = self.tape
        out = t.new(rows * width * self.f)
        return out, t.node(rule or self._grads(table.data.nbytes), [table.node], [] if ids is None else [ids])

    @op("activation")
    def _tanh(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """tanh (one op, saving its output: the pooler's, RoBERTa's classification head's)."""
        out = self.tape.new(x.nbytes)
        return out, self.tape.node(self._grads(x.nbytes), [x_node], [out])

    def _head_activation(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """A pooler's or classification head's activation: tanh, or GELU where the family's head takes it
        (ELECTRA's)."""
        return self._gelu(x, x_node) if self.fw.head_activation == "gelu" else self._tanh(x, x_node)

    @op("activation")
    def _gelu(self, x: Storage, x_node: Edge, view: int = 0) -> tuple[Storage, Node]:
        """gelu (one op, saving its input; `view`: the bytes of the view of `x` it reads, `x` saved whole)."""
        size = view or x.nbytes
        out = self.tape.new(size)
        return out, self.tape.node(self._grads(size), [x_node], [x])

    @op("multiply")
    def _multiply(self, x: Storage, x_node: Edge, y: Storage, y_node: Edge, size: int) -> tuple[Storage, Node]:
        """An element-wise product of `size` bytes (of `x` and `y` or views of them), each saved where the other
        operand's gradient needs it."""
        out = self.tape.new(size)
        return out, self.tape.node(self._mul_backward(size), [x_node, y_node], [(y, 0), (x, 1)])

    @op("activation")
    def _activation(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The feed-forward's activation: gelu, or ALBERT's gelu_new written out in Python (NewGELUActivation:
        `0.5 * x * (1.0 + tanh(sqrt(2 / π) * (x + 0.044715 * pow(x, 3.0))))`), op by op."""
        t, size = self.tape, x.nbytes
        if self.fw.activation != "gelu_new":
            return self._gelu(x, x_node)
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
        node = t.node(self._mul_backward(wide, size), [half_node, one_node], [(one, 0), (half, 1)])  # (released: other, self)
        t.drop(half, one)
        return out, node

    @op("norm")
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

    @op("dropout")
    def _dropout(self, x: Storage, x_node: Node, element: int = 0, view: int = 0, select: int = 0
                 ) -> tuple[Storage, Node]:
        """Dropout of `x`, whose elements are `element` bytes (default the model's), keeping a byte mask (in eval
        mode none: `x` itself); `view`: the bytes of the view of `x` it reads (`select`: the bytes of the tensor
        that view selects from, whose gradient its backward makes)."""
        t = self.tape
        if not self.train:
            return t.hold(x), x_node
        size = view or x.nbytes
        out, mask = t.new(size), t.new(size // (element or self.f))
        node = t.node(self._grads(size, select=select), [x_node], [mask])
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
            grads = [t.new(nbytes) if node.wants(i) else None for i, nbytes in enumerate(sizes)]
            self._finish(t, given, node)
            if select and grads[0] is not None:
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
            grads = [None if not node.wants(i) else t.new(narrow[i]) if narrow[i] else
                     t.view(t.new(broadcast)) if i and broadcast else t.hold(given) for i in range(2)]
            self._finish(t, given, node)
            return grads
        return rule

    def _mul_backward(self, size: int, narrow: int = 0) -> Rule:
        """A product of two tensors: the second's gradient first, then the first's (`narrow`: the first was a
        16-bit tensor in a float32 product, its gradient then cast down to these bytes)."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            second = t.new(size) if node.wants(1) else None
            first = t.new(size) if node.wants(0) else None
            if first is not None and narrow and narrow != size:  # (the engine casts it as it checks the outputs, before the releases)
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
            grads = [t.new(second) if node.wants(1) else None,  # bmm's backward: the second input's gradient first
                     t.new(first) if node.wants(0) else None]
            self._finish(t, given, node)
            return grads[::-1]
        return rule

    def _product(self, params: Pair, x: Storage, x_node: Node, rows: int, outputs: int, inputs: int = 0,
                 copy: bool = False, select: int = 0, element: int = 0, selected: bool = False,
                 viewed: bool = False) -> tuple[Storage, Node]:
        """A Linear on `rows` rows of `inputs` (default H): `addmm` with a bias, `mm` without; its output and node
        chain (`_linear`). Under autocast it runs on 16-bit copies: the bias's and the weight's (cached, `_cast`),
        then the input's where it is float32 (a select view: the rows it picks, its own node before the copy).
        `element`: its tensors' bytes an element outside autocast, where they are not the model's (LoRA's float32
        adapters in a 16-bit model); `selected`: the select's node is made already (`x_node`); `viewed`: the weight
        is given as a view (peft's `lora_embedding_B.T`), not a leaf, so autocast's copy of it is not cached."""
        t, inputs = self.tape, inputs or self.h
        if not self.amp:  # (its node saves its inputs before the product runs: a recomputation can stop there)
            node = self._linear(params, x_node, x, rows, inputs, outputs, copy=copy,
                                select=0 if selected else select, element=element)
            t.product(t.thread, addmm=params[1] is not None)
            return t.new(rows * outputs * (element or self.f)), node
        weight, bias = params
        if select and not selected:  # (the view is taken before the Linear runs)
            x_node = t.node(self._grads(select * FLOAT), [x_node])
        bias_copy, bias_node = self._cast(bias) if bias else (None, None)
        weight_copy, weight_node = self._cast(weight, cached=not viewed)
        wide = x.nbytes == (select or rows * inputs) * FLOAT
        leaf = next((leaf for leaf in self.leaves if leaf.data is x), None) if wide and not select else None
        if leaf is not None:  # (a leaf that requires a gradient, the embeddings' output checkpointing made one,
            # read by a Linear as it is (DeBERTa's embed_proj): autocast caches its copy as it does a parameter's)
            x, x_node = self._cast(leaf)
            wide = False
        elif wide:
            x = t.new(rows * inputs * self.lp)
            x_node = t.node(self._grads(rows * inputs * FLOAT), [x_node])
        node = t.node(self._linear_backward(rows, inputs, outputs, copy, 0, bias is not None),
                      [bias_node, weight_node, x_node], [(x, 1), (weight_copy, 2)])
        t.product(t.thread, addmm=bias is not None)
        out = t.new(rows * outputs * self.lp)
        if wide:
            t.drop(x)
        # (a frozen parameter's copy, or a view's, is not cached: made for this product, it goes as it returns)
        t.drop(*(copy for param, copy, cached in ((weight, weight_copy, not viewed), (bias, bias_copy, True))
                 if param is not None and copy is not None and not (param.trains and cached)))
        return out, node

    def _cast(self, param: Param, cached: bool = True) -> tuple[Storage, Node]:
        """Autocast's 16-bit copy of a float32 parameter, made at its first use in a forward and cached (its node
        shared: the gradients of every use are summed before it casts them back); not `cached`: a view of it,
        copied for each use."""
        if not param.trains:  # (autocast caches the copies of leaves that need a gradient only)
            return self.tape.new(param.data.nbytes // FLOAT * self.lp), param.node
        if not cached:
            return (self.tape.new(param.data.nbytes // FLOAT * self.lp),
                    self.tape.node(self._grads(param.data.nbytes), [param.node]))
        if id(param) not in self.casts:
            copy = self.tape.new(param.data.nbytes // FLOAT * self.lp)
            self.casts[id(param)] = copy, self.tape.node(self._grads(param.data.nbytes), [param.node])
        return self.casts[id(param)]

    def _linear(self, params: Pair, x_node: Node, x: Storage, rows: int, inputs: int, outputs: int,
                copy: bool = False, select: int = 0, element: int = 0) -> Node:
        """A Linear's node chain on `x` (saved for the weight's gradient; the weight, for the input's: nothing
        allocated, but a holder a checkpoint's frame waits on), handing its gradients on as the engine does:
        addmm's own edge to the bias first, then the nodes created just before it run, the weight's transpose
        (created last) before the input's view."""
        weight, bias = params
        return self.tape.node(self._linear_backward(rows, inputs, outputs, copy, select, bias is not None, element),
                              [bias.node if bias else None, weight.node, x_node], [(x, 1), (weight.data, 2)])

    def _linear_backward(self, rows: int, inputs: int, outputs: int, copy: bool = False, select: int = 0,
                         bias: bool = True, element: int = 0) -> Rule:
        """A Linear's chain: (a copy of a gradient that is not contiguous, for q, k, v) addmm's backward, the
        input's gradient first, then the weight's and the bias's (without a bias, mm's: the weight's, then the
        input's); a select's gradient (zeros of the whole). Handed on as `_linear` orders the edges (a shared
        parameter's second gradient goes at once)."""
        lp = element or self.lp

        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            if copy:
                copied = t.new(rows * outputs * lp)
                t.drop(given)
                given = copied
            last = len(node.edges) - 1  # (its edges: the bias's, the weight's, the input's)
            wants_input, wants_weight = node.wants(last), node.wants(last - 1)
            if wants_input or wants_weight:
                t.product("backward")
            # (each handed on as a view: the input's viewed back to 3-D where it has token rows, the weight's
            # transposed, the bias's summed down with keepdim: a second gradient is summed apart, `Tape.view`)
            if bias:
                grad = t.new(rows * inputs * lp) if wants_input else None
                weight = t.new(outputs * inputs * lp) if wants_weight else None
                self._applied(t, node)  # (the bias's gradient: summed down as the engine checks the outputs)
                grads = [t.view(t.new(outputs * lp)) if node.wants(0) else None, weight and t.view(weight)]
            else:
                grads = [t.view(t.new(outputs * inputs * lp)) if wants_weight else None]
                grad = t.new(rows * inputs * lp) if wants_input else None
            self._finish(t, given, node)
            if select and grad is not None:
                whole = t.new(select * self.f)
                t.drop(grad)
                grad = whole
            elif grad is not None and rows in self.token_rows:
                grad = t.view(grad)
            return [*grads, grad]
        return rule

    def _upcast(self, head: Node, size: int) -> tuple[Storage | None, Node]:
        """`x.float()` on `size` elements (logits a loss casts up, ModernBERT's q and k): a float32 copy of a
        16-bit tensor (its backward casts the gradient back), nothing for a float32 one."""
        if self.lp == FLOAT:
            return None, head
        t = self.tape
        return t.new(size * FLOAT), t.node(self._grads(size * self.lp), [head])

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
