"""Explain a published parameter count: which counting conventions (or mistakes) reproduce it.

A hand count is the exact count with some conventions applied: biases left out, LayerNorm left out, Q/K/V
counted as a full H×H matrix per head, and so on. `hand_count` computes any combination part by part (with
no convention it equals the exact total, for every head class); `audit` tries every combination of the
conventions that apply (at most 2**11, instantly) and ranks those that reproduce the claim by how few
assumptions they need. A claim written short ("110M", "0.11B") matches at the precision it was written with.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from itertools import combinations

from ..config import FAMILIES, LM_HEADS, BertConfig
from .claims import Claim, ClaimError, round_figures
from .families import build_tree
from .totals import layer_sharing


@dataclass(frozen=True, slots=True)
class Convention:
    """One named way a hand count departs from the exact one."""

    key: str
    says: str  # what the convention does, in plain words
    parts: tuple[str, ...]  # the parts (modules) it changes


CONVENTIONS: dict[str, Convention] = {
    c.key: c
    for c in (
        Convention("no-biases", "biases omitted (every Linear counted as weights only)",
                   ("qkv.bias", "attention.output", "intermediate", "output", "pooler", "head",
                    "crossattention.qkv.bias", "crossattention.output")),
        Convention("no-layernorm", "LayerNorm weights and biases omitted",
                   ("embeddings.LayerNorm", "LayerNorm", "head", "crossattention.LayerNorm")),
        Convention("pooler", "pooler (H² + H) included or omitted, against what the class builds", ("pooler",)),
        Convention("no-embeddings", "all embeddings omitted (a 'non-embedding' count)",
                   ("embeddings.word_embeddings", "embeddings.position_embeddings", "embeddings.token_type_embeddings",
                    "embeddings.LayerNorm")),
        Convention("no-position", "position embeddings omitted (P × H)", ("embeddings.position_embeddings",)),
        Convention("no-token-type", "token-type embeddings omitted (T × H)", ("embeddings.token_type_embeddings",)),
        Convention("qkv-full-per-head", "Q, K and V counted as a full H × H matrix per head (A·H² each, not H²)",
                   ("qkv.weight", "crossattention.qkv.weight")),
        Convention("qkv-bias-per-head", "Q, K and V biases counted as H per head instead of H/A (A·H each, not H)",
                   ("qkv.bias", "crossattention.qkv.bias")),
        Convention("pretraining-heads", "MLM and NSP heads included (BertForPreTraining: what the hub's checkpoints hold)",
                   ("head",)),
        Convention("tied-twice", "the tied MLM decoder counted again (V × H + V), as if it were not shared", ("head",)),
        Convention("unshared-layers", "ALBERT's shared layers counted once per run (L layers), not once stored (G·K)",
                   ("encoder",)),
    )
}
# Where each part of a hand count lives in the parameter tree (`*`: every encoder layer).
PART_NODES: dict[str, str] = {
    "embeddings.word_embeddings": "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings": "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm": "embeddings.LayerNorm.{weight,bias}",
    "qkv.weight": "encoder.layer.*.attention.self.{query,key,value}.weight",
    "qkv.bias": "encoder.layer.*.attention.self.{query,key,value}.bias",
    "attention.output": "encoder.layer.*.attention.output.dense",
    "LayerNorm": "encoder.layer.*.{attention.output,output}.LayerNorm",
    "intermediate": "encoder.layer.*.intermediate.dense",
    "output": "encoder.layer.*.output.dense",
    "crossattention.qkv.weight": "encoder.layer.*.crossattention.self.{query,key,value}.weight",
    "crossattention.qkv.bias": "encoder.layer.*.crossattention.self.{query,key,value}.bias",
    "crossattention.output": "encoder.layer.*.crossattention.output.dense",
    "crossattention.LayerNorm": "encoder.layer.*.crossattention.output.LayerNorm",
    "pooler": "pooler.dense",
    "head": "the head (cls / classifier / qa_outputs)",
    "embeddings": "the embeddings (and a projection to H)",
    "encoder": "the encoder's layers",
}
# The conventions for the families beyond BERT's layout, applied to their counted tree part by part.
FAMILY_CONVENTIONS = ("no-biases", "no-layernorm", "pooler", "no-embeddings", "pretraining-heads", "tied-twice",
                      "unshared-layers")
LAYER_CONVENTIONS = ("no-biases", "no-layernorm", "qkv-full-per-head", "qkv-bias-per-head")


def hand_count(config: BertConfig, conventions: Iterable[str] = (), scope: str = "model") -> dict[str, int]:
    """The count of each part under `conventions` (no convention: the exact count of `config.hf_class`)."""
    if not config.family.bert_names:
        return _family_count(config, set(conventions))
    on = set(conventions)
    c = config
    h, i, a, v = c.hidden_size, c.intermediate_size, c.num_attention_heads, c.vocab_size
    b = 0 if "no-biases" in on else 1
    ln = 0 if "no-layernorm" in on else 1
    layer = {
        "qkv.weight": 3 * h * h * (a if "qkv-full-per-head" in on else 1),
        "qkv.bias": b * 3 * h * (a if "qkv-bias-per-head" in on else 1),
        "attention.output": h * h + b * h,
        "LayerNorm": ln * 4 * h,
        "intermediate": h * i + b * i,
        "output": i * h + b * h,
    }
    if c.add_cross_attention:  # a decoder's cross-attention: Q/K/V, output and LayerNorm again, by the same hand
        layer.update({"crossattention.qkv.weight": layer["qkv.weight"], "crossattention.qkv.bias": layer["qkv.bias"],
                      "crossattention.output": h * h + b * h, "crossattention.LayerNorm": ln * 2 * h})
    if scope == "layer":
        return layer
    embeddings = 0 if "no-embeddings" in on else 1
    parts = {
        "embeddings.word_embeddings": embeddings * v * h,
        "embeddings.position_embeddings": embeddings * (0 if "no-position" in on else c.max_position_embeddings * h),
        "embeddings.token_type_embeddings": embeddings * (0 if "no-token-type" in on else c.type_vocab_size * h),
        "embeddings.LayerNorm": embeddings * ln * 2 * h,
    }
    parts.update({part: c.num_hidden_layers * n for part, n in layer.items()})
    parts["pooler"] = (h * h + b * h) if c.has_pooler != ("pooler" in on) else 0
    parts["head"] = _head(c, on, b, ln)
    return parts


def _head(c: BertConfig, on: set[str], b: int, ln: int) -> int:
    h, v, n = c.hidden_size, c.vocab_size, c.num_labels
    mlm = c.head in LM_HEADS or "pretraining-heads" in on
    nsp = c.head in ("pretraining", "next-sentence") or "pretraining-heads" in on
    count = (h * h + b * h + ln * 2 * h + b * v) if mlm else 0  # transform, its LayerNorm, the output bias
    count += (v * h + b * v) if mlm and ("tied-twice" in on or not c.tie_word_embeddings) else 0
    count += (2 * h + b * 2) if nsp else 0
    if c.head == "sequence-classification" and c.family.forward.classifier == "dense":
        count += h * h + b * h  # RoBERTa's classifier has a dense layer before out_proj
    if c.head in ("sequence-classification", "token-classification", "question-answering"):
        count += n * h + b * n
    elif c.head == "multiple-choice":
        count += h + b
    return count


def _family_count(config: BertConfig, on: set[str]) -> dict[str, int]:
    """A hand count of a family beyond BERT's layout, read from its counted tree group by group: biases or
    norms left out by kind, the embeddings or the pooler left out (or the pooler added), the class's
    pre-training head included, a tied decoder counted again, ALBERT's layers counted once per run."""
    counted = config
    if "pretraining-heads" in on:
        counted = config.replace(head=_pretraining_head(config), pooler=True)
    tree = build_tree(counted)
    parts = dict(tree.groups())
    parts.setdefault("head", 0)
    for param in tree.unique_params():
        if ("no-biases" in on and param.kind == "bias") or ("no-layernorm" in on and param.kind == "norm"):
            parts[param.group] -= param.numel
    if "no-embeddings" in on:
        parts["embeddings"] = 0
    if "pooler" in on:
        h = config.hidden_size
        parts["pooler"] = 0 if counted.has_pooler else h * h + (0 if "no-biases" in on else h)
    if "tied-twice" in on:
        parts["head"] += sum(p.numel for p in tree.tied_params() if p.kind != "embedding")
    sharing = layer_sharing(config, tree.total)
    if "unshared-layers" in on and sharing is not None:
        parts["encoder"] += sharing.unshared - tree.total
    return parts


def _pretraining_head(config: BertConfig) -> str:
    return "pretraining" if "pretraining" in config.family.heads else "mlm"


def describe(key: str, config: BertConfig) -> str:
    """A convention in plain words, for this config (the pooler one says which way it goes)."""
    if key == "pooler":
        return "pooler (H² + H) omitted" if config.has_pooler else f"pooler (H² + H) included ({config.hf_class} has none)"
    if not config.family.bert_names:
        if key == "pretraining-heads":
            head = config.replace(head=_pretraining_head(config), pooler=True).hf_class
            return f"the pre-training head included ({head}: what the hub's checkpoints hold)"
        if key == "tied-twice":
            return "the tied LM decoder counted again, as if it were not shared"
        if key == "no-biases":
            return "biases omitted (every Linear and LayerNorm bias)"
    return CONVENTIONS[key].says


def part_name(part: str, config: BertConfig) -> str:
    """Where a part of a hand count lives: BERT's modules, or the group for the other families."""
    return part if not config.family.bert_names else PART_NODES[part]


def applicable(config: BertConfig, scope: str) -> list[str]:
    """The conventions that can change something for this config and scope."""
    if not config.family.bert_names:
        keys = [k for k in FAMILY_CONVENTIONS if k != "unshared-layers" or config.family.forward.shared_layers]
        if config.head in ("mlm", "pretraining"):
            keys.remove("pretraining-heads")
        if config.family.heads.get("none", False) is False:
            keys.remove("pooler")  # the family has no pooler to add or leave out
        return keys
    keys = list(LAYER_CONVENTIONS) if scope == "layer" else [k for k in CONVENTIONS if k != "unshared-layers"]
    if config.num_attention_heads == 1:  # one head: per-head and whole counts are the same
        keys = [k for k in keys if not k.startswith("qkv")]
    if config.head == "pretraining" or ("pretraining" not in config.family.heads and scope == "model"):
        keys.remove("pretraining-heads")  # already counted, or no such heads (RoBERTa has no NSP)
    return keys


def _coherent(combo: tuple[str, ...], config: BertConfig) -> bool:
    """Skip combinations holding a convention that changes nothing given the others."""
    on = set(combo)
    if "no-embeddings" in on and on & {"no-position", "no-token-type"}:
        return False
    if "no-biases" in on and "qkv-bias-per-head" in on:
        return False
    has_mlm = config.head in LM_HEADS or "pretraining-heads" in on
    return "tied-twice" not in on or (has_mlm and config.tie_word_embeddings)


@dataclass(frozen=True, slots=True)
class Explanation:
    """A set of conventions, the count they give, and how each part differs from the exact count."""

    conventions: tuple[str, ...]
    value: int
    rounded: int | None  # the value at the claim's precision, when the claim is a short form
    changes: dict[str, int]  # part → (hand count − exact count), only the parts that differ

    @property
    def assumptions(self) -> int:
        return len(self.conventions) + (self.rounded is not None and self.rounded != self.value)


@dataclass(frozen=True, slots=True)
class Audit:
    claim: Claim
    scope: str
    exact: int
    matches: tuple[Explanation, ...]  # fewest assumptions first
    nearest: Explanation | None  # when nothing matches: the closest combination
    reread: bool = False  # a count written in full that nothing reproduced exactly, read at its significant figures


def audit(claim: Claim, config: BertConfig, scope: str = "model", limit: int = 8) -> Audit:
    """Every combination of applicable conventions that reproduces `claim`, fewest assumptions first.

    A count written in full with trailing zeros (110000000, 110,000,000) says nothing of its precision: when
    no combination gives it exactly, it is read at the precision of its significant digits (2 here), as
    '110M' is, and the result says so."""
    if not config.family.bert_names and scope == "layer":
        bert_layout = [name for name, family in FAMILIES.items() if family.bert_names]
        raise ClaimError(f"per-layer claims are audited for the BERT layout ({', '.join(bert_layout)}); "
                         f"{config.model_type} is audited per model")
    result = _audit(claim, config, scope, limit)
    figures = len(str(claim.value).rstrip("0"))
    if result.matches or claim.figures is not None or figures == len(str(claim.value)):
        return result
    reread = _audit(Claim(claim.text, claim.value, figures), config, scope, limit)
    return replace(reread, reread=True) if reread.matches else result


def _audit(claim: Claim, config: BertConfig, scope: str, limit: int) -> Audit:
    exact_parts = hand_count(config, (), scope)
    exact = sum(exact_parts.values())
    keys = applicable(config, scope)
    found: list[Explanation] = []
    best: Explanation | None = None
    for size in range(len(keys) + 1):
        for combo in combinations(keys, size):
            if not _coherent(combo, config):
                continue
            parts = hand_count(config, combo, scope)
            value = sum(parts.values())
            changes = {p: n - exact_parts[p] for p, n in parts.items() if n != exact_parts[p]}
            if size and not changes:
                continue  # a convention that changes nothing here explains nothing
            rounded = None if claim.figures is None else round_figures(value, claim.figures)
            explanation = Explanation(combo, value, rounded, changes)
            if claim.matches(value):
                found.append(explanation)
            elif best is None or abs(value - claim.value) < abs(best.value - claim.value):
                best = explanation
    found.sort(key=lambda e: (e.assumptions, abs(e.value - claim.value)))
    return Audit(claim, scope, exact, tuple(found[:limit]), None if found else best)
