"""LoRA as `peft` builds it: the parameters of `get_peft_model(model, LoraConfig(...))`, named, shaped and marked
trainable as peft marks them, and `get_nb_trainable_parameters()`'s two figures, from the config alone.

Read from peft 0.22 (`tuners/lora/layer.py`, `tuners/tuners_utils.py`, `utils/other.py`, `peft_model.py`) and
checked against it name by name (tests/fixtures/peft_params.json, written by tests/fixtures/generate_peft.py):

- Targets: a module whose name equals a `target_modules` entry or ends with `.entry` (a string is a regex the
  whole name must match; `all-linear`: every Linear but the output embeddings, or for sequence classification the
  model's `score`/`classifier`). None: peft's default for the model type, and its refusal where it has none. A
  module inside one of `modules_to_save` is never a target, nor one inside the heads sequence classification
  saves (its peft model adds them first); token classification and question answering add theirs after the
  adapters are made, so a target there is adapted and then cannot be saved whole: peft refuses it, as does a
  target that is a module saved, or ends in `.` and its name. `layers_to_transform` keeps the modules whose first
  numbered segment (after `layers_pattern`'s name, where given) is one of those indices, of those a name's ending
  picks (one named whole is adapted anyway). `exclude_modules` holds back what it names (as targets are named),
  before anything else is asked. A target naming a module without parameters (a dropout, an activation) or one
  that is no Linear or Embedding is refused, as peft refuses it.
- A targeted Linear becomes `X.base_layer.{weight,bias}`, `X.lora_A.default.weight` [r, in] and
  `X.lora_B.default.weight` [out, r] (and `X.lora_magnitude_vector.default.weight` [out] with DoRA); an
  Embedding `X.base_layer.weight`, `X.lora_embedding_A.default` [r, V] and `X.lora_embedding_B.default` [E, r].
  `rank_pattern` gives a module its own r (the first key that `(.*\\.)?(KEY)$` matches).
- Trainable: the adapters; `bias="all"` every parameter named `bias`, `"lora_only"` the adapted modules' biases;
  each module whose name is a `modules_to_save` entry or ends in `.entry` is wrapped as `X.original_module.*`
  (frozen) and `X.modules_to_save.default.*` (a trained copy, counted in the total too; a tensor it shared with
  one outside is its own there); one saved inside another saved is refused (peft wraps it again in the copy).
  The task type adds peft's own: `classifier`, `score` and `pre_classifier` for sequence and token
  classification, `qa_outputs` for question answering. (peft 0.21 matched the entries as text, so that
  `classifier` wrapped `pre_classifier` and `lm_head` ELECTRA's `generator_lm_head`, and DistilBERT's
  `pre_classifier` was adapted under `all-linear`, then could not be saved whole.)
- Everything is prefixed `base_model.model.`. A tied tensor is listed once, where `named_parameters()` meets it
  first, in an adapted module too (LoRA on BERT's tied decoder: its adapters follow the module, the weight stays
  the word table's; under `lora_only` the decoder's bias trains, which is the tensor `cls.predictions.bias`).
- peft's file (`saved_tensors`): the trained tensors without the adapter's name; under `bias="all"` every state
  dict key ending in `.bias` (each name of a tied tensor, a saved module's original's and copy's), under
  `lora_only` each adapted module's `base_layer.bias`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import BertConfig, ConfigError
from .families import bare_modules
from .trained import Adapted, PeftParam, Trained, of_adapted, targets_text
from .tree import Param, ParamTree

PREFIX = "base_model.model."
# The task type a head's class is fine-tuned under, and the modules its peft model class saves by itself.
TASK_TYPES = {"sequence-classification": "SEQ_CLS", "token-classification": "TOKEN_CLS",
              "question-answering": "QUESTION_ANS", "causal-lm": "CAUSAL_LM", "none": "FEATURE_EXTRACTION"}
# (peft 0.22's `CLASSIFIER_MODULE_NAMES`: DistilBERT's `pre_classifier` is made new with the head, so it is saved
# too — and, named before the adapters are made, never adapted, where 0.21 adapted it and then refused to save it)
TASK_SAVES = {"SEQ_CLS": ("classifier", "score", "pre_classifier"),
              "TOKEN_CLS": ("classifier", "score", "pre_classifier"), "QUESTION_ANS": ("qa_outputs",)}
# The task types whose peft model class adds its heads to `modules_to_save` before it makes the adapters, so that
# no target is ever inside them; the others add them after: a target there is adapted, then cannot be saved whole
SAVED_BEFORE_ADAPTING = frozenset({"SEQ_CLS"})
SEQ_CLS_HEAD_NAMES = ("score", "classifier")
BIASES = ("none", "all", "lora_only")
ALL_LINEAR = "all-linear"
MAX_RANK = 1 << 20


@dataclass(frozen=True)
class Lora:
    """A `LoraConfig` as far as it decides parameters (`lora_alpha` and `lora_dropout` decide none)."""

    r: int = 8
    target_modules: tuple[str, ...] | str | None = None  # None: peft's default for the model type
    bias: str = "none"
    modules_to_save: tuple[str, ...] = ()
    use_dora: bool = False
    layers_to_transform: tuple[int, ...] | None = None
    rank_pattern: tuple[tuple[str, int], ...] = ()
    lora_alpha: int = 8
    lora_dropout: float = 0.0
    exclude_modules: tuple[str, ...] | str | None = None  # names (or a regular expression) never adapted
    layers_pattern: tuple[str, ...] | None = None  # the layer list `layers_to_transform` counts in (`layer`)
    lora_bias: bool = False  # a trained bias on each lora_B ([out]): peft's `lora_bias`, not `bias`

    def __post_init__(self) -> None:
        for name, rank in (("r", self.r), *((f"rank_pattern[{key!r}]", value) for key, value in self.rank_pattern)):
            if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_RANK:
                raise ConfigError(f"lora_{name}" if name == "r" else name, rank,
                                  f"must be a whole number between 1 and {MAX_RANK:,}")
        if self.bias not in BIASES:
            raise ConfigError("bias", self.bias, f"must be one of: {', '.join(BIASES)}")
        if self.lora_bias and self.use_dora:
            raise ConfigError("lora_bias", True, "peft refuses a bias on lora_B with DoRA (use_dora)")
        if isinstance(self.target_modules, str):
            if self.target_modules != ALL_LINEAR:
                try:
                    re.compile(self.target_modules)
                except re.error as problem:
                    raise ConfigError("target_modules", self.target_modules, f"is not a regular expression: "
                                      f"{problem}") from None
            if self.layers_to_transform is not None:
                raise ConfigError("target_modules", self.target_modules, "is a string (all-linear or a regular "
                                  "expression), which peft refuses with layers_to_transform (--lora-layers): name "
                                  "the modules instead")
        elif self.target_modules is not None and not self.target_modules:
            raise ConfigError("target_modules", "", "is empty: name the modules to adapt (e.g. query,value)")
        for key, _ in self.rank_pattern:
            try:
                re.compile(key)
            except re.error as problem:
                raise ConfigError("rank_pattern", key, f"is not a regular expression: {problem}") from None
        _check_saved(self.modules_to_save)
        _check_excluded(self.exclude_modules)
        for pattern in self.layers_pattern or ():
            try:
                re.compile(rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\.")
            except re.error as problem:
                raise ConfigError("layers_pattern", pattern, f"breaks peft's pattern for it (a regular expression): "
                                  f"{problem}") from None
        if self.layers_pattern and self.layers_to_transform is None:
            raise ConfigError("layers_pattern", ",".join(self.layers_pattern), "needs layers_to_transform "
                              "(--lora-layers): peft refuses it alone")
        if isinstance(self.lora_dropout, bool) or not isinstance(self.lora_dropout, int | float) or \
                not 0 <= self.lora_dropout < 1:
            raise ConfigError("lora_dropout", self.lora_dropout, "must be a probability from 0 up to (not) 1")


    kind = "lora"

    @property
    def name(self) -> str:
        return "DoRA" if self.use_dora else "LoRA"

    def label(self, adapted: Adapted | None = None) -> str:
        return f"{self.name} r={self.r}{targets_text(adapted)}"

    def trained(self, tree: ParamTree, config: BertConfig) -> Trained:
        return of_adapted(adapt(tree, config, self), self)

    def settings(self) -> dict[str, object]:
        return {"r": self.r, "lora_alpha": self.lora_alpha, "lora_dropout": self.lora_dropout, "bias": self.bias,
                "use_dora": self.use_dora}

    def step_refusal(self) -> ConfigError | None:
        if self.lora_bias:
            return ConfigError("lora_bias", True, "a bias on lora_B is counted, but its step is not modelled")
        return None


@dataclass(frozen=True)
class Ia3:
    """An `IA3Config` as far as it decides parameters: each target Linear gains one trained vector, `ia3_l`,
    [out, 1] (scaling its output), or [1, in] for a feed-forward module (scaling its input); a module is one of
    `feedforward_modules` when its name ends with an entry, as text (peft's rule)."""

    target_modules: tuple[str, ...] | str | None = None
    feedforward_modules: tuple[str, ...] | None = None
    modules_to_save: tuple[str, ...] = ()
    exclude_modules: tuple[str, ...] | str | None = None  # names (or a regular expression) never adapted

    def __post_init__(self) -> None:
        if isinstance(self.target_modules, str):
            try:
                re.compile(self.target_modules)
            except re.error as problem:
                raise ConfigError("target_modules", self.target_modules, f"is not a regular expression: "
                                  f"{problem}") from None
        _check_saved(self.modules_to_save)
        _check_excluded(self.exclude_modules)


    kind = "ia3"
    name = "IA3"

    def label(self, adapted: Adapted | None = None) -> str:
        return f"IA3{targets_text(adapted)}"

    def trained(self, tree: ParamTree, config: BertConfig) -> Trained:
        return of_adapted(adapt_ia3(tree, config, self), self)

    def settings(self) -> dict[str, object]:
        return {}

    def step_refusal(self) -> ConfigError | None:
        return None


def _check_saved(names: tuple[str, ...]) -> None:
    """peft reads each `modules_to_save` entry inside a regular expression (`(^|.*\\.)NAME($|\\..*)`, keeping
    targets out of it): one that breaks it, peft refuses."""
    for name in names:
        try:
            re.compile(rf"(^|.*\.){name}($|\..*)")
        except re.error as problem:
            raise ConfigError("modules_to_save", name, f"breaks peft's pattern for it (a regular expression): "
                              f"{problem}") from None


def _check_excluded(exclude: tuple[str, ...] | str | None) -> None:
    """`exclude_modules` as a string is a regular expression the whole name must match."""
    if isinstance(exclude, str):
        try:
            re.compile(exclude)
        except re.error as problem:
            raise ConfigError("exclude_modules", exclude, f"is not a regular expression: {problem}") from None


def _excluded(key: str, exclude: tuple[str, ...] | str | None) -> bool:
    """peft's `check_target_module_exists` asks this first: the name, or one ending in `.name`, or a full match."""
    if not exclude:
        return False
    return re.fullmatch(exclude, key) is not None if isinstance(exclude, str) else _named(key, exclude)


def _layer_index(key: str, patterns: tuple[str, ...] | None) -> int | None:
    """The layer a module is in, as `layers_to_transform` reads it: the first number after the layer list's name
    (`layers_pattern`), or without one the first number two names in (peft's lazy `.*?`)."""
    if not patterns:
        found = re.match(r".*?\.[^.]*\.(?P<idx>\d+)\.", key)
    else:
        found = next((match for pattern in patterns
                      if (match := re.match(rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\.", key)) is not None), None)
    return None if found is None else int(found.group("idx"))


def adapt_ia3(tree: ParamTree, config: BertConfig, ia3: Ia3) -> Adapted:
    """`get_peft_model(model, IA3Config(...))` of `tree`'s class."""
    params, modules, task, saved, targets = _plan(tree, config, ia3, config.family.ia3_targets)
    if any(modules[name].kind != "linear" for name in targets):
        name = next(name for name in targets if modules[name].kind != "linear")
        raise ConfigError("target_modules", name, "is not a Linear: IA3 on it is not modelled")
    feedforward = ia3.feedforward_modules
    if feedforward is None:
        feedforward = config.family.ia3_feedforward if ia3.target_modules is None else ()
    if isinstance(ia3.target_modules, tuple) and not set(feedforward) <= set(ia3.target_modules) and \
            ia3.feedforward_modules is not None:
        raise ConfigError("feedforward_modules", ", ".join(feedforward), "must be a subset of target_modules "
                          "(peft refuses otherwise)")
    out: list[PeftParam] = []
    adapted = set(targets)
    last = {param.name.rsplit(".", 1)[0]: param.name for param in params}
    by_name = {param.name: param for param in params}
    seen: set[str] = set()

    def vector(module: str) -> PeftParam:
        rows, columns = by_name[f"{module}.weight"].shape
        is_ff = any(module.endswith(name) for name in feedforward)
        return PeftParam(f"{PREFIX}{module}.ia3_l.default", (1, columns) if is_ff else (rows, 1), True, "ia3")

    for param in params:
        module, local = param.name.rsplit(".", 1) if "." in param.name else ("", param.name)
        if param.tied_to:  # listed where first met; a module's vector still follows its last tensor
            if module in adapted and last[module] == param.name:
                out.append(vector(module))
            continue
        outer = _saved_in(param.name, saved)
        if outer is not None:
            if outer not in seen:
                seen.add(outer)
                out += _wrapped(params, outer)
            continue
        if module in adapted:
            out.append(PeftParam(f"{PREFIX}{module}.base_layer.{local}", param.shape, False, "base"))
            if last[module] == param.name:
                out.append(vector(module))
            continue
        out.append(PeftParam(f"{PREFIX}{param.name}", param.shape, False, "base"))
    return Adapted(tuple(out), tuple(targets), tuple(saved), task, aliases=_aliases(params, saved))


@dataclass(frozen=True, slots=True)
class _Module:
    name: str
    params: tuple[Param, ...]  # its own tensors, tied ones included, in order

    @property
    def kind(self) -> str:
        """'linear', 'embedding', or 'other' (LayerNorm, a convolution, a bare parameter)."""
        weight = next((p for p in self.params if p.name.endswith(".weight")), None)
        if weight is None or len(weight.shape) != 2:
            return "other"
        if weight.kind == "embedding":
            return "embedding"
        return "linear" if weight.kind == "weight" else "other"


def task_type(config: BertConfig) -> str | None:
    return TASK_TYPES.get(config.head)


def adapt(tree: ParamTree, config: BertConfig, lora: Lora) -> Adapted:
    """`get_peft_model(model, LoraConfig(...))` of `tree`'s class: its parameters as peft names and marks them."""
    params, _, task, saved, targets = _plan(tree, config, lora, config.family.lora_targets)
    ranks = {name: _rank(lora, name) for name in targets}
    return Adapted(_peft_params(params, lora, targets, saved, ranks), tuple(targets), tuple(saved), task, ranks,
                   lora.bias, _aliases(params, saved), _state_biases(params, targets, saved))


def _state_biases(params: list[Param], targets: list[str], saved: list[str]
                  ) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The state dict's keys that end in `.bias`, as the peft model names them: a tied tensor under each of its
    names (`state_dict()` keeps them all), an adapted module's under `base_layer.`, a saved module's under its
    original's name and its copy's."""
    adapted = set(targets)
    keys: list[tuple[str, tuple[int, ...]]] = []
    for param in params:
        if not param.name.endswith(".bias") and param.name != "bias":
            continue
        module, _, local = param.name.rpartition(".")
        outer = _saved_in(param.name, saved)
        if outer is not None:
            rest = param.name[len(outer) + 1:]
            keys += [(f"{PREFIX}{outer}.original_module.{rest}", param.shape),
                     (f"{PREFIX}{outer}.modules_to_save.default.{rest}", param.shape)]
        elif module in adapted:
            keys.append((f"{PREFIX}{module}.base_layer.{local}", param.shape))
        else:
            keys.append((f"{PREFIX}{param.name}", param.shape))
    return tuple(keys)


def _saved_in(name: str, saved: list[str]) -> str | None:
    """The module saved whole that holds the tensor `name`, if one does."""
    return next((outer for outer in saved if name.startswith(f"{outer}.")), None)


def _aliases(params: list[Param], saved: list[str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each saved module's tensors tied to another of its own: a key of the copy's state dict (as peft writes it:
    without the adapter's name), not a parameter of its own."""
    return tuple((f"{PREFIX}{p.name}", p.shape) for outer in saved for p in params
                 if p.name.startswith(f"{outer}.") and p.tied_to is not None and p.tied_to.startswith(f"{outer}."))


def _plan(tree: ParamTree, config: BertConfig, method: Lora | Ia3, defaults: tuple[str, ...] | None
          ) -> tuple[list[Param], dict[str, _Module], str | None, list[str], list[str]]:
    """What both methods find first: the tensors, the modules, the task type, the modules saved whole (the
    method's and the task type's) and the modules adapted."""
    params = list(tree.root.params())
    modules = _modules(params)
    task = task_type(config)
    task_saves = TASK_SAVES.get(task or "", ())
    saved_names = (*method.modules_to_save, *task_saves)
    # what peft's target matching keeps clear of: the method's own, and the task's where it adds them first
    guarded = (*method.modules_to_save, *(task_saves if task in SAVED_BEFORE_ADAPTING else ()))
    containers = _containers(modules)
    saved = _saved(saved_names, modules, containers)
    # a name can match a module that holds others, or one with no parameters at all (a dropout): peft refuses both
    others = containers | set(bare_modules(config))
    return params, modules, task, saved, _targets(config, method, modules, others, (guarded, saved_names),
                                                  task, defaults)


def _modules(params: list[Param]) -> dict[str, _Module]:
    grouped: dict[str, list[Param]] = {}
    for param in params:
        grouped.setdefault(param.name.rsplit(".", 1)[0] if "." in param.name else "", []).append(param)
    return {name: _Module(name, tuple(found)) for name, found in grouped.items()}


def _containers(modules: dict[str, _Module]) -> set[str]:
    """Every module name that holds others (`bert.encoder.layer.0`), leaves with tensors of their own aside."""
    found: set[str] = set()
    for name in modules:
        parts = name.split(".")
        found.update(".".join(parts[:end]) for end in range(1, len(parts)))
    return found - set(modules)


def _named(key: str, names: tuple[str, ...]) -> bool:
    return key in names or any(key.endswith(f".{name}") for name in names)


def _saved(names: tuple[str, ...], modules: dict[str, _Module], containers: set[str]) -> list[str]:
    """The outermost modules named by `modules_to_save` (a wrapped module's own children are not wrapped again),
    in the order of their first tensor."""
    if not names:
        return []
    first: dict[str, int] = {}  # a module or container: where its first tensor comes in named_parameters()
    for index, name in enumerate(modules):
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            first.setdefault(".".join(parts[:end]), index)
    wrapped: list[str] = []
    for key in sorted({*modules, *containers}, key=lambda key: (first.get(key, len(modules)), key.count("."))):
        # peft's `_set_trainable` (0.22's `_is_valid_match`): the name is the entry or ends in `.entry`
        if not _named(key, names):
            continue
        outer = next((outer for outer in wrapped if key.startswith(f"{outer}.")), None)
        if outer is not None:  # (peft wraps it again inside the copy it made of the outer one)
            entry = next(name for name in names if _named(key, (name,)))
            raise ConfigError("modules_to_save", entry, f"saves {key} inside {outer}, which is saved whole too: "
                              f"peft wraps the copy's module again, which is not modelled")
        wrapped.append(key)
    return wrapped


def _targets(config: BertConfig, lora: Lora | Ia3, modules: dict[str, _Module], others: set[str],
             names: tuple[tuple[str, ...], tuple[str, ...]], task: str | None,
             defaults: tuple[str, ...] | None) -> list[str]:
    """The modules adapted: those `target_modules` names (peft's default where None), but none inside a module
    named by `guarded` (peft's `check_target_module_exists`); then any that is one of `saved_names` or ends in
    `.` and one (peft's `_set_trainable` wraps it) is refused, as peft refuses it, and so is any of `others`
    (a module that holds others, or none: peft cannot wrap it)."""
    guarded, saved_names = names
    wanted = lora.target_modules
    if wanted is None:
        if defaults is None:
            raise ConfigError("target_modules", "(default)", f"peft has no default for model type "
                              f"{config.model_type!r}: name the modules to adapt (--lora-targets, --ia3-targets)")
        wanted = defaults
    linear = [name for name, module in modules.items() if module.kind == "linear"]
    wanted_names = set(linear) - _output_layer(config, modules, task) if wanted == ALL_LINEAR else None
    found: list[str] = []
    elsewhere = []  # targets in layers that `layers_to_transform` leaves out
    excluded = False  # a target `exclude_modules` held back (peft asks it first)
    for key in [*modules, *sorted(others)]:
        whole = False  # named whole: peft's `check_target_module_exists` asks no layer of it
        if wanted_names is not None:
            hit = key in wanted_names
        elif isinstance(wanted, str):
            hit = re.fullmatch(wanted, key) is not None
        else:
            hit, whole = _named(key, tuple(wanted)), key in wanted
        if hit and _excluded(key, lora.exclude_modules):
            excluded = True
            continue
        if any(re.match(rf"(^|.*\.){name}($|\..*)", key) for name in guarded):
            continue  # peft never adapts inside a module it was told to save whole before adapting
        if hit and not whole and isinstance(lora, Lora) and lora.layers_to_transform is not None:
            index = _layer_index(key, lora.layers_pattern)
            hit = index is not None and index in lora.layers_to_transform
            if not hit:
                elsewhere.append(key)
        if hit:
            found.append(key)
    if not found and elsewhere and isinstance(lora, Lora) and lora.layers_to_transform is not None:
        layers = ", ".join(map(str, lora.layers_to_transform))
        raise ConfigError("layers_to_transform", layers, f"holds none of the targets, which {config.hf_class} has "
                          f"in layers 0 … {config.num_hidden_layers - 1} (peft refuses it)")
    if not found and excluded:
        said = lora.exclude_modules if isinstance(lora.exclude_modules, str) else ",".join(lora.exclude_modules or ())
        raise ConfigError("exclude_modules", said, "holds back every target: no module is left to adapt (peft "
                          "refuses it)")
    if not found:
        said = wanted if isinstance(wanted, str) else ", ".join(wanted)
        raise ConfigError("target_modules", said, f"matches no module of {config.hf_class} (peft refuses it); its "
                          f"Linear modules end in: {', '.join(sorted({n.rsplit('.', 1)[-1] for n in linear}))}")
    said = wanted if isinstance(wanted, str) else ",".join(wanted)

    def who(name: str) -> str:
        return "modules_to_save" if name in lora.modules_to_save else f"peft's {task} model"

    for key in found:  # peft's `_set_trainable` then wraps it, and cannot (a TypeError)
        clash = next((name for name in saved_names if _named(key, (name,))), None)
        if clash is not None:
            raise ConfigError("target_modules", said, f"adapts {key}, which {clash!r} names and "
                              f"{who(clash)} saves whole too: peft refuses it (modules_to_save cannot wrap an "
                              f"adapted layer); name the modules to adapt without it")
        inside = next((name for name in saved_names if re.match(rf"(^|.*\.){name}\..*", key)), None)
        if inside is not None:  # a module saved whole that holds an adapted one: peft copies it, adapter and all
            raise ConfigError("target_modules", said, f"adapts {key}, inside {inside!r}, which {who(inside)} "
                              f"saves whole after the adapters are made: not modelled")
        module = modules.get(key)
        if module is None and not any(name.startswith(f"{key}.") for name in modules):
            raise ConfigError("target_modules", key, "holds no parameters (a dropout, an activation, an Identity): "
                              "peft cannot adapt it (it refuses the target as not supported)")
        if module is None or module.kind == "other":
            raise ConfigError("target_modules", key, "is not a Linear or an Embedding: peft cannot adapt it")
    position = {name: index for index, name in enumerate(modules)}
    return sorted(found, key=position.__getitem__)


def _output_layer(config: BertConfig, modules: dict[str, _Module], task: str | None) -> set[str]:
    """What `all-linear` leaves out: the output embeddings (an LM head's decoder over V), else for sequence
    classification the Linear modules of the model's own `score` or `classifier`."""
    if config.lm_decoder:
        return {name for name, module in modules.items() if module.kind == "linear" and module.params[0].name
                .endswith(".weight") and module.params[0].shape[0] == config.vocab_size and not name.startswith(
                    f"{config.body}.")}
    if task == "SEQ_CLS":  # the head's Linear modules: RoBERTa's `classifier` holds two
        for name in SEQ_CLS_HEAD_NAMES:
            found = {key for key in modules if key == name or key.startswith(f"{name}.")}
            if found:
                return found
    return set()


def _rank(lora: Lora, name: str) -> int:
    for key, rank in lora.rank_pattern:
        if re.match(rf"(.*\.)?({key})$", name):
            return rank
    return lora.r


def _peft_params(params: list[Param], lora: Lora, targets: list[str], saved: list[str],
                 ranks: dict[str, int]) -> tuple[PeftParam, ...]:
    out: list[PeftParam] = []
    adapted = set(targets)
    seen: set[str] = set()
    last = {param.name.rsplit(".", 1)[0]: param.name for param in params}  # each module's last tensor
    by_name = {param.name: param for param in params}
    # `lora_only` trains an adapted module's bias; one tied to a bias outside it is that tensor (LoRA on BERT's tied
    # decoder trains `cls.predictions.bias`)
    trained_elsewhere = {param.tied_to for param in params if param.tied_to and lora.bias == "lora_only"
                         and param.name.endswith(".bias") and param.name.rpartition(".")[0] in adapted}
    for param in params:
        module, local = param.name.rsplit(".", 1) if "." in param.name else ("", param.name)
        if param.tied_to:  # named_parameters() yields a tied tensor once, where it is first met
            if module in adapted and last[module] == param.name:  # (its adapters still follow it)
                out += _adapters(module, by_name[f"{module}.weight"], lora, ranks[module])
            continue
        outer = _saved_in(param.name, saved)
        if outer is not None:
            if outer not in seen:  # the wrapper: the original's tensors, then the copy's
                seen.add(outer)
                out += _wrapped(params, outer)
            continue
        if module in adapted:
            out.append(PeftParam(f"{PREFIX}{module}.base_layer.{local}", param.shape,
                                 local == "bias" and lora.bias != "none", "base"))
            if last[module] == param.name:
                out += _adapters(module, by_name[f"{module}.weight"], lora, ranks[module])
            continue
        out.append(PeftParam(f"{PREFIX}{param.name}", param.shape,
                             (local == "bias" and lora.bias == "all") or param.name in trained_elsewhere, "base"))
    return tuple(out)


def _adapters(module: str, weight: Param, lora: Lora, rank: int) -> list[PeftParam]:
    rows, columns = weight.shape
    if weight.kind == "embedding":  # DoRA's magnitude: one per embedding dimension
        if lora.lora_bias:
            raise ConfigError("lora_bias", True, f"peft refuses a bias on lora_B for an Embedding ({module})")
        adapters = [PeftParam(f"{PREFIX}{module}.lora_embedding_A.default", (rank, rows), True, "lora_A"),
                    PeftParam(f"{PREFIX}{module}.lora_embedding_B.default", (columns, rank), True, "lora_B")]
        out_features = columns
    else:  # DoRA's magnitude: one per output feature
        adapters = [PeftParam(f"{PREFIX}{module}.lora_A.default.weight", (rank, columns), True, "lora_A"),
                    PeftParam(f"{PREFIX}{module}.lora_B.default.weight", (rows, rank), True, "lora_B")]
        if lora.lora_bias:
            adapters.append(PeftParam(f"{PREFIX}{module}.lora_B.default.bias", (rows,), True, "lora_B"))
        out_features = rows
    if lora.use_dora:
        adapters.append(PeftParam(f"{PREFIX}{module}.lora_magnitude_vector.default.weight", (out_features,), True,
                                  "magnitude"))
    return adapters


def _wrapped(params: list[Param], outer: str) -> list[PeftParam]:
    """A module to save as peft wraps it: the original's tensors (frozen), then the trained copy's. The copy is a
    deep copy of the module alone, so a tensor it shares with one outside (an LM decoder's weight, tied to the word
    embeddings) is a tensor of its own there, listed where the module meets it; one shared within stays one."""
    own = [p for p in params if p.name.startswith(f"{outer}.")]
    copied: list[Param] = []
    outside: set[str] = set()
    for param in own:
        if param.tied_to is not None:
            if param.tied_to.startswith(f"{outer}.") or param.tied_to in outside:
                continue
            outside.add(param.tied_to)
        copied.append(param)
    return [*(PeftParam(f"{PREFIX}{outer}.original_module.{p.name[len(outer) + 1:]}", p.shape, False, "original")
              for p in own if not p.tied_to),
            *(PeftParam(f"{PREFIX}{outer}.modules_to_save.default.{p.name[len(outer) + 1:]}", p.shape, True, "copy")
              for p in copied)]
