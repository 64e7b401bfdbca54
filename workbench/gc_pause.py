"""Python's cyclic garbage collector paused while a phase builds many objects that live on.

Parsing the converter specs and keys.yaml, reading a dump's rows or matching its calls each allocate tens or
hundreds of thousands of containers, and the collector starts a pass every 700 of them that walks the young ones
again and again (~10 % of a conversion's start-up, half the time of reading a 200k-row dump.json). What such a
phase leaves as garbage is acyclic and reference counting frees it at once; the collector is restored after it.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """The cyclic collector off inside the block, then back as it was (nested pauses keep it off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
