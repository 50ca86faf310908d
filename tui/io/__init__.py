"""Reading and writing files: atomic writes, HF config.json and safetensors headers (read-only, no torch)."""
