"""The config form's fields as data and text, pure (no widget): labels, symbols and units, which fields and
switches a family shows, the pooler's state, the head's choices, a config read from the fields' text, and the
cost texts beside them (the costs themselves come from the core). Tested without Pilot."""

from __future__ import annotations

from ...core import (
    HEADS,
    SIZE_FIELDS,
    SYMBOLS,
    BertConfig,
    ConfigError,
    Marginal,
)
from ...core.config import (
    CROSS_FLAGS,
    DEFAULT,
    EXTRA_FIELDS,
    EXTRA_SYMBOLS,
    FAMILIES,
    FLAG_FIELDS,
)
from ...core.fields import FIELDS, SWITCHES
from ...core.units import short_count

FIELD_LABELS = {name: field.label for name, field in FIELDS.items()}
COST_UNITS = {name: field.unit for name, field in FIELDS.items()}
INPUT_FIELDS = (*SIZE_FIELDS, "num_labels")
ALL_SYMBOLS = {**SYMBOLS, **EXTRA_SYMBOLS}
# fields with a message line of their own
ERROR_FIELDS = (*INPUT_FIELDS, *EXTRA_FIELDS, "pooler", "head", "model_type")


FLAG_LABELS = {name: switch.label for name, switch in SWITCHES.items()}


def form_flags(model_type: str) -> tuple[str, ...]:
    """The family's switches the form shows: a decoder's cross-attention is not one (it comes with an opened
    config, kept as loaded, and shows in the tree)."""
    family = FAMILIES.get(model_type)
    return tuple(flag for flag in family.switches if flag not in CROSS_FLAGS) if family else ()


def flag_text(flag: str, value: bool, costs: dict[str, str]) -> str:
    """'on: +393.2 K': the switch's state and what it adds when on, as the core counts it for the config shown
    (the state alone until the core has answered)."""
    state = "on" if value else "off"
    return f"{state}: {costs[flag]}" if costs.get(flag) else state


def pooler_of(model_type: str, head: str) -> bool | None:
    """Whether the family's head class fixes the pooler (None: the user chooses; unknown pairs as BERT's)."""
    family = FAMILIES.get(model_type)
    heads = family.heads if family else {}
    return heads[head] if head in heads else HEADS[head].pooler if head in HEADS else None


def uses_labels(model_type: str, head: str) -> bool:
    family = FAMILIES.get(model_type)
    sentence_order = family is not None and family.forward.sentence_order
    return head in HEADS and (HEADS[head].uses_num_labels or (head == "pretraining" and sentence_order))


def field_label(field: str) -> str:
    return f"{FIELD_LABELS[field]} {ALL_SYMBOLS.get(field, '')}".rstrip()


def head_choices(config: BertConfig) -> list[tuple[str, str]]:
    """The head select's options, named as the family's classes."""
    heads = config.family.heads
    return [(f"{name} ({config.replace(head=name, pooler=True, num_labels=2).hf_class})" if name in heads
             else f"{name} (no {config.model_type} class)", name) for name in HEADS]


def pooler_state(model_type: str, head: str, user_pooler: bool) -> tuple[bool, bool, str]:
    """The pooler switch as the head class sets it: (on, fixed by the class, its description)."""
    fixed = pooler_of(model_type, head)
    value = user_pooler if fixed is None else fixed
    state = "on" if value else "off"
    text = f"{state}: fixed by head" if fixed is not None else f"{state}: adds H² + H"
    family = FAMILIES.get(model_type)
    if family is not None and family.heads.get("none", None) is False:
        text = f"{state}: no pooler"
    return value, fixed is not None, text


def config_from_fields(values: dict[str, object], base: BertConfig) -> BertConfig:
    """What the form reads as: its fields' values (a size's text, a switch's state, the head and family
    selects; a field not shown is absent) over the config last loaded, whose other keys stand. The one statement
    of it, for the fields (`ConfigForm.read`) and the first frame's preview (`as_read`); the core validates."""
    values = dict(values)
    head, model_type = values.get("head"), values.get("model_type")
    values["head"] = head if isinstance(head, str) else "none"
    values["model_type"] = model_type if isinstance(model_type, str) else DEFAULT
    if values["head"] != "none":
        values["pooler"] = True  # a head class fixes its pooler; the switch speaks for BertModel only
    values.setdefault("num_labels", base.num_labels)
    family = FAMILIES.get(str(values["model_type"]))
    switches = family.switches if family else ()
    if "add_cross_attention" not in switches:  # a decoder's cross-attention goes with its family
        values["add_cross_attention"] = False
    return BertConfig.from_mapping(values, base=base)


def family_switched(current: BertConfig, model_type: str, head: object) -> BertConfig:
    """What the form holds once its family select says `model_type`: `current` as that family's (the core's
    `as_family`), with the `head` the head select asks where the family has that class and takes it."""
    family = current.as_family(model_type)
    if isinstance(head, str) and head != family.head and head in FAMILIES[model_type].heads:
        try:
            return family.replace(head=head, pooler=True)
        except ConfigError:  # (DistilBERT's question answering with other than 2 labels): the family's own head
            pass
    return family


def as_read(config: BertConfig) -> BertConfig:
    """The config the form reports once its fields hold `config` (what `ConfigForm.read` returns then): a size
    the config leaves to a default (DeBERTa's E following H) is read from its field as a number."""
    shown = [f for f in (*SIZE_FIELDS, *EXTRA_FIELDS) if f in config.fields]
    values: dict[str, object] = {field: str(field_value(config, field)) for field in shown}
    values.update(num_labels=config.num_labels, head=config.head, model_type=config.model_type,
                  pooler=pooler_state(config.model_type, config.head, config.pooler)[0])
    values.update((flag, getattr(config, flag)) for flag in form_flags(config.model_type))
    try:
        return config_from_fields(values, config)
    except ConfigError:  # not expected: the fields hold a config the core accepted
        return config


def cost_text(marginal: Marginal) -> str:
    """'+7.09 M / layer', '+768 / token', 'heads: +0, they split H'."""
    if marginal.note == "switch":  # what it adds when on
        return f"{'−' if marginal.delta < 0 else '+'}{short_count(abs(marginal.delta))}"
    if marginal.field in FLAG_FIELDS:
        return "fixed"  # the other position cannot be counted for this config
    if marginal.field == "num_attention_heads":
        return "+0: split H"
    per = f"{marginal.step} {COST_UNITS[marginal.field]}" if marginal.step > 1 else COST_UNITS[marginal.field]
    if marginal.at_limit:
        return f"max · +{short_count(marginal.delta)}/{per}" if marginal.delta else "at its limit"
    return f"+{short_count(marginal.delta)}/{per}"


def first_line(text: str, width: int, ellipsis: bool = False) -> str:
    """What a one-line label shows of `text`: Rich wraps at words ('conv kernel C' in 12 cells: 'conv kernel');
    a cost (`text-overflow: ellipsis`) ends in '…' where it is cut."""
    if len(text) <= width:
        return text
    if ellipsis:
        return text[:width - 1] + "…"
    cut = text.rfind(" ", 0, width + 1)
    return text[:cut].rstrip() if cut > 0 else text[:width]


def field_value(config: BertConfig, field: str) -> int:
    """What a size field shows: E as the width it takes (0 in the config: as wide as H)."""
    return config.embedding_width if field == "embedding_size" else int(getattr(config, field))
