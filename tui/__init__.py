"""bert-tui: every weight in BERT, counted and explained."""

__version__ = "0.1.0"
