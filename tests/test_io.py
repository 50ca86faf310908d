"""Real model files: HF config.json, safetensors checkpoints (single, sharded, legacy), malformed files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tui.core import build_tree
from tui.core.count.compare import canonical, compare, infer_config
from tui.io.hf_config import SourceError, load_hf_config
from tui.io.safetensors import load_checkpoint, read_header

from .clirun import completed
from .hf_cases import hf_total
from .ready import type_text

FIXTURES = Path(__file__).parent / "fixtures"
CHECKPOINTS = FIXTURES / "checkpoints"
LIVE = json.loads((CHECKPOINTS / "live_totals.json").read_text(encoding="utf-8"))


cli = completed  # the command in this process: its code, output and error as a child's


def test_hub_bert_base_config_counts_as_bert_for_masked_lm() -> None:
    hf = load_hf_config(FIXTURES / "hub" / "bert-base-uncased")
    assert hf.architecture == "BertForMaskedLM" and hf.config.head == "mlm"
    assert build_tree(hf.config).total == 109_514_298 == hf_total("bert-base-uncased/mlm")


@pytest.mark.parametrize("name", ["pretraining", "sharded", "legacy", "bertmodel"])
def test_checkpoint_folders_hold_what_the_live_model_counts(name: str) -> None:
    config = load_hf_config(CHECKPOINTS / name).config
    checkpoint = load_checkpoint(CHECKPOINTS / name)
    result = compare(build_tree(config), [(t.name, t.shape) for t in checkpoint.tensors])
    assert result.clean and result.held == result.expected == LIVE[name]


def test_sharded_checkpoint_reads_every_shard() -> None:
    checkpoint = load_checkpoint(CHECKPOINTS / "sharded" / "model.safetensors.index.json")
    assert len(checkpoint.files) == 4
    assert sum(t.numel for t in checkpoint.tensors) == LIVE["sharded"]


def test_legacy_layout_counts_the_same_and_reports_the_stored_decoder() -> None:
    checkpoint = load_checkpoint(CHECKPOINTS / "legacy")
    assert {t.name for t in checkpoint.tensors} == set(LIVE["legacy_stored_names"])
    config = load_hf_config(CHECKPOINTS / "legacy").config
    result = compare(build_tree(config), [(t.name, t.shape) for t in checkpoint.tensors])
    assert result.held == LIVE["pretraining"]
    assert set(result.tied_stored) == {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    assert result.legacy_names == 12


def test_names_with_and_without_the_bert_prefix() -> None:
    assert canonical("embeddings.LayerNorm.gamma", "bert.") == ("bert.embeddings.LayerNorm.weight", True)
    assert canonical("bert.encoder.layer.0.output.dense.bias", "") == ("encoder.layer.0.output.dense.bias", False)
    assert canonical("cls.predictions.bias", "") == ("cls.predictions.bias", False)
    assert canonical("embeddings.word_embeddings.weight", "roberta.") == ("roberta.embeddings.word_embeddings.weight", False)


def test_a_checkpoint_against_another_config_lists_what_differs() -> None:
    config = load_hf_config(CHECKPOINTS / "pretraining").config
    stored = [(t.name, t.shape) for t in load_checkpoint(CHECKPOINTS / "bertmodel").tensors]
    result = compare(build_tree(config), stored)
    assert not result.clean and "cls.seq_relationship.weight" in result.missing
    wider = compare(build_tree(config.replace(intermediate_size=25)), stored)
    assert ("bert.encoder.layer.0.intermediate.dense.weight", (25, 16), (24, 16)) in wider.mismatched


def test_config_read_back_from_shapes() -> None:
    stored = [(t.name, t.shape) for t in load_checkpoint(CHECKPOINTS / "legacy").tensors]
    config, notes = infer_config(stored)
    assert config.head == "pretraining" and build_tree(config).total == LIVE["pretraining"]
    assert "num_attention_heads assumed" in notes[0]


def test_cli_checkpoint_without_config_beside_reads_the_shapes(tmp_path: Path) -> None:
    lone = tmp_path / "weights.safetensors"
    lone.write_bytes((CHECKPOINTS / "bertmodel" / "model.safetensors").read_bytes())
    result = cli("count", "--checkpoint", str(lone), "--format", "json")
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["total"] == LIVE["bertmodel"] and data["checkpoint"]["clean"]
    assert "num_attention_heads assumed" in result.stderr


def test_cli_count_config_and_checkpoint() -> None:
    result = cli("count", "--config", str(FIXTURES / "hub" / "bert-base-uncased" / "config.json"), "--format", "json")
    assert json.loads(result.stdout)["total"] == 109_514_298
    result = cli("count", "--checkpoint", str(CHECKPOINTS / "legacy"))
    assert result.returncode == 0
    assert "tied tensors stored anyway, counted once" in result.stdout and "matches the config" in result.stdout


def write_header(path: Path, header: bytes, claimed: int | None = None, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header) if claimed is None else claimed) + header + data)
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: d.joinpath("t.safetensors").write_bytes(b"\x01\x02") and d / "t.safetensors", "too short"),
        (lambda d: write_header(d / "h.safetensors", b"{}", claimed=2**62), "header claims"),
        (lambda d: write_header(d / "j.safetensors", b"{not json"), "not valid JSON"),
        (lambda d: write_header(d / "l.safetensors", b"[1, 2]"), "not a JSON object"),
        (lambda d: write_header(d / "o.safetensors", b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
                                data=b"\0" * 8), "fall outside"),
        (lambda d: write_header(d / "s.safetensors", b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}',
                                data=b"\0" * 8), "needs 16"),
        (lambda d: write_header(d / "d.safetensors", b'{"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}',
                                data=b"\0"), "unknown dtype"),
    ],
)
def test_malformed_safetensors_are_refused_clearly(tmp_path: Path, make: object, fragment: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(SourceError, match=fragment):
        read_header(path)
    result = cli("count", "--checkpoint", str(path))
    assert result.returncode == 2 and fragment in result.stderr and "Traceback" not in result.stderr


def test_truncated_real_checkpoint_is_refused(tmp_path: Path) -> None:
    data = (CHECKPOINTS / "pretraining" / "model.safetensors").read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match="fall outside"):
        load_checkpoint(cut)


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('{"hidden_size": "768"}', "hidden_size", "must be a JSON integer"),
        ('{"hidden_size": 770}', "hidden_size", "multiple of num_attention_heads"),
        ('{"model_type": "gpt2"}', "model_type", "not supported"),
        ('{"architectures": "BertModel"}', "architectures", "list of class names"),
        ('{"vocab_size": 10', None, "not valid JSON"),
        ("[]", None, "JSON object"),
    ],
)
def test_bad_config_json_names_file_and_key(tmp_path: Path, text: str, key: str | None, fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        load_hf_config(tmp_path)
    assert caught.value.key == key and fragment in str(caught.value) and str(path) in str(caught.value)
    result = cli("count", "--config", str(path))
    assert result.returncode == 2 and str(path) in result.stderr and "Traceback" not in result.stderr


def test_config_json_defaults_labels_and_unknown_architectures_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_hidden_layers": 6, "architectures": ["BertForSequenceClassification"],
                                "id2label": {"0": "a", "1": "b", "2": "c"}, "some_new_key": [1]}), encoding="utf-8")
    hf = load_hf_config(path)
    assert (hf.config.head, hf.config.num_labels, hf.config.hidden_size) == ("sequence-classification", 3, 768)
    assert any("vocab_size not in the file" in note for note in hf.notes)
    path.write_text(json.dumps({"architectures": ["SomethingElse"]}), encoding="utf-8")
    with pytest.raises(SourceError, match="'?SomethingElse'? is not a class bert-tui counts; it counts BertForMaskedLM"):
        load_hf_config(path)


def test_folder_without_config_or_weights(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="without config.json"):
        load_hf_config(tmp_path)
    with pytest.raises(SourceError, match="holds no model.safetensors"):
        load_checkpoint(tmp_path)


async def test_explorer_marks_tensors_a_checkpoint_lacks_and_opens_files() -> None:
    from tui.explorer.app import make_app
    from tui.explorer.dialogs import OpenScreen
    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.presets import load_catalog

    config = load_hf_config(CHECKPOINTS / "pretraining").config
    app = make_app(load_catalog(), config, title="pretraining")
    app.main.stored = [(t.name, t.shape) for t in load_checkpoint(CHECKPOINTS / "bertmodel").tensors]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.main.comparison is not None and "cls.seq_relationship.weight" in app.main.comparison.missing
        tree = app.query_one(ParamTreeView)
        tree.action_expand_all()
        await pilot.pause()
        node = next(n for n in _walk(tree.root) if n.data == "cls.seq_relationship.weight")
        assert "✗ not in the file" in tree.render_label(node, tree.rich_style, tree.rich_style).plain
        await pilot.press("o")
        assert isinstance(app.screen, OpenScreen)
        await type_text(pilot, str(CHECKPOINTS / "nothing-here"))
        await pilot.press("enter")
        assert isinstance(app.screen, OpenScreen)  # the error stays in the prompt
        await pilot.press("ctrl+u")
        await type_text(pilot, str(CHECKPOINTS / "legacy"))
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, OpenScreen)
        assert app.main.comparison is not None and app.main.comparison.clean and app.main.comparison.tied_stored
        assert app.main.model is not None and app.main.model.total == LIVE["legacy"]
        await pilot.press("o")
        await type_text(pilot, str(FIXTURES / "hub" / "bert-base-uncased"))
        await pilot.press("enter")
        await pilot.pause()
        assert app.main.comparison is None and app.main.model is not None and app.main.model.total == 109_514_298


def _walk(node):  # type: ignore[no-untyped-def]
    yield node
    for child in node.children:
        yield from _walk(child)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("position_embedding_type", "relative_key", "the count depends on the version"),
        ("pruned_heads", {"0": [1]}, "removes the pruned heads' rows"),
        ("torchscript", True, "clones tied weights"),
        ("quantization_config", {"load_in_4bit": True}, "quantized model"),
        ("auto_map", {"AutoModel": "x.Y"}, "its own modeling code"),
    ],
)
def test_keys_that_change_parameters_uncounted_are_refused_by_name(tmp_path: Path, key: str, value: object,
                                                                    fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({key: value}), encoding="utf-8")
    with pytest.raises(SourceError, match=fragment) as caught:
        load_hf_config(path)
    assert caught.value.key == key
    result = cli("count", "--config", str(path))
    assert result.returncode == 2 and f"{key}: " in result.stderr and "is not counted" in result.stderr


def test_a_decoders_cross_attention_is_counted_where_transformers_builds_one(tmp_path: Path) -> None:
    """bert2bert's decoder (add_cross_attention with is_decoder): counted, every layer with its crossattention
    block; without is_decoder transformers refuses to build it, and a family without one refuses the key."""
    base = json.loads((FIXTURES / "hub" / "bert-base-uncased" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, "add_cross_attention": True, "is_decoder": True}), encoding="utf-8")
    tree = build_tree(load_hf_config(path).config)
    assert tree.total == 109_514_298 + 12 * (4 * 768 * 768 + 6 * 768)
    assert "bert.encoder.layer.11.crossattention.self.key.weight" in {p.name for p in tree.unique_params()}
    path.write_text(json.dumps({**base, "add_cross_attention": True}), encoding="utf-8")
    with pytest.raises(SourceError, match="needs is_decoder true"):
        load_hf_config(path)
    path.write_text(json.dumps({"model_type": "distilbert", "add_cross_attention": True, "is_decoder": True}),
                    encoding="utf-8")
    with pytest.raises(SourceError, match="counts for bert, roberta, xlm-roberta, camembert and electra only"):
        load_hf_config(path)


@pytest.mark.parametrize(("key", "value"), [("add_cross_attention", False), ("position_embedding_type", "absolute"),
                                            ("position_embedding_type", None), ("pruned_heads", {}),
                                            ("torchscript", False), ("hidden_dropout_prob", 0.3),
                                            ("layer_norm_eps", 1e-5), ("is_decoder", True)])
def test_keys_at_their_counted_value_or_without_effect_are_silent(tmp_path: Path, key: str, value: object) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((FIXTURES / "hub" / "bert-base-uncased" / "config.json").read_text()),
                                key: value}), encoding="utf-8")
    hf = load_hf_config(path)
    assert build_tree(hf.config).total == 109_514_298 and hf.notes == ()


def test_an_activation_compute_does_not_model_is_counted_with_a_note(tmp_path: Path) -> None:
    """`hidden_act` changes no parameter (the count stands) but what a step saves: one note says compute refuses."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((FIXTURES / "hub" / "bert-base-uncased" / "config.json").read_text()),
                                "hidden_act": "relu"}), encoding="utf-8")
    hf = load_hf_config(path)
    assert build_tree(hf.config).total == 109_514_298
    assert hf.notes == ("hidden_act relu: counted; compute refuses it (what a step saves with it is not modelled)",)


@pytest.mark.parametrize(("architecture", "case"), [("BertLMHeadModel", "keys/bert/causal-lm/untied/base"),
                                                    ("BertForMaskedLM", "keys/bert/mlm/untied/base"),
                                                    ("RobertaForCausalLM", "keys/roberta/causal-lm/untied/base")])
def test_untied_word_embeddings_and_causal_lm_classes_from_a_config(tmp_path: Path, architecture: str, case: str) -> None:
    model_type = "roberta" if architecture.startswith("Roberta") else "bert"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": [architecture], "model_type": model_type, "vocab_size": 30522,
                                "tie_word_embeddings": False, "max_position_embeddings": 512, "type_vocab_size": 2}),
                    encoding="utf-8")
    config = load_hf_config(path).config
    assert config.hf_class == architecture and build_tree(config).total == hf_total(case)


DEBERTA = json.loads((FIXTURES / "hub" / "deberta-v3-base" / "config.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("attention_head_size", 32, "attention_head_size = 64 only"),
        ("pooler_hidden_size", 1024, "pooler_hidden_size = 768 only"),
        ("conv_groups", 2, "conv_groups = 1 only"),
        ("pos_att_type", "p2c|p2p", "must be a list of (or '|'-separated) c2p and p2c"),
        ("pos_att_type", 3, "must be a list of"),
        ("norm_rel_ebd", True, "must be a string such as 'layer_norm'"),
        ("share_att_key", "yes", "must be true or false"),
        ("position_buckets", 2.5, "must be a JSON integer"),
    ],
)
def test_deberta_keys_counted_only_at_one_value_or_malformed_are_refused_by_name(
        tmp_path: Path, key: str, value: object, fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**DEBERTA, key: value}), encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        load_hf_config(path)
    assert caught.value.key == key and fragment in caught.value.problem
    result = cli("count", "--config", str(path))
    assert result.returncode == 2 and f"{key}: " in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, {"position_buckets": 256, "max_relative_positions": 0, "pos_att_c2p": True, "pos_att_p2c": True,
              "norm_rel_ebd": True, "type_vocab_size": 0}),
        ({"pos_att_type": ["c2p"], "share_att_key": False}, {"pos_att_c2p": True, "pos_att_p2c": False}),
        ({"pos_att_type": None, "norm_rel_ebd": "none"}, {"pos_att_c2p": False, "norm_rel_ebd": False}),
        ({"position_buckets": -1, "max_relative_positions": 128}, {"position_buckets": 0, "max_relative_positions": 128}),
        ({"attention_head_size": 64, "pooler_hidden_size": 768, "conv_groups": 1}, {"conv_kernel_size": 0}),
    ],
)
def test_deberta_keys_read_as_the_config_class_reads_them(tmp_path: Path, changes: dict[str, object],
                                                           expected: dict[str, object]) -> None:
    """HF's -1 is bert-tui's 0 ("none" / P); pos_att_type as "p2c|c2p", a list or null; norm_rel_ebd a word."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**DEBERTA, **changes}), encoding="utf-8")
    config = load_hf_config(path).config
    assert {key: getattr(config, key) for key in expected} == expected


async def test_the_explorer_shows_a_decoders_cross_attention_and_keeps_it_through_edits(tmp_path: Path) -> None:
    from tui.explorer.app import make_app
    from tui.explorer.widgets.param_tree import ParamTreeView
    from tui.presets import load_catalog

    base = json.loads((FIXTURES / "hub" / "bert-base-uncased" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**base, "add_cross_attention": True, "is_decoder": True}),
                                          encoding="utf-8")
    config = load_hf_config(tmp_path).config
    app = make_app(load_catalog(), config, title="decoder")
    async with app.run_test(size=(120, 40)) as pilot:
        tree = app.query_one(ParamTreeView)
        tree.action_expand_all()
        await pilot.pause()
        layer = next(node for node in _walk(tree.root) if (node.data or "").endswith("encoder.layer.0"))
        assert [child.data.rsplit(".", 1)[-1] for child in layer.children] == [
            "attention", "crossattention", "intermediate", "output"]
        await pilot.press("f2", "tab", "tab", "tab", "ctrl+u", "6")  # six layers: still a decoder
        assert app.main.model is not None and app.main.model.config.add_cross_attention
        assert app.main.model.total == build_tree(config.replace(num_hidden_layers=6)).total
