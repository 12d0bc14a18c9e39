"""Replay split across MPI ranks: whole process groups of files per rank, statistics reduced to
rank 0 as msgpack bytes (Gatherv of raw buffers: no pickle), one summary identical to a
single-process replay of the same files."""

from __future__ import annotations

import os

import numpy as np

from scrtune.engine.replay import (
    ReplayOptions,
    fewer_collections,
    made_to_keep,
    new_stats,
    order_files,
    read_files,
)
from scrtune.engine.summary import Summary, finish
from scrtune.errors import TraceError
from scrtune.mpibytes import gather_bytes

_LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")


def launched_by_mpi() -> bool:
    """True under mpirun/mpiexec/srun with more than one rank (without initialising MPI)."""
    for name in _LAUNCHER_SIZE_VARS:
        try:
            if int(os.environ.get(name, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def assign(paths: list[str], ranks: int) -> list[list[str]]:
    """Process groups to ranks, largest first onto the least loaded rank (deterministic)."""
    groups = order_files(paths)
    sizes = [sum(_size(p) for p in group) for group in groups]
    loads = [0] * ranks
    shares: list[list[str]] = [[] for _ in range(ranks)]
    for index in sorted(range(len(groups)), key=lambda i: (-sizes[i], i)):
        rank = min(range(ranks), key=lambda r: (loads[r], r))
        loads[rank] += sizes[index]
        shares[rank].extend(groups[index])
    return shares


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def replay_mpi(paths: list[str], options: ReplayOptions) -> Summary | None:
    """Run on every rank; returns the summary on rank 0 and None elsewhere."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    stats = new_stats(options)
    with fewer_collections():
        opened = read_files(stats, assign(paths, size)[rank], workers=1)
    parts = gather_bytes(comm, stats.to_bytes())
    total_opened = np.zeros(1, dtype=np.int64)
    comm.Allreduce(np.array([opened], dtype=np.int64), total_opened, op=MPI.SUM)
    if not total_opened[0]:
        raise TraceError(f"none of the {len(paths)} trace files could be read")
    if parts is None:  # not rank 0
        return None
    merged = new_stats(options)
    with fewer_collections():
        for part in parts:
            merged.merge_bytes(part)
        with made_to_keep():
            return finish(merged)
