"""Presets: named configs in YAML files, shipped in `presets/` and read from the user's presets folder.

A preset file:

    name: bert-base-uncased
    title: BERT-Base, uncased
    source: https://huggingface.co/google-bert/bert-base-uncased (config.json)
    config: {vocab_size: 30522, hidden_size: 768, ...}   # HF keys; head/pooler/num_labels optional
    expected_total: 109482240                              # the total transformers gives for `config`

Files are read with `yaml.safe_load` only, and a file larger than `MAX_PRESET_BYTES` is refused before it is
parsed. A broken file becomes a `PresetError` naming the file and the field; the other presets still load.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .core import BertConfig, ConfigError
from .io.files import ReadError, os_problem, parse_yaml, probe, read_text, write_atomic

DEFAULT_PRESET = "bert-base-uncased"
MAX_PRESET_BYTES = 64 * 1024
_PACKAGE_DIR = Path(__file__).resolve().parent
PRESET_KEYS = ("name", "title", "source", "config", "expected_total", "claims")
HF_CONFIG_HINTS = ("model_type", "architectures", "hidden_size", "vocab_size", "num_hidden_layers")


@dataclass(frozen=True, slots=True)
class PresetClaim:
    """A count published for this model: as written ('110M'), where, and for what scope (model or layer)."""

    value: str
    source: str
    scope: str = "model"


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    title: str
    source: str
    config: BertConfig
    expected_total: int | None
    path: Path
    builtin: bool
    claims: tuple[PresetClaim, ...] = ()


class PresetError(ValueError):
    """A preset file that cannot be used: which file, which field, what is wrong."""

    def __init__(self, path: Path | str, field: str | None, problem: str) -> None:
        self.path = Path(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: {field}" if field else f"{self.path}"
        super().__init__(f"{where}: {problem}")


class UnknownPresetError(LookupError):
    """A preset name that no file defines; the message lists the known names."""

    def __init__(self, name: str, known: Iterable[str], also: str = "") -> None:
        import difflib

        self.name = name
        self.known = tuple(sorted(known, key=str.lower))
        by_lower = {k.lower(): k for k in self.known}
        close = [by_lower[k] for k in difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)]
        guess = f" (did you mean {', '.join(close)}?)" if close else ""
        super().__init__(f"unknown preset {name!r}{also}{guess}; known presets: {', '.join(self.known)}")


class Presets(Mapping[str, Preset]):
    """Presets by name, each file read when its preset is first asked for: the explorer's start reads one.

    Built-in presets are known by their file names (a shipped file's name is its preset's name: a test holds
    every shipped file to it); user presets are read at once, since their files name them (and a broken one
    must be reported)."""

    def __init__(self, found: Mapping[str, Preset | Path]) -> None:
        self._found: dict[str, Preset | Path] = dict(found)

    def __getitem__(self, name: str) -> Preset:
        item = self._found[name]
        if isinstance(item, Path):
            item = load_preset(item, builtin=True)
            if item.name != name:
                raise PresetError(item.path, "name", f"{item.name!r}: a shipped preset is named as its file ({name!r})")
            self._found[name] = item
        return item

    def __iter__(self) -> Iterator[str]:
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every preset found, by name (user presets after built-ins, so a user file can shadow one), and the
    user's files that could not be read."""

    presets: Presets
    errors: tuple[PresetError, ...]

    def get(self, name: str) -> Preset:
        """The preset called `name`; `UnknownPresetError` listing the known names otherwise."""
        if name in self.presets:
            return self.presets[name]
        raise UnknownPresetError(name, self.presets)


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_preset_name(name: str) -> str:
    """A name that is a plain file name (letters, digits, . _ -; no path); ValueError says what is allowed."""
    name = name.strip()
    if not _PLAIN_NAME.fullmatch(name) or name.endswith((".yaml", ".yml")) or ".." in name:
        raise ValueError(f"{name!r} is not a plain preset name: use letters, digits, '.', '_' or '-' "
                         "(at most 64, starting with a letter or digit, no folders)")
    return name


_FILE_SUFFIXES = (".json", ".yaml", ".yml", ".safetensors")
_GENERIC_STEMS = {"config", "adapter_config", "model", "model.safetensors.index"}


def suggest_preset_name(title: str) -> str:
    """A preset name for what the explorer shows: a file's stem (`cfgs/my_config.json` → `my_config`), or its
    folder's name where the file's is generic (`models/tiny/config.json` → `tiny`), a Hub id with its slash
    made a dash, and `-edited` where the form changed it; always a name `check_preset_name` takes."""
    edited = " (edited)" in title
    text = title.replace(" (edited)", "").strip()
    parts = [part for part in re.split(r"[\\/]", text.split(" (", 1)[0]) if part not in ("", ".", "..")]
    if parts and parts[-1].lower().endswith(_FILE_SUFFIXES):
        stem = parts[-1].rsplit(".", 1)[0]
        stem = stem.removesuffix(".safetensors.index").removesuffix(".safetensors")
        name = parts[-2] if stem in _GENERIC_STEMS and len(parts) > 1 else stem
    else:
        name = "-".join(parts[-2:]) if parts else ""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip("._-").replace("..", ".")
    name = (name or "my-preset")[: 64 - (7 if edited else 0)].rstrip("._-") or "my-preset"
    return name + ("-edited" if edited else "")


def user_preset_path(name: str) -> Path:
    return user_dir() / f"{check_preset_name(name)}.yaml"


def save_user_preset(name: str, config: BertConfig, title: str) -> Path:
    """Write `config` as a user preset (atomically); the caller has confirmed any overwrite."""
    path = user_preset_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"name": name, "title": title, "source": "saved from the bert-tui explorer",
            "config": preset_config(config)}
    import yaml

    write_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def preset_config(config: BertConfig) -> dict[str, object]:
    """The keys a preset of `config` needs: its family's sizes and switches, head, pooler, labels, model type and
    ties (a saved BERT carried DeBERTa's and ModernBERT's switches too); values as the config holds them."""
    from .core.count.report import config_dict

    data = config_dict(config)
    data["pooler"] = config.pooler  # as chosen, not as the head class builds it
    if "embedding_size" in data:
        data["embedding_size"] = config.embedding_size  # 0: as wide as H, and stays so when H changes
    # The longest sequence compute accepts, where no position table makes it a size (ModernBERT's rotary).
    data.setdefault("max_position_embeddings", config.max_position_embeddings)
    return data


def builtin_dir() -> Path:
    """The shipped presets: inside the wheel (`tui/_presets`), or `presets/` beside a source checkout."""
    packaged = _PACKAGE_DIR / "_presets"
    return packaged if packaged.is_dir() else _PACKAGE_DIR.parent / "presets"


def user_dir() -> Path:
    """`$XDG_CONFIG_HOME/bert-tui/presets`, `~/.config/bert-tui/presets` when XDG_CONFIG_HOME is unset."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "bert-tui" / "presets"


def load_catalog(extra_dirs: Iterable[Path] = ()) -> Catalog:
    """Built-in presets, then the user's, then any `extra_dirs`; a later file of the same name shadows. The
    built-in files are read on first use (see `Presets`)."""
    found: dict[str, Preset | Path] = {}
    errors: list[PresetError] = []
    for path in _preset_files(builtin_dir(), errors):
        found[path.stem] = path
    for folder in (user_dir(), *extra_dirs):
        _load_folder(folder, False, found, errors)
    return Catalog(Presets(found), tuple(errors))


def _preset_files(folder: Path, errors: list[PresetError]) -> list[Path]:
    """The preset files in `folder`, sorted; a folder that cannot be listed into `errors`."""
    try:
        return sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    except (OSError, ValueError) as error:
        errors.append(PresetError(folder, None, f"presets folder {os_problem(error)}"))
        return []


def _load_folder(folder: Path, builtin: bool, presets: dict[str, Preset | Path], errors: list[PresetError]) -> None:
    """Every preset file in `folder` into `presets`; a file (or the folder) that cannot be read into `errors`."""
    for path in _preset_files(folder, errors):
        try:
            preset = load_preset(path, builtin=builtin)
        except PresetError as error:
            errors.append(error)
        else:
            presets[preset.name] = preset


def find_preset(name: str) -> Preset:
    """The preset called `name`, exactly as `load_catalog().get(name)` finds it (a user preset shadows a
    built-in one of the same name, whatever its file is called), reading no other built-in file when the
    built-in one is named `NAME.yaml` (the CLI's fast path)."""
    if not name.strip():
        raise UnknownPresetError(name, load_catalog().presets)
    user: dict[str, Preset | Path] = {}
    _load_folder(user_dir(), False, user, [])
    if isinstance(mine := user.get(name), Preset):
        return mine
    path = builtin_dir() / f"{name}.yaml"
    if _PLAIN_NAME.fullmatch(name) and probe(path, Path.is_file):  # names are plain: no other file can hold it
        preset = load_preset(path, builtin=True)
        if preset.name == name:
            return preset
    return load_catalog().get(name)


def load_preset(path: Path, *, builtin: bool = False) -> Preset:
    """Read and validate one preset file."""
    try:
        text = read_text(path, MAX_PRESET_BYTES, "a preset file")
    except ReadError as problem:
        raise PresetError(path, None, str(problem)) from None
    return _preset(path, text, builtin)


@lru_cache(maxsize=64)
def _preset(path: Path, text: str, builtin: bool) -> Preset:
    """The preset a file's text holds. Its whole text is the key: a text read before is not parsed again (the
    YAML parser is pure Python, and the explorer's palette and a process that runs many commands, as the tests
    do, read the same few files again and again); an edited file is a new text. A refused text is
    not kept: it is parsed again, and refused again, each time it is read."""
    data = read_yaml(path, text)
    if not isinstance(data, dict):
        raise PresetError(path, None, "must be a mapping with name, config and expected_total")
    unknown_keys = [key for key in data if key not in PRESET_KEYS]
    if unknown_keys:
        if any(key in data for key in HF_CONFIG_HINTS):
            raise PresetError(path, None, "is a Hugging Face config.json, not a preset: open it with --config")
        raise PresetError(path, unknown_keys[0], f"unknown key; a preset has: {', '.join(PRESET_KEYS)}")
    try:  # a name is what --preset takes and what the file is saved as: a plain identifier, never markup
        name = check_preset_name(_text(path, data, "name", default=path.stem))
    except ValueError as problem:
        raise PresetError(path, "name", str(problem)) from None
    config_data = data.get("config", {})
    if not isinstance(config_data, dict):
        raise PresetError(path, "config", "must be a mapping of HF config keys")
    unknown = sorted(set(config_data) - set(BertConfig.__dataclass_fields__))
    if unknown:
        raise PresetError(path, f"config.{unknown[0]}", f"unknown key; allowed: {', '.join(BertConfig.__dataclass_fields__)}")
    try:
        config = BertConfig.from_mapping(config_data)
    except ConfigError as error:
        raise PresetError(path, f"config.{error.field}", f"{error.value!r}: {error.rule}") from None
    expected = data.get("expected_total")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
        raise PresetError(path, "expected_total", f"{expected!r} must be a whole number")
    title = _text(path, data, "title", default=name)
    source = _text(path, data, "source", default="(no source given)")
    return Preset(name, title, source, config, expected, path, builtin, _claims(path, data.get("claims", [])))


def _claims(path: Path, items: object) -> tuple[PresetClaim, ...]:
    """`claims:` a list of {value, source, scope}; each value must read as a count."""
    if not isinstance(items, list):
        raise PresetError(path, "claims", "must be a list of {value, source, scope}")
    from .core.count.claims import (  # here: a claim's grammar, for claims only
        SCOPES,
        ClaimError,
        parse_claim,
    )

    claims = []
    for index, item in enumerate(items):
        field = f"claims[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("value"), (str, int)) or isinstance(item.get("value"), bool):
            raise PresetError(path, field, "must be a mapping with a value (text or number) and a source")
        value = str(item["value"])
        try:
            parse_claim(value)
        except ClaimError as error:
            raise PresetError(path, f"{field}.value", str(error)) from None
        scope = item.get("scope", "model")
        if scope not in SCOPES:
            raise PresetError(path, f"{field}.scope", f"{scope!r} must be one of: {', '.join(SCOPES)}")
        claims.append(PresetClaim(value, str(item.get("source", "")), scope))
    return tuple(claims)


def read_yaml(path: Path, text: str) -> Any:
    """A preset file's text (read through the bounded reader) as safe YAML; a failure is a `PresetError` naming
    the file."""
    try:
        return parse_yaml(text)
    except ReadError as problem:
        raise PresetError(path, None, str(problem)) from None


def _text(path: Path, data: dict[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise PresetError(path, key, f"{value!r} must be non-empty text")
    return value.strip()
