"""workbench.gc_pause: the collector is off inside the pause and back after it; what the pause left alive
reaches the oldest generation without a pass over it, still collectable, and objects that the program froze
stay frozen."""
from __future__ import annotations

import gc

from workbench.gc_pause import gc_paused


class _Node:
    def __init__(self):
        self.me = self                              # a cycle: only the collector frees it


def test_the_pause_leaves_no_pass_over_its_survivors_and_they_stay_collectable():
    passes: list[int] = []
    record = lambda phase, info: passes.append(info["generation"]) if phase == "start" else None  # noqa: E731
    gc.collect()
    gc.callbacks.append(record)
    try:
        with gc_paused():
            assert not gc.isenabled()
            kept = [[] for _ in range(50_000)]       # lists: always tracked
            cycle = _Node()
        assert gc.isenabled() and gc.get_count()[0] < 700
        more = [[] for _ in range(10)]              # the next allocations start no pass over the 50k survivors
        assert passes == [] and gc.is_tracked(kept[0]) and len(more) == 10
        del cycle
        assert gc.collect() >= 1                    # the oldest generation is still collected
    finally:
        gc.callbacks.remove(record)


def test_objects_frozen_by_the_program_stay_frozen():
    # A container of its own, not the freeze count: other frozen objects may be freed meanwhile (the count
    # dropped by 2 in one fresh-clone run). gc.get_objects() leaves out the permanent generation.
    sentinel = ["frozen"]                # a list: always tracked by the collector
    gc.collect()
    gc.freeze()
    try:
        assert not any(item is sentinel for item in gc.get_objects())
        with gc_paused():
            [{} for _ in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert not any(item is sentinel for item in gc.get_objects()), "the program's frozen objects were thawed"
    finally:
        gc.unfreeze()
    assert any(item is sentinel for item in gc.get_objects())


def test_a_pause_inside_a_pause_keeps_the_collector_off():
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
