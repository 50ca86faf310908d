"""Where a config comes from: a preset (by name or file), a HF config.json or model folder, or a checkpoint.

Shared by the CLI and the explorer; every failure is one of `LOAD_ERRORS`, whose message names the file
(or the preset) and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .core import BertConfig, ConfigError, build_tree
from .io.files import probe
from .io.hf_config import SourceError, load_hf_config
from .presets import PresetError, UnknownPresetError, find_preset, load_preset

if TYPE_CHECKING:  # checkpoints are read on demand: `bert-tui count --preset ...` starts without them
    from .core.compare import Comparison
    from .io.safetensors import Checkpoint

LOAD_ERRORS = (PresetError, UnknownPresetError, SourceError)


@dataclass(frozen=True)
class Source:
    """A config read from somewhere, with a name for it and notes on how it was read."""

    name: str
    config: BertConfig
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckpointReport:
    """A checkpoint and how it compares with the config it was checked against."""

    checkpoint: Checkpoint
    comparison: Comparison


def load_source(source: str | Path, kind: str = "either") -> Source:
    """A preset by name ('name'), a preset file ('file'), a config.json / folder / preset YAML ('config'),
    or ('either') whichever of these `source` names: an existing path, else a preset name."""
    path = Path(source)
    if kind == "config" or (kind == "either" and probe(path, Path.exists)):
        if path.suffix not in (".yaml", ".yml"):
            hf = load_hf_config(path)
            return Source(str(path), hf.config, hf.notes)
        kind = "file"
    preset = load_preset(path) if kind == "file" else find_preset(str(source))
    return Source(preset.name, preset.config)


def source_beside(checkpoint: Path) -> Source:
    """The config.json beside a checkpoint, or a config read back from its tensor shapes."""
    from .core.compare import infer_config
    from .io.safetensors import load_checkpoint

    folder = checkpoint if probe(checkpoint, Path.is_dir) else checkpoint.parent
    if probe(folder / "config.json", Path.exists):
        return load_source(folder / "config.json", "config")
    stored = load_checkpoint(checkpoint)
    try:
        config, notes = infer_config([(t.name, t.shape) for t in stored.tensors])
    except (ValueError, ConfigError) as error:
        raise SourceError(checkpoint, None, f"no config.json beside it, and {error}") from None
    return Source(f"{checkpoint} (config read from its shapes)", config, notes)


def check_checkpoint(path: Path, config: BertConfig) -> CheckpointReport:
    """Read a checkpoint's headers and compare what it stores with what `config` predicts."""
    from .core.compare import compare
    from .io.safetensors import load_checkpoint

    checkpoint = load_checkpoint(path)
    stored = [(t.name, t.shape) for t in checkpoint.tensors]
    return CheckpointReport(checkpoint, compare(build_tree(config), stored))


def is_checkpoint(path: Path) -> bool:
    """Whether `path` names weights (a .safetensors file, an index, or a folder holding weights)."""
    if probe(path, Path.is_dir):
        return probe(path / "model.safetensors", Path.exists) or probe(path / "model.safetensors.index.json", Path.exists)
    return path.suffix == ".safetensors" or path.name.endswith(".safetensors.index.json")


def open_path(path: Path) -> tuple[Source, Checkpoint | None]:
    """What the explorer's 'open' prompt opens: a checkpoint with its config, or a config alone."""
    from .io.safetensors import load_checkpoint

    if is_checkpoint(path):
        return source_beside(path), load_checkpoint(path)
    return load_source(path, "config"), None
