"""Parts frozen for fine-tuning (`requires_grad_(False)` on them, the rest trained): the embeddings, the first
k encoder layers, or the whole body (everything but the head, the `for p in model.bert.parameters()` recipe).
What trains and what does not, counted from the tree's own groups and layer names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import BertConfig, ConfigError
from .trained import Adapted, Trained
from .tree import Param, ParamTree, strip_body

_LAYER = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


@dataclass(frozen=True)
class Freeze:
    embeddings: bool = False
    layers: int = 0  # the first `layers` encoder layers
    body: bool = False  # everything but the head

    kind = "freeze"
    name = "parts frozen"

    def label(self, adapted: Adapted | None = None) -> str:
        parts = [part for part, on in (("embeddings", self.embeddings), (f"the first {self.layers} layers",
                                                                        self.layers), ("the body", self.body)) if on]
        return f"{' and '.join(parts) or 'nothing'} frozen"

    def trained(self, tree: ParamTree, config: BertConfig) -> Trained:
        cold = freeze(tree, config, self)
        return Trained(self.label(), cold.trainable, cold.frozen, cold.names, how=self)

    def step_refusal(self) -> ConfigError | None:
        return None

    def settings(self) -> dict[str, object]:
        return {"embeddings": self.embeddings, "layers": self.layers, "body": self.body}


@dataclass(frozen=True)
class Frozen:
    """(trainable, frozen) elements, and the parameters frozen, in model order."""

    trainable: int
    frozen: int
    names: tuple[str, ...]


def freeze(tree: ParamTree, config: BertConfig, spec: Freeze) -> Frozen:
    if spec.layers < 0 or spec.layers > config.num_hidden_layers:
        raise ConfigError("freeze_layers", spec.layers, f"must be between 0 and num_hidden_layers "
                          f"({config.num_hidden_layers})")
    if spec.layers and config.family.forward.shared_layers:
        raise ConfigError("freeze_layers", spec.layers, "ALBERT's layers are shared (one stored layer runs L "
                          "times): the first k cannot be frozen apart")
    if spec.body and config.head == "none":
        raise ConfigError("freeze_body", True, f"{config.hf_class} has no head: nothing would train")
    def part_frozen(param: Param) -> bool:
        layer = _LAYER.search(param.name)
        # the embeddings as people freeze them: `body.embeddings.requires_grad_(False)` (not ELECTRA's projection,
        # which counts with the embeddings but sits beside them)
        embeddings = strip_body(param.name).startswith("embeddings.")
        # the body as the recipe freezes it, `model.<body>.requires_grad_(False)` (DeBERTa's pooler is beside it)
        body = param.name.startswith(f"{config.body}.")
        return (spec.body and body) or (spec.embeddings and embeddings) or (
            param.group == "encoder" and layer is not None and int(layer.group(1)) < spec.layers)

    # A tied tensor is one Parameter: freezing the part that holds either name freezes both (XLM-R's MLM head
    # yields the decoder's name first, so freezing the embeddings freezes that decoder weight).
    tied_cold = {p.tied_to for p in tree.tied_params() if part_frozen(p)}
    trainable = frozen = 0
    names = []
    for param in tree.unique_params():
        if part_frozen(param) or param.name in tied_cold:
            frozen += param.count
            names.append(param.name)
        else:
            trainable += param.count
    return Frozen(trainable, frozen, tuple(names))
