"""What trains under a fine-tuning method, as counting sees it, and the protocol every method keeps.

A method (`FineTuning`: LoRA and DoRA, IA3 in `lora`, parts frozen in `frozen`) is one value that knows its
name and label, what it makes of a model (`trained`: one `Trained` record for full fine-tuning, an adapter or
parts frozen, so that every face says the same of it: the count's table, its JSON, CSV and Markdown, the
explorer's Totals pane and its export, the step), and why the step does not model it yet (`step_refusal`). The
faces hold a method, never a union of kinds.

The training convention is the count's (mixed-precision Adam, `totals.ADAM_BYTES_PER_PARAM` bytes a trained
parameter, activations not included) and a frozen parameter's 16-bit weight (`FROZEN_BYTES`); `bert-tui compute`
is the step's own, measured account.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Protocol

from ..config import BertConfig, ConfigError
from .totals import ADAM_BYTES_PER_PARAM
from .tree import ParamTree

FROZEN_BYTES = 2  # a frozen parameter under mixed precision: its 16-bit weight only (no gradient, no moments)


@dataclass(frozen=True, slots=True)
class PeftParam:
    """One tensor of the peft model: its name, shape, whether it trains, and what it is."""

    name: str
    shape: tuple[int, ...]
    trainable: bool
    role: str  # "base", "lora_A", "lora_B", "magnitude", "original", "copy"

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class Adapted:
    """The peft model's parameters, and `get_nb_trainable_parameters()`: (trainable, all)."""

    params: tuple[PeftParam, ...]
    targets: tuple[str, ...]  # the modules adapted
    saved: tuple[str, ...]  # the modules wrapped to be saved (trained copies)
    task_type: str | None
    ranks: dict[str, int] = field(default_factory=dict)
    bias: str = "none"  # LoRA's `bias`: under "all" peft's file holds every bias of the model (`saved_tensors`)
    # a saved module's tensors its copy shares within itself (BERT's `cls.predictions.decoder.bias`, the
    # predictions' `bias`): one parameter, but a key of its state dict, which peft's file holds (`saved_tensors`)
    aliases: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # every key of the peft model's state dict that names a bias (`.bias`), a tied tensor's second name included
    # (BERT's `cls.predictions.decoder.bias`): peft's file holds them under `bias="all"` (`saved_tensors`)
    state_biases: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def trainable(self) -> int:
        return sum(p.numel for p in self.params if p.trainable)

    @property
    def total(self) -> int:
        return sum(p.numel for p in self.params)

    @property
    def frozen(self) -> int:
        return self.total - self.trainable


class FineTuning(Protocol):
    """A fine-tuning method, as flags or an adapter_config.json name it."""

    @property
    def kind(self) -> str:
        """Its key in the JSON and the family of its flags: lora, ia3, freeze."""
        ...

    @property
    def name(self) -> str:
        """What it is called: LoRA, DoRA, IA3, parts frozen."""
        ...

    def label(self, adapted: Adapted | None = None) -> str:
        """It in a few words: "LoRA r=8 on query, value", "embeddings frozen" (`adapted`: the modules matched)."""
        ...

    def trained(self, tree: ParamTree, config: BertConfig) -> Trained:
        """What trains under it on `tree`'s class (a `ConfigError` names what it cannot be on this model)."""
        ...

    def step_refusal(self) -> ConfigError | None:
        """Why compute and memory under it are not modelled yet, naming the setting (None: they are)."""
        ...

    def settings(self) -> dict[str, object]:
        """Its own settings, as its config names them (what the JSON shows of it)."""
        ...


@dataclass(frozen=True)
class Trained:
    """What trains: `trainable` elements with gradients and optimizer states, `frozen` ones held as weights."""

    label: str  # "full fine-tuning", "LoRA r=8 on query, value (peft)", "IA3 on …", "embeddings frozen"
    trainable: int
    frozen: int
    frozen_names: tuple[str, ...] = ()  # parts frozen: the parameters frozen, in model order
    adapted: Adapted | None = None  # an adapter: the peft model's tensors
    how: FineTuning | None = None  # the method as it was named (None: full fine-tuning)

    @property
    def total(self) -> int:
        """Every parameter of the model as trained (peft's "all params": the adapters included)."""
        return self.trainable + self.frozen

    @property
    def training_bytes(self) -> int:
        """The count's training convention: 16 bytes a trained parameter, 2 a frozen one; no activations."""
        return self.trainable * ADAM_BYTES_PER_PARAM + self.frozen * FROZEN_BYTES

    @property
    def convention(self) -> str:
        """How `training_bytes` is reckoned, in words."""
        if not self.frozen:
            return f"mixed-precision Adam, {ADAM_BYTES_PER_PARAM} B/param"
        return f"mixed-precision Adam, {ADAM_BYTES_PER_PARAM} B a trained parameter, {FROZEN_BYTES} a frozen one"


def full(tree: ParamTree) -> Trained:
    """Full fine-tuning: every parameter trains."""
    return Trained("full fine-tuning", tree.total, 0)


def of_adapted(adapted: Adapted, how: FineTuning) -> Trained:
    """What trains under an adapter, as peft built it (`lora.adapt`, `lora.adapt_ia3`)."""
    return Trained(f"{how.label(adapted)} (peft)", adapted.trainable, adapted.frozen, adapted=adapted, how=how)


def trained(tree: ParamTree, config: BertConfig, how: FineTuning | None) -> Trained:
    """What trains under `how` on `tree`'s class (None: full fine-tuning)."""
    return full(tree) if how is None else how.trained(tree, config)


def targets_text(adapted: Adapted | None) -> str:
    """" on key, value": the last names of the modules an adapter's targets matched ("" without one)."""
    if adapted is None:
        return ""
    return " on " + ", ".join(sorted({name.rsplit(".", 1)[-1] for name in adapted.targets}))
