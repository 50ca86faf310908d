"""A fine-tuning method in the allocation order: the model as the method makes it before it moves to the device
(`adapt`: frozen parameters out of autograd's graph, LoRA's adapters and IA3's vectors beside their modules,
`modules_to_save` copies read in place of their originals), from `Method.layout` (the peft model's tensors in
`named_parameters()` order). The methods' forwards are `emulation_peft.Linears`' (`_lora`, `_dora`, `_ia3`,
`_lookup_lora`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tape import FLOAT, Event, Param, Tape

if TYPE_CHECKING:
    from .method import Method


def _paired(pair: tuple[Param, Param] | None, param: Param, role: str) -> tuple[Param, Param]:
    """LoRA's (A, B) as `adapt` meets them, A first."""
    return (param, param) if role == "lora_A" or pair is None else (pair[0], param)


def adapt(t: Tape, run_params: list[Param], element: int, method: Method
          ) -> tuple[list[Param], dict[int, Param], Param | None]:
    """The model as the method makes it, before it moves to the device: its frozen parameters out of the
    graph, LoRA's adapters (float32 whatever the model's precision: peft's `autocast_adapter_dtype`) and
    `modules_to_save`'s trained copies, each moved just after the module it adapts or copies (`Module.to`'s
    walk). Given the run's parameters (`named_parameters()`'s order) and its element, it gives back the peft
    model's (the optimizer's: those that train), each `modules_to_save` copy by its original's id, and the copy of
    the LM decoder's weight where a saved LM head unties it from the word table (`Method.unties`: the decoder
    reads it, the lookup the frozen table)."""
    base = [entry for entry in method.layout if entry[1] in ("base", "original")]
    if [numel * element for *_, numel in base] != [param.data.nbytes for param in run_params]:
        raise ValueError("the method's parameters are not the run's (their order or sizes differ)")
    named = dict(zip((name for name, *_ in base), run_params, strict=True))
    for (_, _, trains, _), param in zip(base, run_params, strict=True):
        if not trains:
            param.freeze()
    after: dict[int, list[Event]] = {}  # the tensors a module's last one moved brings after it, by its id
    copies: dict[int, Param] = {}
    decoder: Param | None = None
    params: list[Param] = []
    anchor = 0
    for name, role, _, numel in method.layout:
        if role in ("base", "original"):
            params.append(named[name])
            anchor = named[name].data.id
            continue
        if role == "copy":  # (a copy in the model's dtype; the original, frozen, is not run)
            module, _, rest = name.partition(".modules_to_save.default.")
            if f"{module}.{rest}" == method.unties:  # (the decoder's weight, the word table's no longer)
                param = decoder = Param(t, numel * element)
            else:
                original = named[f"{module}.original_module.{rest}"]
                param = Param(t, original.data.nbytes)
                copies[id(original)] = param
        elif role not in ("ia3", "ia3-input", "magnitude", "lora_A", "lora_B"):
            raise ValueError(f"{role}: its step is not derived yet")
        else:  # (float32, as peft keeps its adapters), on the base layer's weight (or an embedding's table)
            param = Param(t, numel * FLOAT, FLOAT)
            module, _, rest = name.partition({"ia3": ".ia3_l.", "ia3-input": ".ia3_l.",
                                              "magnitude": ".lora_magnitude_vector."}.get(role, f".{role}."))
            if not rest:  # (an embedding's: lora_embedding_A.default, lora_embedding_B.default)
                table = named[f"{name.partition(f'.lora_embedding_{role[-1]}.')[0]}.base_layer.weight"]
                table.lookup_adapters = _paired(table.lookup_adapters, param, role)
            else:
                weight = named[f"{module}.base_layer.weight"]
                if role == "magnitude":
                    weight.magnitude = param
                elif role.startswith("ia3"):
                    weight.ia3 = (param, role == "ia3-input")
                else:
                    weight.adapters = _paired(weight.adapters, param, role)
        params.append(param)
        after.setdefault(anchor, []).append(t.events[-1])
    made = {event[1] for events in after.values() for event in events}
    moved: list[Event] = []
    for event in t.events:
        if event[1] not in made or event[0] != "a":
            moved.append(event)
        if event[0] == "a":
            moved += after.get(event[1], [])
    t.events[:] = moved
    return params, copies, decoder
