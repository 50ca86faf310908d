"""Attention as each kernel allocates it: eager attention (its scores, softmax, dropout and context, and under
autocast the float32 softmax), sdpa's memory-efficient and cuDNN kernels (their outputs, log-sum-exp and
backward workspaces), and the masks they read (padding, causal, a float bias padded to sdpa's alignment).
"""

from __future__ import annotations

from collections.abc import Sequence

from .emulation_ops import op
from .emulation_peft import Linears
from .tape import (
    FLOAT,
    LONG,
    MASK_ALIGNMENT,
    AttentionCopies,
    Node,
    Rule,
    Storage,
    Tape,
    efficient_backward_workspace,
)


class Attention(Linears):
    """The attention kernels and masks of BERT's code and the families built like it."""

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

    @op("attention")
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
        if not (t.grad and any(node.live for node in (q_node, k_node, v_node))):  # (no log-sum-exp without a
            return out, t.node(self._efficient_backward(), [])  # backward: inference, or nothing below trains)
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

    @op("attention")
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
        bmm1 = t.node(self._bmm_backward(n * h * lp, n * h * lp), [q_pass, k_pass], [(k_operand, 0), (q_operand, 1)])
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
                      [(v_operand, 0), (dropped, 1)])  # (bmm saves its second operand first)
        # (whether it kept the probabilities: not in inference, a checkpointed forward, or where v wants no
        # gradient)
        saving = any(kept is dropped for kept in bmm2.saved)
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
