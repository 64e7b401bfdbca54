"""Python's cyclic garbage collector paused while a phase builds many objects that live on.

Parsing the converter specs and keys.yaml, reading a dump's rows or matching its calls each allocate tens or
hundreds of thousands of containers, and the collector starts a pass every 700 of them that walks the young ones
again and again (~10 % of a conversion's start-up, half the time of reading a 200k-row dump.json). What such a
phase leaves as garbage is acyclic and reference counting frees it at once; the collector is restored after it.

The collector counts the containers allocated meanwhile all the same, so its first pass after the pause would walk
every one that the phase left alive (a comparison's tables and digests: 45-50 ms, in the serial part of
``compare --workers``). What outlived the phase moves to the oldest generation instead, as if it had survived the
young passes it skipped (``gc.freeze`` then ``gc.unfreeze``: two list splices, the counts reset), where the full
passes still collect it, unless the program has frozen objects of its own, which must stay frozen.
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
            _promote_survivors()
            gc.enable()


def _promote_survivors() -> None:
    """Every tracked object into the oldest generation, without a pass over them (see the module doc)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
