"""Measure a training step of the real transformers class with torch: the oracle `tui.core.step` is checked by.

Needs the optional `verify` extra; importing this module does not import torch. What it measures, and how:
- FLOPs: `torch.utils.flop_counter.FlopCounterMode` around the forward and, separately, the backward, on the
  meta device (no weights; a padding mask does not change FLOPs in that convention, and the meta device cannot
  build one). Forward FLOPs per component come from the counter's module breakdown.
- Activations: every tensor saved for backward during the forward, caught by
  `torch.autograd.graph.saved_tensors_hooks`, on CPU with real (small) tensors. A storage counts once, for the
  component whose module saved it first; parameters' and buffers' storages are not activations.
- Checkpointing: the layers' inputs are what the forward keeps; the backward recomputes one layer at a time, and
  what that recomputation saves is caught the same way during the backward (its peak is the largest layer).
- Weights, gradients and optimizer states: bytes of the tensors after one real step (`step` tensors included).

A training step is the class's forward with labels (its own loss), the backward and one optimizer step. BertModel
has no loss: its step's loss is the sum of its outputs (which saves nothing and reaches every parameter).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core.config import BertConfig
from ..core.step.symbols import attention_run
from ..core.step.workload import Workload

# The dtype the model is built in: autocast (amp-*) runs float32 weights.
PRECISION_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "amp-bf16": "float32",
                    "amp-fp16": "float32"}


@dataclass(frozen=True, slots=True)
class Measurement:
    flops_forward: int
    flops_backward: int
    flops_forward_by_component: dict[str, int]
    activations_by_component: dict[str, int]
    recompute_peak: int  # bytes saved while the backward recomputes a checkpointed layer (0 without checkpointing)
    weights: int
    gradients: int
    optimizer: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "flops": {"forward": self.flops_forward, "backward": self.flops_backward,
                      "forward_by_component": self.flops_forward_by_component},
            "activations": {"by_component": self.activations_by_component, "recompute_peak": self.recompute_peak},
            "weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
        }


LAYER_STACKS = (["encoder", "layer"], ["transformer", "layer"])  # BERT's and its kin's; DistilBERT's
ALBERT_LAYERS = ["encoder", "albert_layer_groups", "*", "albert_layers", "*"]  # stored layers, each run L/G times
EMBEDDING_ROOTS = (["embeddings"], ["embeddings_project"], ["encoder", "embedding_hidden_mapping_in"],
                   ["encoder", "relative_attention_bias"], ["encoder", "LayerNorm"])
# (ELECTRA's projection, ALBERT's mapping, MPNet's position bias, DeBERTa's relative embeddings' LayerNorm)
POOLER_ROOTS = (["pooler"], ["pooler_activation"])


def _root(rest: list[str]) -> str | None:
    """The component whose root module `rest` (a name under the body) is, or None."""
    if rest in EMBEDDING_ROOTS:
        return "embeddings"
    if rest in POOLER_ROOTS:
        return "pooler"
    if len(rest) == 3 and rest[:2] in LAYER_STACKS:
        return f"layer.{rest[2]}"
    if len(rest) == 2 and rest[0] == "layers":  # ModernBERT's stack sits under the body itself
        return f"layer.{rest[1]}"
    if len(rest) == len(ALBERT_LAYERS) and all(a in ("*", b) for a, b in zip(ALBERT_LAYERS, rest)):
        return f"layer.{rest[2]}.{rest[4]}"
    return None


def _under_body(parts: list[str], body: str) -> list[str]:
    """A module's name parts below the body attribute (`bert.encoder.layer.0` → `encoder.layer.0`)."""
    return parts[1:] if parts[:1] == [body] else parts


def _module_path(module_name: str, body: str) -> list[str]:
    """A module's name as parts under the body (a peft model's class sits under `base_model.model`)."""
    parts = module_name.split(".")
    if parts[:2] == ["base_model", "model"]:
        parts = parts[2:]
    return _under_body(parts, body)


def component_of(module_name: str, body: str) -> str:
    """Which component of the core's breakdown a module belongs to: embeddings, layer.N, pooler or head (the
    root it lies under; a module under no root is the head's)."""
    parts = _module_path(module_name, body)
    for end in range(len(parts), 0, -1):
        component = _root(parts[:end])
        if component is not None:
            return component
    return "head"


def construct(config: BertConfig, workload: Workload) -> Any:
    """transformers' class for `config`, in float32 on the current device, seeded, with the attention that runs."""
    import torch
    import transformers

    from ..io.hf_config import to_hf_keys

    family = config.family.prefix  # Bert, Roberta, ..., DistilBert, Electra
    attention = attention_run(config, workload).attention  # MPNet has no sdpa: transformers would pick eager
    hf_config = getattr(transformers, f"{family}Config")(**to_hf_keys(config), attn_implementation=attention)
    if config.head == "causal-lm":
        hf_config.is_decoder = True
    cls = getattr(transformers, config.hf_class)
    torch.manual_seed(0)
    chooses = config.head == "none" and config.fixed_pooler is None  # the base model takes the pooler flag
    return cls(hf_config, add_pooling_layer=config.pooler) if chooses else cls(hf_config)


def dtype_of(workload: Workload) -> Any:
    import torch

    return getattr(torch, PRECISION_DTYPES[workload.precision])


def prepare(model: Any, workload: Workload) -> Any:
    """Training or evaluation mode, and checkpointing, as the workload asks."""
    model.train(workload.mode == "train")
    if workload.checkpointing:  # (transformers 5.23 renamed it; the old name warns)
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
    return model


def build_model(config: BertConfig, workload: Workload, device: str, method: dict[str, Any] | None = None) -> Any:
    import torch

    with torch.device(device):
        model = construct(config, workload)
    model.to(dtype_of(workload))
    return apply_method(prepare(model, workload), config, method)


def apply_method(model: Any, config: BertConfig, method: dict[str, Any] | None) -> Any:
    """A fine-tuning method as people apply it: `{"lora": LoraConfig's keys}` (or `{"ia3": IA3Config's}`) wraps
    the model with peft's `get_peft_model` (task type as the head's); `{"freeze": {"embeddings": bool, "layers": k, "body": bool}}`
    calls `requires_grad_(False)` on those parts."""
    if not method:
        return model
    if "lora" in method:
        from peft import LoraConfig, get_peft_model

        from ..core.count.lora import task_type

        return get_peft_model(model, LoraConfig(task_type=task_type(config), **method["lora"]))
    if "ia3" in method:
        from peft import IA3Config, get_peft_model

        from ..core.count.lora import task_type

        return get_peft_model(model, IA3Config(task_type=task_type(config), **method["ia3"]))
    spec = method["freeze"]
    body = model if config.head == "none" else getattr(model, config.body)
    if spec.get("body"):
        body.requires_grad_(False)
    if spec.get("embeddings"):
        body.embeddings.requires_grad_(False)
    stack = body.get_submodule(config.family.layer_stack) if spec.get("layers") else ()
    for layer in list(stack)[:spec.get("layers", 0)]:
        layer.requires_grad_(False)
    return model


def inputs(config: BertConfig, workload: Workload, device: str) -> dict[str, Any]:
    """Token ids, the padding mask if asked, and the head's labels, seeded."""
    import torch

    gen = torch.Generator().manual_seed(1)
    b, s = workload.batch, workload.seq
    shape = (b, workload.choices, s) if config.head == "multiple-choice" else (b, s)
    batch: dict[str, Any] = {"input_ids": torch.randint(0, config.vocab_size, shape, generator=gen)}
    if workload.padding_mask:
        mask = torch.ones(shape, dtype=torch.long)
        if s > 1:  # the last third of every sequence is padding (at least one token, never the first)
            mask[..., s - max(1, s // 3):] = 0
        batch["attention_mask"] = mask
    if workload.mode == "train":
        batch.update(_labels(config, workload, gen))
    return {key: value.to(device) for key, value in batch.items()}


def _labels(config: BertConfig, workload: Workload, gen: Any) -> dict[str, Any]:
    import torch

    b, s = workload.batch, workload.seq
    head, n = config.head, config.num_labels
    if head == "pretraining" and config.family.forward.sentence_order:  # sentence order, over num_labels classes
        return {"labels": torch.randint(0, config.vocab_size, (b, s), generator=gen),
                "sentence_order_label": torch.randint(0, n, (b,), generator=gen)}
    if head == "pretraining" and config.family.forward.discriminator:  # the discriminator: replaced or not, per token
        return {"labels": torch.randint(0, 2, (b, s), generator=gen)}
    if head in ("mlm", "causal-lm"):
        return {"labels": torch.randint(0, config.vocab_size, (b, s), generator=gen)}
    if head == "pretraining":
        return {"labels": torch.randint(0, config.vocab_size, (b, s), generator=gen),
                "next_sentence_label": torch.randint(0, 2, (b,), generator=gen)}
    if head == "sequence-classification":
        if n == 1:
            return {"labels": torch.rand((b,), generator=gen)}
        return {"labels": torch.randint(0, n, (b,), generator=gen)}
    if head == "token-classification":
        return {"labels": torch.randint(0, n, (b, s), generator=gen)}
    if head == "question-answering":
        return {"start_positions": torch.randint(0, s, (b,), generator=gen),
                "end_positions": torch.randint(0, s, (b,), generator=gen)}
    if head == "multiple-choice":
        return {"labels": torch.randint(0, workload.choices, (b,), generator=gen)}
    if head == "next-sentence":
        return {"labels": torch.randint(0, 2, (b,), generator=gen)}
    return {}


def loss_of(outputs: Any) -> Any:
    """The class's own loss, or for BertModel the sum of its outputs."""
    if getattr(outputs, "loss", None) is not None:
        return outputs.loss
    total = outputs.last_hidden_state.sum()
    if getattr(outputs, "pooler_output", None) is not None:
        total = total + outputs.pooler_output.sum()
    return total


def _autocast(workload: Workload, device: str) -> contextlib.AbstractContextManager[Any]:
    import torch

    if not workload.precision.startswith("amp-"):
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if workload.precision == "amp-bf16" else torch.float16
    return torch.autocast("cpu" if device == "meta" else device, dtype=dtype)


def measure_flops(config: BertConfig, workload: Workload, device: str = "meta",
                  method: dict[str, Any] | None = None) -> tuple[int, int, dict[str, int]]:
    """FlopCounterMode's forward and backward: on the meta device (no weights, the math path), or on CUDA with the
    real kernels (sdpa's fused attention counts its backward as 2.5 × its forward)."""
    from torch.utils.flop_counter import FlopCounterMode

    # fp32 and no mask on the meta device (it cannot build one); on CPU the mask stays (a class may need it)
    plain = Workload(**{**workload.as_dict(), "padding_mask": workload.padding_mask and device == "cpu",
                        "precision": "fp32"})
    if device not in ("meta", "cpu"):
        plain = workload
    model = build_model(config, plain, device, method)
    batch = inputs(config, plain, device)
    prefix = type(model).__name__
    with FlopCounterMode(display=False) as forward_mode, _autocast(plain, device):
        loss = loss_of(model(**batch)) if workload.mode == "train" else model(**batch)
    by_component: dict[str, int] = {}
    for name, counts in forward_mode.get_flop_counts().items():
        parts = name.split(".")
        if parts[1:3] == ["base_model", "model"]:  # a peft model: the class sits under base_model.model
            parts = parts[:1] + parts[3:]
        if parts[0] != prefix or len(parts) < 2:
            continue
        component = _root(_under_body(parts[1:], config.body))
        if component is not None:  # counted at the components' roots; the head is what remains of the total
            by_component[component] = by_component.get(component, 0) + sum(counts.values())
    head_flops = forward_mode.get_total_flops() - sum(by_component.values())
    by_component["head"] = by_component.get("head", 0) + head_flops
    backward = 0
    if workload.mode == "train":
        with FlopCounterMode(display=False) as backward_mode:
            loss.backward()
        backward = backward_mode.get_total_flops()
    return forward_mode.get_total_flops(), backward, {k: v for k, v in by_component.items() if v}


@contextlib.contextmanager
def _module_stack(model: Any) -> Iterator[list[str]]:
    """The name of the innermost module running, kept up to date by forward hooks."""
    stack = [""]

    def enter(name: str) -> Any:
        return lambda _module, _args: stack.append(name)  # a pre-hook returning None keeps the inputs

    def leave(_module: Any, _args: Any, _output: Any) -> None:
        stack.pop()

    handles = []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(enter(name)))
        handles.append(module.register_forward_hook(leave))
    try:
        yield stack
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _layer_runs(model: Any, body: str) -> Iterator[list[int]]:
    """How many times a stored layer has run so far, less one (ALBERT runs its G·K stored layers L times)."""
    runs = [-1]
    roots = {name: _root(_module_path(name, body)) for name, _ in model.named_modules()}
    handles = [module.register_forward_pre_hook(lambda _module, _args: runs.__setitem__(0, runs[0] + 1))
               for name, module in model.named_modules() if (roots[name] or "").count(".") == 2]
    try:
        yield runs
    finally:
        for handle in handles:
            handle.remove()


def measure_memory(config: BertConfig, workload: Workload, device: str = "cpu",
                   method: dict[str, Any] | None = None) -> tuple[dict[str, int], int, int, int, int]:
    """(activations by component, recompute peak, weights, gradients, optimizer states) in bytes, on CPU."""
    import torch

    model = build_model(config, workload, device, method)
    batch = inputs(config, workload, device)
    fixed = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    saved: dict[int, tuple[str, int]] = {}
    alive: list[Any] = []  # saved tensors held until the end, so no freed address is reused and miscounted
    with _module_stack(model) as stack, _layer_runs(model, config.body) as runs:
        def pack(tensor: Any) -> Any:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in fixed and storage.data_ptr() not in saved:
                component = component_of(stack[-1], config.body)
                if component.count(".") == 2:  # an ALBERT layer: stored once, counted by the run
                    component = f"layer.{runs[0]}"
                saved[storage.data_ptr()] = (component, storage.nbytes())
                alive.append(tensor)
            return tensor

        grad = torch.enable_grad() if workload.mode == "train" else torch.no_grad()
        with grad, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _autocast(workload, device):
            outputs = model(**batch)
    by_component: dict[str, int] = {}
    for component, nbytes in saved.values():
        by_component[component] = by_component.get(component, 0) + nbytes
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if workload.mode != "train":
        return by_component, 0, weights, 0, 0
    recompute = _backward(model, loss_of(outputs), workload.checkpointing, fixed | set(saved))
    gradients = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    optimizer = _optimizer_step(model, workload)
    return by_component, recompute, weights, gradients, optimizer


def _backward(model: Any, loss: Any, checkpointing: bool, held: set[int]) -> int:
    """Run the backward; with checkpointing, the most bytes one layer's recomputation saves.

    torch recomputes a checkpointed layer under hooks of its own (`_recomputation_hook`), which hide what it saves
    from outer hooks: the oracle wraps their pack hook for the backward. Storages the forward already holds (the
    layer's input) and parameters are not counted again.
    """
    from torch.utils import checkpoint

    if not checkpointing:
        loss.backward()
        return 0
    recomputations: list[dict[int, int]] = []
    alive: list[Any] = []  # as in the forward: no address reused while it is being counted
    hook_class: Any = checkpoint._recomputation_hook  # private: the oracle watches torch's own recomputation
    real_init = hook_class.__init__

    def init(self: Any, *args: Any) -> None:
        real_init(self, *args)
        inner_pack, seen = self.pack_hook, dict[int, int]()
        recomputations.append(seen)

        def pack(tensor: Any) -> Any:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in held and storage.data_ptr() not in seen:
                seen[storage.data_ptr()] = storage.nbytes()
                alive.append(tensor)
            return inner_pack(tensor)

        self.pack_hook = pack

    hook_class.__init__ = init
    try:
        loss.backward()
    finally:
        hook_class.__init__ = real_init
    return max((sum(seen.values()) for seen in recomputations), default=0)


def _optimizer_step(model: Any, workload: Workload) -> int:
    import torch

    params = [p for p in model.parameters() if p.grad is not None]
    if workload.optimizer == "adamw":
        optimizer: Any = torch.optim.AdamW(params, lr=1e-4, foreach=False)
    elif workload.optimizer == "sgd":
        optimizer = torch.optim.SGD(params, lr=1e-4, foreach=False)
    else:
        optimizer = torch.optim.SGD(params, lr=1e-4, momentum=0.9, foreach=False)
    optimizer.step()
    total = 0
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
    return total


def measure(config: BertConfig, workload: Workload, device: str = "cpu",
            method: dict[str, Any] | None = None) -> Measurement:
    """The oracle on `device`: on the CPU, FLOPs on the meta device and bytes on the CPU (the fixtures); on
    "cuda", both with the real kernels (tests/gpu/measure_steps_cuda.py adds the peak, phase by phase)."""
    # DeBERTa and ModernBERT read tensor values while they run (log buckets, masks), which the meta device cannot:
    # their FLOPs on CPU, with the math path (the CPU's flash kernel is not one FlopCounterMode counts; the
    # products are the same).
    on_cpu = config.family.forward.reads_values
    flops_device = device if device != "cpu" else ("cpu" if on_cpu else "meta")
    flops_workload = Workload(**{**workload.as_dict(), "attention": "eager"}) if on_cpu and device == "cpu" else workload
    forward, backward, flops_by_component = measure_flops(config, flops_workload, flops_device, method)
    activations, recompute, weights, gradients, optimizer = measure_memory(config, workload, device, method)
    return Measurement(forward, backward, flops_by_component, activations, recompute, weights, gradients, optimizer)
