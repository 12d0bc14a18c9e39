"""The probe of RS's parity arithmetic (scrtune/probe/arithmetic.py) times redset's loop in C
where it was built: Python's nearest loop ran at 0.3-0.6x of it on a machine of the project's
kind, and RS's encode through the real SCR then came out 1.27-1.41x the formula (issue 48's CI)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from scrtune.probe import arithmetic

pytestmark = pytest.mark.skipif(arithmetic._rsloop is None, reason="C loop not built")


def test_the_c_loop_multiplies_and_adds_as_redset_does():
    """parity[j] ^= table[data[j]], checked against numpy's table lookup, twice over (the
    second pass adds onto the first) and on a length that is no multiple of a word."""
    rng = np.random.default_rng(48)
    table = bytes(rng.permutation(256).astype(np.uint8))
    lookup = np.frombuffer(table, dtype=np.uint8)
    for length in (1 << 20, 4097):
        first, second = os.urandom(length), os.urandom(length)
        parity = np.zeros(length, dtype=np.uint8)
        arithmetic._rsloop.multadd(table, first, parity)
        arithmetic._rsloop.multadd(table, second, parity)
        expected = lookup[np.frombuffer(first, np.uint8)] ^ lookup[np.frombuffer(second, np.uint8)]
        assert np.array_equal(parity, expected)


def test_bad_buffers_are_refused_not_overrun():
    parity = np.zeros(16, dtype=np.uint8)
    with pytest.raises(ValueError, match="256 bytes"):
        arithmetic._rsloop.multadd(b"short", bytes(16), parity)
    with pytest.raises(ValueError, match="one length"):
        arithmetic._rsloop.multadd(bytes(256), bytes(32), parity)
    with pytest.raises(TypeError):  # a parity block it could not write
        arithmetic._rsloop.multadd(bytes(256), bytes(16), bytes(16))
