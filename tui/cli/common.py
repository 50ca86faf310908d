"""What every command shares: the parser's one-line errors, the source and override arguments, reading the
source (a preset, a file, a Hub id) with the overrides on top, and the exit codes."""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from ..core import FAMILIES, HEADS, SIZE_FIELDS, BertConfig, ConfigError
from ..core.config import DEFAULT, EXTRA_FIELDS, parse_int
from ..core.count.frozen import Freeze
from ..core.count.lora import ALL_LINEAR, BIASES, Ia3, Lora
from ..core.count.trained import FineTuning
from ..core.fields import FIELDS
from ..plain import printable, say
from ..presets import DEFAULT_PRESET, Catalog, load_catalog
from ..sources import (
    LOAD_ERRORS,
    CheckpointReport,
    Source,
    check_checkpoint,
    compare_checkpoint,
    load_source,
    open_model,
    source_beside,
)

EXIT_OUTPUT = 1  # the output could not be written (a full disk, an I/O error)
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3  # an optional extra is not installed
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug of bert-tui's, not bad input

OVERRIDE_HELP = {name: field.help for name, field in FIELDS.items()}
HEAD_HELP = "; ".join(f"{name} = {spec.hf_class}" for name, spec in HEADS.items())


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Help as wide as the terminal: prose wrapped at word boundaries; an example command kept whole per flag and
    continued with a backslash (it still pastes); an indented definition (`count     count one ...`) wrapped
    under its text."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _terminal_width() - 2 if width is None else width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        for line in text.splitlines():
            if not line.startswith(" "):
                lines += textwrap.wrap(line, width, break_on_hyphens=False, break_long_words=False) or [""]
            elif line.lstrip().startswith("bert-tui"):
                lines += _continued(line, width)
            else:
                term = re.match(r"\s+\S+\s{2,}", line)
                hang = " " * (term.end() if term else len(line) - len(line.lstrip()) + 2)
                lines += textwrap.wrap(line, width, subsequent_indent=hang, break_on_hyphens=False,
                                       break_long_words=False)
        return "\n".join(indent + line if line else "" for line in lines)


def _terminal_width() -> int:
    """The terminal's width as `shutil.get_terminal_size` gives it (COLUMNS, else standard output's terminal, else
    80), without importing shutil: argparse asks at every `add_argument`, and shutil's import (its compression
    modules) was 2-3 ms of `bert-tui count`'s ~90 ms start."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _continued(command: str, width: int) -> list[str]:
    """`command` in lines of at most `width` (a flag stays with its value), each but the last ending in ` \\`."""
    lead = len(command) - len(command.lstrip())
    groups: list[str] = []
    for word in command.split():
        if groups and not word.startswith("-") and groups[-1].startswith("--") and " " not in groups[-1]:
            groups[-1] += " " + word
        else:
            groups.append(word)
    lines, current = [], " " * lead + groups[0]
    for group in groups[1:]:
        if len(current) + len(group) + 3 > width:
            lines.append(current + " \\")
            current = " " * (lead + 4) + group
        else:
            current += " " + group
    return [*lines, current]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (and exit 2), without the usage block, and whose help
    fits the terminal (`Formatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, say(f"{self.prog}: error: {printable(message)} (see {self.prog} --help)") + "\n")


FLAG_OF = {"use_dora": "--dora", "target_modules": "--lora-targets"}  # fields whose flag is not their name


def flag(field: str) -> str:
    return FLAG_OF.get(field, "--" + field.replace("_", "-"))


def as_typed(field: str, value: object) -> str:
    """A refused value as the command line says it: `--batch 0`, `--checkpointing`, `--no-pooler`."""
    if value is True:
        return flag(field)
    if value is False:
        return "--no-" + flag(field)[2:]
    return f"{flag(field)} {value}"


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", nargs="?",
                        help="a Hugging Face Hub model id (ORG/NAME), a local config.json, model folder or checkpoint "
                        "(a path that exists wins over an id), or a preset name")


def add_source(parser: argparse.ArgumentParser, checkpoint: bool = True) -> None:
    group = parser.add_argument_group("source (default: --preset bert-base-uncased)")
    group.add_argument("--revision", metavar="REV", help="with a Hub id: a branch, tag or commit (default: main)")
    group.add_argument("--offline", action="store_true",
                       help="with a Hub id: use only the Hugging Face cache, never the network (as HF_HUB_OFFLINE=1)")
    group.add_argument("--base", metavar="SOURCE",
                       help="with a PEFT adapter (MODEL holding adapter_config.json): the model it adapts, a path, Hub "
                       "id or preset, in place of its base_model_name_or_path (default: that, found as an absolute "
                       "path, else relative to here, to the adapter's folder or its parent, else as a Hub id or "
                       "preset)")
    source = group.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME", help="a preset by name (see `bert-tui presets`)")
    source.add_argument("--preset-file", metavar="PATH", type=Path, help="a preset YAML file")
    source.add_argument("--config", metavar="PATH", type=Path,
                        help="a Hugging Face config.json, a model folder holding one, or a preset YAML file")
    if checkpoint:
        group.add_argument("--checkpoint", metavar="PATH", type=Path,
                           help="a .safetensors file, a model.safetensors.index.json or a model folder: read its "
                           "headers only, count what it holds and compare it with the config (given with --config, "
                           "--preset or --preset-file, else the one beside it, else read back from the shapes)")


def add_overrides(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("overrides (Hugging Face config keys; applied on top of the source)")
    for field in (*SIZE_FIELDS, *EXTRA_FIELDS):
        group.add_argument(flag(field), dest=field, metavar="N", help=OVERRIDE_HELP[field])
    group.add_argument("--head", choices=list(HEADS), metavar="HEAD",
                       help=f"the model class to count: {HEAD_HELP} (default: none)")
    group.add_argument("--num-labels", dest="num_labels", metavar="N",
                       help=OVERRIDE_HELP["num_labels"])
    group.add_argument("--model-type", dest="model_type", choices=list(FAMILIES), metavar="TYPE",
                       help=f"the family: {', '.join(FAMILIES)} (default: {DEFAULT})")
    group.add_argument("--no-pooler", dest="pooler", action="store_false", default=None,
                       help="BertModel without its pooler (add_pooling_layer=False); other heads fix the pooler themselves")
    group.add_argument("--add-cross-attention", dest="add_cross_attention", action="store_true", default=None,
                       help="a decoder (is_decoder) with a cross-attention block in every layer, as bert2bert's: "
                       "bert, roberta, xlm-roberta, camembert and electra")


def add_lora(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "fine-tuning with LoRA (peft's LoraConfig; any of these adapts the model)")
    group.add_argument("--lora-r", metavar="R", help="the adapters' rank r (default 8)")
    group.add_argument("--lora-targets", metavar="NAMES",
                       help="target_modules: module names or name endings, comma-separated (query,value), or "
                       f"all-linear; default: peft's for the model type ({peft_defaults('lora_targets')})")
    group.add_argument("--lora-targets-regex", metavar="RE", help="target_modules as a regular expression the "
                       "whole module name must match (peft's string form)")
    group.add_argument("--lora-bias", choices=BIASES, help="bias: none (default), all (every bias trains) or "
                       "lora_only (the adapted modules' biases)")
    group.add_argument("--lora-b-bias", action="store_true", default=None, help="lora_bias: a trained bias on each "
                       "adapter's lora_B (out features; not with DoRA or on an Embedding)")
    group.add_argument("--lora-save", metavar="NAMES", help="modules_to_save: modules trained whole (a copy beside "
                       "the frozen original), comma-separated; the task type adds peft's own (classifier and score "
                       "for sequence and token classification, qa_outputs for question answering)")
    group.add_argument("--lora-layers", metavar="INDICES", help="layers_to_transform: only these layers, "
                       "comma-separated (0,1,2)")
    group.add_argument("--lora-layers-pattern", metavar="NAMES", help="layers_pattern: the layer list "
                       "--lora-layers counts in (layer), comma-separated; default: the first number in a name")
    group.add_argument("--lora-exclude", metavar="NAMES", help="exclude_modules: modules never adapted, named as "
                       "targets are (a name or its ending), comma-separated")
    group.add_argument("--lora-rank-pattern", metavar="KEY=R,...", help="rank_pattern: another rank for the modules "
                       "a key matches (value=4)")
    group.add_argument("--lora-alpha", metavar="ALPHA", help="lora_alpha (scales the update; adds no parameter)")
    group.add_argument("--lora-dropout", metavar="P", help="lora_dropout (default 0): in compute, each adapted "
                       "module keeps a dropout mask and the dropped copy of its input")
    group.add_argument("--dora", action="store_true", default=None, help="use_dora: a magnitude vector per adapted "
                       "module")
    cold = parser.add_argument_group("fine-tuning with parts frozen (requires_grad_(False); the rest trains)")
    cold.add_argument("--freeze-embeddings", action="store_true", default=None, help="the embeddings do not train")
    cold.add_argument("--freeze-layers", metavar="K", help="the first K encoder layers do not train")
    cold.add_argument("--freeze-body", action="store_true", default=None,
                      help="only the head trains: the body's parameters frozen, as model.<body>.requires_grad_(False) "
                      "freezes them (a pooler inside the body with them; DeBERTa's sits beside it and trains)")
    ia3 = parser.add_argument_group("fine-tuning with IA3 (peft's IA3Config; any of these adapts the model)")
    ia3.add_argument("--ia3", action="store_true", default=None, help="IA3 with peft's defaults for the model type "
                     f"({peft_defaults('ia3_targets')})")
    ia3.add_argument("--ia3-targets", metavar="NAMES", help="target_modules, comma-separated, or all-linear")
    ia3.add_argument("--ia3-feedforward", metavar="NAMES", help="feedforward_modules: targets scaled on their input "
                     "(a subset of the targets)")
    ia3.add_argument("--ia3-save", metavar="NAMES", help="modules_to_save, as for LoRA")
    ia3.add_argument("--ia3-exclude", metavar="NAMES", help="exclude_modules: modules never adapted, as for LoRA")


LORA_FLAGS = ("lora_r", "lora_targets", "lora_targets_regex", "lora_bias", "lora_b_bias", "lora_save",
              "lora_layers", "lora_layers_pattern", "lora_exclude", "lora_rank_pattern", "lora_alpha", "lora_dropout",
              "dora")


IA3_FLAGS = ("ia3", "ia3_targets", "ia3_feedforward", "ia3_save", "ia3_exclude")


def peft_defaults(key: str) -> str:
    """peft's default targets by family, from the records: "bert, roberta: query,value; deberta-v2: …; others
    have none" (`key`: the record's lora_targets or ia3_targets)."""
    by_targets: dict[tuple[str, ...], list[str]] = {}
    for name, family in FAMILIES.items():
        targets = getattr(family, key)
        if targets is not None:
            by_targets.setdefault(targets, []).append(name)
    said = [f"{', '.join(names)}: {','.join(targets)}" for targets, names in by_targets.items()]
    return "; ".join(said) + ("; others have none" if sum(map(len, by_targets.values())) < len(FAMILIES) else "")


def method_flags(args: argparse.Namespace) -> FineTuning | None:
    """The fine-tuning method the command line's flags name (LoRA or DoRA, IA3, or parts frozen: one), or None."""
    lora, ia3 = lora_of(args), ia3_of(args)
    if lora is not None and ia3 is not None:
        raise UsageError("--ia3* and --lora-* name two methods: give one")
    cold = freeze_of(args)  # (refuses an adapter's flags beside its own)
    return lora or ia3 or cold


def method_with(flagged: FineTuning | None, selection: Selection) -> FineTuning | None:
    """The method a command works under: the flags', else an adapter folder's own (both: refused)."""
    if flagged is not None and selection.method is not None:
        raise UsageError("the adapter folder names its own method (adapter_config.json): drop the --lora-*, "
                         "--ia3* and --freeze-* flags")
    return flagged or selection.method


def _listed(flag: str, text: str | None) -> tuple[str, ...]:
    found = tuple(part.strip() for part in (text or "").split(",") if part.strip())
    if text is not None and not found:
        raise UsageError(f"{flag} {text!r}: name at least one module")
    return found


FREEZE_FLAGS = ("freeze_embeddings", "freeze_layers", "freeze_body")


def freeze_of(args: argparse.Namespace) -> Freeze | None:
    """The parts the command line freezes, or None."""
    if all(getattr(args, name, None) is None for name in FREEZE_FLAGS):
        return None
    if any(getattr(args, name, None) is not None for name in (*LORA_FLAGS, *IA3_FLAGS)):
        raise UsageError("--freeze-* and an adapter (--lora-*, --ia3*) both say what trains: give one (an adapter "
                         "freezes the whole model but itself)")
    layers = 0
    if args.freeze_layers is not None:
        try:
            layers = parse_int("freeze_layers", args.freeze_layers)
        except ConfigError:
            raise UsageError(f"--freeze-layers {printable(args.freeze_layers)!r}: must be a whole number") from None
    return Freeze(bool(args.freeze_embeddings), layers, bool(args.freeze_body))


def ia3_of(args: argparse.Namespace) -> Ia3 | None:
    """The IA3 the command line asks for, or None."""
    if all(getattr(args, name, None) is None for name in IA3_FLAGS):
        return None
    listed = _listed("--ia3-targets", args.ia3_targets)
    targets: tuple[str, ...] | str | None = (ALL_LINEAR if listed == (ALL_LINEAR,) else listed) or None
    feedforward = None if args.ia3_feedforward is None else _listed("--ia3-feedforward", args.ia3_feedforward)
    try:
        return Ia3(targets, feedforward, _listed("--ia3-save", args.ia3_save),
                   _listed("--ia3-exclude", args.ia3_exclude) or None)
    except ConfigError as error:
        raise UsageError(f"{IA3_FLAG_OF.get(error.field, '--ia3')} {printable(str(error.value))}: {error.rule}") \
            from None


def lora_of(args: argparse.Namespace) -> Lora | None:
    """The LoRA the command line asks for, or None (full fine-tuning); a bad value names its flag."""
    if all(getattr(args, name, None) is None for name in LORA_FLAGS):
        return None
    if args.lora_targets is not None and args.lora_targets_regex is not None:
        raise UsageError("--lora-targets and --lora-targets-regex both name the targets: give one")

    def names(flag: str, text: str | None) -> tuple[str, ...]:
        found = tuple(part.strip() for part in (text or "").split(",") if part.strip())
        if text is not None and not found:
            raise UsageError(f"{flag} {text!r}: name at least one module")
        return found

    def whole(flag: str, text: str) -> int:
        try:
            return parse_int(flag, text)
        except ConfigError:
            raise UsageError(f"{flag} {printable(text)!r}: must be a whole number") from None

    def fraction(flag: str, text: str) -> float:
        try:
            chance = float(text)
        except ValueError:
            raise UsageError(f"{flag} {printable(text)!r}: must be a number from 0 up to (not) 1") from None
        if not 0 <= chance < 1:  # (nan and inf too)
            raise UsageError(f"{flag} {printable(text)!r}: must be a number from 0 up to (not) 1")
        return chance

    targets: tuple[str, ...] | str | None = None
    if args.lora_targets_regex is not None:
        targets = args.lora_targets_regex
    elif args.lora_targets is not None:
        listed = names("--lora-targets", args.lora_targets)
        targets = ALL_LINEAR if listed == (ALL_LINEAR,) else listed
    pattern = []
    for item in names("--lora-rank-pattern", args.lora_rank_pattern):
        key, equals, rank = item.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"--lora-rank-pattern {printable(item)!r}: write KEY=R (value=4)")
        pattern.append((key.strip(), whole("--lora-rank-pattern", rank.strip())))
    layers = None if args.lora_layers is None else tuple(whole("--lora-layers", part)
                                                         for part in names("--lora-layers", args.lora_layers))
    try:
        return Lora(r=8 if args.lora_r is None else whole("--lora-r", args.lora_r), target_modules=targets,
                    bias=args.lora_bias or "none", modules_to_save=names("--lora-save", args.lora_save),
                    use_dora=bool(args.dora), layers_to_transform=layers, rank_pattern=tuple(pattern),
                    lora_alpha=8 if args.lora_alpha is None else whole("--lora-alpha", args.lora_alpha),
                    lora_dropout=0.0 if args.lora_dropout is None else fraction("--lora-dropout", args.lora_dropout),
                    exclude_modules=names("--lora-exclude", args.lora_exclude) or None,
                    layers_pattern=names("--lora-layers-pattern", args.lora_layers_pattern) or None,
                    lora_bias=bool(args.lora_b_bias))
    except ConfigError as error:  # (the Lora is not made: its regular expression may be what is refused)
        value = "" if error.value is True else f" {printable(str(error.value))}"  # (a flag given names itself)
        raise UsageError(f"{lora_flag(error.field, targets)}{value}: {error.rule}") from None


LORA_FLAG_OF = {"lora_r": "--lora-r", "lora_bias": "--lora-b-bias", "target_modules": "--lora-targets",
                "rank_pattern": "--lora-rank-pattern", "layers_to_transform": "--lora-layers", "use_dora": "--dora",
                "modules_to_save": "--lora-save", "r": "--lora-r", "bias": "--lora-bias", "lora_alpha": "--lora-alpha",
                "lora_dropout": "--lora-dropout", "exclude_modules": "--lora-exclude",
                "layers_pattern": "--lora-layers-pattern"}
IA3_FLAG_OF = {"target_modules": "--ia3-targets", "feedforward_modules": "--ia3-feedforward",
               "modules_to_save": "--ia3-save", "exclude_modules": "--ia3-exclude", "ia3": "--ia3"}


def lora_flag(field: str, targets: tuple[str, ...] | str | None) -> str:
    """The flag that sets a LoRA field (`targets`: what the targets were given as: a regular expression is
    `--lora-targets-regex`'s, a list or all-linear `--lora-targets`')."""
    if field == "target_modules" and isinstance(targets, str) and targets != ALL_LINEAR:
        return "--lora-targets-regex"
    return LORA_FLAG_OF.get(field, "--lora-" + field.replace("_", "-"))


def method_refusal(error: ConfigError, how: object, adapter: object = None) -> str:
    """A fine-tuning method's refusal as the user wrote the method: an adapter folder's own (`adapter`) by
    adapter_config.json's key, else by the flag that set the value (`--lora-targets-regex` for a regular
    expression, `--lora-layers` for layers that hold no target, `--freeze-layers` …)."""
    value = printable(str(error.value))
    if adapter is not None and how is adapter:
        return f"{error.field} {value} (adapter_config.json): {error.rule}"
    kind = getattr(how, "kind", None)
    if kind == "freeze":
        return f"{as_typed(error.field, error.value)}: {error.rule}"
    if kind == "ia3":
        named = IA3_FLAG_OF.get(error.field, "--ia3-" + error.field.replace("_", "-"))
    else:
        named = lora_flag(error.field, getattr(how, "target_modules", None))
    return f"{named if error.value is True else f'{named} {value}'}: {error.rule}"


@dataclass(frozen=True)
class Selection:
    """What the user asked to count: the config, a title for it, notes, and a checkpoint's report."""

    config: BertConfig
    title: str
    notes: tuple[str, ...] = ()
    checkpoint: CheckpointReport | None = None
    method: FineTuning | None = None  # a PEFT adapter folder's
    adapter_weights: Path | None = None


def resolve(args: argparse.Namespace) -> Selection:
    """Source, then overrides on top, then the checkpoint (if any) against the result."""
    checkpoint_path: Path | None = getattr(args, "checkpoint", None)
    model: str | None = getattr(args, "model", None)
    if model is not None and (args.preset is not None or args.preset_file is not None or args.config is not None):
        raise UsageError(f"MODEL {model!r} and --preset/--preset-file/--config name two sources: give one")
    if model is None and args.revision is not None:
        raise UsageError("--revision goes with a Hub model id (bert-tui count ORG/NAME --revision REV)")
    try:
        stored = None
        if model is None and getattr(args, "base", None) is not None:
            raise UsageError("--base names a PEFT adapter's base model: give the adapter as MODEL "
                             "(bert-tui count path/to/adapter --base SOURCE)")
        if model is not None:
            source, stored = open_model(model, revision=args.revision, offline=args.offline, progress=progress,
                                        base=getattr(args, "base", None))
        elif args.preset_file is not None:
            source = load_source(args.preset_file, "file")
        elif args.config is not None:
            source = load_source(args.config, "config")
        elif args.preset is not None:
            source = load_source(args.preset, "name")
        elif checkpoint_path is not None:
            source = source_beside(checkpoint_path)
        else:
            source = load_source(DEFAULT_PRESET, "name")
        selection = apply_overrides(args, source)
        if checkpoint_path is not None:
            report_ = check_checkpoint(checkpoint_path, selection.config)
        elif stored is not None:
            report_ = compare_checkpoint(stored, selection.config)
        else:
            return selection
    except LOAD_ERRORS as error:
        raise SourceUnavailable(str(error)) from None
    return replace(selection, checkpoint=report_)


class SourceUnavailable(UsageError):
    """The model named could not be read (a file, the Hub, a preset): the explorer opens on the default preset
    and shows this instead of exiting."""


def progress(message: str) -> None:
    """What a slow step is doing (a Hub fetch), on stderr, only where a person watches it (a terminal)."""
    if sys.stderr.isatty():
        print(f"bert-tui: {printable(message)}", file=sys.stderr, flush=True)


def load(source: str, revision: str | None = None, offline: bool = False) -> Source:
    """A MODEL argument (path, Hub id or preset name) with its errors as usage errors (one line, exit 2)."""
    try:
        return open_model(source, revision=revision, offline=offline, progress=progress)[0]
    except LOAD_ERRORS as error:
        raise UsageError(str(error)) from None


def apply_overrides(args: argparse.Namespace, source: Source) -> Selection:
    """The source's config with the command line's overrides on top; a refused value names its flag."""
    fields = (*SIZE_FIELDS, *EXTRA_FIELDS, "head", "num_labels", "pooler", "model_type", "add_cross_attention")
    overrides = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    try:
        base = source.config
        if "model_type" in overrides:  # another family: what both have is carried, the rest its defaults
            base = base.as_family(str(overrides["model_type"]))
        config = BertConfig.from_mapping(overrides, base=base)
    except ConfigError as error:
        raise UsageError(f"{as_typed(error.field, error.value)}: {error.rule}") from None
    edited = " (edited)" if any(f in overrides for f in (*SIZE_FIELDS, *EXTRA_FIELDS)) else ""
    if config.model_type != source.config.model_type:
        edited = f" as {config.model_type}{edited}"
    notes = tuple(source.notes)
    if "num_labels" in overrides and not config.uses_num_labels:
        notes += (f"--num-labels {overrides['num_labels']} is unused: {config.hf_class} has no classifier "
                  "(--head chooses one)",)
    return Selection(config, source.name + edited, notes, method=source.method, adapter_weights=source.adapter_weights)


def catalog_with_warnings() -> Catalog:
    """Every preset; a broken preset file is a warning (the others still load), not a failure."""
    catalog = load_catalog()
    for error in catalog.errors:
        print(f"bert-tui: warning: skipped preset file {printable(str(error))}", file=sys.stderr)
    return catalog

