"""peft's adapter file (`adapter_model.safetensors`) as `save_pretrained` writes it for a method's `Adapted`: the
tensor names and shapes predicted from the config alone, and a stored file's headers compared with them.

Read from peft 0.22 (`utils/save_and_load.py`, `tuners/tuners_utils.py`) and checked against files peft wrote
(tests/fixtures/adapters/, by tests/fixtures/generate_peft.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .lora import PREFIX
from .trained import Adapted


def saved_tensors(adapted: Adapted) -> list[tuple[str, tuple[int, ...]]]:
    """What peft's `save_pretrained` writes to adapter_model.safetensors: every trainable tensor, named without
    the adapter's name (`lora_A.weight`, `lora_magnitude_vector`), a saved module's copy under the module's own
    name (`classifier.weight`). Under `bias="all"` peft's `get_peft_model_state_dict` also keeps every key of
    the state dict ending in `.bias`, trained or not, each name of a tied tensor, before it renames the saved
    modules: a saved module's frozen original's bias and its copy's under `modules_to_save.` are written too;
    under `lora_only`, each adapted module's `base_layer.bias` (the name a tied bias has there)."""
    out = []
    for param in adapted.params:
        if not param.trainable or param.role == "base":  # (a base tensor trains only as a bias: below)
            continue
        if param.role == "copy":
            name = param.name.replace(".modules_to_save.default.", ".")
        else:
            name = _file_key(param.name)
            if param.role == "magnitude":
                name = name.removesuffix(".weight")
        out.append((name, param.shape))
    out += list(adapted.aliases)
    written = {name for name, _ in out}
    if adapted.bias == "all":  # every key of the state dict that ends in `.bias`, each of a tied tensor's names
        out += [(name, shape) for key, shape in adapted.state_biases for name in (_file_key(key),)
                if name not in written]
    elif adapted.bias == "lora_only":  # each adapted module's own, by its name there
        wanted = {f"{PREFIX}{target}.base_layer.bias" for target in adapted.targets}
        out += [(key, shape) for key, shape in adapted.state_biases if key in wanted and key not in written]
    return out


def _file_key(key: str) -> str:
    """A state dict key as peft's file names it (`_remove_adapter_name_from_state_dict_key`): the adapter's name
    dropped where it ends the key or the module path (`lora_A.default.weight` → `lora_A.weight`), kept elsewhere."""
    if key.endswith(".default"):
        return key.removesuffix(".default")
    path, _, last = key.rpartition(".")
    return f"{path.removesuffix('.default')}.{last}"


@dataclass(frozen=True)
class AdapterComparison:
    """An adapter file against what its config predicts: tensors missing, unexpected, or of another shape."""

    expected: int
    held: int
    missing: tuple[str, ...]
    unexpected: tuple[tuple[str, tuple[int, ...]], ...]
    mismatched: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]

    @property
    def clean(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)


def compare_adapter(adapted: Adapted, stored: list[tuple[str, tuple[int, ...]]]) -> AdapterComparison:
    expected = dict(saved_tensors(adapted))
    held = dict(stored)
    return AdapterComparison(
        sum(prod(shape) for shape in expected.values()), sum(prod(shape) for shape in held.values()),
        tuple(name for name in expected if name not in held),
        tuple((name, shape) for name, shape in held.items() if name not in expected),
        tuple((name, expected[name], shape) for name, shape in held.items()
              if name in expected and tuple(expected[name]) != tuple(shape)))
