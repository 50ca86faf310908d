"""Screens over the explorer: help, audit a claimed count, export the breakdown, confirm an overwrite."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static
from textual.worker import Worker, WorkerState, get_current_worker

from ..core import BertConfig, ParamTree
from ..core.count.audit import audit
from ..core.count.claims import SCOPES, ClaimError, parse_claim
from ..core.count.trained import Trained
from ..formats.params import audit_text, to_csv, to_json, to_markdown
from ..io.files import ReadError, check_writable_target, probe, user_path, write_atomic
from ..io.safetensors import Checkpoint
from ..plain import plain
from ..presets import check_preset_name, save_user_preset, user_dir, user_preset_path
from ..sources import LOAD_ERRORS, Source, names_hub_model, open_hub, open_model
from .widgets.field_input import FieldInput

EXPORTERS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown"}
ResultT = TypeVar("ResultT")


class DismissOnce:
    """Mixin for a screen that closes once: a key queued before the first close (two quick Enters) would
    otherwise pop the screen below it (Textual 8.2.8 raises ScreenStackError when that is the last one)."""

    is_active: bool

    def dismiss(self, result: object = None) -> AwaitComplete:
        if not self.is_active:
            return AwaitComplete()
        return super().dismiss(result)  # type: ignore[misc, no-any-return]


class Dialog(DismissOnce, ModalScreen[ResultT]):
    """The explorer's modal screens."""


class HelpScreen(Dialog[None]):
    """Every key of the explorer; any of Escape, F1, ? or q closes it."""

    AUTO_FOCUS = "#help-box"

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("f1", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self._key_rows = rows

    def compose(self) -> ComposeResult:
        table = Table(title="bert-tui keys", title_justify="left", box=None, padding=(0, 2, 0, 0))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("does")
        for key, does in self._key_rows:
            table.add_row(key, does)
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Static(table)
            yield Static("Escape closes this help.", classes="dim")


class AuditScreen(Dialog[None]):
    """Type a published count; see which conventions reproduce it and which parts of the tree they change."""

    AUTO_FOCUS = "#claim"
    BINDINGS = [Binding("escape", "dismiss", "Close")]

    def __init__(self, config: BertConfig, title: str, claims: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self._config = config
        self._source_title = title
        self._claims = claims  # (value, scope, source) published for this preset

    def compose(self) -> ComposeResult:
        first = self._claims[0] if self._claims else ("", "model", "")
        with Vertical(id="audit-box", classes="dialog"):
            yield Label(plain(f"Audit a claimed count for {self._source_title} ({self._config.hf_class})"), classes="dialog-title")
            with Horizontal(id="audit-inputs"):
                yield FieldInput(first[0], placeholder="186,828,288 or 110M", id="claim", compact=True)
                yield Select([(scope, scope) for scope in SCOPES], value=first[1], allow_blank=False, id="scope", compact=True)
            if self._claims:
                published = "; ".join(f"{value} ({scope}): {source}" for value, scope, source in self._claims)
                yield Static(plain(f"published: {published}"), id="claims", classes="dim")
            with VerticalScroll(id="audit-result"):
                yield Static("", id="explanations")
            yield Static("Escape closes; the claim is explained at every keystroke.", classes="dim")

    def on_mount(self) -> None:
        self._explain()

    @on(Input.Changed, "#claim")
    @on(Select.Changed, "#scope")
    def _explain(self) -> None:
        text = self.query_one("#claim", Input).value
        scope = self.query_one("#scope", Select).value
        out = self.query_one("#explanations", Static)
        if not text.strip():
            out.update("Type the count you read somewhere.")
            return
        try:
            claim = parse_claim(text)
        except ClaimError as error:
            out.update(plain(f"⚠ {error}"))
            return
        try:
            result = audit(claim, self._config, str(scope))
        except ClaimError as error:
            out.update(plain(f"⚠ {error}"))
            return
        more = f"`bert-tui audit {claim.text.strip()} --format json` lists them"
        out.update(Text(audit_text(result, self._config, self._source_title, more)))


class ConfirmScreen(Dialog[bool]):
    """A yes/no question; y or Enter on Yes says yes, n or Escape says no."""

    AUTO_FOCUS = "#no"
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n", "answer(False)", "No"), Binding("escape", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Yes, overwrite") -> None:
        super().__init__()
        self._question = question
        self._yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box", classes="dialog"):
            yield Static(plain(self._question))
            with Horizontal(id="confirm-buttons"):
                yield Button("No", id="no", variant="primary")
                yield Button(self._yes, id="yes", variant="error")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


def render_export(model: ParamTree, title: str, kind: str, trained: Trained | None = None) -> str:
    """The breakdown as `bert-tui count` writes it in `kind`, under the fine-tuning method shown (`trained`)."""
    if kind == "csv":
        return to_csv(model, trained)
    return to_markdown(model, title, trained) if kind == "markdown" else to_json(model, trained)


class ExportScreen(Dialog[Path | None]):
    """Ask for a path; write the current breakdown there (JSON, CSV or Markdown by extension), atomically,
    asking before overwriting. Dismisses with the path written, or None."""

    AUTO_FOCUS = "#path"
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, model: ParamTree, title: str, suggestion: str, trained: Trained | None = None) -> None:
        super().__init__()
        self._model = model
        self._source_title = title
        self._suggestion = suggestion
        self._trained = trained  # the fine-tuning method the explorer shows (None: full fine-tuning)

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box", classes="dialog"):
            yield Label("Export the breakdown: .json, .csv or .md", classes="dialog-title")
            yield FieldInput(self._suggestion, id="path", compact=True)
            yield Static("", id="export-error", classes="error")
            yield Static("Enter writes (asking before it overwrites); Escape cancels.", classes="dim")

    @on(Input.Changed, "#path")
    def _edited(self) -> None:
        self.query_one("#export-error", Static).update("")  # an old error would speak of another path

    @on(Input.Submitted, "#path")
    def _submitted(self, event: Input.Submitted) -> None:
        error = self.query_one("#export-error", Static)
        error.update("")
        try:
            path = check_writable_target(event.value)
        except ValueError as problem:
            error.update(plain(f"⚠ {problem}"))
            return
        kind = EXPORTERS.get(path.suffix.lower())
        if kind is None:
            error.update(plain(f"⚠ {path.name}: end the name with .json, .csv or .md"))
            return
        if path.exists():
            self.app.push_screen(ConfirmScreen(f"{path} exists. Overwrite it?"), lambda yes: self._write(path, kind) if yes else None)
        else:
            self._write(path, kind)

    def _write(self, path: Path, kind: str) -> None:
        try:
            write_atomic(path, render_export(self._model, self._source_title, kind, self._trained))
        except OSError as problem:
            self.query_one("#export-error", Static).update(plain(f"⚠ {path}: {problem.strerror or problem}"))
            return
        self.dismiss(path)


Opened = tuple[Source, Checkpoint | None]  # what the open prompt returns


class OpenScreen(Dialog[Opened | None]):
    """Ask for a path (a config.json, a model folder, a preset YAML, a checkpoint or a PEFT adapter folder), a
    Hub model id or a preset name, and, for an adapter, its base model where its adapter_config.json does not
    find it (as `--base`). A path is read at once; an id is fetched in a worker thread while the prompt keeps
    answering keys, its progress shown, Escape cancelling it. Errors stay in the prompt."""

    AUTO_FOCUS = "#open-path"
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box", classes="dialog"):
            yield Label("Open a Hub id (ORG/NAME), config.json, folder, checkpoint, adapter or preset",
                        classes="dialog-title")
            yield FieldInput(placeholder="path/to/model, org/name or a preset", id="open-path", compact=True)
            yield FieldInput(placeholder="an adapter's base model (optional: as --base)", id="open-base",
                             compact=True)
            yield Static("", id="open-error", classes="error")
            yield Static("Enter opens; Escape cancels. Only config and headers are read, never weights.", classes="dim")

    @on(Input.Submitted, "#open-path, #open-base")
    def _submitted(self) -> None:
        text = self.query_one("#open-path", Input).value.strip()
        base = self.query_one("#open-base", Input).value.strip() or None
        try:
            path = user_path(text)
            if names_hub_model(text):
                self._status(f"fetching {text}… (Escape cancels)")
                self._fetch(text, base)
                return
            # (a path that exists, else a preset by name: as the command line reads a MODEL)
            self.dismiss(open_model(str(path) if probe(path, Path.exists) else text, base=base))
        except (*LOAD_ERRORS, ReadError) as error:
            self._status(f"⚠ {error}")

    def _status(self, text: str) -> None:
        self.query_one("#open-error", Static).update(plain(text))

    @work(thread=True, exclusive=True, group="fetch", exit_on_error=False)
    def _fetch(self, repo_id: str, base: str | None) -> Opened:
        """The network part, off the event loop; its progress lines come back through call_from_thread."""
        def progress(message: str) -> None:
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(self._status, f"{message} (Escape cancels)")

        return open_hub(repo_id, progress=progress, base=base)

    @on(Worker.StateChanged)
    def _fetched(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "fetch" or worker.is_cancelled or not self.is_attached:
            return
        if event.state == WorkerState.SUCCESS and worker.result is not None:
            self.dismiss(worker.result)
        elif event.state == WorkerState.ERROR:
            self._status(f"⚠ {worker.error}")


class SavePresetScreen(Dialog[str | None]):
    """Ask for a preset name; save the current config to the user presets folder (asking before it
    overwrites a file, or shadows a built-in preset). Dismisses with the name saved, or None."""

    AUTO_FOCUS = "#preset-name"
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, config: BertConfig, suggestion: str, builtin: set[str]) -> None:
        super().__init__()
        self._config = config
        self._suggestion = suggestion
        self._builtin = builtin

    def compose(self) -> ComposeResult:
        with Vertical(id="save-box", classes="dialog"):
            yield Label(plain(f"Save as a user preset (in {user_dir()})"), classes="dialog-title")
            yield FieldInput(self._suggestion, id="preset-name", compact=True)
            yield Static("", id="save-error", classes="error")
            yield Static("Enter saves; Escape cancels. Letters, digits, '.', '_' and '-'.", classes="dim")

    @on(Input.Changed, "#preset-name")
    def _edited(self) -> None:
        self.query_one("#save-error", Static).update("")  # an old error would speak of another name

    @on(Input.Submitted, "#preset-name")
    def _submitted(self, event: Input.Submitted) -> None:
        self.query_one("#save-error", Static).update("")
        try:
            name = check_preset_name(event.value)
        except ValueError as problem:
            self.query_one("#save-error", Static).update(plain(f"⚠ {problem}"))
            return
        path = user_preset_path(name)
        exists = probe(path, Path.exists)
        if exists or name in self._builtin:
            if exists:
                question, yes = f"{path} exists. Overwrite it?", "Yes, overwrite"
            else:  # the built-in stays; yours is found first
                question, yes = f"{name} is a built-in preset. Shadow it with yours?", "Yes, shadow it"
            self.app.push_screen(ConfirmScreen(question, yes), lambda answer: self._save(name) if answer else None)
        else:
            self._save(name)

    def _save(self, name: str) -> None:
        try:
            save_user_preset(name, self._config, name)
        except OSError as problem:
            self.query_one("#save-error", Static).update(plain(f"⚠ {problem.strerror or problem}"))
            return
        self.dismiss(name)
