"""Presets: shipped files, the user's folder, --preset-file, and broken files that must not break the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.presets import (
    MAX_PRESET_BYTES,
    PresetError,
    UnknownPresetError,
    builtin_dir,
    load_catalog,
    load_preset,
)

REQUIRED = {
    "bert-base-uncased", "bert-large-uncased", "example-40k", "bert-base-cased", "bert-large-cased",
    "bert-base-multilingual-cased", "bert-base-chinese", "bert-tiny", "bert-mini", "bert-small", "bert-medium",
}

USER_PRESET = """\
name: my-bert
title: My BERT
config:
  vocab_size: 32000
  num_hidden_layers: 6
expected_total: 1
"""


def test_every_required_preset_ships_and_loads_cleanly() -> None:
    catalog = load_catalog()
    assert REQUIRED <= set(catalog.presets)
    assert catalog.errors == ()
    assert all(p.builtin and p.path.parent == builtin_dir() for p in catalog.presets.values())


def test_user_presets_come_from_xdg_config_home(isolated_user_presets: Path) -> None:
    isolated_user_presets.mkdir(parents=True)
    (isolated_user_presets / "mine.yaml").write_text(USER_PRESET, encoding="utf-8")
    preset = load_catalog().get("my-bert")
    assert not preset.builtin
    assert (preset.config.vocab_size, preset.config.num_hidden_layers, preset.config.hidden_size) == (32000, 6, 768)


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("name: x\nconfig: !!python/object/apply:os.system ['echo pwned']\n", None, "safe YAML only"),
        ("name: x\nconfig: [1, 2\n", None, "not valid YAML"),
        ("- just\n- a list\n", None, "must be a mapping"),
        ("name: x\nconfig:\n  hidden_size: 770\n", "config.hidden_size", "multiple of num_attention_heads"),
        ("name: x\nconfig:\n  hidden_size: big\n", "config.hidden_size", "whole number"),
        ("name: x\nconfig:\n  hiden_size: 768\n", "config.hiden_size", "unknown key"),
        ("name: x\nconfig: 3\n", "config", "must be a mapping"),
        ("name: ''\n", "name", "non-empty text"),
        ("name: x\nexpected_total: lots\n", "expected_total", "whole number"),
    ],
)
def test_broken_preset_names_file_and_field_and_the_rest_still_load(
    isolated_user_presets: Path, text: str, field: str | None, fragment: str
) -> None:
    isolated_user_presets.mkdir(parents=True)
    broken = isolated_user_presets / "broken.yaml"
    broken.write_text(text, encoding="utf-8")
    (isolated_user_presets / "fine.yaml").write_text(USER_PRESET, encoding="utf-8")
    catalog = load_catalog()
    assert REQUIRED | {"my-bert"} <= set(catalog.presets)
    (error,) = catalog.errors
    assert error.path == broken and error.field == field
    assert fragment in str(error) and str(broken) in str(error)


def test_an_oversized_preset_file_is_refused_before_parsing(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"name: x\n" + b"#" * MAX_PRESET_BYTES)
    with pytest.raises(PresetError, match="a preset file may be at most"):
        load_preset(huge)


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPresetError) as caught:
        load_catalog().get("bert-huge")
    assert "bert-huge" in str(caught.value) and "bert-base-uncased" in str(caught.value)


def test_every_shipped_preset_is_named_as_its_file() -> None:
    """The catalog knows built-in presets by their file names before reading them (see `Presets`)."""
    for path in sorted(builtin_dir().glob("*.y*ml")):
        assert load_preset(path, builtin=True).name == path.stem, path


def test_the_catalog_reads_a_builtin_file_only_when_its_preset_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.presets as presets

    read: list[str] = []
    real = presets.load_preset

    def counting(path: Path, *, builtin: bool = False) -> presets.Preset:
        read.append(path.stem)
        return real(path, builtin=builtin)

    monkeypatch.setattr(presets, "load_preset", counting)
    catalog = load_catalog()
    assert read == [] and REQUIRED <= set(catalog.presets)
    assert catalog.get("bert-large-uncased").config.num_hidden_layers == 24
    assert catalog.get("bert-large-uncased") is catalog.get("bert-large-uncased")
    assert read == ["bert-large-uncased"]


def test_a_shipped_file_whose_name_differs_from_its_file_name_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.presets as presets

    (tmp_path / "bert-tiny.yaml").write_text("name: bert-small\nconfig: {hidden_size: 128, num_attention_heads: 2}\n")
    monkeypatch.setattr(presets, "builtin_dir", lambda: tmp_path)
    catalog = load_catalog()
    assert list(catalog.presets) == ["bert-tiny"]
    with pytest.raises(PresetError, match="named as its file"):
        catalog.get("bert-tiny")


def test_a_preset_text_is_parsed_once_and_an_edited_file_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsed preset is kept by the file's text: read again, the same text is not parsed again; rewritten at
    once with another text of the same size (the same file times, as a coarse clock gives), it is read anew."""
    import tui.presets as presets

    parsed: list[str] = []
    parse = presets.parse_yaml
    monkeypatch.setattr(presets, "parse_yaml", lambda text: parsed.append(text) or parse(text))
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nconfig: {hidden_size: 128, num_attention_heads: 2, num_hidden_layers: 3}\n")
    first, again = load_preset(path), load_preset(path)
    assert first == again and first.config.num_hidden_layers == 3 and len(parsed) == 1
    path.write_text("name: mine\nconfig: {hidden_size: 128, num_attention_heads: 2, num_hidden_layers: 4}\n")
    edited = load_preset(path)
    assert edited.config.num_hidden_layers == 4 and len(parsed) == 2
    path.write_text("name: mine\nconfig: {hidden_size: 128, num_attention_heads: 2, num_hidden_layers: x}\n")
    for _ in range(2):  # a refused text is refused each time it is read
        with pytest.raises(PresetError, match="num_hidden_layers"):
            load_preset(path)


def test_a_preset_holds_the_config_of_the_hub_model_it_names() -> None:
    """Every preset whose Hub config.json is kept in the fixtures equals it field by field (the head aside: a
    preset counts the base model; what changes only the step, as ModernBERT's pooling, aside). ModernBERT's said 512 positions, the default, where the Hub says 8,192."""
    from tui.io.hf_config import load_hf_config

    catalog = load_catalog()
    hub = Path(__file__).parent / "fixtures" / "hub"
    checked = 0
    for folder in sorted(hub.iterdir()):
        if folder.name in catalog.presets:
            preset, published = catalog.get(folder.name).config, load_hf_config(folder).config
            fields = (*preset.fields, "max_position_embeddings")  # the longest sequence compute accepts
            differ = {field: (getattr(preset, field), getattr(published, field)) for field in fields
                      if field != "head" and getattr(preset, field) != getattr(published, field)}
            assert not differ, (folder.name, differ)
            checked += 1
    assert checked >= 8
