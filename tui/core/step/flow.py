"""What a step saves and computes when only part of the model trains: frozen parts, and peft's adapters (LoRA,
DoRA, IA3, LoRA on the word embeddings).

Autograd records an operation only when one of its inputs requires a gradient, and keeps a tensor only for a
gradient it will compute (tools/autograd/derivatives.yaml; `mm` keeps `self` for `mat2`'s gradient and `mat2` for
`self`'s). So the modules of each component are walked in the order they run, with whether the hidden state
requires a gradient yet (`Walk.flowing`), and:

- a lookup keeps its indices when its table trains; the embeddings' output requires a gradient from then on;
- a Linear keeps its input when its weight trains (once, where several read one tensor), and under autocast its
  weight's 16-bit copy when its input requires a gradient; its output requires one when its input does, or its
  weight or bias trains, or it carries an adapter. Its backward runs one product per gradient it computes;
- a LoRA adapter (peft 0.22, `lora.Linear.forward`: `result + lora_B(lora_A(dropout(x))) * scaling`) keeps
  what `lora_A` reads — the input itself, or a new tensor: the float32 copy peft makes of a 16-bit input (its
  adapters are float32 whatever the model's dtype: `_cast_input_dtype`), the dropout's output (and the dropout
  its mask, when the input requires a gradient), or autocast's 16-bit copy — and the `tokens × r` that `lora_B`
  reads; under autocast the adapters' 16-bit weights;
- a LayerNorm keeps its input, mean and rstd when its input requires a gradient or its own parameters train;
  dropout its mask and an activation what it saves when their input requires one (so does a loss);
- attention by the math path: Q·Kᵀ keeps Q for K's gradient and K for Q's, softmax its output when the scores
  need a gradient, P·V keeps P for V's gradient and V for P's; a fused kernel is one operation: all or nothing.

Full fine-tuning never comes here: every module's `saves` in `kinds` is that walk with everything trained.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..config import ConfigError
from .kinds import (
    Attention,
    Branch,
    Drop,
    Flop,
    Flows,
    Keep,
    Linear,
    Lookup,
    Module,
    Norm,
    Product,
    Projection,
    Saved,
    SavesOnly,
    Step,
)
from .steps import CONTEXT, HELD, WORDS


@dataclass(frozen=True, slots=True)
class Trains:
    """What of one module trains: its weight, its bias, and a LoRA adapter of rank `rank` beside it (0: none)."""

    weight: bool = False
    bias: bool = False
    rank: int = 0
    scale: str = ""  # IA3's trained vector: "output" (it scales the module's output), "input" (a feed-forward's)
    dora: bool = False  # DoRA's magnitude beside the LoRA adapter
    biased: bool = True  # the module has a bias (DoRA takes it off the base output)

    @property
    def output(self) -> bool:
        """Whether the module's output requires a gradient whatever its input."""
        return self.weight or self.bias or self.rank > 0 or bool(self.scale)


class Training(Protocol):
    """What the walk needs of a fine-tuning method (`tui.core.step.method.Method`)."""

    @property
    def dropout(self) -> bool: ...

    def module(self, name: str) -> Trains | None: ...

    def layer_key(self, prefix: str) -> Hashable:
        """What of the modules under `prefix` (an encoder layer) trains, comparable between layers."""
        ...


@dataclass(frozen=True, slots=True)
class _Walked:
    """What walking one encoder layer gave: its terms, the flow it recorded for its Linears' inputs (names under
    `prefix`), and the flow it left."""

    prefix: str
    saves: tuple[Saved, ...]
    flops: tuple[Flop, ...]
    inputs: tuple[tuple[str, bool], ...]
    flowing: bool


@dataclass
class Walk:
    """The walk over a step's components, in the order they run."""

    training: Training
    step: Step
    names: Mapping[str, str] = field(default_factory=dict)  # BERT's module names → the family's
    body: str = ""  # the head classes' body prefix (`model.`): a module named `@name` is under it
    flowing: bool = False  # the hidden state requires a gradient
    inputs: dict[str, bool] = field(default_factory=dict)  # a Linear's input requires a gradient (first pass)
    kept: set[tuple[str, str]] = field(default_factory=set)  # tensors kept so far: each counts once
    ends: dict[str, bool] = field(default_factory=dict)  # whether a component's output requires a gradient
    flops: list[Flop] = field(default_factory=list)
    saves: list[Saved] = field(default_factory=list)
    _qkv: tuple[bool, bool, bool] = (False, False, False)
    scores_bias: bool = False  # a trained bias joins every layer's scores
    operands: dict[str, bool] = field(default_factory=dict)  # DeBERTa's operands that need a gradient (`_flow`)
    _prefix: str = ""
    _component: str = ""
    _scope: str = ""  # the component, or the run of a stored layer: what `_once` counts within
    _layers: dict[tuple[object, ...], _Walked] = field(default_factory=dict)  # an encoder layer's walk, by entry
    # checkpointing's `enable_input_require_grads` where the word table does not train: its lookup's output made a
    # leaf that requires a gradient, held (not saved: no hook sees it) with that gradient until the graph goes
    leaf: Saved | None = None

    def component(self, component: str, prefix: str, modules: tuple[Module, ...], run: str = "") -> None:
        """Walk `modules` as `component`, whose modules are named under `prefix`; `run` (its name): one run of a
        stored layer that runs several times (ALBERT's), whose weights' copies are cast once. An encoder layer that
        enters as one walked before did (the hidden state's flow, and what of it trains, alike) does what that one
        did: its terms are copied, not walked again (a deep model's layers are mostly alike)."""
        self._component, self._prefix, self._scope = component, prefix, run or component
        layer = component.startswith("layer.")
        key = (id(modules), self.flowing, self.scores_bias, self.training.layer_key(prefix)) if layer and not run \
            else None
        if key is not None and key in self._layers:
            self._replay(self._layers[key], component, prefix)
        else:
            saves, flops, inputs, kept = len(self.saves), len(self.flops), set(self.inputs), set(self.kept)
            here = Step(self.step.workload, self.step.c, self.step.facts, component)
            for module in modules:
                if here.holds(module.when):
                    module.walk(self, here)
            # a layer that kept a tensor it shares with others (a rotary table) is walked again, not copied
            shares = any(token[0] == "" and not token[1].startswith(prefix) for token in self.kept - kept)
            if key is not None and not shares:
                self._layers[key] = _Walked(prefix, tuple(self.saves[saves:]), tuple(self.flops[flops:]),
                                            tuple((k.split("|", 1)[1], self.inputs[k]) for k in self.inputs
                                                  if k not in inputs), self.flowing)
        self.ends["encoder" if layer else component] = self.flowing

    def _replay(self, walked: _Walked, component: str, prefix: str) -> None:
        self.saves += [Saved(component, t.what, t.factors, t.size, t.coef, t.batch_one) for t in walked.saves]
        self.flops += [Flop(component, t.what, t.factors, t.coef, t.attention, t.backward, t.recomputed, t.grads)
                       for t in walked.flops]
        for name, flowing in walked.inputs:
            self.inputs[f"{component}|{prefix}{name.removeprefix(walked.prefix)}"] = flowing
        self.flowing = walked.flowing

    def _input_key(self, name: str) -> str:
        """Where the walk records whether a Linear's input requires a gradient: by module and run."""
        return f"{self._scope}|{self._full(name)}"

    # -- what the walk asks ------------------------------------------------------------------------------------
    def trains(self, name: str) -> Trains:
        for alternative in name.split("|"):
            found = self.training.module(self._resolve(alternative))
            if found is not None:
                return found
        raise ConfigError("fine-tuning", self._resolve(name), "is a module the step reads and the model does not "
                          "have: compute under a fine-tuning method is not modelled for this class")

    def _resolve(self, name: str) -> str:
        """A module's full name: under the component's prefix, `../` one level up (ELECTRA's projection sits
        beside its embeddings), in the family's own words."""
        name = self.names.get(name, name)
        if name.startswith("@"):  # under the body, from a component that is not (ModernBERT's final norm)
            return self.body + name[1:]
        prefix = self._prefix
        while name.startswith("../"):
            name, prefix = name[3:], prefix.rstrip(".").rpartition(".")[0] + "."
        return (prefix if prefix != "." else "") + name

    def _full(self, name: str) -> str:
        return self._resolve(name.split("|")[0])

    def _once(self, key: str, shared: bool = False) -> bool:
        token = ("", key) if shared else (self._scope, key)
        if token in self.kept:
            return False
        self.kept.add(token)
        return True

    def _save(self, step: Step, what: str, factors: tuple[str, ...], size: int | str, coef: int = 1) -> None:
        if coef:
            self.saves.append(step.saved(what, factors, size, coef))

    def _flop(self, step: Step, what: str, factors: tuple[str, ...], coef: int, grads: int, **kw: bool) -> None:
        if coef:
            self.flops.append(Flop(step.component, what, factors, coef, grads=grads, **kw))

    # -- the modules -----------------------------------------------------------------------------------------
    # -- the rules, one a kind (each kind's `walk` names its own: `kinds.Walker`) --------------------------------
    def branch(self, module: Branch, step: Step) -> None:
        self.flowing = self.ends.get(module.source, self.ends.get("embeddings", False))

    def lookup(self, module: Lookup, step: Step) -> None:
        """(DeBERTa's relative embeddings' LayerNorm: its bias may train alone.)"""
        trains = self.trains(module.module).output if module.feeds == "rel" else self.trains(module.module).weight
        rank = self.trains(module.module).rank if module.feeds == "stream" else 0
        if (trains or rank) and module.what:
            self._save(step, module.what, module.factors, module.size)
        if rank:
            self._lookup_adapter(module.module, rank, step)
            trains = True
        if module.feeds == "scores":  # a position bias every layer adds to its scores (MPNet's)
            self.scores_bias = trains
        elif module.feeds == "rel":  # the relative embeddings every layer reads (DeBERTa's)
            self.operands["rel"] = self.operands.get("rel", False) or trains
        else:  # (checkpointing: transformers' `enable_input_require_grads` makes the word embeddings' output
            # require a gradient whatever trains, so that the checkpointed layers run their backward)
            checkpointing = step.workload.checkpointing and step.workload.train
            if checkpointing and module.module == WORDS and not trains:
                self.leaf = step.saved("the word embeddings' output, a leaf (checkpointing)", ("n", "E"), "weight")
            self.flowing |= trains or checkpointing

    def _lookup_adapter(self, name: str, rank: int, step: Step) -> None:
        """LoRA on an embedding (peft 0.22, `lora.Embedding.forward`: `F.embedding(ids, lora_embedding_A.T) @
        lora_embedding_B.T * scaling`): the `tokens × r` lookup kept for B's gradient (float32; under autocast the
        product's 16-bit copy of it, and of B, cached), the product's FLOPs (both its gradients in the backward;
        the lookup's own backward is no product)."""
        label = f"LoRA on {name}"
        if step.workload.amp and step.c.compute != 4:
            self._save(step, f"{label}: after_A (16-bit copy)", ("n",), "compute", rank)
            self._save(step, f"{label}: 16-bit copy of lora_embedding_B", ("E",), "compute", rank)
        else:
            self._save(step, f"{label}: after_A (tokens × r)", ("n",), 4, rank)
        self._flop(step, f"{label}: lora_embedding_B", ("n", "E"), rank, 2)

    def norm(self, module: Norm, step: Step) -> None:
        norm = self.trains(module.module) if module.module else Trains()
        if self.flowing or norm.output:
            self.saves.extend(module.saves(step))
        self.flowing |= norm.output

    def product(self, module: Product, step: Step) -> None:
        grads = sum(self._flow(name, step) for name in module.grads_of) if module.grads_of else (
            2 if self.flowing else 0)
        for flop in module.flops(step.component):
            self._flop(step, flop.what, flop.factors, flop.coef, grads, backward=flop.backward)

    def flows(self, module: Flows, step: Step) -> None:
        fq, fk, fv = self._qkv
        self.operands.update(q=fq, k=fk, v=fv, pk=False, pq=False)
        if step.facts["relative"] and self.operands.get("rel"):
            self.saves.extend(Drop("relative embeddings' dropout mask", ("2", "D", "H"), "residual").saves(step))

    def saved_if_flowing(self, module: SavesOnly, step: Step) -> None:
        """Dropout and the losses: saved where the stream needs a gradient."""
        if self.flowing:
            self.saves.extend(module.saves(step))

    def _flow(self, name: str, step: Step) -> bool:
        """Whether one of DeBERTa's operands needs a gradient: q, k, v, rel, pk, pq, or derived from them."""
        f, facts = self.operands, step.facts
        c2p = facts["relative"] and facts["c2p"] and f.get("pk", False)
        p2c = facts["relative"] and facts["p2c"] and f.get("pq", False)
        q, k = f.get("q", False), f.get("k", False)
        derived = {"c2p": q or f.get("pk", False), "p2c": k or f.get("pq", False), "c2p_pk": c2p,
                   "position": c2p or p2c, "scores": q or k or c2p or p2c}
        return derived[name] if name in derived else f.get(name, False)

    def keep(self, keep: Keep, step: Step) -> None:
        if keep.if_flows:
            if any(self._flow(name, step) for name in keep.if_flows):
                self.saves.extend(keep.saves(step))
        elif keep.copies_of:  # one 16-bit weight copy for each Linear whose input requires a gradient: autocast
            # casts a weight that trains once a forward (its cache), a frozen one each time it runs
            count = sum(self.inputs.get(self._input_key(name), False) and (
                not self.trains(name).weight or self._once(f"{self._full(name)}: 16-bit copy", shared=True))
                for name in keep.copies_of)
            self._save(step, keep.what, keep.factors, keep.size, keep.coef // len(keep.copies_of) * count)
        elif keep.for_weights:
            trained = sum(self.trains(name).weight for name in keep.for_weights)
            if keep.each:
                self._save(step, keep.what, keep.factors, keep.size, keep.coef // len(keep.for_weights) * trained)
            elif trained and self._once(keep.storage or keep.what, shared=bool(keep.storage)):
                self._save(step, keep.what, keep.factors, keep.size, keep.coef)
        elif self.flowing and (not keep.storage or self._once(keep.storage, shared=True)):
            self.saves.extend(keep.saves(step))

    def linear(self, linear: Linear, step: Step) -> None:
        if not linear.names:
            raise ConfigError("fine-tuning", linear.what, "is not named in the step's modules: compute under a "
                              "fine-tuning method is not modelled for this class")
        trains = [self.trains(name) for name in linear.names]
        flowing, amp, c = self.flowing, step.workload.amp, step.c
        for name in linear.names:
            self.inputs[self._input_key(name)] = flowing
        weights = sum(t.weight for t in trains)
        x = step.size(linear.x if linear.x is not None else linear.size)
        rows, din, dout = linear.rows, linear.din, linear.dout
        for name, t in zip(linear.names, trains):
            if t.scale == "input":  # (the product reads the scaled input, which requires a gradient)
                self._scaled_input(linear, name.split("|")[0], x, step)
                flowing = True
        if weights:  # the input, for the weight gradients
            if linear.input is not None and amp and step.size(linear.size) != c.compute:
                self._save(step, linear.copy or f"{linear.input} (16-bit copy)", (rows, din), "compute", weights)
            elif linear.input is not None:
                key, shared = (linear.held, True) if linear.held else (linear.input, False)
                if self._once(key, shared):
                    self._save(step, linear.input, (rows, din), linear.size)
            elif linear.reads and not (amp and x != c.compute) and not linear.held_input(step) and self._once(
                    linear.reads, bool(linear.held)):
                self._save(step, linear.reads, (rows, din), x)
        if amp and linear.weight is not None and flowing:
            self._save(step, linear.weight, (dout, din), "compute", len(linear.names))
        by_grads: dict[int, int] = {}
        for t in trains:
            grads = flowing + t.weight
            by_grads[grads] = by_grads.get(grads, 0) + 1
        each = linear.coef // len(linear.names)  # products a module runs (ModernBERT's Wqkv: 3)
        # (a layer's last product, which checkpointing's early stop never reruns, is rerun where an adapter's
        # tensors are packed after it: LoRA's `lora_B` is then the last product, DoRA's and IA3's products save)
        after = any(t.rank or t.scale == "output" for t in trains)
        for grads, count in sorted(by_grads.items()):
            self._flop(step, linear.what, (rows, din, dout), count * each, grads,
                       recomputed=linear.recomputed or after)
        for name, t in zip(linear.names, trains):
            if t.rank:
                self._adapter(linear, name.split("|")[0], t.rank, x, step, last=not linear.recomputed and not t.dora)
            if t.dora:
                self._dora(name.split("|")[0], t, (linear.rows,), linear.din, linear.dout,
                           linear.coef // len(linear.names), flowing, step)
            if t.scale == "output":
                self._scaled_output(linear, name.split("|")[0], step, flowing)
        if len(linear.names) == 3:  # Q, K and V: the attention reads each apart
            self._qkv = (flowing or trains[0].output, flowing or trains[1].output, flowing or trains[2].output)
        else:
            self.flowing = flowing or any(t.output for t in trains)

    def _scaled_input(self, linear: Linear, name: str, x: int, step: Step) -> None:
        """IA3 on a feed-forward module (peft 0.22, `ia3.Linear.forward`): `(x.to(float32) * ia3_scaling)` keeps
        the float32 input for the vector's gradient (a new tensor where x is 16-bit, else x itself, kept once)
        and, where x requires a gradient, the scaling vector (`1 * ia3_l.flatten()`, float32)."""
        label, rows, din = f"IA3 on {name}", linear.rows, linear.din
        if x != 4:
            self._save(step, f"{label}: float32 input", (rows, din), 4)
        else:
            self._own_input(linear, x, step)
        if self.flowing:
            self._save(step, f"{label}: scaling vector", (din,), 4)

    def _scaled_output(self, linear: Linear, name: str, step: Step, flowing: bool) -> None:
        """IA3 on another module: `(base_layer(x) * ia3_scaling).to(its dtype)` keeps the module's output for
        the vector's gradient and, where that output requires a gradient (its input does), the vector."""
        label = f"IA3 on {name}"
        self._save(step, f"{label}: the module's output", (linear.rows, linear.dout), "compute",
                   linear.coef // len(linear.names))
        if flowing:
            self._save(step, f"{label}: scaling vector", (linear.dout,), 4, linear.coef // len(linear.names))

    def _dora(self, name: str, t: Trains, rows: tuple[str, ...], din: str, dout: str, wide: int, flowing: bool,
              step: Step) -> None:
        """DoRA beside LoRA (peft 0.22, `DoraLinearLayer.forward`, no dropout): the adapters' weight made from
        `eye(in)` (its two products, forward only; what they keep is packed, then goes with a graph nothing reads:
        the eye — under autocast its 16-bit copy — and `lora_A`'s output), the weight norm (kept by the division
        of the magnitude), the base output less its bias (float32 under autocast, a 16-bit output less a float32
        bias), `m/‖·‖ - 1` where that output needs a gradient (its input does, or its bias trains), the adapters'
        output and `m/‖·‖`."""
        label, rank = f"DoRA on {name}", t.rank
        amp = step.workload.amp and step.c.compute != 4
        self._save(step, f"{label}: eye (lora_A's input)", (din, din), "compute" if amp else 4)
        self._save(step, f"{label}: lora_A(eye)", (din,), "compute" if amp else 4, rank)
        self._flop(step, f"{label}: lora_A(eye)", (din, din), rank, 0, backward=False)
        self._flop(step, f"{label}: lora_B(eye)", (din, dout), rank * wide, 0, backward=False)
        self._save(step, f"{label}: weight norm", (dout,), 4, wide)
        if self.training.dropout:  # the base product again, on the dropped input, with the float32 weight
            self._save(step, f"{label}: base product on the dropped input", (*rows, dout), "compute" if amp else 4,
                       wide)
            if flowing and (amp or step.c.compute != 4):  # (the weight's copy kept for the input's gradient)
                self._save(step, f"{label}: {'16-bit' if amp else 'float32'} copy of the base weight", (dout, din),
                           "compute" if amp else 4, wide)
            self._flop(step, f"{label}: base product on the dropped input", (*rows, din, dout), wide, int(flowing))
        else:
            base = 4 if amp and t.biased else "compute"
            self._save(step, f"{label}: base output less its bias" if t.biased else f"{label}: base output",
                       (*rows, dout), base, wide)
        if flowing or (t.bias and not self.training.dropout):  # (the base output needs a gradient: its input
            # does, or the bias it has trains — with dropout the base product is made again, without the bias)
            self._save(step, f"{label}: m/‖W‖ - 1", (dout,), 4, wide)
        self._save(step, f"{label}: lora_B's output", (*rows, dout), "compute" if amp else 4, wide)
        self._save(step, f"{label}: m/‖W‖", (dout,), 4, wide)

    def _adapter(self, linear: Linear, name: str, rank: int, x: int, step: Step, last: bool = False) -> None:
        """LoRA beside `linear`'s module `name` (its output as wide as the module's: 3·H for ModernBERT's Wqkv);
        `last`: its `lora_B` is the layer's last product (not rerun by checkpointing's early stop)."""
        self._lora(step, f"LoRA on {name}", self._full(name), rank, (linear.rows,), linear.din, linear.dout,
                   linear.coef // len(linear.names), x, self.flowing, lambda: self._own_input(linear, x, step),
                   last=last)

    def _own_input(self, linear: Linear, x: int, step: Step) -> None:
        """The Linear's own input, kept (by `lora_A`, IA3's product) once, with whatever else keeps it."""
        rows, din = linear.rows, linear.din
        if linear.held == HELD:  # the last hidden state, whole (a [CLS] token's view keeps its storage)
            if self._once(linear.held, shared=True):
                self._save(step, linear.input or "last hidden state (kept whole by the [CLS] view)", ("n", "H"),
                           "stream")
        elif linear.held:  # another component's output
            if self._once(linear.held, shared=True):
                self._save(step, linear.reads or linear.held, (rows, din), x)
        elif not linear.held_input(step) and self._once(linear.input or linear.reads or linear.what):
            self._save(step, linear.input or linear.reads or f"{linear.what} input", (rows, din), x)

    def _lora(self, step: Step, label: str, full: str, rank: int, rows: tuple[str, ...], din: str, dout: str,
              wide: int, x: int, flowing: bool, own_input: Callable[[], None], backward: bool = True,
              last: bool = False) -> None:
        """What `lora_A` and `lora_B` keep and compute over `rows` (their input `flowing` or not): peft keeps the
        adapters in float32 (a 16-bit model's too) and casts a 16-bit input to their dtype first, a new tensor,
        as dropout's output is; else `lora_A` keeps the input itself (`own_input`)."""
        c, amp = step.c, step.workload.amp
        new = x != 4
        if self.training.dropout:
            if flowing:
                self._save(step, f"{label}: dropout mask", (*rows, din), c.mask(4))
            new = True
        if amp and c.compute != 4:
            self._save(step, f"{label}: lora_A input (16-bit copy)", (*rows, din), "compute")
        elif new:
            self._save(step, f"{label}: lora_A input", (*rows, din), 4)
        else:
            own_input()
        # the adapters train: autocast casts them once a forward (a stored layer run again reuses the copies)
        if amp and flowing and self._once(f"{full}: lora_A copy", shared=True):
            self._save(step, f"{label}: 16-bit copy of lora_A", (din,), "compute", rank)
        self._save(step, f"{label}: lora_B input (tokens × r)", rows, c.compute if amp else 4, rank)
        if amp and self._once(f"{full}: lora_B copy", shared=True):
            self._save(step, f"{label}: 16-bit copy of lora_B", (dout,), "compute", rank * wide)
        self._flop(step, f"{label}: lora_A", (*rows, din), rank, flowing + 1, backward=backward)
        self._flop(step, f"{label}: lora_B", (*rows, dout), rank * wide, 2, backward=backward, recomputed=not last)

    def projection(self, projection: Projection, step: Step) -> None:
        """A Linear over the 2·D relative embeddings (DeBERTa's position keys or queries): its input kept for its
        weight, its weight's 16-bit copy for the embeddings' gradient, an adapter on it as peft runs it there too."""
        name = projection.names[0]
        trains, rel, amp = self.trains(name), self.operands.get("rel", False), step.workload.amp
        full, rows = self._full(name), ("2", "D", "H")
        if trains.weight:
            if amp:
                self._save(step, projection.copy, rows, "compute")
            elif self._once("relative embeddings (input)"):
                self._save(step, "relative embeddings (the position projections' input)", rows, "residual")
        if amp and rel and (not trains.weight or self._once(f"{full}: 16-bit copy", shared=True)):
            self._save(step, f"16-bit copy of {full.rsplit('.', 1)[-1]}'s weight", ("H", "H"), "compute")
        self._flop(step, projection.what, (*rows, "H"), 1, rel + trains.weight, backward=projection.used)
        if trains.rank:
            self._relative_adapter(projection, full, trains.rank, step)
        if trains.dora:  # (DoRA there too, its weight made again at this call)
            self._dora(f"{full.rsplit('.', 2)[-1]} (relative embeddings)", trains, ("2", "D"), "H", "H", 1, rel, step)
        if trains.scale:  # IA3 there too: the projection's output kept for the vector's gradient
            label = f"IA3 on {full.rsplit('.', 2)[-1]} (relative embeddings)"
            self._save(step, f"{label}: the projection's output", rows, "compute")
            if rel:
                self._save(step, f"{label}: scaling vector", ("H",), 4)
        self.operands[projection.flow] = rel or trains.output

    def _relative_adapter(self, projection: Projection, full: str, rank: int, step: Step) -> None:
        """LoRA on a projection the relative embeddings run through (a shared key or query projection)."""
        def own_input() -> None:
            if self._once("relative embeddings (input)"):
                self._save(step, "relative embeddings (the position projections' input)", ("2", "D", "H"),
                           "residual")

        self._lora(step, f"LoRA on {full.rsplit('.', 2)[-1]} (relative embeddings)", full, rank, ("2", "D"), "H", "H",
                   1, step.size("residual"), self.operands.get("rel", False), own_input, projection.used)

    def attention(self, attention: Attention, step: Step) -> None:
        if attention.values_only:  # DeBERTa: the position scores join the content scores
            self.scores_bias = self._flow("position", step)
        if attention.fused_qkv:  # one projection: q, k and v require a gradient together, or none does
            self._qkv = (self.flowing,) * 3
        fq, fk, fv = self._qkv
        scores = fq or fk or self.scores_bias
        c, workload = step.c, step.workload
        kernel = c.fused or (not attention.dropout and workload.attention == "sdpa" and workload.train)
        one_kernel = kernel or attention.fused_qkv  # one operation, or q, k, v one tensor: all or nothing
        flops = list(attention.flops(step.component))
        if one_kernel:  # it keeps everything when any of q, k, v requires a gradient
            if fq or fk or fv:
                for saved in attention.saves(step):
                    if saved.what == CONTEXT:  # a kernel's backward reads its output; the math path's does not
                        if not kernel:
                            continue  # (the output projection keeps it, for its weight: `reads`)
                        self._once(saved.what)
                    self.saves.append(saved)
            if c.fused:  # CUDA's kernels: their backward counts every gradient (and recomputes the scores)
                for flop in flops:
                    self._flop(step, flop.what, flop.factors, flop.coef, 2 if fq or fk or fv else 0, attention=True)
            else:  # the CPU's flash kernel: FlopCounterMode counts the products of the gradients asked for
                self._flop(step, flops[0].what, flops[0].factors, 1, fq + fk, attention=True)
                self._flop(step, flops[1].what, flops[1].factors, 1, scores + fv, attention=True)
        else:
            if attention.values_only:  # (the queries and keys: kept by the modules before, `DEBERTA_WALK`)
                self._save(step, "values (split into heads)", ("n", "H"), "heads", scores)
            else:
                self._save(step, "queries, keys, values (split into heads)", ("n", "H"), "heads", fk + fq + scores)
            softmax = c.softmax
            if attention.dropout:
                self._save(step, "attention probabilities (softmax output)", ("b'", "A", "s", "s"), softmax, scores)
                self._save(step, "attention dropout mask", ("b'", "A", "s", "s"), c.mask(softmax), scores)
                self._save(step, "attention probabilities after dropout", ("b'", "A", "s", "s"), "heads", fv)
            else:
                same = softmax == c.heads
                self._save(step, "attention probabilities (softmax output)", ("b'", "A", "s", "s"), softmax,
                           scores or (fv and same))
                if fv and not same:
                    self._save(step, "attention probabilities (a copy in the values' dtype)", ("b'", "A", "s", "s"),
                               "heads")
            self._flop(step, flops[0].what, flops[0].factors, 1, fq + fk, attention=True)
            self._flop(step, flops[1].what, flops[1].factors, 1, scores + fv, attention=True)
        self.flowing = scores or fv


Part = tuple[str, str, tuple[Module, ...], str]  # a component, its modules' prefix, its modules, its run ("": none)


def walk(parts: list[Part], step: Step, training: Training, names: Mapping[str, str] | None = None,
         body: str = "") -> Walk:
    """Walk the step's components (name, module prefix, modules) in order; twice, for the inputs the first pass
    learns (a weight's 16-bit copy is kept when its Linear's input requires a gradient, which only the walk knows).
    `names`: the family's names for the modules the shared constants name as BERT does."""
    first = Walk(training, step, dict(names or {}), body)
    for component, prefix, modules, run in parts:
        first.component(component, prefix, modules, run)
    second = Walk(training, step, dict(names or {}), body, inputs=first.inputs)
    for component, prefix, modules, run in parts:
        second.component(component, prefix, modules, run)
    return second
