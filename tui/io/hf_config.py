"""Hugging Face `config.json` files (and model folders holding one), read into a `BertConfig`.

Unknown keys are ignored; missing keys take HF's `BertConfig` defaults; `architectures` picks the head class
where it names one; `num_labels` comes from `id2label` as HF derives it. Every problem is a `SourceError`
naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import ReadError, os_problem, parse_json, read_bytes
from ..core import HEADS, MODEL_TYPES, SIZE_FIELDS, BertConfig, ConfigError

MAX_CONFIG_BYTES = 1024 * 1024
SUPPORTED_MODEL_TYPES = tuple(MODEL_TYPES)  # BERT's layout; others (albert, distilbert, electra, ...) are not
ARCHITECTURES = {
    BertConfig(head=head, model_type=model_type).hf_class: (model_type, head)
    for model_type in MODEL_TYPES
    for head in HEADS
    if model_type == "bert" or head not in ("pretraining", "next-sentence")
}


# Where a model type's config class defaults differ from BertConfig's (RobertaConfig sets these).
HF_DEFAULTS: dict[str, dict[str, int]] = {"roberta": {"vocab_size": 50265}}


class SourceError(ValueError):
    """A file that cannot be used: which file, which key, what is wrong."""

    def __init__(self, path: Path | str, key: str | None, problem: str) -> None:
        self.path = Path(path)
        self.key = key
        self.problem = problem
        super().__init__(f"{path}: {key}: {problem}" if key else f"{path}: {problem}")


@dataclass(frozen=True, slots=True)
class HFConfig:
    """What a config.json says: the config to count, and how its head was chosen."""

    path: Path
    config: BertConfig
    architecture: str | None  # the `architectures` entry used, if any
    notes: tuple[str, ...]  # what a user should know (defaults taken, architectures ignored, ...)


def config_path(path: Path) -> Path:
    """`path` itself, or `path/config.json` for a model folder."""
    try:
        if path.is_dir():
            inner = path / "config.json"
            if not inner.exists():
                raise SourceError(path, None, "is a folder without config.json")
            return inner
    except (OSError, ValueError) as error:
        raise SourceError(path, None, os_problem(error)) from None
    return path


def read_json(path: Path, limit: int = MAX_CONFIG_BYTES) -> Any:
    """A JSON file through the bounded reader; every failure names the file."""
    try:
        return parse_json(read_bytes(path, limit, "a config"))
    except ReadError as problem:
        raise SourceError(path, None, str(problem)) from None


def load_hf_config(path: Path) -> HFConfig:
    """Read a HF config.json (or a folder holding one)."""
    path = config_path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise SourceError(path, None, "must be a JSON object of config keys")
    model_type = data.get("model_type", "bert")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise SourceError(path, "model_type", f"{model_type!r} is not supported; bert-tui counts: {', '.join(SUPPORTED_MODEL_TYPES)}")
    values: dict[str, Any] = {"model_type": model_type}
    for key in SIZE_FIELDS:
        if key in data:
            values[key] = _integer(path, key, data[key])
    for key, value in HF_DEFAULTS.get(model_type, {}).items():
        values.setdefault(key, value)
    notes = [f"{key} not in the file: HF's default {values.get(key, getattr(BertConfig(), key))}"
             for key in SIZE_FIELDS if key not in data]
    labels = data.get("id2label")
    if labels is not None:
        if not isinstance(labels, dict) or not labels:
            raise SourceError(path, "id2label", "must be a non-empty object of label names")
        values["num_labels"] = len(labels)
    elif "num_labels" in data:
        values["num_labels"] = _integer(path, "num_labels", data["num_labels"])
    architecture = _architecture(path, data.get("architectures"), notes)
    if architecture is not None:
        arch_type, values["head"] = ARCHITECTURES[architecture]
        if arch_type != model_type:
            notes.append(f"architectures names {architecture} but model_type is {model_type!r}: counted as {model_type}")
    try:
        config = BertConfig.from_mapping(values)
    except ConfigError as error:
        raise SourceError(path, error.field, f"{error.value!r}: {error.rule}") from None
    return HFConfig(path, config, architecture, tuple(notes))


def _integer(path: Path, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(path, key, f"{value!r} must be a JSON integer")
    return value


def _architecture(path: Path, value: object, notes: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SourceError(path, "architectures", f"{value!r} must be a list of class names")
    known: list[str] = [name for name in value if name in ARCHITECTURES]
    if not known:
        if value:
            notes.append(f"architectures {value} names no class bert-tui counts: counted as BertModel")
        return None
    return known[0]
