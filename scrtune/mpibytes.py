"""Bytes across MPI ranks with mpi4py's buffer calls: sizes first, then one variable-length
exchange. No pickle (mpi4py's lower-case calls would pickle)."""

from __future__ import annotations

import numpy as np


def _split(out: np.ndarray, sizes: np.ndarray) -> list[bytes]:
    offsets = np.r_[0, np.cumsum(sizes)]
    return [out[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])]


def allgather_bytes(comm, data: bytes) -> list[bytes]:
    """Every rank's bytes, on every rank, in rank order."""
    sizes = np.zeros(comm.Get_size(), dtype=np.int64)
    comm.Allgather(np.array([len(data)], dtype=np.int64), sizes)
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    comm.Allgatherv(np.frombuffer(data, dtype=np.uint8), (out, sizes))
    return _split(out, sizes)


def gather_bytes(comm, data: bytes, root: int = 0) -> list[bytes] | None:
    """Every rank's bytes on `root`, in rank order; None elsewhere."""
    here = comm.Get_rank() == root
    sizes = np.zeros(comm.Get_size(), dtype=np.int64) if here else None
    comm.Gather(np.array([len(data)], dtype=np.int64), sizes, root=root)
    out = np.empty(int(sizes.sum()), dtype=np.uint8) if here else None
    comm.Gatherv(np.frombuffer(data, dtype=np.uint8), (out, sizes) if here else None, root=root)
    return _split(out, sizes) if here else None


def bcast_bytes(comm, data: bytes, root: int = 0) -> bytes:
    """`root`'s bytes on every rank."""
    size = np.array([len(data)], dtype=np.int64)
    comm.Bcast(size, root=root)
    buffer = np.frombuffer(data, dtype=np.uint8).copy() if comm.Get_rank() == root else \
        np.empty(int(size[0]), dtype=np.uint8)
    comm.Bcast(buffer, root=root)
    return buffer.tobytes()
