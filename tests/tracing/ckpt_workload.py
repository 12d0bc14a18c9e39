"""A small checkpointing program traced by whichever DFTracer generation is installed.

Each step computes (sleeps), then saves a checkpoint in a CHECKPOINT region: `--files` files per
step written with unbuffered `os.write` calls of `--write-size` bytes up to `--file-bytes` each,
an fsync per file, then loads the previous checkpoint back and deletes the one before it.
Used to make real traces of older tracer generations and live traces for tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor


def _tracer(log_file: str, data_dir: str):
    try:  # dftracer 2.x
        from dftracer.python import dft_fn, dftracer

        return dftracer.initialize_log(log_file, data_dir, -1), dft_fn
    except ImportError:
        pass
    try:  # dftracer 1.x
        from dftracer.logger import dft_fn, dftracer

        return dftracer.initialize_log(log_file, data_dir, -1), dft_fn
    except ImportError:
        from dlio_profiler.logger import dlio_logger, fn_interceptor

        return dlio_logger.initialize_log(log_file, data_dir, -1), fn_interceptor


def _write_file(path: str, total: int, write_size: int) -> None:
    block = b"x" * write_size
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < total:
            done += os.write(fd, block[: min(write_size, total - done)])
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_file(path: str, read_size: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.read(fd, read_size):
            pass
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True, help="checkpoint directory (traced)")
    parser.add_argument("--log", required=True, help="trace file prefix")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--file-bytes", type=int, default=4 << 20)
    parser.add_argument("--write-size", type=int, default=1 << 20)
    parser.add_argument("--compute-s", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=1, help="files written concurrently")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    log, region = _tracer(args.log, args.dir)
    saved: list[str] = []
    for step in range(1, args.steps + 1):
        with region(cat="COMPUTE", name="train.step", step=step):
            time.sleep(args.compute_s)
        target = os.path.join(args.dir, f"global_step{step}")
        with region(cat="CHECKPOINT", name="checkpoint.save", step=step):
            os.makedirs(target, exist_ok=True)
            paths = [os.path.join(target, f"shard{index}.pt") for index in range(args.files)]
            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(lambda p: _write_file(p, args.file_bytes, args.write_size), paths))
        if saved:
            with region(cat="CHECKPOINT", name="checkpoint.load", step=step):
                for index in range(args.files):
                    _read_file(os.path.join(saved[-1], f"shard{index}.pt"), 1 << 20)
        if len(saved) > 1:
            shutil.rmtree(saved.pop(0))
        saved.append(target)
    log.finalize()


if __name__ == "__main__":
    main()
