"""The command line: one module per command (`count`, `compute`, `presets`, `audit`, `diff`, `verify`; `explore`
opens the explorer), over `common` (sources, overrides, one-line errors); `dispatch.main` is the way in."""

from .dispatch import main

__all__ = ["main"]
