"""Hugging Face `config.json` files (and model folders holding one), read into a `BertConfig`.

Every key that changes which parameters transformers builds, or their shapes, is either honoured (`HONOURED`)
or refused by name with the reason (`REFUSED`); keys that change no parameter (dropouts, activations,
`layer_norm_eps`, token ids, ...) are ignored. Missing keys take the config class's defaults (each named in a
note); `architectures` picks the class, and one bert-tui does not count is refused; `num_labels` comes from
`id2label` as HF derives it. Every problem is a `SourceError` naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import FAMILIES, SIZE_FIELDS, BertConfig, ConfigError
from ..core.config import DEFAULT, EXTRA_FIELDS, ZERO_MEANS, Family
from ..plain import printable
from .files import ReadError, os_problem, parse_json, read_bytes

MAX_CONFIG_BYTES = 1024 * 1024


def architectures() -> dict[str, tuple[str, str]]:
    """Every class counted: its name → (model type, head), from the families' records. (A family's config class
    defaults and its config.json's own names for the sizes are its record's `defaults` and `aliases`.)"""
    return {family.hf_class(head): (name, head) for name, family in FAMILIES.items() for head in family.heads}


# The keys of BertConfig, RobertaConfig, XLMRobertaConfig, CamembertConfig and PretrainedConfig that change the
# parameters, read from transformers 5.24 (configuration_*.py, modeling_*.py, modeling_utils.py) and 4.x.
# Each is counted exactly (fixtures and live tests against transformers cover each one), or refused.
HONOURED: dict[str, str] = {
    "vocab_size": "V: rows of the word embedding (and of an LM decoder and its bias)",
    "hidden_size": "H: the width of every projection",
    "num_hidden_layers": "L: encoder layers",
    "num_attention_heads": "A: splits H (adds no parameter); H must be a multiple of it",
    "intermediate_size": "I: the feed-forward width",
    "max_position_embeddings": "P: rows of the position embedding",
    "type_vocab_size": "T: rows of the token-type embedding",
    "id2label": "N: its length is num_labels, as HF derives it",
    "num_labels": "N: outputs of the classification and QA heads (when id2label is absent)",
    "model_type": "the family: names (bert. / roberta.), order and heads",
    "architectures": "the class counted (its first entry)",
    "tie_word_embeddings": "false: the LM decoder's weight and bias are parameters of their own (V·H + V more)",
    "dim": "DistilBERT's H", "n_layers": "DistilBERT's L", "n_heads": "DistilBERT's A", "hidden_dim": "DistilBERT's I",
    "sinusoidal_pos_embds": "DistilBERT: fixed sinusoidal positions, still a registered P × H table (no change)",
    "embedding_size": "E (ALBERT, ELECTRA): the embedding width, mapped to H (ALBERT) or projected when E ≠ H (ELECTRA)",
    "num_hidden_groups": "G (ALBERT): layer groups stored; the L layers run through them",
    "inner_group_num": "K (ALBERT): layers stored in each group",
    "relative_attention_num_buckets": "R (MPNet): rows of the relative attention bias (R × A)",
    "summary_use_proj": "ELECTRA's multiple-choice summary projection (H × H + H) while true",
    "norm_bias": "ModernBERT: every LayerNorm's bias (H each)",
    "attention_bias": "ModernBERT: the biases of Wqkv (3H) and Wo (H)",
    "mlp_bias": "ModernBERT: the biases of Wi (2I) and Wo (H)",
    "classifier_bias": "ModernBERT: the bias of the prediction head's dense (H)",
    "decoder_bias": "ModernBERT: the MLM decoder's bias (V)",
    "relative_attention": "DeBERTa: the relative position embeddings (2D × H) and the position projections",
    "position_buckets": "DeBERTa: D, the relative span, when above 0 (rows of rel_embeddings: 2D)",
    "max_relative_positions": "DeBERTa: D when there are no buckets (below 1: P)",
    "share_att_key": "DeBERTa: true, positions go through the content key/query: no pos_key_proj/pos_query_proj",
    "pos_att_type": "DeBERTa: c2p adds pos_key_proj, p2c pos_query_proj (H² + H each, per layer) unless shared",
    "norm_rel_ebd": "DeBERTa: layer_norm adds the encoder's LayerNorm of the relative embeddings (2H)",
    "position_biased_input": "DeBERTa: false drops the absolute position table (P × E)",
    "conv_kernel_size": "DeBERTa-v2: C above 0 adds the convolution beside the first layer (C·H² + H, and 2H)",
    "legacy": "DeBERTa: the masked-LM head's layout (cls.predictions, or lm_predictions without a decoder)",
    "attention_head_size": "DeBERTa: counted when it is H / A (the only width its output projection accepts)",
    "pooler_hidden_size": "DeBERTa: counted when it is H (the classifier reads H)",
    "conv_groups": "DeBERTa-v2: counted when 1",
}
# key: (the values bert-tui counts, why another value is refused); HF writes some of these as null.
REFUSED: dict[str, tuple[tuple[object, ...], str]] = {
    "add_cross_attention": ((False,), "adds a cross-attention block to every layer (the decoder of an "
                                   "encoder-decoder model), which bert-tui counts for bert, roberta, "
                                   "xlm-roberta, camembert and electra only"),
    "position_embedding_type": (("absolute", None), "relative positions add a distance_embedding to every layer in "
                                            "transformers 4.x and nothing in 5.x: the count depends on the version"),
    "pruned_heads": (({}, None), "transformers 4.x removes the pruned heads' rows when it builds the model, 5.x does not: "
                         "the count depends on the version"),
    "torchscript": ((False,), "transformers 4.x clones tied weights instead of sharing them under torchscript"),
    "quantization_config": ((None,), "a quantized model stores packed tensors of other shapes; bert-tui counts the "
                                  "unquantized model only"),
    "auto_map": ((None,), "the repository brings its own modeling code (trust_remote_code), which bert-tui cannot count"),
    "summary_use_proj": ((True,), "ELECTRA's multiple-choice head without its summary projection is not counted"),
    "summary_proj_to_labels": ((False, None), "ELECTRA's summary projected to num_labels is not counted"),
}


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
    model_type = data.get("model_type", DEFAULT)
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise SourceError(path, "model_type", f"{model_type!r} is not supported; bert-tui counts: {', '.join(FAMILIES)}")
    family = FAMILIES[model_type]
    values: dict[str, Any] = {"model_type": model_type}
    names = {key: key for key in (*SIZE_FIELDS, *family.fields)}
    names.update({alias: key for alias, key in family.aliases.items()})
    for name, key in names.items():
        if name in data:
            values[key] = _integer(path, name, data[name])
            if key in ZERO_MEANS and key != "embedding_size":  # DeBERTa reads -1 (below 1) as none/default
                values[key] = max(values[key], 0)
            elif key in EXTRA_FIELDS and values[key] < 1:
                raise SourceError(path, name, f"{values[key]!r} must be at least 1")
    _refuse_unmodelled(path, data, model_type)
    defaults = {**{key: getattr(BertConfig(), key) for key in SIZE_FIELDS}, **family.defaults}
    if family.read_words is not None:
        try:
            values.update(family.read_words(data, values.get("hidden_size", defaults["hidden_size"]),
                                            values.get("num_attention_heads", defaults["num_attention_heads"])))
        except ConfigError as error:
            raise SourceError(path, error.field, f"{printable(repr(error.value))[:80]} {error.rule}") from None
    if "tie_word_embeddings" in data:
        values["tie_word_embeddings"] = data["tie_word_embeddings"]
    for flag in family.switches:
        if flag in data and flag not in family.words:
            if not isinstance(data[flag], bool):
                raise SourceError(path, flag, f"{printable(repr(data[flag]))[:80]} must be true or false")
            values[flag] = data[flag]
    fields = BertConfig(model_type=model_type).fields
    notes = [f"{_file_name(family, key)} not in the file: HF's default {_default_text(key, values.get(key, defaults.get(key, getattr(BertConfig(), key))))}"
             for key in fields if key not in values]
    for key, value in family.defaults.items():
        values.setdefault(key, value)
    labels = data.get("id2label")
    if labels is not None:
        if not isinstance(labels, dict) or not labels:
            raise SourceError(path, "id2label", "must be a non-empty object of label names")
        values["num_labels"] = len(labels)
    elif "num_labels" in data:
        values["num_labels"] = _integer(path, "num_labels", data["num_labels"])
    architecture = _architecture(path, data.get("architectures"), model_type)
    if architecture is not None:
        arch_type, values["head"] = architectures()[architecture]
        if arch_type != model_type:
            notes.append(f"architectures names {architecture} but model_type is {model_type!r}: counted as {model_type}")
    try:
        config = BertConfig.from_mapping(values)
    except ConfigError as error:
        raise SourceError(path, error.field, f"{error.value!r}: {error.rule}") from None
    step_keys = _step_keys(data, family)
    if step_keys:
        config = config.replace(step_keys=step_keys)
        from ..core.step.layouts import (
            STEPS,  # here: the compute engine's data, for a file that names step keys only
        )

        modelled = STEPS[model_type].modelled_keys
        refused = [(key, value) for key, value in step_keys if (key, value) not in modelled]
        if refused:
            notes.append(f"{refused[0][0]} {refused[0][1]}: counted; compute refuses it (what a step saves with it "
                         "is not modelled)")
    return HFConfig(path, config, architecture, tuple(notes))


def _step_keys(data: dict[str, Any], family: Family) -> tuple[tuple[str, str], ...]:
    """The keys of `data` set to something compute does not model (named, with their value, for its refusal): the
    family's record says which keys change a step, and the values modelled (`StepKeys`)."""
    keys = family.step_keys
    if keys.exact is not None:  # (a key left null takes its default)
        return tuple((key, _shown(data[key])) for key, modelled in keys.exact.items()
                     if data.get(key) is not None and (data[key] != modelled or isinstance(data[key], bool)
                                                       != isinstance(modelled, bool)))
    found: list[tuple[str, str]] = []
    if keys.activation in data and data[keys.activation] != keys.activation_value:
        found.append((keys.activation, _shown(data[keys.activation])))
    for key in keys.dropouts:
        value = data.get(key)
        if key in data and (not isinstance(value, (int, float)) or isinstance(value, bool)
                            or (value == 0) != keys.dropout_free):
            found.append((key, _shown(value)))
    return tuple(found)


def _shown(value: object) -> str:
    """A file's value as a refusal names it: printable, at most 40 characters."""
    return printable(str(value))[:40]


def _default_text(key: str, value: object) -> str:
    """A default as a user reads it: DeBERTa's 0s are the config class's -1 or absent key."""
    return f"{value}" if value != 0 or key not in ZERO_MEANS else ZERO_MEANS[key]


def _file_name(family: Family, key: str) -> str:
    """The name a config.json of this family uses for `key` (DistilBERT's `dim` for hidden_size)."""
    return next((alias for alias, name in family.aliases.items() if name == key), key)


def _integer(path: Path, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(path, key, f"{value!r} must be a JSON integer")
    return value


def _refuse_unmodelled(path: Path, data: dict[str, Any], model_type: str) -> None:
    """Refuse the first key whose value changes the parameters in a way bert-tui does not count."""
    for key, (counted, why) in REFUSED.items():
        if key in FAMILIES[model_type].switches:
            continue  # counted for this family (cross-attention in BERT-style decoders)
        if key in data and data[key] not in counted:
            raise SourceError(path, key, f"{printable(repr(data[key]))[:80]} is not counted: {why}")
    if data.get("add_cross_attention") is True and data.get("is_decoder") is not True:
        raise SourceError(path, "add_cross_attention", "true needs is_decoder true: transformers refuses to build "
                          "cross-attention in an encoder")


def _architecture(path: Path, value: object, model_type: str) -> str | None:
    """The class `architectures` names first; one that bert-tui does not count is refused by name."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SourceError(path, "architectures", f"{printable(repr(value))[:80]} must be a list of class names")
    if not value:
        return None
    if value[0] not in architectures():
        family = sorted(name for name, (kind, _head) in architectures().items() if kind == model_type)
        others = ", ".join(kind for kind in FAMILIES if kind != model_type)
        raise SourceError(path, "architectures", f"{printable(value[0])[:80]} is not a class bert-tui counts; it "
                          f"counts {', '.join(family)} (and the classes of {others})")
    return str(value[0])


def to_hf_keys(config: BertConfig) -> dict[str, Any]:
    """The keyword arguments of the family's transformers config class that describe `config` (the inverse of
    `load_hf_config`): its sizes under the family's own names, its family sizes, labels and tying."""
    family = config.family
    renamed = {key: alias for alias, key in family.aliases.items()}
    keys = {renamed.get(name, name): getattr(config, name) for name in config.fields}
    if "embedding_size" in keys:
        keys["embedding_size"] = config.embedding_width
    keys.update({flag: getattr(config, flag) for flag in family.switches if flag not in family.words})
    if family.write_words is not None:  # what the family's config class takes as words, and its own keys
        keys.update(family.write_words(config))
    if config.add_cross_attention:
        keys["is_decoder"] = True  # transformers builds cross-attention in decoders only
    return {**keys, "num_labels": config.num_labels, "tie_word_embeddings": config.tie_word_embeddings}
