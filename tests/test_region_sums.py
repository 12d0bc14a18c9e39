"""Region keys of a batch counted into bins give what a unique of them gives, and keys too
large for bins (a hostile batch's codes) take the unique, not a bin per possible key."""

from __future__ import annotations

import numpy as np

from scrtune.engine.regions import region_sums


def reference(pair: np.ndarray, dur_us: np.ndarray) -> tuple[list, list, list]:
    keys, inverse = np.unique(pair, return_inverse=True)
    return (keys.tolist(), np.bincount(inverse).tolist(),
            np.bincount(inverse, weights=dur_us).tolist())


def test_counted_keys_equal_the_unique_of_them():
    rng = np.random.default_rng(5)
    for highest in (1, 7, 300, 70_000, 1 << 40):
        for rows in (1, 2, 50, 5_000):
            pair = rng.integers(0, highest, rows, dtype=np.int64)
            dur_us = rng.integers(0, 1 << 40, rows, dtype=np.int64)
            found = region_sums(pair, dur_us)
            assert [f.tolist() for f in found] == list(reference(pair, dur_us))


def test_huge_keys_do_not_allocate_a_bin_each():
    pair = np.array([3, (1 << 50) + 1, 3], dtype=np.int64)
    keys, counts, durs = region_sums(pair, np.array([1, 2, 4], dtype=np.int64))
    assert keys.tolist() == [3, (1 << 50) + 1]
    assert counts.tolist() == [2, 1] and durs.tolist() == [5.0, 2.0]
