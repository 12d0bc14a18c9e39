"""Replay's summary is made to be kept: the collector neither walks it while it is made nor
at the next young collection (engine/replay.made_to_keep)."""

from __future__ import annotations

import gc

from scrtune.engine.replay import made_to_keep


def test_objects_made_to_keep_are_not_walked_by_the_next_young_collection():
    """Pausing the collector alone would leave the 5,000 objects young, and the next
    allocations would start a collection that walks them all."""
    started: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        with made_to_keep():
            assert not gc.isenabled()
            kept = [[number] for number in range(5000)]
        after = [[number] for number in range(50)]  # fewer than a young collection's threshold
    finally:
        gc.callbacks.remove(seen)
    assert gc.isenabled() and started == [] and len(after) == 50
    oldest = {id(item) for item in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in kept)
    assert gc.get_freeze_count() == 0  # nothing is left frozen


def test_a_paused_collector_stays_paused():
    gc.disable()
    try:
        with made_to_keep():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
