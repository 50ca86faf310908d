"""The step's allocation order, derived op by op: what a training run asks of the CUDA caching allocator, and when
it gives each block back, as eager PyTorch runs transformers' forward, autograd's backward and the optimizer.

The events are those `tests/fixtures/allocation/record.py` records with CUDA faked (`("a", id, bytes)`: a new
storage; `("f", id, 0)`: its release), so that `allocator.replay` can replay either.

The rooms: `tape` is the engine (storages and views, autograd's nodes and the backward's order, checkpointing's
frames, ATen's stride rules, the kernels' workspaces); `emulation_ops.Run` a run's state, each op kind's rules
(Linear, LayerNorm, dropout, activations, element-wise ops, casts) and checkpointing's (`_checkpointed`,
`_input_leaf`); `emulation_attention` the attention kernels and masks; `emulation_heads` the heads and losses;
`emulation_loop` the loop, where each step's graph goes, and the optimizer; this module BERT's code's forward
(embeddings, layers), which ModernBERT's and DeBERTa's runs override in part. What decides the order:

- **Python's references** in the forward: an op's output lives while a variable of transformers' code holds it
  or autograd saved it; a rebound variable releases its old value at once, a function's locals at its return
  (in the order the function first names them).
- Nodes created one after the other in a chain (a Linear's views and product) run one after the other in the
  backward, nothing in between: each such chain is one `Node` here, which frees and releases in its own order.
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
last tensor the forward packed is made again (`StopRecomputation`), each kept for the node that saved it. A
frozen Linear packs its weight for its input's gradient (nothing allocated, but the frame waits on it). With it
transformers turns on `enable_input_require_grads`: where nothing before it trains, the word embeddings' output is
made a leaf that requires a gradient (`_input_leaf`), kept by its AccumulateGrad with that gradient until the
step's graph goes (`_graph_gone`: the loss and outputs released).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from ..config import BertConfig
from .emulation_attention import Attention
from .emulation_heads import Head, Heads
from .emulation_loop import Loop
from .emulation_ops import ALBERT_LAYER, DISTILBERT_LAYER
from .method import Method
from .tape import (
    FLOAT,
    LONG,
    AttentionCopies,
    Biased,
    Node,
    Pair,
    Param,
    Rule,
    Storage,
    Tape,
    is_contiguous,
)
from .workload import Workload

# A layer's Linear: (inputs, outputs) from H and I.
LAYER_LINEARS: dict[str, Callable[[int, int], tuple[int, int]]] = {
    "q": lambda h, i: (h, h), "k": lambda h, i: (h, h), "v": lambda h, i: (h, h), "o": lambda h, i: (h, h),
    "up": lambda h, i: (h, i), "down": lambda h, i: (i, h)}


class BertRun(Loop, Heads, Attention):
    """The run of BERT's classes (and of the families built like them, RoBERTa's encoder …), op by op."""

    LOOKUP_ADAPTERS = True  # whether its embeddings run LoRA on the word embeddings (`_lookup_lora`)

    @staticmethod
    def refuses(config: BertConfig, workload: Workload, method: Method | None = None) -> str | None:
        """Why this run does not derive `config`'s step under `method` (None: it does); the refusals every run
        shares are `allocations.covers`'."""
        return None

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
            if self.fw.lm_head.startswith("narrow"):  # the LayerNorm assigned first, then dense (H → E), then the
                self.transform_norm, self.transform = norm(e), linear(h, e)  # decoder's bias (its weight tied);
                self.decoder_bias = Param(t, c.vocab_size * self.f)  # ALBERT's head owns that bias
                if self.fw.lm_head == "narrow-bias-first":
                    return [self.decoder_bias, *self.transform_norm, *self.transform]
                return [*self.transform_norm, *self.transform, self.decoder_bias]
            # the transform, then the decoder (its weight the word table, then its own bias)
            self.transform, self.transform_norm = linear(h, h), norm()
            if not hasattr(self, "word"):  # (a head assigned before the body owns the tied table)
                self.word = Param(t, c.vocab_size * h * self.f)
            self.decoder_bias = Param(t, c.vocab_size * self.f)
            owned = [self.word] if self.head_first else []
            if self.fw.lm_head == "transform-bias-last":  # (vocab_transform, vocab_layer_norm, vocab_projector: modules of the model)
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
            if self.fw.position_table_last:  # (RoBERTa assigns its position table last, with a padding index)
                self.types = Param(t, c.type_vocab_size * e * self.f)
                self.embedding_norm = norm(e)
                self.position = Param(t, c.max_position_embeddings * e * self.f)
                params = [*table, self.types, *self.embedding_norm, self.position]
            elif not self.fw.token_types:
                self.position = Param(t, c.max_position_embeddings * e * self.f)
                self.embedding_norm = norm(e)
                params = [*table, self.position, *self.embedding_norm]
            else:
                self.position = Param(t, c.max_position_embeddings * e * self.f)
                self.types = Param(t, c.type_vocab_size * e * self.f)
                self.embedding_norm = norm(e)
                params = [*table, self.position, self.types, *self.embedding_norm]
            self.position_ids = t.new(c.max_position_embeddings * LONG)
            if self.fw.token_types:
                self.type_ids = t.new(c.max_position_embeddings * LONG)
            if self.projected:  # ELECTRA's embeddings_project, ALBERT's embedding_hidden_mapping_in (E → H)
                self.projection = linear(e, h)
                params += self.projection
            self.layers: list[dict[str, Biased]] = []
            # ALBERT's layer assigns its output LayerNorm first; it stores G groups of K layers
            keys = ("norm2", "q", "k", "v", "o", "norm1", "up", "down") if self.fw.layer == ALBERT_LAYER else (
                "q", "k", "v", "o", "norm1", "up", "down", "norm2")
            stored = c.num_hidden_groups * c.inner_group_num if self.fw.shared_layers else c.num_hidden_layers
            for _ in range(stored):
                made = {key: norm() if key.startswith("norm") else linear(*LAYER_LINEARS[key](h, i)) for key in keys}
                self.layers.append(made)
                for key in keys:
                    params += made[key]
            if self.fw.relative_bias:  # the encoder's relative_attention_bias: buckets × heads
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
        if self.fw.projection == "always":  # (its encoder projects the embeddings: after the model made its mask)
            x, x_node = self._project(x, x_node)
        self.bias = self._position_bias() if self.fw.relative_bias else None
        # ALBERT's group of K layers: the encoder's name keeps the group's input until the group returns
        inner = self.c.inner_group_num if self.fw.shared_layers else 1
        group_input: Storage | None = None
        for index, layer in enumerate(self._runs()):
            if inner > 1 and index % inner == 0:
                group_input = self.tape.hold(x)
            if self.checkpointing:
                x, x_node = self._checkpointed(partial(self._layer, layer, x_node=x_node, mask=mask), x, mask)
            else:
                x, x_node = self._layer(layer, x, x_node, mask)
            if index % inner == inner - 1:
                self.tape.drop(group_input)
                group_input = None
        self.tape.drop(self.bias[0] if self.bias else None)  # (the encoder's local, as its forward returns)
        self.model_locals = mask, embedded  # they go as the model returns, after the body's pooler if any
        if not self.c.has_pooler:
            self.tape.drop(*self.model_locals)
        return self._head(x, x_node)

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
        if self.fw.positions_add_past:
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
        from_ids = self.fw.positions_from_ids
        position_ids = self._position_ids() if from_ids else self.position_ids
        if not self.fw.token_types:  # no token types: the word embeddings are the sum so far
            words, sum_node = self._lookup(self.word, self.ids, n, h)
            if self.word.lookup_adapters:
                words, sum_node = self._lookup_lora(self.word, words, sum_node, self.ids, n, h)
            summed = words
            sum_node = self._input_leaf(words, sum_node)
            types = None
        else:
            type_ids = t.new((n if from_ids else s) * LONG)  # the token-type buffer gathered at the positions
            words, words_node = self._lookup(self.word, self.ids, n, h)
            if self.word.lookup_adapters:
                words, words_node = self._lookup_lora(self.word, words, words_node, self.ids, n, h)
            words_node = self._input_leaf(words, words_node)
            types, types_node = self._lookup(self.types, type_ids, n, h)
            summed = t.new(n * h * self.f)
            sum_node = t.node(self._add_backward(), [words_node, types_node])
        positions, positions_node = self._lookup(self.position, position_ids, n if from_ids else s, h)
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
        t.drop(type_ids if self.fw.token_types else None, words, types, positions)
        if from_ids:
            t.drop(position_ids)
        if self.projected and self.fw.projection != "always":  # ELECTRA's embeddings_project: E → H (the model's mask after it)
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
        values, node = self._lookup(self.relative, ret, s * s, heads, rule=self._bias_backward())
        # (s, s, A) permuted to (A, s, s), unsqueezed, expanded to (b, A, s, s): a copy unless that is contiguous
        expanded = (b, heads, s, s), (0 if b > 1 else heads * s * s, 1, s * heads, heads)
        bias = t.hold(values) if is_contiguous(*expanded) else t.new(b * heads * s * s * self.f)
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
        if not self.fw.shared_layers:
            return self.layers
        k = c.inner_group_num
        return [self.layers[int(i / (c.num_hidden_layers / c.num_hidden_groups)) * k + j]
                for i in range(c.num_hidden_layers) for j in range(k)]

    def _layer(self, layer: Mapping[str, Pair], x: Storage, x_node: Node,
               mask: Storage | None) -> tuple[Storage, Node]:
        t, n, h = self.tape, self.n, self.h
        code = self.fw.layer
        distil, albert = code == DISTILBERT_LAYER, code == ALBERT_LAYER
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
        if not (distil or albert or self.mpnet):
            t.drop(*locals_)
        # the attention's output: Linear, dropout, LayerNorm(· + x) (ALBERT: LayerNorm(x + ·))
        if not self.mpnet:
            attention, attention_node = self._output(layer["o"], layer["norm1"], merged, merge, h, x, x_node,
                                                     dropout=self.dropout and not distil,
                                                     then=(*locals_, merged) if distil else
                                                     (merged,) if albert else (), residual_first=albert)
        if albert:
            t.drop(*locals_)
        if not (distil or albert or self.mpnet):  # (DistilBERT's and MPNet's: their attention's local,
            t.drop(merged)  # gone as it returns; ALBERT's rebound to the projection's output)
        up, up_node = self._dense(layer["up"], attention, attention_node, n, self.i)
        gelu, gelu_node = self._activation(up, up_node)
        t.drop(up)
        # (ALBERT's feed-forward rebinds its activation to the output projection's: it goes then)
        out, out_node = self._output(layer["down"], layer["norm2"], gelu, gelu_node, self.i, attention,
                                     attention_node, dropout=self.dropout,
                                     then=(gelu,) if albert or distil else ())
        # the layer's locals as it returns (`_`: the attention's weights)
        t.drop(None if albert or distil else gelu, self.weights, attention)
        self.weights = None
        t.drop(x)
        return out, out_node

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

    # The optimizer ------------------------------------------------------------------------------------------
