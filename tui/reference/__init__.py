"""The real thing, for checking the core against it (the `verify` extra: torch and transformers, imported only
here): `verify` builds transformers' class on the meta device; `measure` is the compute oracle (FlopCounterMode,
saved tensors, optimizer states)."""
