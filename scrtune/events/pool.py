"""Parse chunks in forked worker processes; bytes in, encoded EventBatches out, in order.

JSON decoding holds the GIL, so a second core needs a second process. Workers are forked (the
parser is already imported), and talk over pipes with `send_bytes`/`recv_bytes`: raw bytes,
never pickle. The replay process keeps decompression and aggregation for itself.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection

import msgspec

from scrtune.errors import ScrtuneError
from scrtune.events.codec import decode_batch, encode_batch
from scrtune.events.model import EventBatch, Generation
from scrtune.events.parse import FileContext, parse_lines

IN_FLIGHT_PER_WORKER = 2


class _Job(msgspec.Struct, frozen=True, array_like=True):
    first_line: int
    generation: str
    time_metric: str
    data: bytes


_job_encoder = msgspec.msgpack.Encoder()
_job_decoder = msgspec.msgpack.Decoder(_Job)


def _work(conn: Connection) -> None:
    while True:
        try:
            message = conn.recv_bytes()
        except EOFError:
            return
        if not message:
            return
        job = _job_decoder.decode(message)
        context = FileContext(Generation(job.generation), job.time_metric)
        batch, _ = parse_lines(job.data.split(b"\n"), job.first_line, context)
        conn.send_bytes(encode_batch(batch))


class ParsePool:
    """`workers` forked parsers. Use as a context manager."""

    def __init__(self, workers: int) -> None:
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

    def parse(
        self, chunks: Iterable[tuple[int, bytes]], context: FileContext
    ) -> Iterator[EventBatch]:
        """Parse chunks of one file (context known from its start); batches come in order.

        A feeder thread reads `chunks` (so decompression overlaps aggregation) and sends jobs;
        this thread only receives. Sending and receiving on separate threads is what keeps a
        worker blocked on its result from deadlocking against a send to it.
        """
        slots = threading.Semaphore(IN_FLIGHT_PER_WORKER * len(self._conns))
        order: queue.Queue[Connection | BaseException | None] = queue.Queue()
        stop = threading.Event()

        def feed() -> None:
            try:
                for turn, (first_line, data) in enumerate(chunks):
                    slots.acquire()
                    if stop.is_set():
                        return
                    conn = self._conns[turn % len(self._conns)]
                    job = _Job(first_line, context.generation.value, context.time_metric, data)
                    conn.send_bytes(_job_encoder.encode(job))
                    order.put(conn)
            except BaseException as exc:  # handed to the consumer, which re-raises it
                order.put(exc)
                return
            order.put(None)

        feeder = threading.Thread(target=feed, name="scrtune-parse-feeder", daemon=True)
        feeder.start()
        finished = False
        try:
            while (item := order.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                batch = self._receive(item)
                slots.release()
                yield batch
            finished = True
        finally:
            stop.set()
            slots.release()
            if not finished:  # results still in the pipes: this pool cannot be reused
                self.kill()
            feeder.join()

    @staticmethod
    def _receive(conn: Connection) -> EventBatch:
        try:
            return decode_batch(conn.recv_bytes())
        except (EOFError, OSError):
            raise ScrtuneError("a trace parse worker died; rerun with --workers 1") from None


def default_workers() -> int:
    """Parse workers worth starting: one per core beyond the one that aggregates, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))
