"""Parse one file on several cores; EventBatches come back in file order.

JSON decoding holds the GIL, so more cores need more processes. Moving decompressed text
through pipes would cost more than decompressing it again (ISA-L inflates far faster than
JSON parses), so every process reads and inflates the whole file itself and parses only the
chunks it owns; the replay process owns a share too and aggregates everything. Only compact
encoded batches cross the pipes (`send_bytes`/`recv_bytes`: raw bytes, never pickle).
Workers only write and the replay process only reads, so no send can wait on a send.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from scrtune.errors import ScrtuneError
from scrtune.events.codec import decode_batch, encode_batch
from scrtune.events.model import EventBatch, Generation
from scrtune.events.parse import FileContext, parse_block
from scrtune.events.reader import CHUNK_BYTES, ReadProblems, iter_chunks

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

MAIN = -1  # owner of a chunk parsed by the replay process itself
AHEAD = 6  # batches a worker may have finished before the replay process takes them


class _FileJob(msgspec.Struct, frozen=True, array_like=True):
    path: str
    generation: str
    time_metric: str
    owners: list[int]  # one cycle of chunk owners, from the second chunk on
    worker: int
    chunk_bytes: int


class _Failure(msgspec.Struct, frozen=True, array_like=True, tag="failure"):
    message: str


_END_OF_FILE = b""  # worker to replay process: no more batches for this file
_job_encoder = msgspec.msgpack.Encoder()
_job_decoder = msgspec.msgpack.Decoder(_FileJob)
_failure_decoder = msgspec.msgpack.Decoder(_Failure)


def _work(conn: Connection) -> None:
    while True:
        try:
            message = conn.recv_bytes()
        except EOFError:
            return
        if not message:
            return
        job = _job_decoder.decode(message)
        try:
            _parse_owned(conn, job)
        except Exception as exc:  # reported to the replay process, which raises it
            conn.send_bytes(_job_encoder.encode(_Failure(f"{type(exc).__name__}: {exc}")))
        conn.send_bytes(_END_OF_FILE)


def _parse_owned(conn: Connection, job: _FileJob) -> None:
    context = FileContext(Generation(job.generation), job.time_metric)
    chunks = iter_chunks(job.path, ReadProblems(), job.chunk_bytes)
    next(chunks, None)  # the first chunk is the replay process's (it told the context)
    for index, data in enumerate(chunks):
        if job.owners[index % len(job.owners)] == job.worker:
            batch, _ = parse_block(data, context)
            conn.send_bytes(encode_batch(batch))


def owner_cycle(workers: int) -> list[int]:
    """The replay process parses one chunk in 2*workers+1 (it also aggregates every batch)."""
    return [MAIN] + list(range(workers)) * 4


class ParsePool:
    """`workers` forked parsers. Use as a context manager."""

    def __init__(self, workers: int) -> None:
        import multiprocessing  # here: every command imports this module, few fork workers

        context = multiprocessing.get_context("fork")
        self._conns: list[Connection] = []
        self._procs = []
        for _ in range(workers):
            mine, theirs = context.Pipe(duplex=True)
            proc = context.Process(target=_work, args=(theirs,), daemon=True)
            proc.start()
            theirs.close()
            self._conns.append(mine)
            self._procs.append(proc)

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kill(self) -> None:
        for proc in self._procs:
            proc.kill()
        for conn in self._conns:
            conn.close()
        self._conns = []

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send_bytes(b"")
            except OSError:
                pass
            conn.close()
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        self._conns = []

    def parse_rest(
        self,
        path: str,
        chunks: Iterator[bytes],
        context: FileContext,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> Iterator[EventBatch]:
        """Batches of the chunks that `chunks` (this process's reader of `path`, its first
        chunk already taken) still holds, parsed here and by the workers, in order."""
        owners = owner_cycle(len(self._conns))
        for worker, conn in enumerate(self._conns):
            job = _FileJob(path, context.generation.value, context.time_metric, owners, worker,
                           chunk_bytes)
            conn.send_bytes(_job_encoder.encode(job))
        # A pipe holds 64 KiB and a batch is megabytes: without a drain thread a worker would
        # wait on every send until this process reaches that chunk, and never run ahead.
        stop = threading.Event()
        inboxes: list[queue.Queue[bytes | None]] = [queue.Queue(maxsize=AHEAD) for _ in self._conns]
        drains = [threading.Thread(target=_drain, args=(conn, box, stop), daemon=True)
                  for conn, box in zip(self._conns, inboxes)]
        for drain in drains:
            drain.start()
        finished = False
        try:
            for index, data in enumerate(chunks):
                owner = owners[index % len(owners)]
                if owner == MAIN:
                    yield parse_block(data, context)[0]
                else:
                    yield _unpack(inboxes[owner].get())
            finished = True
        finally:
            if not finished:  # results may be left in the pipes: this pool cannot be reused
                stop.set()
                self.kill()
            for drain in drains:
                drain.join()



def _drain(conn: Connection, inbox: queue.Queue, stop: threading.Event) -> None:
    """Move one worker's messages for one file into `inbox`, up to its end marker."""
    while True:
        try:
            message: bytes | None = conn.recv_bytes()
        except (EOFError, OSError):
            message = None  # the worker died or was killed
        while True:
            try:
                inbox.put(message, timeout=0.1)
                break
            except queue.Full:
                if stop.is_set():
                    return
        if not message:
            return


def _unpack(message: bytes | None) -> EventBatch:
    if message is None:
        raise ScrtuneError("a trace parse worker died; rerun with --workers 1")
    if message[:1] == b"\x92":  # a two-element array: a _Failure, not a batch
        failure = _failure_decoder.decode(message)
        raise ScrtuneError(f"a trace parse worker failed: {failure.message}")
    return decode_batch(message)


def default_workers() -> int:
    """Parse processes for this machine: one per core available to us (1 = no pool)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))
