"""How fast one core does Reed-Solomon's parity arithmetic, as SCR's redset library does it.

redset's RS encode (`redset_rs_reduce_buffer_multadd`, CPU method) multiplies every byte a rank
receives into each of its k parity blocks by a premultiplied 256-entry table and XORs it in:
`buf[j] ^= premult[data[j]]`, one table lookup a byte, single-threaded. That arithmetic, not the
traffic, is what RS costs beyond XOR (issue 46: RS's encode measured 1.9x the formula without
it). `_rsloop.multadd` is redset's loop in C. Where it was not built (no C compiler at install)
`bytes.translate` does the lookups and numpy XORs the product in: on the project's first
machine that ran at 1.7 GB/s where redset's loop ran at 1.9 GB/s, but on a later one of the
kind at 1.2-2.5 GB/s against 4 GB/s (it allocates a block a call), and RS's encode through
the real SCR came out 1.27-1.41x the formula.
"""

from __future__ import annotations

import os
import time

import numpy as np

try:
    from scrtune.probe import _rsloop
except ImportError:  # built without a C compiler: Python's nearest loop, slower
    _rsloop = None

BLOCK_BYTES = 1 << 20  # redset's default MPI buffer: the unit it multiplies at a time
_TABLE = bytes((value * 37) & 0xFF ^ 0x5A for value in range(256))  # any permutation will do


def rs_arithmetic_bytes_per_s(budget_s: float) -> float:
    """Bytes a second one core multiplies into a parity block: blocks of random bytes looked
    up and XORed into an accumulator until `budget_s` (at least 8 blocks)."""
    data = os.urandom(BLOCK_BYTES)
    parity = np.zeros(BLOCK_BYTES, dtype=np.uint8)
    blocks = 0
    started = time.perf_counter()
    deadline = started + budget_s
    while blocks < 8 or time.perf_counter() < deadline:
        _multadd(_TABLE, data, parity)
        blocks += 1
    return blocks * BLOCK_BYTES / (time.perf_counter() - started)


def _python_multadd(table: bytes, data: bytes, parity: np.ndarray) -> None:
    np.bitwise_xor(parity, np.frombuffer(data.translate(table), dtype=np.uint8), out=parity)


# chosen once, not at every block the probe times
_multadd = _rsloop.multadd if _rsloop is not None else _python_multadd
