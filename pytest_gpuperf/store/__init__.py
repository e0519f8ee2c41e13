"""Storage: per-GPU baseline YAML and results JSON. Imports only core."""
