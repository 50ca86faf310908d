"""Regenerate every command output and figure in README.md and docs/*.md from the commands that print them.

    python tests/docs.py            # rewrite the pages (atomically), saying which changed
    python tests/docs.py --check    # exit 1, naming each stale place, if regenerating would change anything

Three kinds of marker, each written in the page itself (the reader sees the command beside what it printed):

- A console block: a fence opened as ```console right after a line `<!-- generated -->`; each line that starts
  with `$ bert-tui ` (continued by a trailing `\\`) is a command, and what follows it, up to the next command or
  the fence's end, is what that command prints (standard output, then standard error), regenerated.
- A named block: `<!-- generated: NAME -->` ... `<!-- end -->`, whose lines are a function's of this module
  (`NAMED`: the family table, the fine-tuning table), built from the commands' own JSON.
- A page's name for a command its figures share: `<!-- let L = compute bert-large-uncased ... -->`, then
  `<!-- figure: $L --checkpointing :: memory_bytes.peak | size -->`.
- A figure in prose: `<!-- figure: ARGS :: PATH -->109,482,240<!-- /figure -->`, the value at PATH (dotted keys
  and list indices) of `bert-tui ARGS --format json`, integers with thousands separators (`PATH | size`: in short
  bytes as the tool prints them, 20.6 GiB; `PATH | flops`: in short FLOPs).

Why not cog (cogapp): the pages hold commands, not Python, so a reader can run what they read; the commands run in
this process (a fresh interpreter each would cost ~0.45 s, and there are dozens), at the terminal size the tests
pin; and the test suite runs the check without another dependency. tests/test_docs.py runs `--check`'s logic.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui.cli import main  # noqa: E402

COLUMNS, LINES = "80", "24"  # the size the tests pin (tests/conftest.py): tables are as an 80-column terminal shows
CONSOLE = re.compile(r"(<!-- generated -->\n```console\n)(.*?)(^```$)", re.S | re.M)
NAMED_BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(^<!-- end -->$)", re.S | re.M)
FIGURE = re.compile(r"(<!-- figure: (.*?) :: (.*?) -->)(.*?)(<!-- /figure -->)", re.S)
LET = re.compile(r"^<!-- let (\w+) = (.*?) -->$", re.M)  # a page's name for a command its figures share


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@contextmanager
def pinned() -> Iterator[None]:
    """The terminal size and environment the pages are written for (and nothing of the user's own)."""
    saved = {key: os.environ.get(key) for key in ("COLUMNS", "LINES", "NO_COLOR", "HF_HUB_OFFLINE")}
    os.environ.update(COLUMNS=COLUMNS, LINES=LINES, NO_COLOR="1", HF_HUB_OFFLINE="1")
    here = Path.cwd()
    os.chdir(ROOT)  # (the pages name files from the repository's root: tests/fixtures/...)
    try:
        yield
    finally:
        os.chdir(here)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run(argv: list[str]) -> tuple[int, str, str]:
    """`bert-tui ARGV` in this process: its exit code, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    with pinned(), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@cache
def printed(command: str) -> str:
    """What `bert-tui COMMAND` prints: standard output, then standard error (a note, a refusal)."""
    _, out, err = run(shlex.split(command))
    return out + err


@cache
def json_of(args: str) -> Any:
    code, out, err = run([*shlex.split(args), "--format", "json"])
    if code:
        raise ValueError(f"bert-tui {args} --format json: {err.strip()}")
    return json.loads(out)


def console(body: str) -> str:
    """A console block's body regenerated: each `$ bert-tui ...` command, then what it prints."""
    commands: list[str] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ bert-tui "):
            typed = [line]
            while typed[-1].endswith("\\") and index + 1 < len(lines):
                index += 1
                typed.append(lines[index])
            commands.append("\n".join(typed))
        index += 1
    if not commands:
        raise ValueError(f"a generated console block names no command: {body[:60]!r}")
    said = []
    for typed in commands:
        command = typed.removeprefix("$ bert-tui ").replace("\\\n", " ")
        said.append(typed + "\n" + printed(command))
    return "".join(text if text.endswith("\n") else text + "\n" for text in said)


def figure(args: str, path: str) -> str:
    """The value at `path` of the command's JSON, as the tool prints it: `PATH | size` in short bytes (20.6 GiB),
    `PATH | flops` in short FLOPs, `PATH | gib` a card's size in GiB, else integers with thousands separators."""
    from tui.core.units import short_bytes, short_flops

    path, _, kind = (part.strip() for part in path.partition("|"))
    value: Any = json_of(args)
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    if kind == "size":
        return short_bytes(value)
    if kind == "flops":
        return short_flops(value)
    if kind:
        raise ValueError(f"figure {path!r}: no format {kind!r} (size, flops)")
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def family_table() -> str:
    from tests.family_table import table

    with pinned():
        return table()


def fine_tuning_table() -> str:
    """Sequence classification at 32 × 256, amp-bf16, full fine-tuning beside LoRA r = 8 on query, value: what
    trains, the step's FLOPs and peak, the largest batch on 24 GiB."""
    rows = ["| model, method | trains | step FLOPs | peak at batch 32 | largest batch on 24 GiB |",
            "|---|---:|---:|---:|---:|"]
    from tui.core.units import short_bytes

    for model in ("bert-base-uncased", "roberta-base"):
        for label, flags in (("full fine-tuning", ""), ("LoRA r=8 on query, value",
                                                        " --lora-r 8 --lora-targets query,value")):
            data = json_of(f"compute {model} --head sequence-classification --batch 32 --seq 256 "
                           f"--precision amp-bf16 --gpu-memory 24GiB{flags}")
            trains = data.get("trainable", data["parameters"])
            rows.append(f"| {model}, {label} | {trains:,} | {data['flops']['step'] / 1e12:.2f} TFLOP | "
                        f"{short_bytes(data['memory_bytes']['peak'])} | {data['fits'][1]['max_batch']:,} |")
    return "\n".join(rows) + "\n"


def gpu_caps_table() -> str:
    """The largest batches measured on an H200 under a memory cap (tests/fixtures/gpu/h200-steps.json: ran / out of
    memory), beside what `compute` says for the same command (as it was measured: `as_measured`'s loop)."""
    from tests.gpu.measure_steps_cuda import as_measured

    data = json.loads((ROOT / "tests/fixtures/gpu/h200-steps.json").read_text(encoding="utf-8"))
    rows = ["| the step (`bert-tui compute …`) | measured: ran / out of memory | `compute` says |", "|---|---|---|"]
    for case in data["fits"]:
        argv = as_measured([str(part) for part in case["argv"]])
        fit = next(fit for fit in json_of(" ".join(["compute", *argv]))["fits"] if fit["asked"])
        dropped = {"--device", "--batch"}  # (the device is CUDA's, the batch the one searched for)
        shown = " ".join(part for index, part in enumerate(argv)
                         if part not in dropped and (index == 0 or argv[index - 1] not in dropped))
        rows.append(f"| `{shown}` | {case['largest_batch_that_ran']} / {case['first_batch_out_of_memory']} | "
                    f"{fit['max_batch']} |")
    return "\n".join(rows) + "\n"


def presets_table() -> str:
    """Every built-in preset: its family and sizes, bert-tui's count of its base model, and what transformers built
    for the fixtures (tests/fixtures/transformers_params.json, `sum(p.numel() for p in model.parameters())`)."""
    built = {case["id"].removesuffix("/none"): case["total"] for case in json.loads(
        (ROOT / "tests/fixtures/transformers_params.json").read_text(encoding="utf-8"))["cases"]
        if case["id"].endswith("/none")}
    rows = ["| preset | family | V | H | L | A | I | bert-tui | transformers |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for preset in sorted(json_of("presets"), key=lambda preset: (preset["model_type"] != "bert", preset["name"].lower())):
        if not preset["builtin"]:
            continue
        c = preset["config"]
        rows.append(f"| {preset['name']} | {preset['model_type']} | {c['vocab_size']} | {c['hidden_size']} | "
                    f"{c['num_hidden_layers']} | {c['num_attention_heads']} | {c['intermediate_size']} | "
                    f"{preset['total']:,} | {built[preset['name']]:,} |")
    return "\n".join(rows) + "\n"


def caps_table() -> str:
    """What fits against the replay of recorded runs (tests/fixtures/allocation.json): for each recorded cap, the
    largest batch that replays without running out, the first that runs out, and `compute`'s claim, its share."""
    from tests.gpu.measure_steps_cuda import as_measured

    data = json.loads((ROOT / "tests/fixtures/allocation.json").read_text(encoding="utf-8"))
    rows = ["| recorded cap | replay: runs / out of memory | `compute` claims | share |", "|---|---|---:|---:|"]
    for part in ("lm_caps", "inference_caps", "checkpointing_caps"):
        for case in data[part]:
            argv = as_measured([str(arg) for arg in case["argv"]])
            claim = next(fit for fit in json_of(" ".join(["compute", *argv]))["fits"] if fit["asked"])["max_batch"]
            runs = case["largest_batch_that_runs"]
            rows.append(f"| {case['case']} | {runs} / {case['first_batch_out_of_memory']} | {claim} | "
                        f"{100 * claim / runs:.1f} % |")
    return "\n".join(rows) + "\n"


NAMED: dict[str, Callable[[], str]] = {"presets-table": presets_table, "caps-table": caps_table, "family-table": family_table, "fine-tuning-table": fine_tuning_table,
                                       "gpu-caps-table": gpu_caps_table}


def regenerate(text: str) -> str:
    text = CONSOLE.sub(lambda m: m[1] + console(m[2]) + m[3], text)
    text = NAMED_BLOCK.sub(lambda m: m[1] + NAMED[m[2]]() + m[4], text)
    names = dict(LET.findall(text))
    return FIGURE.sub(lambda m: m[1] + figure(expand(m[2], names), m[3]) + m[5], text)


def expand(args: str, names: dict[str, str]) -> str:
    """`$NAME more flags`: the command a `<!-- let NAME = ... -->` line of the page names, with more flags."""
    if not args.startswith("$"):
        return args
    name, _, more = args[1:].partition(" ")
    return f"{names[name]} {more}".strip()


def stale(text: str) -> list[str]:
    """What regenerating `text` would change, each place named by its first line."""
    fresh = regenerate(text)
    if fresh == text:
        return []
    changed = []
    for pattern in (CONSOLE, NAMED_BLOCK, FIGURE):
        old, new = list(pattern.finditer(text)), list(pattern.finditer(fresh))
        changed += [_first(a[0], pattern is FIGURE) for a, b in zip(old, new, strict=True) if a[0] != b[0]]
    return changed or ["(the page as a whole)"]


def _first(place: str, figure: bool) -> str:
    """A place as a message names it: a figure's marker, else a block's first line after its marker."""
    lines = place.splitlines()
    return (lines[0] if figure or len(lines) < 3 else lines[2] if lines[1].startswith("```") else lines[0])[:80]


def write(path: Path, text: str) -> None:
    """Atomically: a temporary file beside it, then a rename."""
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def main_(argv: list[str]) -> int:
    check = "--check" in argv
    found = 0
    for page in pages():
        text = page.read_text(encoding="utf-8")
        places = stale(text)
        if not places:
            continue
        found += len(places)
        for place in places:
            print(f"{page.relative_to(ROOT)}: stale: {place}")
        if not check:
            write(page, regenerate(text))
    if check and found:
        print("regenerate with: python tests/docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main_(sys.argv[1:]))
