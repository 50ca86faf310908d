"""Cross-check the core against the real transformers classes, built on the meta device (no weights).

Needs the optional `verify` extra (torch, transformers); importing this module does not import them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import BertConfig, build_tree

INSTALL_HINT = "needs the verify extra (torch, transformers): pip install 'bert-tui[verify]'"


class ExtraMissing(RuntimeError):
    """torch or transformers cannot be imported."""


@dataclass(frozen=True, slots=True)
class Verification:
    hf_class: str
    transformers_version: str
    ours: list[tuple[str, tuple[int, ...]]]
    theirs: list[tuple[str, tuple[int, ...]]]
    our_total: int
    their_total: int

    @property
    def agrees(self) -> bool:
        return self.ours == self.theirs and self.our_total == self.their_total

    def disagreements(self) -> list[str]:
        ours, theirs = dict(self.ours), dict(self.theirs)
        lines = [f"only in transformers: {name} {list(shape)}" for name, shape in self.theirs if name not in ours]
        lines += [f"only in bert-tui: {name} {list(shape)}" for name, shape in self.ours if name not in theirs]
        lines += [f"shape of {name}: bert-tui {list(shape)}, transformers {list(theirs[name])}"
                  for name, shape in self.ours if name in theirs and theirs[name] != shape]
        if not lines and self.ours != self.theirs:
            lines.append("same names and shapes, in another order")
        return lines


def hf_parameters(config: BertConfig) -> tuple[str, list[tuple[str, tuple[int, ...]]], int]:
    """(transformers version, named_parameters() names and shapes, total) of `config.hf_class` on meta."""
    try:
        import torch
        import transformers
    except ImportError as error:
        raise ExtraMissing(f"{INSTALL_HINT} ({error})") from None
    from ..io.hf_config import to_hf_keys

    family = config.family.prefix  # Bert, Roberta, ..., DistilBert, Albert, Electra, MPNet
    hf_config = getattr(transformers, f"{family}Config")(**to_hf_keys(config))
    if config.head == "causal-lm":
        hf_config.is_decoder = True  # as a causal LM is used (and as its class asks); no parameter changes
    cls = getattr(transformers, config.hf_class)
    with torch.device("meta"):
        chooses = config.head == "none" and config.fixed_pooler is None  # the base model takes the pooler flag
        model = cls(hf_config, add_pooling_layer=config.pooler) if chooses else cls(hf_config)
    params = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    return transformers.__version__, params, sum(p.numel() for p in model.parameters())


def verify(config: BertConfig) -> Verification:
    version, theirs, their_total = hf_parameters(config)
    tree = build_tree(config)
    ours = [(p.name, p.shape) for p in tree.unique_params()]
    return Verification(config.hf_class, version, ours, theirs, tree.total, their_total)
