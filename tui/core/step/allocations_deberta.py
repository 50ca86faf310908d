"""DeBERTa-v2's step (v2 and v3 configs), op by op, as `emulation` derives BERT's (read that module first).

What DeBERTa's code does that BERT's does not, each read off a recorded trace
(`tests/fixtures/allocation/compare.py`):

- The model makes an all-ones float mask (b, s) and zero token types (b, s) itself; the embeddings add what the
  config asks (an absolute position table, else a zeros_like the step never reads; token types), project E → H
  without a bias, normalize, multiply by the mask (which it saves) and drop out. The encoder makes the mask
  (b, 1, s, s) and, with relative attention, the relative positions (s, s) (`make_log_bucket_position` op by op
  where positions are bucketed) and the relative embeddings (their LayerNorm where `norm_rel_ebd` asks).
- Each layer's attention: q, k and v projected and made contiguous (b·A, s, d) (its backward copies where the
  heads' layout is not the tokens'), k transposed and divided by its scale, the scores; with relative attention
  the relative embeddings dropped out, projected by the layer's own key and query projections (`share_att_key`)
  or by pos_key_proj / pos_query_proj, repeated over the batch, and the c2p and p2c scores gathered (their
  backward: zeros, then a scatter_add) at clamped positions, scaled and summed onto the scores; the mask as a
  boolean and its negation made in every layer, masked_fill, softmax, dropout, the context made contiguous.
- Heads: the legacy MLM head (transform H → E, LayerNorm, the tied decoder) or the newer one (dense, LayerNorm, a
  product with the word table and a bias added), token classification, question answering, multiple choice
  (ContextPooler: the first token, dense, gelu, dropout, one logit a choice), one-label regression and the bare
  model. Sequence classification with labels ≥ 2 is refused: its loss keeps the labels ≥ 0 by `nonzero`, a count
  only data can tell (the recorder cannot run it).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from ..config import BertConfig
from .emulation import BertRun
from .emulation_heads import Head
from .emulation_ops import op
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
)
from .workload import Workload


class DebertaRun(BertRun):
    """DebertaV2Model and DebertaV2For{MaskedLM,TokenClassification,QuestionAnswering,MultipleChoice}, and
    DebertaV2ForSequenceClassification with one label."""

    LAYER = "DebertaV2Layer"
    LOOKUP_ADAPTERS = False  # (its embeddings are its own: LoRA on them is not derived yet)

    @staticmethod
    def refuses(config: BertConfig, workload: Workload, method: Method | None = None) -> str | None:
        if config.head == "sequence-classification" and config.num_labels > 1 and workload.train:
            return ("DeBERTa's sequence classification in training: its loss keeps the labels ≥ 0 by nonzero(), a "
                    "count only data can tell (the recorder cannot run it), so its order is not derived yet "
                    "(num_labels 1 is, and inference)")
        if config.conv_kernel_size:
            return "DeBERTa's convolution beside the first layer: its allocation order is not derived yet"
        unread = config.relative_attention and config.share_att_key and not (config.pos_att_c2p or config.pos_att_p2c)
        adapted = method is not None and any(role not in ("base", "original", "copy") and (
            ".query_proj." in name or ".key_proj." in name) for name, role, *_ in method.layout)
        if unread and adapted:
            return ("an adapter on DeBERTa's query or key projection where no score type reads the relative "
                    "embeddings they project (share_att_key, no c2p or p2c): the graph of a projection nothing reads, "
                    "its adapters' with it, is not derived yet")
        return None

    def _setup(self) -> None:
        t, c, h, i, e = self.tape, self.c, self.h, self.i, self.e
        self.disentangled = c.relative_attention
        self.c2p, self.p2c = bool(self.disentangled and c.pos_att_c2p), bool(self.disentangled and c.pos_att_p2c)
        self.span = c.position_buckets or c.max_relative_positions or c.max_position_embeddings  # att_span
        self.token_rows.add(2 * self.span)  # (the relative embeddings' projections read them as (1, 2·span, H))
        self.scale_terms = 1 + c.pos_att_c2p + c.pos_att_p2c

        def linear(inputs: int, outputs: int, bias: bool = True) -> Pair:
            return Param(t, outputs * inputs * self.f), Param(t, outputs * self.f) if bias else None

        def norm(width: int = h) -> Biased:
            return Param(t, width * self.f), Param(t, width * self.f)

        def flat(*pairs: Pair) -> list[Param]:
            return [param for pair in pairs for param in pair if param is not None]

        self.word = Param(t, c.vocab_size * e * self.f)
        params = [self.word]
        self.absolute = Param(t, c.max_position_embeddings * e * self.f) if c.position_biased_input else None
        self.token_types = Param(t, c.type_vocab_size * e * self.f) if c.type_vocab_size else None
        params += [param for param in (self.absolute, self.token_types) if param]
        self.embed_proj = linear(e, h, bias=False) if e != h else None
        self.embedding_norm = norm()
        params += flat(*([self.embed_proj] if self.embed_proj else []), self.embedding_norm)
        t.new(c.max_position_embeddings * LONG)  # the position_ids buffer
        self.deberta_layers: list[dict[str, Pair]] = []
        for _ in range(c.num_hidden_layers):
            layer = {"q": linear(h, h), "k": linear(h, h), "v": linear(h, h)}
            if self.c2p and not c.share_att_key:
                layer["pos_k"] = linear(h, h)
            if self.p2c and not c.share_att_key:
                layer["pos_q"] = linear(h, h)
            layer.update(o=linear(h, h), norm1=norm(), up=linear(h, i), down=linear(i, h), norm2=norm())
            self.deberta_layers.append(layer)
            params += flat(*layer.values())
        # the relative embeddings (and their LayerNorm) reach the loss only through c2p or p2c scores: a parameter
        # without a gradient gets no optimizer state (`unreached`; still in `named_parameters()`, which a method
        # adapts in order)
        self.rel = Param(t, 2 * self.span * h * self.f) if self.disentangled else None
        self.rel_norm = norm() if c.norm_rel_ebd else None
        built = ([self.rel] if self.rel else []) + (flat(self.rel_norm) if self.rel_norm else [])
        params += built
        if not (self.c2p or self.p2c):
            self.unreached = {id(param) for param in built}
        if self.mlm:  # cls.predictions (legacy: transform H → E, LayerNorm(E), the tied decoder with the head's
            # own bias) or lm_predictions.lm_head (dense, LayerNorm, a bias): moved children first, the head's own
            # bias listed first by the optimizer
            width = e if c.legacy else h
            self.transform, self.transform_norm = linear(h, width), norm(width)
            self.decoder_bias = Param(t, c.vocab_size * self.f)
            params += [self.decoder_bias, *flat(self.transform, self.transform_norm)]
        elif self.choices or self.c.head == "sequence-classification":  # the ContextPooler, the classifier
            self.pooler, self.classifier = linear(h, h), linear(h, 1 if self.choices else c.num_labels)
            params += flat(self.pooler, self.classifier)
        elif not self.bare:  # token classification, qa_outputs
            self.classifier = linear(h, 2 if self.qa else c.num_labels)
            params += flat(self.classifier)
        self.params = params
        self._inputs()
        self.states = []

    # Forward ------------------------------------------------------------------------------------------------
    def _forward(self) -> Head:
        t = self.tape
        # the model's attention mask (float32 ones where the batch gives none), token types
        ones = None if self.w.padding_mask else t.new(self.n * FLOAT)
        types = t.new(self.n * LONG)
        x, x_node = self._deberta_embeddings(ones, types)
        embedded = t.hold(x)  # (the model's local, `embedding_output`)
        # get_attention_mask: (b, 1, 1, s) × (b, 1, s, 1), in the mask's dtype (the batch's: int64)
        mask = t.new(self.b * self.s * self.s * (LONG if ones is None else FLOAT))
        relative = self._relative_positions() if self.disentangled else None
        rel, rel_node, unread = self._relative_embeddings() if self.disentangled else (None, None, ())
        inputs = []  # every layer's input, the encoder's until it returns (a tuple: released last first)
        for layer in self.deberta_layers:
            inputs.append(t.hold(x))
            if self.checkpointing:
                run = partial(self._deberta_layer, layer, x_node=x_node, mask=mask, relative=relative, rel=rel,
                              rel_node=rel_node)
                # (the frame keeps the relative embeddings, and with them the graph of a LayerNorm no score reads)
                x, x_node = self._checkpointed(run, x, mask, relative, rel, *unread)
            else:
                x, x_node = self._deberta_layer(layer, x, x_node, mask, relative, rel, rel_node)
        t.drop(mask, relative, *unread, rel, *reversed(inputs))  # the encoder's locals as it returns
        t.drop(ones, types, embedded)  # the model's
        return self._head(x, x_node)

    def _deberta_embeddings(self, ones: Storage | None, types: Storage) -> tuple[Storage, Node]:
        t, n, s, e, h = self.tape, self.n, self.s, self.e, self.h
        words, node = self._lookup(self.word, self.ids, n, e)
        node = self._input_leaf(words, node)
        summed: Storage = t.hold(words)
        if self.absolute:
            positions, position_node = self._lookup(self.absolute, None, s, e)  # (the buffer's slice)
            added = t.new(n * e * self.f)  # (positions (1, s, E) broadcast: their gradient summed over the batch)
            node = t.node(self._add_backward(broadcast=s * e * self.f if self.b > 1 else 0), [node, position_node])
            t.drop(summed)
            summed = added
        else:
            positions = t.new(n * e * self.f)  # zeros_like(inputs_embeds): made, never read
        token_types = None
        if self.token_types:
            token_types, types_node = self._lookup(self.token_types, types, n, e)
            added = t.new(n * e * self.f)
            node = t.node(self._add_backward(), [node, types_node])
            t.drop(summed)
            summed = added
        if self.embed_proj:  # E → H, no bias
            projected, node = self._dense(self.embed_proj, summed, node, n, h, inputs=e)
            t.drop(summed)
            summed = projected
        normed, norm_node = self._layer_norm(summed, node, self.embedding_norm)
        t.drop(summed)
        cast = t.new(n * self.f) if ones is None or self.f != FLOAT else t.hold(ones)  # mask.to(embeddings.dtype)
        masked = t.new(n * h * self.f)  # × the mask (saved: the other operand)
        mask_node = t.node(self._grads(n * h * self.f), [norm_node], [cast])
        t.drop(normed)
        out, out_node = self._dropout(masked, mask_node)
        t.drop(masked)
        t.drop(words, positions, token_types, cast)  # the function's locals, as it returns
        return out, out_node

    def _relative_positions(self) -> Storage:
        """build_relative_position: q − k as int64 (s, s), bucketed by `make_log_bucket_position` where
        position_buckets asks, op by op."""
        t, s = self.tape, self.s
        pair, pair_bool, pair_float = s * s * LONG, s * s, s * s * FLOAT  # (the buckets: float32 whatever the model)
        q_ids, k_ids = t.new(s * LONG), t.new(s * LONG)
        relative = t.new(pair)
        if self.c.position_buckets:
            sign = t.new(pair)
            below, above = t.new(pair_bool), t.new(pair_bool)
            inside = t.new(pair_bool)
            t.drop(below, above)
            mid = t.new(LONG)  # torch.tensor(mid - 1).type_as(relative_pos): to the device
            absolute = t.new(pair)
            where = t.new(pair)
            t.drop(inside, mid, absolute)
            steps = [t.new(pair_float)]  # abs_pos / mid, log, / log(…), · (mid − 1), ceil, + mid
            for _ in range(5):
                steps.append(t.new(pair_float))
                t.drop(steps[-2])
            near = t.new(pair_bool)
            cast = t.new(pair_float)  # relative_pos.type_as(log_pos)
            signed = t.new(pair_float)  # log_pos · sign
            bucket = t.new(pair_float)
            t.drop(near, cast, signed)
            t.drop(sign, where, steps[-1])  # make_log_bucket_position's locals
            t.drop(relative)
            relative = t.new(pair)  # .to(torch.long)
            t.drop(bucket)
        t.drop(q_ids, k_ids)
        return relative

    def _relative_embeddings(self) -> tuple[Storage, Node, tuple[Storage, ...]]:
        """The relative embeddings' table, through its LayerNorm where norm_rel_ebd asks; where no score reads
        them, that LayerNorm's graph goes with its output (its rstd, its mean: released first)."""
        t, rows = self.tape, 2 * self.span
        assert self.rel is not None
        if self.rel_norm is None:
            return t.hold(self.rel.data), self.rel.node, ()
        if not (self.c2p or self.p2c) and self._rel_graph():  # (no graph, in inference or frozen: they go at once)
            return self._unread_norm(rows)
        return *self._layer_norm(self.rel.data, self.rel.node, self.rel_norm, rows=rows), ()

    def _rel_graph(self) -> bool:
        """Whether the relative embeddings' LayerNorm and dropout record a graph: in training, where the table or
        the LayerNorm's parameters train (a method may freeze them)."""
        assert self.rel is not None
        return self.train and any(param.trains for param in (self.rel, *(self.rel_norm or ())) if param)

    @op("norm")
    def _unread_norm(self, rows: int) -> tuple[Storage, Node, tuple[Storage, ...]]:
        """The relative embeddings' LayerNorm where no score reads its output: its output, mean and rstd, the
        graph keeping the statistics until the output goes (then its rstd, its mean)."""
        t = self.tape
        assert self.rel is not None
        out, mean, rstd = t.new(rows * self.h * self.f), t.new(rows * FLOAT), t.new(rows * FLOAT)
        return out, self.rel.node, (rstd, mean)

    def _deberta_layer(self, layer: dict[str, Pair], x: Storage, x_node: Node, mask: Storage,
                       relative: Storage | None, rel: Storage | None, rel_node: Node | None
                       ) -> tuple[Storage, Node]:
        t, n, h, i = self.tape, self.n, self.h, self.i
        merged, merge = self._disentangled(layer, x, x_node, mask, relative, rel, rel_node)
        attention, attention_node = self._output(layer["o"], layer["norm1"], merged, merge, h, x, x_node)
        t.drop(merged)
        up, up_node = self._dense(layer["up"], attention, attention_node, n, i)
        gelu, gelu_node = self._activation(up, up_node)
        t.drop(up)
        out, out_node = self._output(layer["down"], layer["norm2"], gelu, gelu_node, i, attention, attention_node)
        t.drop(gelu, attention, x)
        return out, out_node

    def _heads(self, params: Pair, x: Storage, x_node: Node, copies: AttentionCopies, copy: int
               ) -> tuple[Storage, Node]:
        """transpose_for_scores(Linear(x)): the projection made contiguous as (b·A, s, d) (a copy unless one
        head or one token), its backward copying back where the heads' layout is not the tokens' (`copy`)."""
        t, n, h = self.tape, self.n, self.h
        projected, node = self._dense(params, x, x_node, n, h, copy=copy)
        if copies.merge_forward:
            out = t.new(n * h * self.lp)
            t.drop(projected)
            projected = out
        return projected, t.node(self._pass(), [node])

    def _disentangled(self, layer: dict[str, Pair], x: Storage, x_node: Node, mask: Storage,
                      relative: Storage | None, rel: Storage | None, rel_node: Node | None
                      ) -> tuple[Storage, Node]:
        """DisentangledSelfAttention.forward."""
        t, n, h, b, heads, s = self.tape, self.n, self.h, self.b, self.heads, self.s
        copies = AttentionCopies(b, heads, s, h // heads)
        q, q_node = self._heads(layer["q"], x, x_node, copies, copies.q_backward)
        # k's gradient: the p2c product's (contiguous) first where there is one, else the scores' (transposed)
        k, k_node = self._heads(layer["k"], x, x_node, copies, copies.q_backward if self.p2c else copies.k_backward)
        v, v_node = self._heads(layer["v"], x, x_node, copies, copies.q_backward)
        lp, pair = self.lp, b * heads * s * s
        scores_size = pair * lp
        divided = t.new(n * h * lp)  # kᵀ / scale
        divide = t.node(self._grads(n * h * lp), [k_node])
        t.product(t.thread)
        scores = t.new(scores_size)
        scores_node = t.node(self._bmm_backward(n * h * lp, n * h * lp), [q_node, divide], [(divided, 0), (q, 1)])
        t.drop(divided)
        rel_att = rel_in = rel_mask = None
        if self.disentangled:
            assert rel is not None and rel_node is not None and relative is not None
            if self.c2p or self.p2c or not self.train:  # (in eval mode dropout gives its input back)
                rel_in, rel_in_node = self._dropout(rel, rel_node)
            else:
                rel_in, rel_mask = self._unread_dropout(rel)
                rel_in_node = rel_node
            rel_att, rel_att_node = self._bias(layer, q, q_node, k, k_node, rel_in, rel_in_node)
            summed = t.new(scores_size)  # scores + rel_att (the integer 0 without c2p or p2c)
            scores_node = t.node(self._add_backward() if rel_att_node else self._pass(),
                                 [scores_node, rel_att_node])
            t.drop(scores)
            scores = summed
        merged, merge, (boolean, filled, dropped) = self._attend(scores, scores_node, v, v_node, copies)
        # the attention's locals as it returns
        t.drop(boolean, rel_mask, rel_in, q, k, v, rel_att, filled, dropped)
        return merged, merge

    @op("attention")
    def _attend(self, scores: Storage, scores_node: Node, v: Storage, v_node: Node, copies: AttentionCopies
                ) -> tuple[Storage, Node, tuple[Storage, Storage, Storage]]:
        """The attention op on the scores made (Q·Kᵀ, the relative scores added): the mask as a boolean and its
        negation, masked_fill, softmax, dropout (under autocast both in float32, the probabilities then copied
        to 16 bits for the product), P·V, the heads merged; its output and node, and the locals the caller's
        function holds until it returns (the boolean mask, the filled scores, the dropped probabilities)."""
        t, n, h, b, heads, s = self.tape, self.n, self.h, self.b, self.heads, self.s
        lp, pair = self.lp, b * heads * s * s
        scores_size = pair * lp
        boolean = t.new(b * s * s)  # attention_mask.bool()
        negated = t.new(b * s * s)  # ~mask, saved by masked_fill
        filled = t.new(scores_size)
        fill_node = t.node(self._grads(scores_size), [scores_node], [negated])
        t.drop(negated, scores)
        cast = None
        if self.amp:  # softmax and dropout in float32
            probs, softmax = self._autocast_softmax(fill_node, pair, lp)
            dropped, drop = self._dropout(probs, softmax, FLOAT)
            t.drop(probs)  # (`attention_probs` rebound to the dropout's output)
            cast = t.new(scores_size)  # (the product's 16-bit copy of the probabilities)
            drop = t.node(self._grads(pair * FLOAT), [drop])
        else:
            probs = t.new(scores_size)
            softmax = t.node(self._grads(scores_size), [fill_node], [probs])
            dropped, drop = self._dropout(probs, softmax)
            t.drop(probs)  # (`attention_probs` rebound to the dropout's output)
        t.product(t.thread)
        context = t.new(n * h * lp)
        bmm = t.node(self._bmm_backward(scores_size, n * h * lp), [drop, v_node], [(v, 0), (cast or dropped, 1)])
        t.drop(cast)
        merged = t.new(n * h * lp) if copies.merge_forward else t.hold(context)
        merge = t.node(self._grads(n * h * lp) if copies.merge_backward else self._pass(), [bmm])
        t.drop(context)
        return merged, merge, (boolean, filled, dropped)

    @op("dropout")
    def _unread_dropout(self, rel: Storage) -> tuple[Storage, Storage | None]:
        """Dropout of the relative embeddings where nothing reads its output: its graph (its mask) goes with the
        output (a checkpointed forward's graph keeps nothing, nor one whose input needs no gradient: the mask
        goes at once)."""
        t = self.tape
        out, mask = t.new(rel.nbytes), t.new(rel.nbytes // self.f)
        if t.packing is not None or not self._rel_graph():
            t.drop(mask)
            return out, None
        return out, mask

    def _bias(self, layer: dict[str, Pair], q: Storage, q_node: Node, k: Storage, k_node: Node,
              rel: Storage, rel_node: Node) -> tuple[Storage | None, Node | None]:
        """disentangled_attention_bias: the relative embeddings projected (by the layer's own projections where
        share_att_key, else pos_key_proj and pos_query_proj), made contiguous per head, repeated over the batch;
        c2p and p2c gathered at clamped positions, scaled, summed (`score`, from the integer 0)."""
        t, b, heads, s, rows = self.tape, self.b, self.heads, self.s, 2 * self.span
        wanted = [("pos_q", "q", self.p2c), ("pos_k", "k", self.c2p)] if self.c.share_att_key else [
            ("pos_k", "pos_k", self.c2p), ("pos_q", "pos_q", self.p2c)]
        self._unread: list[Node] = []  # the graphs of projections nothing reads, dropped with them
        projections = {name: self._positions(layer[params], rel, rel_node, used)
                       for name, params, used in wanted if self.c.share_att_key or used}
        scores_size, pair, product_size = b * heads * s * s * self.lp, s * s * LONG, b * heads * s * rows * self.lp
        score: Storage | None = None
        score_node: Node | None = None
        kept = []  # each kind's positions and gathered scores, the function's locals until it returns
        for kind in [kind for kind, on in (("c2p", self.c2p), ("p2c", self.p2c)) if on]:
            if kind == "c2p":  # q · pos_kᵀ, then clamp(relative + span, 0, 2·span − 1)
                (positions, positions_node), (states, states_node) = projections["pos_k"], (q, q_node)
                product, product_node = self._relative_product(states, states_node, positions, positions_node)
                shifted = t.new(pair)
                index = t.new(pair)
                t.drop(shifted)
            else:  # clamp(−relative + span, …), then k · pos_qᵀ
                negated = t.new(pair)
                shifted = t.new(pair)
                t.drop(negated)
                index = t.new(pair)
                t.drop(shifted)
                (positions, positions_node), (states, states_node) = projections["pos_q"], (k, k_node)
                product, product_node = self._relative_product(states, states_node, positions, positions_node)
            gather = t.new(scores_size)
            gather_node = t.node(self._gather_backward(product_size), [product_node], [index, product])
            t.drop(product)
            kept += [index, gather]
            if kind == "p2c":  # .transpose(-1, -2)
                gather_node = t.node(self._pass(), [gather_node])
            divided = t.new(scores_size)  # / scale
            divide = t.node(self._grads(scores_size), [gather_node])
            if score_node is None:  # 0 + …: a new tensor
                score = t.new(scores_size)
                score_node = t.node(self._pass(), [divide])
            else:  # score += …: in place
                score_node = t.node(self._add_backward(), [score_node, divide])
            t.drop(divided)
        # the function's locals as it returns: the projections (one share_att_key made for nothing goes), each
        # kind's positions and gathered scores
        t.drop(*(projection[0] for projection in projections.values()), *kept)
        for graph in self._unread:
            t.release(graph)
        self._unread = []
        return score, score_node

    @op("product")
    def _relative_product(self, states: Storage, states_node: Node, positions: Storage,
                          positions_node: Node | None) -> tuple[Storage, Node]:
        """bmm(q or k (b·A, s, d), the projected positions transposed (b·A, d, 2·span))."""
        t, b, h, rows = self.tape, self.b, self.h, 2 * self.span
        t.product(t.thread)
        product = t.new(b * self.heads * self.s * rows * self.lp)
        return product, t.node(self._bmm_backward(self.n * h * self.lp, b * rows * h * self.lp),
                               [states_node, positions_node], [(positions, 0), (states, 1)])

    def _positions(self, params: Pair, rel: Storage, rel_node: Node, used: bool) -> tuple[Storage, Node | None]:
        """A projection of the relative embeddings (2·span rows, one sequence), made contiguous per head (a copy
        unless one head), repeated b times; its backward sums the repeats, copies back, then the Linear. Where
        nothing reads it (share_att_key without that score type) it is made and dropped with its graph (`_unread`:
        under autocast that graph holds the input's 16-bit copy)."""
        t, h, heads, b, rows = self.tape, self.h, self.heads, self.b, 2 * self.span
        # (its gradient comes back transposed from one sequence's product, which views back; summed over b > 1
        # sequences it is contiguous, and only a copy can merge its heads)
        projected, node = self._dense(params, rel, rel_node, rows, h, copy=heads > 1 and b > 1)
        contiguous = t.new(rows * h * self.lp) if heads > 1 else t.hold(projected)
        t.drop(projected)
        repeated = t.new(b * rows * h * self.lp)
        t.drop(contiguous)
        if not used:
            self._unread.append(node)
            return repeated, None
        chain = t.node(self._pass(), [node])
        return repeated, t.node(self._sum_repeats(rows * h * self.lp) if b > 1 else self._pass(), [chain])

    @staticmethod
    def _sum_repeats(size: int) -> Rule:
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            summed = t.new(size)
            t.drop(given)
            t.release(node)
            return [summed]
        return rule

    @staticmethod
    def _gather_backward(size: int) -> Rule:
        """gather's backward: zeros of the input's size, scatter_add into a new one, the zeros released; then
        the index and the input it saved."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            zeros = t.new(size)
            out = t.new(size)
            t.drop(zeros, given)
            t.release(node)
            return [out]
        return rule

    def _lm_logits(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The legacy head as BERT's (`emulation`); the newer one: dense, gelu, LayerNorm, then a product with the
        word table (mm) and its bias added (a new tensor; the bias's gradient summed over the tokens)."""
        if self.c.legacy:
            return super()._lm_logits(x, x_node)
        t, n, h, vocab = self.tape, self.n, self.h, self.c.vocab_size
        gelu, gelu_node = self._dense_activation(self.transform, x, x_node, n, h, h, keep=True)  # (`_mlm` releases x)
        normed, norm_node = self._layer_norm(gelu, gelu_node, self.transform_norm)
        t.drop(gelu)
        product, product_node = self._dense((self.decoder or self.word, None), normed, norm_node, n, vocab)
        logits = t.new(n * vocab * self.f)  # (autocast: the 16-bit product and the float32 bias, a float32 sum)
        node = t.node(self._add_backward(broadcast=vocab * self.f, narrow=(self._narrowed(n * vocab), 0)),
                      [product_node, self.decoder_bias.node])
        t.drop(product, normed)
        return logits, node

    def _sequence_head(self, x: Storage, x_node: Node) -> Head:
        """ContextPooler (the first token, a Linear, gelu saving its input), dropout, the classifier; one logit a
        choice (cross-entropy over the choices) or one label (MSE)."""
        t, rows, h = self.tape, self.b, self.h
        classes = 1 if self.choices else self.c.num_labels
        act, act_node = self._dense_activation(self.pooler, x, x_node, rows, h, h, select=self.n * h, keep=True)
        dropped, drop_node = self._dropout(act, act_node, self.lp)
        t.drop(act)
        logits, head = self._dense(self.classifier, dropped, drop_node, rows, classes)
        # (the encoder's output and `pooled_output`, the dropout's: the head's until it returns, where the
        # classifier's backward does not keep them)
        if not self.train:
            t.drop(x, dropped)
            return None, (logits,), head
        if self.choices:
            loss, loss_node = self._cross_entropy(head, self.examples, self.w.choices)
            t.drop(x, dropped)
            return loss, (logits,), loss_node
        cast, head = self._upcast(head, rows)  # logits.view(-1).to(labels.dtype): the copy the outputs keep
        if cast is not None:
            t.drop(logits)
            logits = cast
        loss, loss_node = self._classification_loss(head, rows, classes, logits, FLOAT)
        t.drop(x, dropped)
        return loss, (logits,), loss_node
