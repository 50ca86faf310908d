"""What is run, and the element sizes it decides: the step's leaf (no other step module is imported here).

A `Workload` is the batch, the sequence length and every choice that changes FLOPs or bytes, each setting said
once in `WORKLOAD` (the CLI's flags, the Compute pane's fields and the JSON's keys come from it); `Conventions` are
the bytes per element that the precision and the device decide (the CPU oracle's and CUDA's, where they differ).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..config import ConfigError, parse_int

MODES = ("train", "inference")
PRECISIONS = ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16")
OPTIMIZERS = ("adamw", "sgd", "sgd-momentum")
ATTENTIONS = ("eager", "sdpa")
DEVICES = ("cpu", "cuda")
# The training loop, for what it keeps alive: the course's (the transformers course's and accelerate's examples:
# `out = model(**batch); out.loss.backward(); opt.step()`, nothing deleted) keeps the outputs (an LM head's b·s·V
# logits) through the backward and the step, and on until the next step's forward returns and `out` is rebound;
# the hand-written loop with `del out` at the end of each step, through the backward and the step only; the
# Trainer keeps only the loss.
LOOPS = ("course", "hand-written", "trainer")
GPU_SIZES_GIB = (16, 24, 40, 48, 80, 141)
GIB = 1024**3
FLOP_CONVENTION = "torch.utils.flop_counter: 2 FLOPs per multiply-accumulate, matrix products only"
MAX_BATCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of the workload, said once: the CLI's flag and help, the Compute pane's field, the JSON's key."""

    name: str  # the `Workload` field, the JSON key, the flag (`--padding-mask`) and the pane's field id
    label: str  # the pane's
    default: int | str | bool  # what a user starts from (the CLI and the pane; `Workload()` keeps the CPU oracle's)
    allowed: tuple[str, ...] = ()  # a choice's values (none: a whole number, or a switch if the default is a bool)
    help: str = ""  # the CLI's
    metavar: str = ""  # a whole number's, in the CLI's help

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def switch(self) -> bool:
        return isinstance(self.default, bool)

    @property
    def size(self) -> bool:
        return not self.allowed and not self.switch


WORKLOAD: dict[str, Setting] = {setting.name: setting for setting in (
    Setting("batch", "batch b", 32, help="b: sequences per step (examples, for multiple choice)", metavar="B"),
    Setting("seq", "sequence s", 128, help="s: tokens per sequence (at most max_position_embeddings)", metavar="S"),
    Setting("mode", "mode", "train", MODES, "a training step or an inference forward"),
    Setting("precision", "precision", "fp32", PRECISIONS,
            "fp32/bf16/fp16: the model in that dtype; amp-bf16/amp-fp16: float32 weights under autocast (mixed "
            "precision; AdamW then keeps float32 master weights and moments)"),
    Setting("optimizer", "optimizer", "adamw", OPTIMIZERS,
            "adamw (two moments per parameter), sgd (no state) or sgd-momentum (one buffer)"),
    Setting("checkpointing", "checkpointing", False,
            help="activation checkpointing of every encoder layer (recomputed in the backward)"),
    Setting("attention", "attention", "sdpa", ATTENTIONS,
            "attention implementation: sdpa (as transformers builds these classes; fused kernels on CUDA) or eager "
            "(the math path: softmax over b·A·s² scores)"),
    Setting("padding_mask", "padding mask", False, help="the batch carries a padding attention mask"),
    Setting("device", "device", "cuda", DEVICES,
            "whose conventions where they differ: cuda (1-byte dropout masks, float32 LayerNorm statistics, sdpa's "
            "fused kernels; measured on an H200) or cpu (what the CPU oracle measures)"),
    Setting("choices", "choices", 4, help="multiple-choice only: answers per example", metavar="C"),
    Setting("loop", "loop", "course", LOOPS,
            "what the training loop keeps alive, for the peak and what fits: course (the loop of the transformers "
            "course and accelerate's examples, out = model(**batch); out.loss.backward(); opt.step() with nothing "
            "deleted, keeps the outputs, an LM head's b·s·V logits, through the backward, the step and the next "
            "step's forward), hand-written (the same with `del out` at the end of each step) or trainer "
            "(transformers' Trainer keeps only the loss); with --mode inference, course keeps each forward's "
            "outputs (a causal LM's key/value cache too) until the next forward returns, the other two let them go "
            "before it"),
)}


@dataclass(frozen=True, slots=True)
class Workload:
    """What is run: batch `b` of sequences of length `s`, and every choice that changes FLOPs or bytes."""

    batch: int
    seq: int
    mode: str = "train"
    precision: str = "fp32"
    optimizer: str = "adamw"
    checkpointing: bool = False
    attention: str = "sdpa"  # as transformers builds these classes
    padding_mask: bool = False
    device: str = "cpu"
    choices: int = 2  # multiple-choice only: candidate answers per example (C)
    loop: str = "course"  # what the training loop keeps alive (LOOPS): the peak and fits only

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "choices"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
                raise ConfigError(name, value, f"must be a whole number between 1 and {MAX_BATCH:,}")
        for name, allowed in (("mode", MODES), ("precision", PRECISIONS), ("optimizer", OPTIMIZERS),
                              ("attention", ATTENTIONS), ("device", DEVICES), ("loop", LOOPS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, getattr(self, name), f"must be one of: {', '.join(allowed)}")
        for name in ("checkpointing", "padding_mask"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "must be true or false")
        if self.checkpointing and self.mode != "train":
            raise ConfigError("checkpointing", True, "applies to training only (inference keeps no activations)")

    @property
    def train(self) -> bool:
        return self.mode == "train"

    @property
    def padded(self) -> bool:
        """Whether the mask pads anything: one token cannot be padded, and transformers drops an all-ones mask."""
        return self.padding_mask and self.seq > 1

    @property
    def amp(self) -> bool:
        return self.precision.startswith("amp-")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_settings(cls, given: dict[str, Any]) -> Workload:
        """A workload from settings as a user gives them (`WORKLOAD`'s names; a whole number may be its text), each
        missing one at its `WORKLOAD` default; a `ConfigError` names a refused one."""
        values: dict[str, Any] = {}
        for name, setting in WORKLOAD.items():
            value = given.get(name, setting.default)
            if setting.size and isinstance(value, str):
                value = parse_int(name, value)
            values[name] = value
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Conventions:
    """Element sizes in bytes where the precision and the device decide them."""

    weight: int  # parameters, their gradients and the optimizer's moments
    compute: int  # matrix products, attention, GELU: the 16-bit dtype under autocast
    residual: int  # the hidden states between layers and what LayerNorm takes (float32 under autocast)
    stats: int  # LayerNorm's saved mean and rstd
    heads: int  # queries, keys and values as the attention saves them
    softmax: int  # attention probabilities (CUDA autocast runs softmax in float32)
    loss: int  # the loss's log-probabilities (autocast runs cross-entropy in float32)
    bool_masks: bool  # dropout keeps a 1-byte mask (CUDA) instead of a noise tensor in its input's dtype (CPU)
    fused: bool = False  # sdpa runs a fused kernel (CUDA): no b·A·s² tensors; on CPU it takes the math path
    stream16: bool = False  # the encoder's stream is 16-bit under autocast: a 16-bit projection feeds it (CPU)

    @property
    def stream(self) -> int:
        """The encoder's hidden states between layers: the residual dtype, unless a projection under CPU
        autocast hands the encoder 16-bit states (CPU autocast's LayerNorm keeps its input's dtype)."""
        return self.compute if self.stream16 else self.residual

    @property
    def keeps_16bit_logits(self) -> bool:
        """CUDA autocast's cross-entropy keeps its 16-bit input logits besides the float32 log-probabilities
        (measured on an H200; the CPU does not)."""
        return self.loss != self.compute and self.bool_masks

    @property
    def cast_norm(self) -> int:
        """What a LayerNorm on a 16-bit activation saves as input: CUDA autocast casts it to float32, CPU autocast
        keeps it 16-bit (with float32 statistics)."""
        return 4 if self.residual != self.compute and self.bool_masks else self.compute

    def mask(self, of: int) -> int:
        """Bytes per element of a dropout mask whose input has `of` bytes per element."""
        return 1 if self.bool_masks else of

    @classmethod
    def of(cls, workload: Workload, masked: bool = False) -> Conventions:
        """`masked`: the attention adds a float32 mask, which under autocast makes the scores float32."""
        half = 2 if workload.precision != "fp32" else 4
        weight = 4 if workload.amp or workload.precision == "fp32" else 2
        residual = 4 if workload.amp else half
        cuda = workload.device == "cuda"
        stats = 4 if cuda else residual
        # sdpa's math path on CPU computes 16-bit attention in float32 (q, k, v cast up); on CUDA in 16 bits.
        # CUDA autocast runs eager softmax in float32; on CPU the scores become float32 only when a float32 mask
        # is added to them.
        heads = 4 if not cuda and workload.attention == "sdpa" else half
        if workload.attention == "sdpa":
            softmax = heads
        else:
            softmax = 4 if workload.amp and (cuda or masked) else half
        loss = 4 if workload.amp else half
        return cls(weight, half, residual, stats, heads, softmax, loss, cuda, cuda and workload.attention == "sdpa")
