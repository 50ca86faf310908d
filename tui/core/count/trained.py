"""What trains under a fine-tuning method, as counting sees it: one record for full fine-tuning, LoRA (and DoRA),
IA3 and parts frozen, so that every face says the same of it — the count's table, its JSON, CSV and Markdown, the
explorer's Totals pane and its export.

The training convention is the count's (mixed-precision Adam, `totals.ADAM_BYTES_PER_PARAM` bytes a trained
parameter, activations not included) and a frozen parameter's 16-bit weight (`FROZEN_BYTES`); `bert-tui compute`
is the step's own, measured account.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BertConfig
from .frozen import Freeze, freeze
from .lora import Adapted, Ia3, Lora, adapt, adapt_ia3
from .totals import ADAM_BYTES_PER_PARAM
from .tree import ParamTree

FROZEN_BYTES = 2  # a frozen parameter under mixed precision: its 16-bit weight only (no gradient, no moments)

How = Lora | Ia3 | Freeze  # a fine-tuning method as the flags or an adapter_config.json name it


@dataclass(frozen=True)
class Trained:
    """What trains: `trainable` elements with gradients and optimizer states, `frozen` ones held as weights."""

    label: str  # "full fine-tuning", "LoRA r=8 on query, value (peft)", "IA3 on …", "embeddings frozen"
    trainable: int
    frozen: int
    frozen_names: tuple[str, ...] = ()  # parts frozen: the parameters frozen, in model order
    adapted: Adapted | None = None  # an adapter: the peft model's tensors
    how: How | None = None  # the method as it was named (None: full fine-tuning)

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


def of_adapted(adapted: Adapted, how: Lora | Ia3) -> Trained:
    """An adapter as peft builds it (`lora.adapt`, `lora.adapt_ia3`)."""
    return Trained(f"{label(how, adapted)} (peft)", adapted.trainable, adapted.frozen, adapted=adapted, how=how)


def trained(tree: ParamTree, config: BertConfig, how: How | None) -> Trained:
    """What trains under `how` on `tree`'s class (None: full fine-tuning); a `ConfigError` names what the
    method cannot be on this model."""
    if how is None:
        return full(tree)
    if isinstance(how, Freeze):
        cold = freeze(tree, config, how)
        return Trained(label(how), cold.trainable, cold.frozen, cold.names, how=how)
    adapted = adapt(tree, config, how) if isinstance(how, Lora) else adapt_ia3(tree, config, how)
    return of_adapted(adapted, how)


def label(how: How, adapted: Adapted | None = None) -> str:
    """A method in a few words: "LoRA r=8 on query, value", "DoRA r=8 on …", "IA3 on key, value, output.dense",
    "embeddings and the first 3 layers frozen" (`adapted`: the modules an adapter's targets matched)."""
    if isinstance(how, Freeze):
        parts = [part for part, on in (("embeddings", how.embeddings), (f"the first {how.layers} layers", how.layers),
                                       ("the body", how.body)) if on]
        return f"{' and '.join(parts) or 'nothing'} frozen"
    targets = "" if adapted is None else " on " + ", ".join(sorted({name.rsplit(".", 1)[-1]
                                                                   for name in adapted.targets}))
    if isinstance(how, Ia3):
        return f"IA3{targets}"
    return f"{'DoRA' if how.use_dora else 'LoRA'} r={how.r}{targets}"
