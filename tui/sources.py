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
    from .core.count.trained import FineTuning
    from .io.hub import Progress
    from .io.peft_config import Adapter
    from .io.safetensors import Checkpoint

LOAD_ERRORS = (PresetError, UnknownPresetError, SourceError)


@dataclass(frozen=True)
class Source:
    """A config read from somewhere, with a name for it and notes on how it was read; a PEFT adapter folder
    adds its method and its weights file."""

    name: str
    config: BertConfig
    notes: tuple[str, ...] = ()
    method: FineTuning | None = None  # a PEFT adapter folder's method
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
              progress: Progress | None = None, base: str | None = None) -> tuple[Source, Checkpoint | None]:
    """What the explorer's 'open' prompt opens: a checkpoint with its config, a PEFT adapter folder with the
    model it adapts (`base`: that model as the user names it, in place of its adapter_config.json's), or a
    config alone."""
    from .io.peft_config import is_adapter
    from .io.safetensors import load_checkpoint

    if is_adapter(path):
        return open_adapter(path, revision=revision, offline=offline, progress=progress, base=base), None
    if base is not None:
        raise SourceError(path, None, "--base names a PEFT adapter's base model, and this is no adapter folder "
                          "(no adapter_config.json)")
    if is_checkpoint(path):
        return source_beside(path), load_checkpoint(path)
    return load_source(path, "config"), None


def open_model(text: str, *, revision: str | None = None, offline: bool = False,
               progress: Progress | None = None, base: str | None = None) -> tuple[Source, Checkpoint | None]:
    """What a MODEL argument names: an existing path (config, folder, preset YAML or checkpoint), else a Hub id
    (`ORG/NAME`, with `revision`), else a preset name. The Hub client is imported only for an id. `base`: a PEFT
    adapter's base model, named by the user (`--base`)."""
    path = Path(text)
    if probe(path, Path.exists):  # before the id test: a local path needs nothing of the Hub's
        return open_path(path, revision=revision, offline=offline, progress=progress, base=base)
    if names_hub_model(text):
        return open_hub(text, revision=revision, offline=offline, progress=progress, base=base)
    if revision is not None:
        raise SourceError(text, None, "--revision goes with a Hub model id (ORG/NAME); this is no id, and no path exists")
    if base is not None:
        raise SourceError(text, None, "--base names a PEFT adapter's base model, and a preset is no adapter")
    try:
        return load_source(text, "name"), None
    except UnknownPresetError as error:
        raise UnknownPresetError(text, error.known, ", and no such path or Hub model id (ORG/NAME)") from None


class BaseCycleError(SourceError):
    """Adapters whose bases lead back to one of them: refused by name, with the chain."""


MAX_ADAPTER_CHAIN = 8  # adapters whose base is an adapter, and so on: deeper is refused (no real chain is)


def open_adapter(path: Path, *, revision: str | None = None, offline: bool = False,
                 progress: Progress | None = None, title: str | None = None, base: str | None = None,
                 chain: tuple[Path, ...] = ()) -> Source:
    """A PEFT adapter folder: the model it adapts (`base`, as the user names it with --base, else its
    `base_model_name_or_path`, found as `adapter_base` says), its head the one the task type names, with the
    adapter's method. `title`: what to call the adapter (its path, or its Hub id); `chain`: the adapter folders
    whose bases led here (a cycle is refused)."""
    from .io.peft_config import CONFIG_NAME, TASK_HEADS, load_adapter

    adapter = load_adapter(path)
    here = _resolved(adapter.path)
    file = adapter.path / CONFIG_NAME
    if here in chain or len(chain) >= MAX_ADAPTER_CHAIN:
        said = " → ".join(str(folder) for folder in (*chain, here))
        raise BaseCycleError(file, "base_model_name_or_path", f"a cycle of adapter bases: {said}" if here in chain
                             else f"more than {MAX_ADAPTER_CHAIN} adapters, each the base of the one before: {said}")
    if base is not None:
        try:
            opened, _ = open_model(base, revision=revision, offline=offline, progress=progress)
        except LOAD_ERRORS as error:
            raise SourceError(base, None, f"--base: {error}") from None
        found = f"{opened.name} (named by --base)"
    else:
        opened, found = adapter_base(adapter, file, (*chain, here), revision=revision, offline=offline,
                                     progress=progress)
    config = opened.config
    if adapter.task_type is not None:
        head = TASK_HEADS[adapter.task_type]
        try:
            config = config.replace(head=head)
        except ConfigError as error:
            raise SourceError(path, "task_type", f"{adapter.task_type}: {error.rule}") from None
    notes = (*opened.notes, f"the adapter's base model: {found}")
    return Source(f"{title or path} ({adapter.method.name} on {_short(opened.name)})", config, notes, adapter.method,
                  adapter.weights)


def _short(name: str) -> str:
    """A base model's name for a title: a path by its last folder (`/home/u/run3/base/config.json` → `base`; the
    note beside it says where), a Hub id or a preset as it is."""
    path = Path(name.split(" (", 1)[0])
    if len(path.parts) < 2 or names_hub_model(name):
        return name
    return (path.parent.name if path.suffix == ".json" else path.name) or name


def adapter_base(adapter: Adapter, file: Path, chain: tuple[Path, ...], *, revision: str | None = None,
                 offline: bool = False, progress: Progress | None = None) -> tuple[Source, str]:
    """The model an adapter's `base_model_name_or_path` names, found as a user expects (peft writes it as the
    user passed it to `from_pretrained`: often a path relative to where the script ran): an absolute path; else
    relative to the working directory, to the adapter's folder, to that folder's parent; else a Hub id (through
    the user's cache); else a preset. The first that opens wins; and what was used, said."""
    from .io.peft_config import is_adapter

    value = adapter.base
    if value is None:
        raise SourceError(file, "base_model_name_or_path", "is null (a model built from a config, not loaded with "
                          "from_pretrained): name the base with --base SOURCE (a path, a Hub id or a preset)")
    named = Path(value)
    places = [(named, "as written")] if named.is_absolute() else [
        (named, "relative to the working directory"), (adapter.path / named, "relative to the adapter's folder"),
        (adapter.path.parent / named, "relative to the adapter folder's parent")]
    tried = []
    for place, where in places:
        if not probe(place, Path.exists):
            tried.append(f"{place} (no such path)")
            continue
        try:
            if is_adapter(place):
                opened = open_adapter(place, revision=revision, offline=offline, progress=progress, chain=chain)
            else:
                opened, _ = open_path(place, revision=revision, offline=offline, progress=progress)
        except BaseCycleError:
            raise
        except LOAD_ERRORS as error:
            tried.append(f"{place} ({error})")
            continue
        return opened, f"{opened.name} ({value!r}, found {where})"
    if names_hub_model(value):
        opened, _ = open_hub(value, revision=revision, offline=offline, progress=progress)
        return opened, f"{opened.name} (a Hub id)"
    try:
        opened = load_source(value, "name")
    except UnknownPresetError:
        raise SourceError(file, "base_model_name_or_path", f"{value!r}: tried {'; '.join(tried)}; not a Hub id "
                          "(ORG/NAME) nor a preset: name the base with --base SOURCE (a path, a Hub id or a "
                          "preset)") from None
    return opened, f"{opened.name} (a preset)"


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop of links, a path the system refuses: as written
        return path.absolute()


def names_hub_model(text: str) -> bool:
    """Whether `text` names a model on the Hub: an `ORG/NAME` id, and no path of that name exists (a path wins)."""
    from .io.hub import is_model_id

    return is_model_id(text) and not probe(Path(text), Path.exists)


def open_hub(repo_id: str, *, revision: str | None = None, offline: bool = False,
             progress: Progress | None = None, base: str | None = None) -> tuple[Source, Checkpoint | None]:
    """A model on the Hub: its config.json (through the user's cache) and its checkpoint's headers. `base`: a
    PEFT adapter's base model, named by the user."""
    from .io.hub import ADAPTER_CONFIG, open_repo

    try:
        model = open_repo(repo_id, revision, offline, progress)
    except SourceError as error:  # (offline, or not cached: the built-in preset of that model may serve)
        preset = _preset_like(repo_id)
        if preset is None:
            raise
        raise SourceError(error.path, error.key, f"{error.problem}; the built-in preset {preset} holds its config "
                          f"(name it instead: {preset})") from None
    if model.config_path.name == ADAPTER_CONFIG:  # a PEFT adapter shared on the Hub: its base opens by its name
        adapter = open_adapter(model.config_path, offline=offline, progress=progress, title=model.title, base=base)
        return replace(adapter, notes=(*adapter.notes, *model.notes)), None
    if base is not None:
        raise SourceError(repo_id, None, "--base names a PEFT adapter's base model, and this Hub model is no adapter "
                          "(no adapter_config.json)")
    hf = load_hf_config(model.config_path)
    fetched = (f"read {model.fetched_bytes:,} header bytes from the Hub, no weights",) if model.fetched_bytes else ()
    return Source(model.title, hf.config, (*hf.notes, *model.notes, *fetched)), model.checkpoint


def _preset_like(repo_id: str) -> str | None:
    """The built-in preset named as the Hub model (`google-bert/bert-base-uncased` → `bert-base-uncased`)."""
    from .presets import load_catalog

    name = repo_id.rsplit("/", 1)[-1].lower()
    return next((preset.name for preset in load_catalog().presets.values()
                 if preset.builtin and preset.name.lower() == name), None)


def compare_checkpoint(checkpoint: Checkpoint, config: BertConfig) -> CheckpointReport:
    """How a checkpoint read already compares with `config`."""
    from .core.count.compare import compare

    return CheckpointReport(checkpoint, compare(build_tree(config), [(t.name, t.shape) for t in checkpoint.tensors]))
