"""The Linears a family's forward runs, with what a fine-tuning method puts beside them: `_dense` (a Linear, its
activation), and peft's forwards op by op — `lora.Linear` (`_lora`), DoRA (`_dora`), `lora.Embedding` on the word
embeddings (`_lookup_lora`), `ia3.Linear` (`_ia3`) — over `emulation_ops.Run`'s op rules (`_product`, `_grads`,
...)."""

from __future__ import annotations

from collections.abc import Sequence

from .emulation_ops import Run, op
from .tape import FLOAT, HEADS_VIEW, Node, Pair, Param, Rule, Storage, Tape


class Linears(Run):
    """A run's Linears, plain or adapted (what `emulation_methods.adapt` attached to their weights)."""

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

    @op("linear")
    def _dense(self, params: Pair, x: Storage, x_node: Node, rows: int, outputs: int, inputs: int = 0,
               copy: int = 0, select: int = 0) -> tuple[Storage, Node]:
        """A Linear (`_product`), and what the method put beside it: IA3's vector (`_ia3`), LoRA's adapters
        (`_lora`), with DoRA's magnitude (`_dora`)."""
        adapters = params[0].adapters
        if params[0].ia3 is not None:
            return self._ia3(params, x, x_node, rows, outputs, inputs or self.h, copy, select)
        if adapters is None:
            return self._product(params, x, x_node, rows, outputs, inputs, bool(copy), select)
        if select:  # (the first token's view, read by the base layer and the adapters: a node of its own)
            x_node = self.tape.node(self._grads(select * self.f), [x_node])
        # (q's, k's, v's gradient copied where it is not contiguous: at the sum's view to the heads, a node of its
        # own; or where it is viewed flat, in the base layer's and lora_B's own views, the scaling keeping the
        # gradient's layout)
        flat = bool(copy) and copy != HEADS_VIEW
        out, node = self._product(params, x, x_node, rows, outputs, inputs, flat, select, selected=True)
        view = rows * (inputs or self.h) * self.f if select else 0
        if params[0].magnitude is not None:
            out, node = self._dora(params, x, x_node, rows, inputs or self.h, outputs, out, node, flat, view, select)
        else:
            out, node = self._lora(adapters, x, x_node, rows, inputs or self.h, outputs, out, node, flat, view,
                                   select)
        if copy == HEADS_VIEW:
            node = self.tape.node(self._grads(out.nbytes), [node])
        return out, node

    def _ia3(self, params: Pair, x: Storage, x_node: Node, rows: int, outputs: int, inputs: int, copy: int,
             select: int) -> tuple[Storage, Node]:
        """peft's `ia3.Linear.forward`: `ia3_scaling = 1 * ia3_l.flatten()` (a new float32 vector), then for a
        feed-forward module `base_layer((x.to(float32) * ia3_scaling).to(x's dtype))`, for another
        `(base_layer(x) * ia3_scaling).to(its dtype)`: the product float32 (a 16-bit tensor times the float32
        vector), cast back where the model's element is narrower; its backward sums the vector's gradient down and
        casts the other's."""
        t = self.tape
        vector, feedforward = params[0].ia3  # type: ignore[misc]
        width = inputs if feedforward else outputs
        scaling = t.new(width * FLOAT)
        scaling_node = t.node(self._grads(width * FLOAT), [vector.node])
        flat = bool(copy) and copy != HEADS_VIEW
        if feedforward:
            if select:
                raise ValueError("IA3 on the pooler: its allocation order is not derived yet")
            own = x.nbytes // (rows * inputs)
            x, x_node, wide = self._float32(x, x_node, rows * inputs)
            scaled, node = self._scaled(x, x_node, scaling, scaling_node, rows * inputs, width, FLOAT, own)
            out, node = self._product(params, scaled, node, rows, outputs, inputs, flat)
            t.drop(wide, scaled, scaling)  # (the forward's locals, as it returns)
        else:
            result, node = self._product(params, x, x_node, rows, outputs, inputs, flat, select)
            own = result.nbytes // (rows * outputs)
            out, node = self._scaled(result, node, scaling, scaling_node, rows * outputs, width, own, own)
            t.drop(result, scaling)
        if copy == HEADS_VIEW:
            node = t.node(self._grads(out.nbytes), [node])
        return out, node

    def _scaled(self, x: Storage, x_node: Node, scaling: Storage, scaling_node: Node, size: int, width: int,
                own: int, back: int) -> tuple[Storage, Node]:
        """`(x * scaling).to(back)`: `size` elements of `own` bytes times a float32 vector of `width`, the product
        float32, cast to `back` bytes an element where they are fewer (the product goes as the cast returns)."""
        t = self.tape
        product = t.new(size * FLOAT)
        node = t.node(self._broadcast_backward(size, width, own, 1), [x_node, scaling_node],
                      [(scaling, 0), (x, 1)])
        if back == FLOAT:
            return product, node
        cast = t.new(size * back)
        node = t.node(self._grads(size * FLOAT), [node])
        t.drop(product)
        return cast, node

    def _broadcast_backward(self, size: int, width: int, element: int, vector: int) -> Rule:
        """A product of `size` elements and a float32 vector of `width` (operand `vector`: 0 or 1), float32 out
        (IA3's scaling, DoRA's magnitude): mul's backward makes the second operand's gradient first, then the
        first's; the engine checks them in order, the vector's summed down to it, the other's cast to its
        `element`; each only where wanted."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            grads: list[Storage | None] = [None, None]
            for i in (1, 0):
                if node.wants(i):
                    grads[i] = t.new(size * FLOAT)
            self._applied(t, node)
            for i, grad in enumerate(grads):
                if grad is not None and (i == vector or element != FLOAT):
                    made = t.new(width * FLOAT if i == vector else size * element)
                    grads[i] = t.view(made) if i == vector else made  # (the vector's: summed down, a view)
                    t.drop(grad)
            self._finish(t, given, node)
            return grads
        return rule

    def _sub_backward(self, size: int, own: int, element: int, bias: int) -> Rule:
        """`result - bias` (DoRA's base output less its bias, broadcast over the rows, in `element`s): the
        gradient handed on to the result (cast to its `own` element where it was narrower), and, where the bias
        trains, its negation summed down to the bias (a view); the negation goes last."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            negated = t.new(size * element) if node.wants(1) else None
            grads: list[Storage | None] = [None, None]  # (the engine checks them in order: cast, then summed)
            if node.wants(0):
                grads[0] = t.new(size * own) if own != element else t.hold(given)
            if negated is not None:
                grads[1] = t.view(t.new(bias))
            self._finish(t, given, node)
            t.drop(negated)
            return grads
        return rule

    def _float32(self, x: Storage, x_node: Node, size: int, view: int = 0) -> tuple[Storage, Node, Storage | None]:
        """`x.to(float32)` ahead of the adapters (peft's `_cast_input_dtype`, IA3's cast): a copy of `size`
        elements where x is 16-bit, its gradient cast back (`view`: the bytes of the view of x read, the first
        tokens'); the copy is given back as the forward's local to release, None where x is float32 already."""
        if (view or x.nbytes) == size * FLOAT:
            return x, x_node, None
        wide = self.tape.new(size * FLOAT)
        return wide, self.tape.node(self._grads(view or x.nbytes), [x_node]), wide

    def _lora(self, adapters: tuple[Param, Param], x: Storage, x_node: Node, rows: int, inputs: int, outputs: int,
              result: Storage, result_node: Node, copy: bool = False, view: int = 0, select: int = 0
              ) -> tuple[Storage, Node]:
        """peft's `lora.Linear.forward` after its base layer made `result`: `x` cast to the adapters' float32
        (`_cast_input_dtype`: a copy of a 16-bit input, the forward's local until it returns), dropout (p > 0),
        `lora_B(lora_A(·))` (two products without bias: in float32, or under autocast in 16 bits), `* scaling`,
        `result + ·` (in the wider element: a 16-bit model's sum is float32), `.to(result's dtype)` (a copy
        where the sum widened); each temporary of the expression goes as the next op returns."""
        t = self.tape
        a, b = adapters
        rank = a.data.nbytes // (inputs * FLOAT)
        x, x_node, wide = self._float32(x, x_node, rows * inputs, view)
        if self.method is not None and self.method.dropout and self.train:
            dropped, dropped_node = self._dropout(x, x_node, FLOAT, 0 if wide else view)
        else:
            dropped, dropped_node = t.hold(x), x_node
        # (lora_A reads the first tokens' view as it is where nothing copied it: under autocast its 16-bit copy)
        viewed = select if dropped is x and not wide else 0
        low, low_node = self._product((a, None), dropped, dropped_node, rows, rank, inputs, select=viewed,
                                      element=FLOAT, selected=True)
        t.drop(dropped)
        up, up_node = self._product((b, None), low, low_node, rows, outputs, rank, copy, element=FLOAT)
        t.drop(low)
        summed, node, _ = self._lora_sum(result, result_node, up, up_node, rows * outputs, temporary=True)
        t.drop(wide)
        return summed, node

    def _lookup_lora(self, table: Param, result: Storage, result_node: Node, ids: Storage, rows: int, width: int
                     ) -> tuple[Storage, Node]:
        """peft's `lora.Embedding.forward` after its base lookup made `result` (`rows` of `width`): its
        `_embedding_forward` (peft 0.22) `F.embedding(ids, lora_embedding_A.T)` (float32, `rows × r`: its backward
        a `V × r` table, which the parameter's AccumulateGrad copies to its own `r × V` layout) `@
        lora_embedding_B.T` (a product: under autocast in 16 bits), returned; then `* scaling`, `result + ·`,
        `.to(result's dtype)`."""
        t = self.tape
        a, b = table.lookup_adapters  # type: ignore[misc]
        rank = b.data.nbytes // (width * FLOAT)
        after = t.new(rows * rank * FLOAT)
        after_node = t.node(self._lookup_backward(a.data.nbytes), [a.node], [ids])
        up, up_node = self._product((b, None), after, after_node, rows, width, rank, element=FLOAT, viewed=True)
        t.drop(after)  # (`after_A`: `_embedding_forward`'s local, as it returns; the product keeps it to train B)
        summed, node, scaled = self._lora_sum(result, result_node, up, up_node, rows * width)
        t.drop(scaled)  # (`adapter_output`: the forward's local, as it returns)
        return summed, node

    def _lookup_backward(self, nbytes: int) -> Rule:
        """A lookup in a transposed table (`lora_embedding_A.T`): the table's gradient, then its AccumulateGrad's
        copy in the parameter's layout (the transposed one does not obey it), the first released."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            grad = t.new(nbytes)
            self._finish(t, given, node)
            laid = t.new(nbytes)
            t.drop(grad)
            return [laid]
        return rule

    def _lora_sum(self, result: Storage, result_node: Node, up: Storage, up_node: Node, size: int,
                  temporary: bool = False) -> tuple[Storage, Node, Storage | None]:
        """`result + up * scaling` (in the wider element: a 16-bit model's sum is float32), then
        `.to(result's dtype)` (a copy where the sum widened); `up` goes as the product returns, `result` as the sum
        is bound to its name; the product (`* scaling`) with them where it is a `temporary` of the expression
        (Linear's), else given back for the caller to release (Embedding's `adapter_output`, a local)."""
        t = self.tape
        element = self.lp if self.amp else FLOAT
        scaled = t.new(size * element)
        scaled_node = t.node(self._grads(size * element), [up_node])  # (a product with a number)
        t.drop(up)
        own = result.nbytes // (size)
        widest = max(own, element)
        summed = t.new(size * widest)
        narrow = (size * own if own != widest else 0, size * element if element != widest else 0)
        node = t.node(self._add_backward(narrow=narrow), [result_node, scaled_node])
        t.drop(scaled if temporary else None, result)
        if widest != own:  # result.to(torch_result_dtype)
            cast = t.new(size * own)
            node = t.node(self._grads(size * widest), [node])
            t.drop(summed)
            summed = cast
        return summed, node, None if temporary else scaled

    def _dora(self, params: Pair, x: Storage, x_node: Node, rows: int, inputs: int, outputs: int,
              result: Storage, result_node: Node, copy: bool, view: int = 0, select: int = 0
              ) -> tuple[Storage, Node]:
        """peft's DoRA (`DoraLinearVariant.forward`, `DoraLinearLayer.forward`, no dropout) after the base layer
        made `result`: x cast to the adapters' float32; `lora_B(lora_A(eye(in))).T`, the adapters' weight (a graph
        nothing reads: it goes, with the eye and `lora_A`'s output it kept, as the forward returns; under autocast
        its 16-bit product cast back to float32); the base weight in float32 (a copy in a 16-bit model);
        `‖W + s·ΔW‖` row by row (the sum and the product go as the norm is made); `magnitude / norm` (the norm
        kept); `lora_B(lora_A(x))`; `result - bias`; `(m/‖·‖ - 1) * that + m/‖·‖ * lora_result * s`; then
        `result + ·` and its cast back."""
        t = self.tape
        weight, bias = params
        (a, b), magnitude = weight.adapters, weight.magnitude  # type: ignore[misc]
        rank = a.data.nbytes // (inputs * FLOAT)
        x, x_node, wide = self._float32(x, x_node, rows * inputs, view)
        dropping = self.method is not None and self.method.dropout and self.train
        dropped = None
        if dropping:  # (the variant drops x, then runs the base product again on it: no bias to take off)
            dropped, x_node = self._dropout(x, x_node, FLOAT, 0 if wide else view)
            x, select = dropped, 0
        # get_lora_weight: the products over eye(in), whose graph nothing reads
        eye = t.new(inputs * inputs * FLOAT)
        none = Node(0, [], [], None, live=False)
        low_eye, low_eye_node = self._product((a, None), eye, none, inputs, rank, inputs, element=FLOAT)
        lora_weight, lora_weight_node = self._product((b, None), low_eye, low_eye_node, inputs, outputs, rank,
                                                      element=FLOAT)
        t.drop(low_eye, eye)
        dead = [low_eye_node, lora_weight_node]
        if lora_weight.nbytes != inputs * outputs * FLOAT:  # (autocast's 16-bit product, .to(x.dtype))
            wide_weight = t.new(inputs * outputs * FLOAT)
            dead.append(t.node(self._grads(lora_weight.nbytes), [lora_weight_node]))
            t.drop(lora_weight)
            lora_weight = wide_weight
        base_weight = t.new(outputs * inputs * FLOAT) if self.f != FLOAT else None  # weight.to(x.dtype)
        scaled = t.new(outputs * inputs * FLOAT)  # get_weight_norm: W + s·ΔW, its row norms
        summed = t.new(outputs * inputs * FLOAT)
        t.drop(scaled)
        norm = t.new(outputs * FLOAT)
        t.drop(summed)
        ratio = t.new(outputs * FLOAT)  # magnitude / weight_norm (the norm kept), viewed (1, out)
        ratio_node = t.node(self._grads(outputs * FLOAT), [magnitude.node], [norm])  # type: ignore[union-attr]
        low, low_node = self._product((a, None), x, x_node, rows, rank, inputs, select=0 if wide else select,
                                      element=FLOAT, selected=True)
        up, up_node = self._product((b, None), low, low_node, rows, outputs, rank, copy, element=FLOAT)
        t.drop(low)
        size, own = rows * outputs, result.nbytes // (rows * outputs)
        if dropping:  # F.linear(x, weight): the float32 weight (a 16-bit model's copy, no parameter of its own)
            frozen = weight if base_weight is None else Param(None, 0, FLOAT, data=base_weight)
            base, base_node = self._product((frozen, None), x, x_node, rows, outputs, inputs, element=FLOAT)
            if base_weight is not None and base_node.live:  # (the copy kept for x's gradient: no parameter)
                base_node.saved.append(t.hold(base_weight))
            element = base.nbytes // size
        elif bias is not None:  # base_result - bias (a 16-bit result less a float32 bias: float32)
            element = max(own, bias.data.nbytes // outputs)
            base = t.new(size * element)
            base_node = t.node(self._sub_backward(size, own, element, bias.data.nbytes), [result_node, bias.node])
        else:
            element, base, base_node = own, t.hold(result), result_node
        less = t.new(outputs * FLOAT)  # mag_norm_scale - 1
        less_node = t.node(self._pass(), [ratio_node])
        first = t.new(size * FLOAT)  # (…) * base_result
        first_node = t.node(self._broadcast_backward(size, outputs, element, 0), [less_node, base_node],
                            [(base, 0), (less, 1)])
        t.drop(less)
        up_element = up.nbytes // size
        second = t.new(size * FLOAT)  # mag_norm_scale * lora_result
        second_node = t.node(self._broadcast_backward(size, outputs, up_element, 0), [ratio_node, up_node],
                             [(up, 0), (ratio, 1)])
        scaled_second = t.new(size * FLOAT)  # * scaling
        scaled_node = t.node(self._grads(size * FLOAT), [second_node])
        t.drop(second)
        dora = t.new(size * FLOAT)
        dora_node = t.node(self._add_backward(), [first_node, scaled_node])
        t.drop(first, scaled_second)
        for node in dead:  # (the forward returns: the adapters' weight goes, and its graph with it)
            t.release(node)
        t.drop(lora_weight, base_weight, norm, ratio, up, base)
        widest = max(own, FLOAT)
        total = t.new(size * widest)  # result + result_dora
        narrow = (size * own if own != widest else 0, 0)
        node = t.node(self._add_backward(narrow=narrow), [result_node, dora_node])
        t.drop(dora, result, dropped)  # (the dropped x: the variant's local, as it returns)
        if widest != own:  # result.to(torch_result_dtype)
            cast = t.new(size * own)
            node = t.node(self._grads(size * widest), [node])
            t.drop(total)
            total = cast
        t.drop(wide)
        return total, node
