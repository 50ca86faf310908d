"""ModernBERT's step, op by op, as `emulation` derives the other families' (read that module first).

What ModernBERT's code does that the others' does not, each read off a recorded trace
(`tests/fixtures/allocation/compare.py`):

- Parameters: the word table and a LayerNorm (no position or type tables); every layer a pre-norm (none on
  layer 0: `nn.Identity`), one fused Wqkv, Wo, the MLP's norm, Wi (H → 2I) and Wo; a final norm; then the
  rotary embedding's buffers (`inv_freq` and `original_inv_freq` a layer type, types sorted), the head. Biases
  and norm biases only where the config's switches ask (a Linear without a bias runs `mm`: no cuBLASLt
  workspace, and its backward makes the weight's gradient before the input's).
- The rotary tables (cos, sin: s × d) made once a forward for each layer type, global first (the forward walks
  `set(layer_types)`, whose order is the string hash's: a process without PYTHONHASHSEED may take either; the
  recorder pins it, and the two orders differ only in which of two equal-sized tables is allocated first);
  `apply_rotary_pos_emb` on q and k: `q·cos + rotate_half(q)·sin`, rotate_half a `neg` and a `cat` (its
  backward: views of the gradient to the neg and to a slice, each slice's gradient a zeros of the whole).
- The sliding-window mask of the local layers (every layer but each third) where it is not all ones (s ≥ 64):
  made once by `masking_utils` (aranges, |q − kv| ≤ w, and-ed, a boolean (s, s)); eager attention gets it as a
  float (b, 1, s, s) bias at once, sdpa converts it in every local layer (`where`; for the memory-efficient
  kernel, float32, padded to a multiple of 8 columns; cuDNN's, 16 bits, takes it as it is) and the kernel saves it.
  Given a padding mask, `masking_utils` makes both masks whatever the layers' types: the global layers' as BERT's
  (`_padding_mask`) and the window's and-ed with the padding; the model holds them (and the embeddings' output, in
  its mask arguments) until it returns.
- Wqkv's output unbound into q, k, v (its backward stacks the three gradients); the MLP's Wi output chunked into
  the input and the gate, `gelu(input) · gate` (the chunk's backward concatenates).
- Dropouts are 0 in ModernBERT's configs (a config with others is refused by `covers`): nothing runs for them.
- In 16 bits: the rotary tables computed in float32 (a float32 copy of inv_freq) and cast down; q and k copied
  to float32 by each `x.float()`, rotated, cast back; eager softmax in float32 (bfloat16 cast up first, float16
  through softmax's half-to-float), the probabilities cast back; the masked LM's loss on float32 logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from ..config import BertConfig
from .emulation import BertRun
from .emulation_heads import Head
from .method import Method
from .symbols import GLOBAL_EVERY, HALF_WINDOW
from .tape import (
    FLOAT,
    LONG,
    AttentionCopies,
    Node,
    Pair,
    Param,
    Rule,
    Storage,
    Tape,
    View,
    view_strides,
)
from .workload import Workload


class ModernBertRun(BertRun):
    """ModernBertModel and ModernBertFor{MaskedLM,SequenceClassification,TokenClassification,QuestionAnswering,
    MultipleChoice}, `classifier_pooling: cls`."""

    LAYER = "ModernBertEncoderLayer"
    LOOKUP_ADAPTERS = False  # (its embeddings are its own: LoRA on them is not derived yet)

    @staticmethod
    def refuses(config: BertConfig, workload: Workload, method: Method | None = None) -> str | None:
        if config.head == "multiple-choice":
            return ("ModernBERT's multiple choice: the [CLS] rows are picked by a tensor index (an item() the "
                    "recorder cannot run without data), so its order is not derived yet")
        return None

    def _setup(self) -> None:
        t, c, h, i = self.tape, self.c, self.h, self.i
        self.dropout, self.bias, self.qa_loss_function, self.lm_upcast = False, None, True, True
        self.d = h // self.heads
        self.local = [index % GLOBAL_EVERY != 0 for index in range(c.num_hidden_layers)]
        # the sliding-window mask is not all ones: the model makes it (whatever its layers' types: one layer too)
        self.window = self.s >= HALF_WINDOW

        def linear(inputs: int, outputs: int, bias: bool) -> Pair:
            return Param(t, outputs * inputs * self.f), Param(t, outputs * self.f) if bias else None

        def norm() -> Pair:
            return Param(t, h * self.f), Param(t, h * self.f) if c.norm_bias else None

        def flat(*pairs: Pair) -> list[Param]:
            return [param for pair in pairs for param in pair if param is not None]

        self.word = Param(t, c.vocab_size * h * self.f)
        self.embedding_norm = norm()
        params = [self.word, *flat(self.embedding_norm)]
        self.modern_layers: list[dict[str, Pair]] = []
        for index in range(c.num_hidden_layers):
            layer = {"norm1": norm()} if index else {}  # (layer 0's attention norm: nn.Identity)
            layer["qkv"] = linear(h, 3 * h, c.attention_bias)
            layer["o"] = linear(h, h, c.attention_bias)
            layer["norm2"] = norm()
            layer["up"] = linear(h, 2 * i, c.mlp_bias)
            layer["down"] = linear(i, h, c.mlp_bias)
            self.modern_layers.append(layer)
            params += flat(*layer.values())
        self.final_norm = norm()
        params += flat(self.final_norm)
        for _ in range(2 * (1 + any(self.local))):  # inv_freq, original_inv_freq: d/2 floats a layer type
            t.new(self.d // 2 * self.f)
        if not self.bare:  # ModernBertPredictionHead: dense (classifier_bias), GELU, norm
            self.transform, self.transform_norm = linear(h, h, c.classifier_bias), norm()
            params += flat(self.transform, self.transform_norm)
        if self.mlm:  # the decoder: its weight the word table, a bias of its own if decoder_bias
            self.lm_bias = Param(t, c.vocab_size * self.f) if c.decoder_bias else None
            params += [self.lm_bias] if self.lm_bias else []
        elif not self.bare:
            self.classifier = linear(h, 1 if self.choices else c.num_labels, True)
            params += flat(self.classifier)
        self.params = params
        self._inputs()
        self.states = []

    # Forward ------------------------------------------------------------------------------------------------
    def _forward(self) -> Head:
        t, n, h, s = self.tape, self.n, self.h, self.s
        positions = t.new(s * LONG)  # arange(s)
        words, words_node = self._lookup(self.word, self.ids, n, h)
        words_node = self._input_leaf(words, words_node)
        x, x_node = self._layer_norm(words, words_node, self.embedding_norm)
        embedded = t.hold(x)  # (the model's local until it returns)
        t.drop(words)
        # the global layers' mask and the local layers' (with a padding mask both; without, the window's only
        # where it is not all ones; whatever the layers' types, a model of one global layer too)
        masks: tuple[Storage | None, Storage | None] = (None, None)
        if self.w.padding_mask:
            element = self._element(x)
            masks = self._padding_mask(element), self._window_mask(element)
        elif self.window:
            masks = None, self._window_mask(self.f)
        tables = [self._rotary() for _ in range(1 + any(self.local))]  # global, then local
        for layer, local in zip(self.modern_layers, self.local, strict=True):
            if self.checkpointing:
                run = partial(self._modern_layer, layer, x_node=x_node, table=tables[local], mask=masks[local])
                x, x_node = self._checkpointed(run, x, masks[local], *tables[local])
            else:
                x, x_node = self._modern_layer(layer, x, x_node, tables[local], masks[local])
        out, out_node = self._layer_norm(x, x_node, self.final_norm)
        t.drop(x)
        t.drop(positions, embedded, *masks, *(table for pair in tables for table in pair))  # the model's locals
        if self.bare:
            return self._bare(out, out_node)
        if self.mlm:
            return self._mlm(out, out_node)
        rows = self.n if self.tokens or self.qa else self.b
        if self.choices:  # the [CLS] rows gathered by index: arange(b'), a zero position
            indices, zero = t.new(self.b * LONG), t.new(LONG)
            pooled = t.new(self.b * h * self.f)
            pooled_node = t.node(self._grads(n * h * self.f), [out_node], [indices, zero])
            t.drop(out)
            x, x_node, select = pooled, pooled_node, 0
        else:
            x, x_node, select = out, out_node, 0 if rows == n else n * h
        act, act_node = self._dense_activation(self.transform, x, x_node, rows, h, h, select=select, keep=True)
        normed, norm_node = self._layer_norm(act, act_node, self.transform_norm, rows=rows)
        t.drop(act)
        if self.qa:
            answer = self._question_answering(normed, norm_node)
            t.drop(x)  # (the model's output, the head's until it returns)
            return answer
        labels = 1 if self.choices else self.c.num_labels
        logits, head = self._dense(self.classifier, normed, norm_node, rows, labels)
        if not self.train:
            t.drop(x, normed)
            return None, (logits,), head
        if self.choices:
            loss, loss_node = self._cross_entropy(head, self.examples, self.w.choices)
        elif self.tokens:
            loss, loss_node = self._cross_entropy(head, rows, labels)
        else:
            loss, loss_node = self._classification_loss(head, rows, labels, logits)
        t.drop(x, normed)  # (the head's locals as it returns)
        return loss, (logits,), loss_node

    def _lm_logits(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The prediction head (dense, GELU, norm) and the decoder (the word table, its bias if any)."""
        t, n, h = self.tape, self.n, self.h
        act, act_node = self._dense_activation(self.transform, x, x_node, n, h, h, keep=True)  # (`_mlm` releases x)
        normed, norm_node = self._layer_norm(act, act_node, self.transform_norm)
        t.drop(act)
        logits, node = self._dense((self.decoder or self.word, self.lm_bias), normed, norm_node, n, self.c.vocab_size)
        t.drop(normed)
        return logits, node

    def _window_mask(self, element: int) -> Storage:
        """The local layers' sliding-window mask (`masking_utils`): the batch and head aranges, the keys' and
        queries' positions (each arange + offset), |q − kv| ≤ w and-ed with ones, then with kv ≥ 0 (a boolean
        (s, s), broadcast over the batch); given a padding mask (its booleans first), and-ed with ones again and
        with the padding gathered at (batch, kv), a boolean (b, 1, s, s); eager attention's as a float bias
        (b, 1, s, s) of `element` bytes."""
        t, b, s, n = self.tape, self.b, self.s, self.n
        padded = self.w.padding_mask
        cast = t.new(n) if padded else None
        positions = self._mask_positions()
        outer = t.new(1) if padded else None
        ones = t.new(1)
        distance = t.new(s * s * LONG)
        absolute = t.new(s * s * LONG)
        t.drop(distance)
        near = t.new(s * s)
        t.drop(absolute)
        both = t.new(s * s)
        t.drop(near, ones)
        valid = t.new(s)
        mask = t.new(s * s)
        t.drop(valid, both)
        if padded:
            anded = t.new(s * s)
            t.drop(mask, outer)
            gathered = t.new(n)
            mask = t.new(b * s * s)
            t.drop(gathered, anded)
        t.drop(*positions)
        return self._float_bias(mask, cast, element)

    def _rotary(self) -> tuple[Storage, Storage]:
        """One layer type's rotary table, in float32: the positions as floats times inv_freq (a float32 copy of a
        16-bit buffer), concatenated with itself, cos and sin (each times the attention scaling: a new tensor),
        then cast to a 16-bit model's dtype."""
        t, s, d = self.tape, self.s, self.d
        positions = t.new(s * FLOAT)
        inverse = t.new(d // 2 * FLOAT) if self.f != FLOAT else None  # inv_freq.to(dtype=float)
        freqs = t.new(s * (d // 2) * FLOAT)
        t.drop(positions, inverse)
        emb = t.new(s * d * FLOAT)
        made = []
        for _ in range(2):  # cos, then sin
            raw = t.new(s * d * FLOAT)
            made.append(t.new(s * d * FLOAT))
            t.drop(raw)
        if self.f == FLOAT:
            t.drop(freqs, emb)
            return made[0], made[1]
        cast = t.new(s * d * self.f), t.new(s * d * self.f)  # cos.to(x.dtype), sin.to(x.dtype)
        t.drop(freqs, emb, *made)
        return cast

    def _modern_layer(self, layer: dict[str, Pair], x: Storage, x_node: Node, table: tuple[Storage, Storage],
                      mask: Storage | None) -> tuple[Storage, Node]:
        """x + attn(attn_norm(x)), then + mlp(mlp_norm(·))."""
        t, n, h, i = self.tape, self.n, self.h, self.i
        if "norm1" in layer:
            normed, normed_node = self._layer_norm(x, x_node, layer["norm1"])
        else:
            normed, normed_node = t.hold(x), x_node
        qkv, qkv_node = self._dense(layer["qkv"], normed, normed_node, n, 3 * h)
        # (its backward: a stack, viewed back to (b, s, 3H): a view, which a second gradient is summed apart from)
        unbind = t.node(self._cat_backward(n * 3 * h * self.lp, viewed=True), [qkv_node], inputs=3)
        q_view, k_view, v_view = (t.node(self._pass(), [(unbind, slot)]) for slot in range(3))
        q, q_node = self._rotate(q_view, table)
        k, k_node = self._rotate(k_view, table)
        if self.lp != FLOAT:  # q_embed.to(original_dtype), k_embed.to(…): 16-bit copies, the float32 ones go
            narrow = t.new(n * h * self.lp), t.new(n * h * self.lp)
            casts = t.node(self._grads(n * h * FLOAT), [q_node]), t.node(self._grads(n * h * FLOAT), [k_node])
            t.drop(q, k)
            (q, k), (q_node, k_node) = narrow, casts
        v = t.hold(qkv)
        merged, merge = self._attention(q, q_node, k, k_node, v, v_view, mask)
        attended, attended_node = self._dense(layer["o"], merged, merge, n, h)
        t.drop(normed, qkv, q, k, v, merged)  # the attention's locals, as it returns
        # (autocast: the 16-bit attention added to the float32 stream, its gradient cast down)
        cast_down = (0, self._narrowed(n * h))
        summed = t.new(n * h * self.f)
        sum_node = t.node(self._add_backward(narrow=cast_down), [x_node, attended_node])
        normed2, norm2_node = self._layer_norm(summed, sum_node, layer["norm2"])
        up, up_node = self._dense(layer["up"], normed2, norm2_node, n, 2 * i)
        chunk = t.node(self._cat_backward(n * 2 * i * self.lp), [up_node], inputs=2)  # (input, gate: views of up)
        gelu, gelu_node = self._gelu(up, (chunk, 0), view=n * i * self.lp)
        gated, gated_node = self._multiply(gelu, gelu_node, up, (chunk, 1), n * i * self.lp)
        t.drop(gelu)
        down, down_node = self._dense(layer["down"], gated, gated_node, n, h, inputs=i)
        t.drop(gated, up, normed2)  # (the MLP's temporaries and locals, then its argument)
        out = t.new(n * h * self.f)
        out_node = t.node(self._add_backward(narrow=cast_down), [sum_node, down_node])
        # (eager attention's weights, returned with its output, are the layer's until it returns: first to go
        # where nothing saved them, the attention needing no gradient though what follows it does)
        if out_node.live and t.packing is None:
            t.drop(self.weights, down, summed, attended)
        else:  # (nothing saved)
            t.drop(self.weights, attended, summed, down)
        self.weights = None
        t.drop(x)  # (the caller's name, rebound)
        return out, out_node

    def _attention(self, q: Storage, q_node: Node, k: Storage, k_node: Node, v: Storage, v_node: Node,
                   mask: Storage | None) -> tuple[Storage, Node]:
        """Eager attention (v a view of Wqkv's output: its reshape copies unless one sequence or one head), or
        sdpa's memory-efficient kernel, given the local layers' mask as a float bias made here."""
        t, b, heads, s, d = self.tape, self.b, self.heads, self.s, self.d
        copies = AttentionCopies(b, heads, s, d)
        if self.eager:
            layout = (b, heads, s, d), (s * 3 * self.h, d, 3 * self.h, 1)
            v_copy = view_strides(*layout, (b * heads, s, d)) is None
            return self._eager_attention(q, q_node, k, k_node, v, v_node, copies, mask, v_copy, softmax32=True)
        bias = self._mask_bias(mask) if mask is not None else None
        out, node = self._fused_attention(q, q_node, k, k_node, v, v_node, bias)
        t.drop(bias)
        return out, node

    def _rotate(self, view: Node, table: tuple[Storage, Storage]) -> tuple[Storage, Node]:
        """`x·cos + rotate_half(x)·sin` on q or k (b, A, s, d), in float32: a 16-bit x is copied by each
        `x.float()` (two), their gradients cast back; rotate_half slices x in halves, negates the second and
        concatenates."""
        t, size = self.tape, self.n * self.h * FLOAT
        cos, sin = table
        copy, copy_node = self._upcast(view, self.n * self.h)
        plain = t.new(size)
        plain_node = t.node(self._grads(size), [copy_node], [cos])
        t.drop(copy)
        copy, copy_node = self._upcast(view, self.n * self.h)
        first = t.node(self._grads(size), [copy_node])  # x[..., :d/2]: its gradient zeros of the whole, filled
        second = t.node(self._grads(size), [copy_node])  # x[..., d/2:]
        negated = t.new(size // 2)
        neg_node = t.node(self._grads(size // 2), [second])
        rotated = t.new(size)
        t.drop(negated, copy)  # (rotate_half's locals as it returns: views of the copy)
        cat_node = t.node(self._halves(size // 2), [neg_node, first])
        turned = t.new(size)
        t.drop(rotated)
        turned_node = t.node(self._grads(size), [cat_node], [sin])
        out = t.new(size)
        t.drop(plain, turned)
        return out, t.node(self._add_backward(), [plain_node, turned_node])

    @staticmethod
    def _halves(size: int) -> Rule:
        """A cat's backward: its inputs' gradients are views of its own (each holds it)."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            base = given.base if isinstance(given, View) else given
            halves = [t.hold(View(base, size)), t.hold(View(base, size))]
            t.drop(given)
            t.release(node)
            return halves
        return rule
