"""bert-tui: every weight in BERT, counted and explained."""

__version__ = "0.1.0"
COMMANDS = ("count", "compute", "presets", "audit", "diff", "verify", "serve")  # `bert-tui COMMAND`; anything else opens the explorer
