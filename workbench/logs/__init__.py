"""Training logs to tidy per-step series and per-parameter local norms (see schema.py)."""
