"""Training logs to tidy per-step series and per-parameter local norms (see schema.py).

``read_log(path, run=None, format=None)`` is the one entry point (reader.py)."""
from .reader import FORMATS, read_log
from .schema import LogSeries

__all__ = ["FORMATS", "LogSeries", "read_log"]
