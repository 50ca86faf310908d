"""The counting room: every parameter of a config as transformers builds it — the tree, totals and closed forms,
audit, compare and diff. It imports nothing of the step (`tui.core.step`)."""
