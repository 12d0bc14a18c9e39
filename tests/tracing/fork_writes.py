"""Two processes writing files, the second forked from the first (issue 47: DFTracer's ZeroMQ
writer reconnects in the child, whose last flush is empty): `fork_writes.py DIR COUNT`."""

from __future__ import annotations

import os
import sys


def write(folder: str, tag: str, count: int) -> None:
    for index in range(count):
        with open(os.path.join(folder, f"{tag}{index}.dat"), "wb") as handle:
            handle.write(b"x" * 4096)


def main() -> None:
    folder, count = sys.argv[1], int(sys.argv[2])
    child = os.fork()
    if child == 0:
        write(folder, "child", count)
        sys.exit(0)
    write(folder, "parent", count)
    os.waitpid(child, 0)


if __name__ == "__main__":
    main()
