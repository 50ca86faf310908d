"""A fine-tuning method as the step sees it: which module's weight and bias train, and where LoRA adapters sit.

Made from what counting already knows (`tui.core.count.lora.adapt`, `tui.core.count.frozen.freeze`): the step
needs only, module by module, what trains (`flow.Trains`), and the totals for the bytes of weights, gradients and
optimizer states. peft keeps a 16-bit model's adapters in float32 (`get_peft_model(autocast_adapter_dtype=True)`,
its default), so their weights, gradients and states are 4 bytes an element whatever the precision; a module
trained whole (`modules_to_save`) is a copy in the model's own dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from ..config import LM_HEADS, BertConfig, ConfigError
from ..count.lora import PREFIX
from ..count.trained import Adapted, FineTuning, Trained
from ..count.tree import ParamTree, group_of
from .flow import Trains
from .symbols import unused_modules

# an encoder layer's parameter, and its index (ALBERT's stored layers: their group and index)
_LAYER = re.compile(r"(?:^|\.)(?:layers?|albert_layer_groups\.\d+\.albert_layers)\.(\d+)\.")


@dataclass(frozen=True)
class Method:
    """What trains under a fine-tuning method, module by module (names as `named_parameters()` gives them
    without peft's prefix), and the parameters' totals."""

    label: str
    modules: frozenset[str]  # every module with tensors of its own
    trained: frozenset[str]  # the parameters that train
    ranks: tuple[tuple[str, int], ...]  # LoRA's adapted modules and their r
    dropout: bool  # lora_dropout > 0
    parameters: int  # peft's "all params": the model, the adapters and the trained copies
    tensors: int
    trainable: int
    trainable_tensors: int
    adapters: int  # elements of the adapters (float32 whatever the precision)
    adapter_tensors: int
    sizes: tuple[tuple[str, int], ...] = field(default=(), compare=False)  # each trained parameter's elements
    unreached: tuple[int, int] = (0, 0)  # (elements, tensors) that train but the step never reaches: no gradient
    # every tensor of the model as `named_parameters()` gives them (peft's names, without its prefix): name, role
    # (`PeftParam.role`: "base", "lora_A", "lora_B", "original", "copy", ...), whether it trains, its elements;
    # what the allocation order reads (`emulation_methods.adapt`); compared, so that two methods that train the
    # same tensors but run differently (IA3 scaling a square module's input or its output) are not one in a cache
    layout: tuple[tuple[str, str, bool, int], ...] = ()
    unties: str = ""  # a tensor a saved module's copy unties from one outside it (the LM head's decoder weight)

    @property
    def reached(self) -> tuple[int, int]:
        """(elements, tensors) that get a gradient and optimizer states."""
        return self.trainable - self.unreached[0], self.trainable_tensors - self.unreached[1]

    @property
    def layers_backward(self) -> bool:
        """Whether the backward runs through the encoder layers: something in the embeddings or the layers
        trains (a frozen body's step runs the head's backward alone)."""
        return any(group_of(name) in ("embeddings", "encoder") for name in self.trained)

    def module(self, name: str) -> Trains | None:
        if name not in self.modules:
            return None
        return Trains(f"{name}.weight" in self.trained, f"{name}.bias" in self.trained, self._rank.get(name, 0),
                      self._scale.get(name, ""), name in self._dora, f"{name}.base_layer.bias" in self._names)

    @property
    def dora(self) -> bool:
        """Whether DoRA's magnitudes sit beside the adapters."""
        return bool(self._dora)

    @cached_property
    def _dora(self) -> frozenset[str]:
        """DoRA's modules (a magnitude vector beside the adapters)."""
        return frozenset(name.partition(".lora_magnitude_vector.")[0] for name, role, *_ in self.layout
                         if role == "magnitude")

    @cached_property
    def _names(self) -> frozenset[str]:
        return frozenset(name for name, *_ in self.layout)

    @cached_property
    def _scale(self) -> dict[str, str]:
        """IA3's modules: "input" where the vector scales a feed-forward module's input, else "output"."""
        return {name.partition(".ia3_l.")[0]: "input" if role == "ia3-input" else "output"
                for name, role, *_ in self.layout if role in ("ia3", "ia3-input")}

    @cached_property
    def _rank(self) -> dict[str, int]:
        return dict(self.ranks)

    def layer_key(self, prefix: str) -> tuple[frozenset[str], frozenset[tuple[str, int]]]:
        """What trains under `prefix` (an encoder layer's), named from there: alike for layers that train alike."""
        return self._by_layer.get(prefix, (frozenset(), frozenset()))

    @cached_property
    def _by_layer(self) -> dict[str, tuple[frozenset[str], frozenset[tuple[str, int]]]]:
        trained: dict[str, set[str]] = {}
        ranks: dict[str, set[tuple[str, int]]] = {}
        for name in self.trained:
            layer = _LAYER.search(name)
            if layer is not None:
                cut = layer.end()
                trained.setdefault(name[:cut], set()).add(name[cut:])
        for name, rank in self.ranks:
            layer = _LAYER.search(name + ".")
            if layer is not None:
                cut = layer.end()
                ranks.setdefault(name[:cut], set()).add((name[cut:], rank))
        return {prefix: (frozenset(trained.get(prefix, ())), frozenset(ranks.get(prefix, ())))
                for prefix in {*trained, *ranks}}

    def layer_trainable(self, config: BertConfig) -> int:
        """The most elements one encoder layer trains (its weight gradients: a backward transient)."""
        per_layer: dict[str, int] = {}
        for name, size in self.sizes:
            layer = _LAYER.search(name)
            if layer is not None:
                per_layer[name[:layer.end()]] = per_layer.get(name[:layer.end()], 0) + size
        return max(per_layer.values(), default=0)


def _tied(tree: ParamTree) -> dict[str, str]:
    return {p.name: p.tied_to for p in tree.root.params() if p.tied_to}


def _modules(tree: ParamTree) -> frozenset[str]:
    return frozenset(p.name.rsplit(".", 1)[0] for p in tree.root.params())


def _of_adapter(tree: ParamTree, label: str, adapted: Adapted, dropout: float) -> Method:
    """An adapter as peft builds it on `tree`'s class (LoRA's)."""
    tables = {p.name.removeprefix(PREFIX).partition(".lora_embedding_")[0] for p in adapted.params
              if ".lora_embedding_" in p.name}  # (the Embeddings adapted, whatever their names: MPNet's
    embedding = [name for name in adapted.targets if name in tables and  # relative_attention_bias is one)
                 not name.endswith("word_embeddings")]
    if embedding:
        raise ConfigError("target_modules", embedding[0], "LoRA on this embedding is counted, but its step is "
                          "modelled on the word embeddings only (word_embeddings)")
    tied = _tied(tree)
    owners = set(tied.values())
    shared = [name for name in adapted.targets if any(
        (tensor.startswith(f"{name}.") and "." not in tensor[len(name) + 1:]) and
        (tensor in tied or (tensor in owners and not name.endswith("word_embeddings")))
        for tensor in (*tied, *owners))]
    if shared:  # (the step follows LoRA on the word table that owns the tie only)
        raise ConfigError("target_modules", shared[0], "holds a tensor tied to another module's (the word "
                          "embeddings and the LM decoder): an adapter on it is counted, but its step is not "
                          "modelled")
    dora_tables = [name for name in adapted.targets if name.endswith("embeddings")
                   and any(p.role == "magnitude" and p.name.removeprefix(PREFIX).startswith(f"{name}.")
                           for p in adapted.params)]
    if dora_tables:  # (peft's DoraEmbeddingVariant: the table's norms each step, not modelled)
        raise ConfigError("use_dora", True, f"DoRA on an embedding ({dora_tables[0]}) is counted, but its step is "
                          "not modelled yet: its magnitude scales the lookup by the table's norms")
    trained: set[str] = set()
    copies: dict[str, str] = {}  # trained as a saved module's copy (and that module): a tensor of its own
    sizes: list[tuple[str, int]] = []
    adapters = adapter_tensors = 0
    for param in adapted.params:
        name = param.name.removeprefix(PREFIX)
        if param.role in ("lora_A", "lora_B", "magnitude", "ia3"):
            adapters += param.numel
            adapter_tensors += 1
        elif param.role == "copy":
            module = name.partition(".modules_to_save.default.")[0]
            name = name.replace(".modules_to_save.default.", ".")
            copies[name] = module
        elif param.role == "base":
            name = name.replace(".base_layer.", ".")
        if param.trainable:
            trained.add(name)
            sizes.append((name, param.numel))
    for name, target in tied.items():
        if target in trained and target not in copies:  # (a copy's decoder is not the word table it copied)
            trained.add(name)
    # a copied tensor that was tied to one outside its module is untied (a tie within the module stays one tensor)
    unties = next((copied for copied, module in sorted(copies.items()) for name, target in tied.items()
                   if copied in (name, target) and name.startswith(f"{module}.") != target.startswith(f"{module}.")),
                  "")
    label += f", dropout {dropout:g}" if dropout else ""
    # (IA3's vector [1, in] scales a feed-forward module's input, [out, 1] another's output)
    layout = tuple((p.name.removeprefix(PREFIX), "ia3-input" if p.role == "ia3" and p.shape[0] == 1 < p.numel
                    else p.role, p.trainable, p.numel) for p in adapted.params)
    return Method(label, _modules(tree), frozenset(trained), tuple(adapted.ranks.items()), dropout > 0,
                  adapted.total, len(adapted.params), adapted.trainable, sum(p.trainable for p in adapted.params),
                  adapters, adapter_tensors, tuple(sizes), layout=layout, unties=unties)


def _of_frozen(tree: ParamTree, frozen: Trained) -> Method:
    """Parts frozen, the rest trained whole."""
    if not frozen.frozen_names:
        raise ConfigError("freeze", "nothing", "freezes no part: without a method the step is full fine-tuning")
    cold = set(frozen.frozen_names)
    if frozen.trainable == 0:
        raise ConfigError("freeze", "everything", "nothing would train")
    params = tree.unique_params()
    trained = {p.name for p in params if p.name not in cold}
    for name, target in _tied(tree).items():
        if target in trained:
            trained.add(name)
    return Method(frozen.label, _modules(tree), frozenset(trained), (), False, tree.total,
                  len(params), frozen.trainable, sum(p.name not in cold for p in params), 0, 0,
                  tuple((p.name, p.numel) for p in params if p.name not in cold),
                  layout=tuple((p.name, "base", p.name not in cold, p.numel) for p in params))


def method_of(tree: ParamTree, config: BertConfig, how: FineTuning) -> Method:
    """The step's view of a fine-tuning method on `tree`'s class: what it trains (`FineTuning.trained`), module by
    module; a method whose step is not modelled yet is refused by its own rule (`FineTuning.step_refusal`)."""
    refused = how.step_refusal()
    if refused is not None:
        raise refused
    trained = how.trained(tree, config)
    if trained.adapted is None:
        return _unreached(_of_frozen(tree, trained), config)
    dropout = getattr(how, "lora_dropout", 0.0)  # (LoRA's: a dropout mask beside each adapter in the step)
    return _unreached(_of_adapter(tree, trained.label.removesuffix(" (peft)"), trained.adapted, dropout), config)


def _unreached(method: Method, config: BertConfig) -> Method:
    """`method` with what trains in modules the step never reaches (DeBERTa's relative embeddings' LayerNorm
    without relative attention) set apart: trainable for peft, but no gradient ever comes."""
    body = config.body_prefix
    prefixes = tuple(f"{body}{module}." for module in unused_modules(config))
    cold = [(name, size) for name, size in method.sizes if prefixes and name.startswith(prefixes)]
    if config.head in LM_HEADS and not config.tie_word_embeddings:  # an untied LM head's own bias: its decoder's
        cold += [(name, size) for name, size in method.sizes  # bias is the one the forward adds
                 if name.endswith(".bias") and f"{name.removesuffix('bias')}decoder" in method.modules]
    if not cold:
        return method
    return replace(method, unreached=(sum(size for _, size in cold), len(cold)))
