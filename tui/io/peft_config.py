"""A PEFT adapter folder: `adapter_config.json` (peft's `LoraConfig` or `IA3Config`, saved) and
`adapter_model.safetensors`.

What the config decides about parameters is read into `tui.core.count.lora.Lora`; every other key is either one
that changes no parameter (`lora_alpha`, `lora_dropout`, `use_rslora`, `init_lora_weights`, ...), or one this
reader refuses by name when it is set (another PEFT method than LoRA, `target_parameters`,
`layer_replication`, `trainable_token_indices`, ...): never counted wrong.
The file is read bounded and parsed strictly (`tui.io.files`), as a config.json is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import ConfigError
from ..core.count.lora import Ia3, Lora
from .files import ReadError, parse_json, probe, read_bytes
from .hf_config import SourceError

CONFIG_NAME, WEIGHTS_NAME = "adapter_config.json", "adapter_model.safetensors"
MAX_ADAPTER_CONFIG_BYTES = 1024 * 1024
# task_type → the head whose class peft fine-tunes under it
TASK_HEADS = {"SEQ_CLS": "sequence-classification", "TOKEN_CLS": "token-classification",
              "QUESTION_ANS": "question-answering", "FEATURE_EXTRACTION": "none", "CAUSAL_LM": "causal-lm"}
# Keys that change no parameter's name or shape (an initialisation: PiSSA, OLoRA, LoftQ, Astra, IA3's ones).
NEUTRAL = {"lora_alpha", "lora_dropout", "use_rslora", "init_lora_weights", "fan_in_fan_out", "inference_mode",
           "alpha_pattern", "peft_version", "revision", "auto_mapping", "megatron_core", "qalora_group_size",
           "ensure_weight_tying", "loftq_config", "base_model_name_or_path", "peft_type", "task_type",
           "astra_config", "runtime_config", "init_ia3_weights"}
# Keys read into the method (`Lora`, `Ia3`).
READ = {"r", "target_modules", "bias", "modules_to_save", "use_dora", "layers_to_transform", "rank_pattern",
        "feedforward_modules", "exclude_modules", "layers_pattern", "lora_bias"}
# Keys that change parameters in ways not modelled: refused when set (not null, false, empty).
REFUSED = ("target_parameters", "layer_replication",
           "trainable_token_indices", "megatron_config", "use_qalora", "alora_invocation_tokens", "arrow_config",
           "corda_config", "eva_config", "kasa_config", "lora_ga_config", "monteclora_config", "velora_config",
           "use_bdlora")
KNOWN = NEUTRAL | READ | set(REFUSED)


@dataclass(frozen=True)
class Adapter:
    """An adapter folder: its LoRA, the model it adapts and the head its task type names."""

    path: Path
    method: Lora | Ia3  # the adapter's method (`FineTuning`)
    base: str | None  # base_model_name_or_path
    task_type: str | None
    weights: Path | None  # adapter_model.safetensors, where present


def is_adapter(path: Path) -> bool:
    """A folder holding `adapter_config.json`, or that file itself."""
    if probe(path, Path.is_dir):
        return probe(path / CONFIG_NAME, Path.exists)
    return path.name == CONFIG_NAME


def load_adapter(path: Path) -> Adapter:
    """Read an adapter folder (or its adapter_config.json); a refused key names itself and the file."""
    folder = path if probe(path, Path.is_dir) else path.parent
    config_path = folder / CONFIG_NAME
    try:
        data = parse_json(read_bytes(config_path, MAX_ADAPTER_CONFIG_BYTES, "an adapter config"), "JSON")
    except ReadError as problem:
        raise SourceError(config_path, None, str(problem)) from None
    if not isinstance(data, dict):
        raise SourceError(config_path, None, "is not a JSON object")
    method = data.get("peft_type")
    if method not in ("LORA", "IA3"):
        raise SourceError(config_path, "peft_type", f"{_said(method)}: only LORA and IA3 adapters are modelled "
                          "(prefix and prompt tuning and the other methods are not)")
    for key in REFUSED:
        if _set(data.get(key)):
            raise SourceError(config_path, key, f"{_said(data[key])}: changes the adapter's parameters in a way "
                              "bert-tui does not model")
    # a key of a later peft (or of none), set: what it does to the parameters is not known, so it is not counted
    unknown = next((key for key, value in data.items() if key not in KNOWN and _set(value)), None)
    if unknown is not None:
        raise SourceError(config_path, unknown, f"{_said(data[unknown])}: not a key of peft's LoraConfig or "
                          "IA3Config as bert-tui models them (peft 0.22): it may change the adapter's parameters, "
                          "so it is not counted")
    task = data.get("task_type")
    if task is not None and task not in TASK_HEADS:
        raise SourceError(config_path, "task_type", f"{_said(task)}: must be one of {', '.join(TASK_HEADS)} or null")
    base = data.get("base_model_name_or_path")
    if base is not None and (not isinstance(base, str) or not base.strip() or len(base) > 4096):
        raise SourceError(config_path, "base_model_name_or_path", f"{_said(base)}: must name a model (a path, a "
                          "Hub id or a preset)")
    weights = folder / WEIGHTS_NAME
    present = weights if probe(weights, Path.exists) else None
    if method == "IA3":
        try:
            feedforward = data.get("feedforward_modules")
            ia3 = Ia3(_targets(data.get("target_modules")),
                      None if feedforward is None else _names(data, "feedforward_modules"),
                      _names(data, "modules_to_save"), _targets(data.get("exclude_modules"), "exclude_modules"))
        except ConfigError as error:
            raise SourceError(config_path, error.field, f"{_said(error.value)}: {error.rule}") from None
        except _Bad as bad:
            raise SourceError(config_path, bad.key, bad.problem) from None
        return Adapter(folder, ia3, base, task, present)
    try:
        lora = Lora(r=_whole(data, "r", 8), target_modules=_targets(data.get("target_modules")),
                    bias=_text(data, "bias", "none"), modules_to_save=_names(data, "modules_to_save"),
                    use_dora=_flag(data, "use_dora"), layers_to_transform=_layers(data.get("layers_to_transform")),
                    rank_pattern=_pattern(data.get("rank_pattern")), lora_alpha=_number(data, "lora_alpha", 8),
                    exclude_modules=_targets(data.get("exclude_modules"), "exclude_modules"),
                    layers_pattern=_layer_names(data.get("layers_pattern")), lora_bias=_flag(data, "lora_bias"))
    except ConfigError as error:
        raise SourceError(config_path, error.field, f"{_said(error.value)}: {error.rule}") from None
    except _Bad as bad:
        raise SourceError(config_path, bad.key, bad.problem) from None
    return Adapter(folder, lora, base, task, present)


def _set(value: object) -> bool:
    """Whether a key is set: not null, false or empty (as peft writes the keys it leaves alone)."""
    return value not in (None, False, [], {}, "")


class _Bad(ValueError):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key, self.problem = key, problem


def _said(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(data: dict[str, Any], key: str, default: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(key, f"{_said(value)}: must be a whole number")
    return value


def _number(data: dict[str, Any], key: str, default: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(key, f"{_said(value)}: must be a number")
    return int(value)


def _text(data: dict[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise _Bad(key, f"{_said(value)}: must be a string")
    return value


def _flag(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise _Bad(key, f"{_said(value)}: must be true or false")
    return value


def _names(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise _Bad(key, f"{_said(value)}: must be a list of module names or null")
    return tuple(value)


def _targets(value: object, key: str = "target_modules") -> tuple[str, ...] | str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) and item for item in value):
        return tuple(sorted(value))  # peft saves a set as a list: the order means nothing
    raise _Bad(key, f"{_said(value)}: must be a list of module names, a regular expression or null")


def _layer_names(value: object) -> tuple[str, ...] | None:
    """`layers_pattern`: a name or a list of names (empty: peft's default rule)."""
    if value is None or value in ("", []):
        return None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) and item for item in value):
        return tuple(value)
    raise _Bad("layers_pattern", f"{_said(value)}: must be a layer list's name, a list of them or null")


def _layers(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        return tuple(value)
    raise _Bad("layers_to_transform", f"{_said(value)}: must be a layer index, a list of them or null")


def _pattern(value: object) -> tuple[tuple[str, int], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                              for k, v in value.items()):
        raise _Bad("rank_pattern", f"{_said(value)}: must map module names to whole-number ranks")
    return tuple(value.items())
