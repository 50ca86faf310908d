"""A checkpoint's stored tensors against what a config predicts; and a config read back from the tensors.

Stored names are matched after two normalisations that real checkpoints need: legacy LayerNorm names
(`gamma`/`beta` for `weight`/`bias`) and the `bert.` prefix (present or not, whatever the class).
A tied tensor stored anyway (the MLM decoder of older checkpoints) is counted once and reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from ..config import BertConfig
from .tree import ParamTree, strip_body

Shape = tuple[int, ...]
_BODY = ("embeddings.", "encoder.", "pooler.")
_LEGACY = re.compile(r"(LayerNorm|layer_norm)\.(gamma|beta)$")


def canonical(name: str, prefix: str) -> tuple[str, bool]:
    """(the name as the tree names it, whether it was a legacy name); `prefix` is "bert.", "roberta." or ""."""
    legacy = _LEGACY.search(name) is not None
    name = _LEGACY.sub(lambda m: f"{m.group(1)}.{'weight' if m.group(2) == 'gamma' else 'bias'}", name)
    bare = strip_body(name)
    if bare.startswith(_BODY):
        name = f"{prefix}{bare}"
    return name, legacy


@dataclass(frozen=True, slots=True)
class Comparison:
    missing: tuple[str, ...]  # expected by the config, not stored
    unexpected: tuple[tuple[str, Shape], ...]  # stored, not expected
    mismatched: tuple[tuple[str, Shape, Shape], ...]  # (name, expected, stored)
    tied_stored: tuple[str, ...]  # tied tensors the file stores anyway (counted once)
    legacy_names: int  # gamma/beta names read as weight/bias
    held: int  # parameters the file holds, tied duplicates counted once
    expected: int  # the config's total

    @property
    def clean(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)


def compare(tree: ParamTree, stored: Sequence[tuple[str, Shape]]) -> Comparison:
    prefix = "" if tree.config.head == "none" else f"{tree.config.body}."
    expected = {p.name: p.shape for p in tree.unique_params()}
    tied = {p.name for p in tree.tied_params()}
    seen: set[str] = set()
    unexpected, mismatched, tied_stored = [], [], []
    legacy = held = 0
    for raw, shape in stored:
        name, was_legacy = canonical(raw, prefix)
        legacy += was_legacy
        if name in tied:
            tied_stored.append(name)
            continue
        held += prod(shape)
        if name not in expected:
            unexpected.append((raw, shape))
            continue
        seen.add(name)
        if expected[name] != shape:
            mismatched.append((name, expected[name], shape))
    missing = tuple(name for name in expected if name not in seen)
    return Comparison(missing, tuple(unexpected), tuple(mismatched), tuple(tied_stored), legacy, held, tree.total)


def infer_config(stored: Sequence[tuple[str, Shape]]) -> tuple[BertConfig, tuple[str, ...]]:
    """A config read back from tensor shapes, with notes on what shapes cannot tell (the heads)."""
    shapes = {canonical(name, "")[0]: shape for name, shape in stored}
    word = shapes.get("embeddings.word_embeddings.weight")
    if word is None or len(word) != 2:
        raise ValueError("no embeddings.word_embeddings.weight [V, H]: not a BERT checkpoint")
    v, h = word
    layers = {int(m.group(1)) for name in shapes if (m := re.match(r"encoder\.layer\.(\d+)\.", name))}
    heads = h // 64 if h % 64 == 0 else next(a for a in (12, 8, 4, 2, 1) if h % a == 0)  # 64-wide heads are usual
    values: dict[str, Any] = {
        "vocab_size": v, "hidden_size": h, "num_hidden_layers": max(layers, default=-1) + 1 or 1,
        "num_attention_heads": heads, "intermediate_size": _rows(shapes, "encoder.layer.0.intermediate.dense.weight",
                                                                 "[I, H]", 4 * h),
        "max_position_embeddings": _rows(shapes, "embeddings.position_embeddings.weight", "[P, H]", 512),
        "type_vocab_size": _rows(shapes, "embeddings.token_type_embeddings.weight", "[T, H]", 2),
    }
    head, labels = _head_of(shapes)
    config = BertConfig(**values, head=head, pooler="pooler.dense.weight" in shapes if head == "none" else True,
                        num_labels=labels)
    return config, (f"num_attention_heads assumed {heads}: heads split H and leave no trace in the shapes",)


def _rows(shapes: dict[str, Shape], name: str, expected: str, default: int) -> int:
    """The first dimension of a matrix read back from the shapes (`default` when it is not stored); a tensor of
    another rank (0-d, 1-d, 3-d and more) is refused by name, never indexed blindly."""
    shape = shapes.get(name)
    if shape is None:
        return default
    if len(shape) != 2:
        raise ValueError(f"{name} has shape {list(shape)} where a matrix {expected} is expected")
    return shape[0]


def _head_of(shapes: dict[str, Shape]) -> tuple[str, int]:
    mlm = "cls.predictions.bias" in shapes or "cls.predictions.transform.dense.weight" in shapes
    nsp = "cls.seq_relationship.weight" in shapes
    if mlm or nsp:
        return ("pretraining" if mlm and nsp else "mlm" if mlm else "next-sentence"), 2
    if "qa_outputs.weight" in shapes:
        return "question-answering", _rows(shapes, "qa_outputs.weight", "[2, H]", 2)
    if "classifier.weight" not in shapes:
        return "none", 2
    labels = _rows(shapes, "classifier.weight", "[N, H]", 2)
    if labels == 1 and "pooler.dense.weight" in shapes:
        return "multiple-choice", 2
    head = "sequence-classification" if "pooler.dense.weight" in shapes else "token-classification"
    return head, labels
