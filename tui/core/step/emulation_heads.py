"""The heads and their losses as transformers' classes run them: sequence and token classification, question
answering, multiple choice, the masked and causal LMs (the tied decoder, a loss that casts the logits up), BERT's
and ALBERT's pre-training, ELECTRA's discriminator, next sentence, and the bare model (its loss the sum of its
outputs); what each returns to the loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from .emulation_ops import op
from .emulation_peft import Linears
from .tape import FLOAT, LONG, Node, Rule, Storage, Tape, View, is_contiguous

Head = tuple["Storage | None", tuple["Storage", ...], Node]  # the loss (None: inference), the outputs a loop
# keeps, and the node the backward starts from


class Heads(Linears):
    """The heads of BERT's code and the families built like it."""

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
        if self.fw.classifier == "dense" and not self.choices:
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
        if self.fw.head_activation == "gelu":
            t.drop(act)
        logits, head = self._dense(self.classifier, dropped, drop_node, rows, classes)
        if not self.train:
            t.drop(dropped, act, x)
            return None, (logits,), head
        if self.choices:  # the logits viewed as (b, C)
            loss, loss_node = self._cross_entropy(head, self.examples, self.w.choices)
        else:
            loss, loss_node = self._classification_loss(head, rows, classes, logits)
        # the body's output (the encoder's output, the pooled state: tanh's, which its backward saves where the
        # pooler trains) held until the head's forward returns, then its dropped copy
        t.drop(x, act, dropped)
        return loss, (logits,), loss_node

    def _pooler(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The first token's state (a view), a Linear, tanh (ELECTRA's summary: gelu, saving its input)."""
        t, rows, h = self.tape, self.b, self.h
        pooled, dense = self._dense(self.pooler, x, x_node, rows, h, select=self.n * h)
        act, act_node = self._head_activation(pooled, dense)
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
        if self.fw.sentence_order:
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
        loss, loss_node = self._binary_cross_entropy(logits, logits_node, n)
        t.drop(x)  # (the body's output holds the encoder's until the head returns)
        return loss, (logits,), loss_node

    @op("binary_cross_entropy")
    def _binary_cross_entropy(self, logits: Storage, logits_node: Node, n: int) -> tuple[Storage, Node]:
        """Binary cross-entropy with logits (`n` of them) against the labels as floats: it saves both (under
        autocast a float32 copy of the logits); the loss float32."""
        t = self.tape
        target = t.new(n * FLOAT)  # labels.float()
        wide, wide_node = self._upcast(logits_node, n) if self.amp else (None, logits_node)
        loss = t.new(FLOAT)  # (16-bit logits against float32 labels: the loss, float32)
        loss_node = t.node(self._bce_backward(n, FLOAT if wide else self.f), [wide_node], [wide or logits, target])
        t.drop(target, wide)
        return loss, loss_node

    def _bce_backward(self, n: int, element: int) -> Rule:
        """sigmoid(logits) in their dtype (`element` bytes), minus the float32 target, times the gradient
        (float32), cast back to 16-bit logits' dtype where they are."""
        def rule(t: Tape, given: Storage, node: Node) -> Sequence[Storage | None]:
            sigmoid = t.new(n * element)
            minus = t.new(n * FLOAT)
            t.drop(sigmoid)
            grad = t.new(n * FLOAT)
            t.drop(minus)
            grad = self._cast_down(t, grad, n, element)
            self._finish(t, given, node)
            return [grad]
        return rule

    @staticmethod
    def _cast_down(t: Tape, grad: Storage, elements: int, element: int) -> Storage:
        """A float32 gradient of `elements` cast back to the logits' dtype (`element` bytes) where they are 16-bit:
        the copy made, then the float32 one released."""
        if element == FLOAT:
            return grad
        cast = t.new(elements * element)
        t.drop(grad)
        return cast

    def _roberta_classifier(self, x: Storage, x_node: Node) -> Head:
        """RobertaClassificationHead (ElectraClassificationHead: gelu for tanh): the first token's state (a
        view), dropout, dense, tanh, dropout, out_proj; the encoder's output goes as the model's forward
        returns."""
        t, b, h, labels = self.tape, self.b, self.h, self.c.num_labels
        # (in eval mode the first token's state, a view, as it is: the dense selects it)
        dropped, drop_node = self._dropout(x, x_node, view=b * h * self.f, select=self.n * h * self.f)
        dense, dense_node = self._dense(self.pooler, dropped, drop_node, b, h, select=0 if self.train else self.n * h)
        t.drop(dropped)
        act, act_node = self._head_activation(dense, dense_node)  # (RoBERTa's tanh, ELECTRA's gelu)
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
        hidden, hidden_node = self._dropout(x, x_node) if self.fw.qa_dropout else (t.hold(x), x_node)
        logits, qa_node = self._dense(self.classifier, hidden, hidden_node, n, 2)
        split = t.node(self._cat_backward(n * 2 * self.lp), [qa_node], inputs=2)
        # (squeezed, (b, s) with strides (2s, 2): contiguous, so no copy, only where b = s = 1: views of the logits)
        if is_contiguous((b, s), (2 * s, 2)):
            start, end = t.hold(View(logits, self.lp)), t.hold(View(logits, self.lp))
        else:
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

    def _cat_backward(self, size: int, viewed: bool = False) -> Rule:
        """A split's backward: its outputs' gradients concatenated, then released in order (`viewed`: handed on
        as a view, where the split's input was a view of the tensor whose gradient it is)."""
        def rule(t: Tape, given: Sequence[Storage | None], node: Node) -> Sequence[Storage | None]:
            whole = t.new(size)
            t.drop(*given)
            t.release(node)
            return [t.view(whole) if viewed else whole]
        return rule  # type: ignore[return-value]  # (given its inputs' list: see `backward`)

    def _classification_loss(self, head: Node, rows: int, classes: int, logits: Storage, element: int = 0
                             ) -> tuple[Storage, Node]:
        """Cross-entropy; one label: regression, MSE (which saves the logits and the float labels; `element`:
        the logits' bytes, the model's unless cast to the labels' float32 first)."""
        if not self.regression:
            return self._cross_entropy(head, rows, classes)
        return self._mse(head, rows, logits, element)

    @op("mse")
    def _mse(self, head: Node, rows: int, logits: Storage, element: int = 0) -> tuple[Storage, Node]:
        """MSE on one logit a row against float32 labels (it saves both; `element`: the logits' bytes)."""
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
            grad = self._cast_down(t, t.new(rows * FLOAT), rows, element)
            self._finish(t, given, node)
            return [grad]
        return rule

    @op("cross_entropy")
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

    def _lm_logits(self, x: Storage, x_node: Node) -> tuple[Storage, Node]:
        """The LM head: transform (Linear, gelu, LayerNorm), the decoder (the word table and its own bias)."""
        t, n, h, vocab = self.tape, self.n, self.e, self.c.vocab_size  # (ELECTRA's generator: H → E)
        gelu, gelu_node = self._dense_activation(self.transform, x, x_node, n, self.h, h, keep=True)
        normed, norm_node = self._layer_norm(gelu, gelu_node, self.transform_norm, h)
        t.drop(gelu)
        logits, decoder_node = self._dense((self.decoder or self.word, self.decoder_bias), normed, norm_node, n, vocab,
                                            inputs=h)
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
