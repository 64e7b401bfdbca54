"""One wrapper for the phase timings of the benchmarks (``logs_phases.py``, ``dump_read.py``)."""
from __future__ import annotations

import time


def phase_timer(function, spent: dict, label: str):
    """``function``, whose wall time of every call is added to ``spent[label]``."""
    def timed_call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start
    return timed_call
