"""Where a config comes from: a preset (by name or file), a HF config.json or model folder, a checkpoint, or
a model on the Hugging Face Hub named by its id (`ORG/NAME`; a path that exists always wins over an id).

Shared by the CLI and the explorer; every failure is one of `LOAD_ERRORS`, whose message names the file
(or the preset) and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .core import BertConfig, ConfigError, build_tree
from .io.files import probe
from .io.hf_config import SourceError, load_hf_config
from .presets import PresetError, UnknownPresetError, find_preset, load_preset

if TYPE_CHECKING:  # checkpoints are read on demand: `bert-tui count --preset ...` starts without them
    from .core.count.compare import Comparison
    from .core.count.lora import Ia3, Lora
    from .io.hub import Progress
    from .io.safetensors import Checkpoint

LOAD_ERRORS = (PresetError, UnknownPresetError, SourceError)


@dataclass(frozen=True)
class Source:
    """A config read from somewhere, with a name for it and notes on how it was read; a PEFT adapter folder
    adds its LoRA and its weights file."""

    name: str
    config: BertConfig
    notes: tuple[str, ...] = ()
    lora: Lora | Ia3 | None = None
    adapter_weights: Path | None = None


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
    from .core.count.compare import infer_config
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
    from .io.safetensors import load_checkpoint

    return compare_checkpoint(load_checkpoint(path), config)


def is_checkpoint(path: Path) -> bool:
    """Whether `path` names weights (a .safetensors file, an index, or a folder holding weights)."""
    if probe(path, Path.is_dir):
        return probe(path / "model.safetensors", Path.exists) or probe(path / "model.safetensors.index.json", Path.exists)
    return path.suffix == ".safetensors" or path.name.endswith(".safetensors.index.json")


def open_path(path: Path, *, revision: str | None = None, offline: bool = False,
              progress: Progress | None = None) -> tuple[Source, Checkpoint | None]:
    """What the explorer's 'open' prompt opens: a checkpoint with its config, a PEFT adapter folder with the
    model it adapts, or a config alone."""
    from .io.peft_config import is_adapter
    from .io.safetensors import load_checkpoint

    if is_adapter(path):
        return open_adapter(path, revision=revision, offline=offline, progress=progress), None
    if is_checkpoint(path):
        return source_beside(path), load_checkpoint(path)
    return load_source(path, "config"), None


def open_model(text: str, *, revision: str | None = None, offline: bool = False,
               progress: Progress | None = None) -> tuple[Source, Checkpoint | None]:
    """What a MODEL argument names: an existing path (config, folder, preset YAML or checkpoint), else a Hub id
    (`ORG/NAME`, with `revision`), else a preset name. The Hub client is imported only for an id."""
    path = Path(text)
    if probe(path, Path.exists):  # before the id test: a local path needs nothing of the Hub's
        return open_path(path, revision=revision, offline=offline, progress=progress)
    if names_hub_model(text):
        return open_hub(text, revision=revision, offline=offline, progress=progress)
    if revision is not None:
        raise SourceError(text, None, "--revision goes with a Hub model id (ORG/NAME); this is no id, and no path exists")
    try:
        return load_source(text, "name"), None
    except UnknownPresetError as error:
        raise UnknownPresetError(text, error.known, ", and no such path or Hub model id (ORG/NAME)") from None


def open_adapter(path: Path, *, revision: str | None = None, offline: bool = False,
                 progress: Progress | None = None, title: str | None = None) -> Source:
    """A PEFT adapter folder: the model `base_model_name_or_path` names (a path beside the folder or as given,
    a Hub id or a preset), its head the one the task type names, with the adapter's LoRA. `title`: what to call
    the adapter (its path, or its Hub id)."""
    from .io.peft_config import TASK_HEADS, load_adapter

    adapter = load_adapter(path)
    if adapter.base is None:
        raise SourceError(path, "base_model_name_or_path", "is null: the adapter does not say which model it adapts")
    beside = adapter.path / adapter.base
    named = str(beside) if not Path(adapter.base).is_absolute() and probe(beside, Path.exists) else adapter.base
    base, _ = open_model(named, revision=revision, offline=offline, progress=progress)
    config = base.config
    if adapter.task_type is not None:
        head = TASK_HEADS[adapter.task_type]
        try:
            config = config.replace(head=head)
        except ConfigError as error:
            raise SourceError(path, "task_type", f"{adapter.task_type}: {error.rule}") from None
    notes = (*base.notes, f"the adapter's base model: {base.name}")
    return Source(f"{title or path} (LoRA on {base.name})", config, notes, adapter.lora, adapter.weights)


def names_hub_model(text: str) -> bool:
    """Whether `text` names a model on the Hub: an `ORG/NAME` id, and no path of that name exists (a path wins)."""
    from .io.hub import is_model_id

    return is_model_id(text) and not probe(Path(text), Path.exists)


def open_hub(repo_id: str, *, revision: str | None = None, offline: bool = False,
             progress: Progress | None = None) -> tuple[Source, Checkpoint | None]:
    """A model on the Hub: its config.json (through the user's cache) and its checkpoint's headers."""
    from .io.hub import ADAPTER_CONFIG, open_repo

    model = open_repo(repo_id, revision, offline, progress)
    if model.config_path.name == ADAPTER_CONFIG:  # a PEFT adapter shared on the Hub: its base opens by its name
        adapter = open_adapter(model.config_path, offline=offline, progress=progress, title=model.title)
        return replace(adapter, notes=(*adapter.notes, *model.notes)), None
    hf = load_hf_config(model.config_path)
    fetched = (f"read {model.fetched_bytes:,} header bytes from the Hub, no weights",) if model.fetched_bytes else ()
    return Source(model.title, hf.config, (*hf.notes, *model.notes, *fetched)), model.checkpoint


def compare_checkpoint(checkpoint: Checkpoint, config: BertConfig) -> CheckpointReport:
    """How a checkpoint read already compares with `config`."""
    from .core.count.compare import compare

    return CheckpointReport(checkpoint, compare(build_tree(config), [(t.name, t.shape) for t in checkpoint.tensors]))
