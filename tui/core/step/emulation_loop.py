"""The training loop and the optimizer as a run's allocation order sees them: each step's forward, the loop's
`del`s, the backward (`tape.backward`), the optimizer's states and temporaries and `zero_grad`, and where each
step's graph goes, whatever the family's forward (`_setup`, `_forward`: `emulation.BertRun` and its subclasses).
"""

from __future__ import annotations

from collections.abc import Sequence

from .emulation_ops import Run
from .tape import Event, Head, Param, Storage, backward


def last_phases(step_ends: Sequence[int], phase_ends: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """The last step's phases, from how many events each step's end and each phase's end has seen: each one's
    name, its first event and how many events its end has seen (the step begins where the one before it ended:
    after its `zero_grad`)."""
    per_step = len(phase_ends) // len(step_ends)
    begin = step_ends[-2] if len(step_ends) > 1 else 0
    phases = []
    for phase, end in phase_ends[-per_step:]:
        phases.append((phase, begin, end))
        begin = end
    return phases


class Loop(Run):
    """A run's loop (the hand-written one, the course's, the Trainer's; inference forwards) and its optimizer."""

    states: list[Storage]  # the optimizer's states, made at its first step (`_optimizer`)

    def _setup(self) -> None:
        """The family's parameters and batch (its run's own)."""
        raise NotImplementedError

    def _forward(self) -> Head:
        """The family's forward: the loss, the outputs a loop keeps, the loss's node (its run's own)."""
        raise NotImplementedError

    def run(self, steps: int) -> list[Event]:
        """The events of `steps` training steps, or inference forwards (`step_ends`: how many events each step's
        end has seen; `phase_ends`: each step's phases, `forward`, `backward` and `optimizer`, with how many
        events each phase's end has seen)."""
        self._setup()
        self._adapt()
        if not self.train:
            return self._forwards(steps)
        t = self.tape
        trainer, course = self.w.loop == "trainer", self.w.loop == "course"
        self.step_ends: list[int] = []
        self.phase_ends: list[tuple[str, int]] = []
        self.last_outputs = ()
        last_loss: Storage | None = None
        last_leaves: list[Param] = []
        for _ in range(steps):
            loss, logits, root = self._forward()  # out = model(**batch); loss = out.loss
            assert loss is not None  # (training: the head's loss)
            leaves, self.leaves = self.leaves, []
            self._returned()
            self._leave_autocast()
            t.drop(last_loss)  # (the course's loop: `loss = out.loss` rebound, the last step's graph gone)
            self._graph_gone(last_leaves)
            self.phase_ends.append(("forward", len(t.events)))
            if trainer:  # del out: the logits go before the backward
                t.drop(*logits)
            grad = t.new(loss.nbytes)  # loss.backward(): ones_like(loss)
            backward(t, root, grad)
            if trainer or self.bare and not course:  # del loss (the bare model's: computed outside it)
                t.drop(loss)
            if trainer:  # (the graph gone with it)
                self._graph_gone(leaves)
            self.phase_ends.append(("backward", len(t.events)))
            self._optimizer()
            self.phase_ends.append(("optimizer", len(t.events)))
            for param in self.trained:  # zero_grad(set_to_none=True)
                t.drop(param.node.grad)
                param.node.grad = None
            if course:  # nothing deleted: the outputs and the loss live on into the next step
                self.last_outputs, last_loss, last_leaves = tuple(logits), loss, leaves
            elif not trainer:  # out = None, after the optimizer's step (the graph gone with it)
                t.drop(None if self.bare else loss, *logits)
                self._graph_gone(leaves)
            self.step_ends.append(len(t.events))
        return t.events

    def last_phases(self) -> list[tuple[str, int, int]]:
        """The last step's phases after `run` (`last_phases`)."""
        return last_phases(self.step_ends, self.phase_ends)

    def _forwards(self, steps: int) -> list[Event]:
        """Inference: `out = model(**batch)` under `no_grad` (and autocast), again and again; the hand-written
        loop lets each forward's outputs go before the next (`out = None`), the course's keeps them until the next
        forward returns and `out` is rebound."""
        t = self.tape
        course = self.w.loop == "course"
        self.step_ends = []
        self.phase_ends = []
        self.last_outputs = ()
        for _ in range(steps):
            _, outputs, _ = self._forward()
            self._returned()
            self._leave_autocast()
            self.phase_ends.append(("forward", len(t.events)))
            if course:
                self.last_outputs = outputs
            else:
                t.drop(*outputs)
            self.step_ends.append(len(t.events))
        return t.events

    def _graph_gone(self, leaves: list[Param]) -> None:
        """A step's graph goes (its loss and outputs released): its leaves (`_input_leaf`) with their gradients."""
        for leaf in leaves:
            self.tape.drop(leaf.node.grad, leaf.data)
            leaf.node.grad = None

    def _dtype_groups(self) -> list[list[Param]]:
        """The trained parameters as a foreach optimizer's step takes them, a dtype at a time: the groups in the
        order C++'s unordered_map gives them back, the dtype met last first (a saved classifier's 16-bit copy,
        met after LoRA's float32 adapters, before them; the adapters before the 16-bit biases that train, met
        first under bias "all")."""
        groups: dict[int, list[Param]] = {}
        for param in self.trained:
            groups.setdefault(param.element or self.f, []).append(param)
        return list(reversed(groups.values()))

    def _optimizer(self) -> None:
        """The optimizer's step (foreach): AdamW's states at the first step, then its `_foreach_sqrt` temporaries
        each step; SGD with momentum its buffers at the first step (a clone of each gradient, in place after);
        SGD nothing (every update in place)."""
        t = self.tape
        if self.w.optimizer != "adamw":
            if self.w.optimizer == "sgd-momentum" and not self.states:  # (made inside the foreach loop: by group)
                self.states = [t.new(param.data.nbytes) for group in self._dtype_groups() for param in group]
            return
        if not self.states:
            for param in self.trained:
                self.states += [t.new(param.data.nbytes), t.new(param.data.nbytes)]
        # _foreach_sqrt(exp_avg_sqs), a dtype's parameters at a time; each group's roots go as the next group's
        # rebind them, the last as the step returns
        roots = [[t.new(param.data.nbytes) for param in group] for group in self._dtype_groups()]
        for made in roots:
            t.drop(*reversed(made))
