"""The step room: FLOPs and memory of a training step or an inference forward, from the config and a workload.

One direction inside it: `workload` (what is run, element sizes) ← `kinds` (the modules' FLOPs and saved tensors)
← `steps` (each family's step as data) ← `symbols` (their values) ← `result` (the sums) ← `peak` (the phases) ←
`compute` (the builder). The step imports the counting room (`tui.core.count`), never the reverse.
"""
