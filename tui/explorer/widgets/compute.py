"""The Compute pane: a workload's fields (batch, sequence, precision, optimizer, checkpointing, loop, and the
fine-tuning method: full, LoRA or parts frozen) and what the core says a training step costs: FLOPs, memory by
kind with bars, and the largest batch that fits common GPUs.

Like the config form, the pane only reads its fields into a `Workload` (the core validates it) and posts
`ComputePane.Changed` or `ComputePane.Invalid`; the app asks the core and hands the result back to `show`.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, Static, Switch

from ...core import ConfigError
from ...core.config import parse_int
from ...core.count.frozen import Freeze
from ...core.count.lora import ALL_LINEAR, Ia3, Lora
from ...core.count.trained import FineTuning
from ...core.step.compute import not_replayed
from ...core.step.peak import HEADROOM_SHORT
from ...core.step.result import Compute
from ...core.step.symbols import attention_run
from ...core.step.workload import WORKLOAD, Setting, Workload
from ...core.units import parse_size, short_bytes, short_flops, size_reading
from ...formats.compute import (
    answer_lines,
    batch_says,
    fit_answer,
    fits_basis,
    full_line,
    labelled,
    method_line,
    one_layer,
    reserved_note,
    size_label,
    versus,
)
from ...plain import plain
from .field_input import FieldInput

KINDS = ("weights", "gradients", "optimizer", "activations")
BAR = 20
METHODS = (("full", "full"), ("LoRA", "lora"), ("DoRA", "dora"), ("IA3 (peft's targets)", "ia3"),
           ("parts frozen", "freeze"))
ADAPTER = ("the adapter's", "adapter")  # offered when a PEFT adapter is open: its own LoRA, whole
# The workload's settings the pane shows, row by row (then the loop beside the method); the others at their default
ROWS = (("batch", "seq", "checkpointing"), ("precision", "optimizer"), ("mode", "attention"), ("padding_mask",))


class ComputePane(VerticalScroll):
    """Workload fields above, the step's cost below. Focus order: batch, sequence, checkpointing, precision,
    optimizer, mode, attention, padding mask, GPU memory, loop, fine-tuning (and its own fields)."""

    class Changed(Message):
        def __init__(self, workload: Workload, gpu_memory: int | None = None,
                     how: FineTuning | None = None) -> None:
            self.workload = workload
            self.gpu_memory = gpu_memory  # one more size for the fits table (bytes), if typed
            self.how = how  # the fine-tuning method (None: full fine-tuning)
            super().__init__()

    class Invalid(Message):
        def __init__(self, error: ConfigError) -> None:
            self.error = error
            super().__init__()

    def __init__(self, workload: Workload, adapter: FineTuning | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._start = workload
        self._adapter = adapter

    def compose(self) -> ComposeResult:
        w = self._start
        for row in ROWS:
            with Horizontal(classes="compute-row"):
                for name in row:
                    yield from self._setting(WORKLOAD[name], getattr(w, name))
                if row is ROWS[-1]:  # one more card for the fits table (not a setting of the step itself)
                    yield Label("GPU memory", classes="compute-label")
                    yield FieldInput("", placeholder="24GiB", max_length=12, id="gpu_memory", compact=True)
        with Horizontal(classes="compute-row"):
            yield from self._setting(WORKLOAD["loop"], w.loop)  # what the loop keeps through the backward
            yield Label("fine-tuning", classes="compute-label")
            yield Select(self._methods(), allow_blank=False, value="adapter" if self._adapter else "full", id="method",
                         compact=True)
        with Horizontal(classes="compute-row", id="lora-row"):  # LoRA as peft's LoraConfig takes it
            yield Label("LoRA r", classes="compute-label")
            yield FieldInput("8", restrict=r"[0-9]*", max_length=4, id="lora_r", compact=True)
            yield Label("targets", classes="compute-label")
            # empty: peft's default for the model's family (its record's; a family without one is refused by name)
            yield FieldInput("", placeholder="peft's default", max_length=200, id="lora_targets", compact=True)
        with Horizontal(classes="compute-row", id="freeze-row"):  # requires_grad_(False) on these parts
            yield Label("freeze embeddings", classes="compute-label")
            yield Switch(value=True, id="freeze_embeddings")
            yield Static("on", id="freeze_embeddings-state", classes="switch-state")
            yield Label("first layers", classes="compute-label")
            yield FieldInput("0", restrict=r"[0-9]*", max_length=4, id="freeze_layers", compact=True)
        with Horizontal(classes="compute-row", id="freeze-body-row"):
            yield Label("freeze the body (only the head trains)", classes="compute-label")
            yield Switch(value=False, id="freeze_body")
            yield Static("off", id="freeze_body-state", classes="switch-state")
        yield Static("", id="compute-error")
        yield Static("", id="compute-result")

    @staticmethod
    def _setting(setting: Setting, value: object) -> ComposeResult:
        """A workload setting's field, as its one statement says it (`WORKLOAD`)."""
        yield Label(setting.label, classes="compute-label")
        if setting.switch:
            yield Switch(value=bool(value), id=setting.name)
            yield Static("on" if value else "off", id=f"{setting.name}-state", classes="switch-state")
        elif setting.allowed:
            yield Select([(choice, choice) for choice in setting.allowed], allow_blank=False, value=str(value),
                         id=setting.name, compact=True)
        else:
            yield FieldInput(str(value), restrict=r"[0-9]*", max_length=10, id=setting.name, compact=True)

    def on_mount(self) -> None:
        self.query_one("#compute-error").display = False
        self._show_method_rows()

    def _show_method_rows(self) -> None:
        chosen = self.query_one("#method", Select).value
        self.query_one("#lora-row").display = chosen in ("lora", "dora")  # (DoRA: LoRA's rank and targets)
        self.query_one("#freeze-row").display = self.query_one("#freeze-body-row").display = chosen == "freeze"

    def _methods(self) -> tuple[tuple[str, str], ...]:
        return (*METHODS, ADAPTER) if self._adapter is not None else METHODS

    def offer_adapter(self, adapter: FineTuning | None) -> None:
        """A source was opened: its adapter's method is offered (and chosen), or no longer offered."""
        self._adapter = adapter
        select = self.query_one("#method", Select)
        chosen = select.value
        select.set_options(self._methods())
        select.value = "adapter" if adapter is not None else (chosen if chosen != "adapter" else "full")
        self._show_method_rows()

    def method(self) -> FineTuning | None:
        """The fine-tuning method the fields say (None: full fine-tuning); the core checks it against the model."""
        chosen = self.query_one("#method", Select).value
        if chosen == "adapter":
            return self._adapter
        if chosen in ("lora", "dora"):
            text = self.query_one("#lora_r", Input).value.strip()
            if not text:
                raise ConfigError("lora_r", text, "is empty: type the adapters' rank (8)")
            targets = tuple(part.strip() for part in self.query_one("#lora_targets", Input).value.split(",")
                            if part.strip())
            return Lora(r=parse_int("lora_r", text),
                        target_modules=ALL_LINEAR if targets == (ALL_LINEAR,) else targets or None,
                        use_dora=chosen == "dora")
        if chosen == "ia3":  # (peft's default targets for the family: a family without them is refused by name)
            return Ia3()
        if chosen == "freeze":
            text = self.query_one("#freeze_layers", Input).value.strip() or "0"
            return Freeze(self.query_one("#freeze_embeddings", Switch).value, parse_int("freeze_layers", text),
                          self.query_one("#freeze_body", Switch).value)
        return None

    def read(self) -> Workload:
        """The fields as a workload (CUDA conventions; what the pane does not show at its default); the core
        validates."""
        given: dict[str, object] = {"device": "cuda"}
        for name in (*(name for row in ROWS for name in row), "loop"):
            setting = WORKLOAD[name]
            if setting.switch:
                given[name] = self.query_one(f"#{name}", Switch).value
            elif setting.allowed:
                given[name] = str(self.query_one(f"#{name}", Select).value)
            else:
                text = self.query_one(f"#{name}", Input).value.strip()
                if not text:
                    raise ConfigError(name, text, "is empty: type a whole number")
                given[name] = text
        return Workload.from_settings(given)

    def gpu_memory(self) -> int | None:
        """The GPU size typed (bytes), or None when the field is empty."""
        text = self.query_one("#gpu_memory", Input).value.strip()
        if not text:
            return None
        try:
            return parse_size(text)
        except ValueError as refused:
            raise ConfigError("gpu_memory", text, str(refused)) from None

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Switch.Changed)
    def _edited(self, event: Message) -> None:
        event.stop()
        if isinstance(event, Switch.Changed):  # said in words too: a switch is only colour without them
            self.query_one(f"#{event.switch.id}-state", Static).update("on" if event.value else "off")
        if isinstance(event, Select.Changed) and event.select.id == "method":
            self._show_method_rows()
        self.refresh_state()

    def refresh_state(self) -> None:
        try:
            workload, size, how = self.read(), self.gpu_memory(), self.method()
        except ConfigError as error:
            self.post_message(self.Invalid(error))
        else:
            self.post_message(self.Changed(workload, size, how))

    def show_error(self, error: ConfigError | None) -> None:
        """The message under the fields (None clears it); the result below stays, marked stale by the app."""
        line = self.query_one("#compute-error", Static)
        if error is not None:
            shown = error.field if error.value == "" else f"{error.field} {error.value}"
            line.update(plain(f"⚠ {shown}: {error.rule}"))
        line.display = error is not None

    def show(self, result: Compute, stale: str | None = None, full: Compute | None = None,
             pending: str | None = None) -> None:
        """The step's figures; `stale`: why they are not the fields' (they are the last valid ones); `full`:
        under a method, the same step fully fine-tuned, beside it; `pending`: what fits is still being worked
        out (said in its place: the figures shown are the step's terms, which need no replay)."""
        typed = self.query("#gpu_memory")  # (its row may still be mounting when the first figures come)
        reading = size_reading(typed.first(Input).value) if typed else None  # (GB on a card's box: said, every time)
        self.query_one("#compute-result", Static).update(render_result(result, stale, full, pending, reading))
        self.set_class(stale is not None, "-stale")

    def clear(self) -> None:
        """No figures: the fields' workload is refused for this model, and the last figures were another's (while
        the core works out a model's fits, its terms show at once: `show(pending=…)`)."""
        self.query_one("#compute-result", Static).update("")
        self.set_class(False, "-stale")


def render_result(result: Compute, stale: str | None = None, full: Compute | None = None,
                  pending: str | None = None, reading: str | None = None) -> Text:
    """The step's cost as the pane shows it: every figure is the core's. `pending`: what fits (and the reserved
    peak, the replay's too) is being worked out: said in their place. `reading`: how a GPU size typed in decimal
    units was read (`units.size_reading`), under the fits."""
    text = Text()
    if stale is not None:
        text.append(f"⚠ stale: {stale}\n", style="bold")
    runs = attention_run(result.config, result.workload).attention
    if runs != result.workload.attention:  # a family transformers builds without sdpa: the math path runs
        text.append(f"attention runs {runs}: {result.config.model_type} has no {result.workload.attention} "
                    "in transformers\n", style="dim")
    if pending is None and result.fits:  # the answer first: on the card typed, else on every size of the table
        text.append(answer_lines(result, None)[0] + "\n", style="bold")
    if result.method is not None:
        text.append(method_line(result) + "\n", style="bold")
        if full is not None:
            text.append(full_line(result, full, before_fits=";\n  ", peak=pending is None or full.derived) + "\n",
                        style="dim")
    step, rule, train = result.flops_step, result.rule_of_thumb, result.workload.train
    text.append("FLOPs per step  " if train else "FLOPs a forward ", style="dim")
    text.append(f"{short_flops(step)}", style="bold")
    text.append(f"   forward {short_flops(result.flops_forward)} · backward {short_flops(result.flops_backward)}\n"
                if train else "\n")
    text.append(f"{result.rule_factor}·params·tokens ", style="dim")
    text.append(f"{short_flops(rule)}   ({versus(rule - step, step)})\n")
    memory = result.memory()
    total = memory["total"]
    text.append("memory for a step " if train else "memory for a forward ", style="dim")
    text.append("(what it allocates; the peak is what it holds at once)\n", style="dim")
    for kind in KINDS:
        n = memory[kind] + (memory["recompute"] if kind == "activations" else 0)
        filled = round(BAR * n / total) if total else 0
        text.append(f"  {kind:<12}{short_bytes(n):>11}  ")
        text.append("█" * filled, style="bold")
        text.append("·" * (BAR - filled), style="dim")
        text.append(f" {100 * n / total:5.1f} %\n" if total else "\n")
    text.append(f"  {'sum':<12}", style="bold")
    text.append(f"{short_bytes(total):>11}", style="bold")
    text.append("  not a bound on the peak\n", style="dim")  # (each kind once: some never held at once, no transient)
    if pending is None or result.derived:  # (a peak the worker is deriving is not shown before it: one peak)
        text.append(f"  {'peak':<12}", style="bold")
        text.append(f"{short_bytes(result.peak):>11}", style="bold")
        text.append(f"  in the {result.peak_phase}\n")
        text.append("  " + " · ".join(f"{phase.name} {short_bytes(phase.peak)}" for phase in result.phases) + "\n",
                    style="dim")
    if pending is not None:
        text.append(f"{pending}\n", style="dim")
        text.append_text(layer_breakdown(result))
        return text
    if result.stranded:
        text.append(f"  {'reserved':<12}{short_bytes(result.reserved_peak):>11}", style="bold")
        text.append(f"  {reserved_note(result)}, allocator replayed\n" if result.replayed
                    else "  with a split logits segment\n")
    text.append(f"{fits_basis(result)} at s = {result.workload.seq:,}:\n", style="dim")
    cells = [f"{size_label(fit)} {fit_answer(fit, short=True)}{'*' if fit.asked else ''}" for fit in result.fits]
    for start in range(0, len(cells), 3):
        text.append("  " + "   ".join(f"{cell:<17}" for cell in cells[start:start + 3]).rstrip() + "\n")
    asked = "; * the size you typed" if any(fit.asked for fit in result.fits) else ""
    w = result.workload
    loop = f"{w.loop} loop; " if w.train or w.loop == "course" else ""  # (inference: the course's keeps the last)
    text.append(f"CUDA; {loop}fits: {HEADROOM_SHORT}{asked}\n", style="dim")  # (replayed: said above)
    if reading:
        text.append(f"GPU memory {reading}\n", style="dim")
    if why := not_replayed(result):
        text.append(f"by the peak rule, not replayed: {why}\n", style="dim")
    for line in batch_says(result):
        text.append(f"{line}\n", style="dim")
    text.append_text(layer_breakdown(result))
    return text


def layer_breakdown(result: Compute) -> Text:
    """One encoder layer, as `bert-tui compute` prints it: FLOPs product by product, bytes tensor by tensor."""
    text = Text()
    flops = result.layer_flops()
    text.append(f"\n{one_layer(result)}: {short_flops(sum(flops.values()))} forward\n", style="bold")
    for what, n in flops.items():
        text.append("\n".join(labelled(2, what, 44, f"{short_flops(n):>14}")) + "\n")
    saved = result.layer_activations()
    if saved:
        text.append(f"{one_layer(result)} saves {short_bytes(sum(saved.values()))} for backward\n", style="bold")
        for what, n in saved.items():
            text.append("\n".join(labelled(2, what, 44, f"{short_bytes(n):>14}")) + "\n")
    return text
