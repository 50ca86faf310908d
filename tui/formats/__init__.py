"""The renderings the command line and the explorer share: `params` (a count as a table, JSON, CSV or Markdown;
audit, diff and checkpoint reports) and `compute` (a step's FLOPs and memory)."""
