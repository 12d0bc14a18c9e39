"""Fuzz campaign against a real daemon subprocess (issue 12): random and mutated messages on
both sockets (requests: msgpack; events: JSON lines, gzip, scrtune batches), then checks that
the daemon is alive, its peak RSS, and that it still answers right.

    python benchmarks/fuzz_daemon.py --messages 1000000

The generator is tests/fuzzing.py; tests/test_fuzz.py runs a bounded share of it in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.conftest import only_file  # noqa: E402
from tests.fuzzing import run_campaign  # noqa: E402
from tests.test_daemon import client_for, feed, settled, start_daemon, stop, wait_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="per socket")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        directory = os.path.join(root, "d")
        os.makedirs(directory, mode=0o700)
        proc = start_daemon(directory)
        campaign = run_campaign(directory, proc.pid, args.messages, only_file("v2_python_api"),
                                args.seed)
        alive = proc.poll() is None
        # what was sent is all in (taken, invalid or dropped) before the check
        if alive:
            wait_for(directory, "batches_received", args.messages, 600)
            wait_for(directory, "requests", args.messages, 600)
        counters = settled(directory) if alive else {}
        right = False
        if alive:
            before = counters["records"]
            feed(directory, before + 888)
            after = client_for(directory).status().result["counters"]["records"]
            right = after == before + 888 and client_for(directory).recommend().ok
            stop(proc)
    print(json.dumps({
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}",
        "messages_per_socket": args.messages, "seed": args.seed,
        "elapsed_s": round(campaign.elapsed_s, 1), "daemon_died": not alive,
        "peak_rss_mib": round(campaign.peak_rss_bytes / 2**20, 1),
        "answers_right_after": right, "counters": counters}, indent=1))


if __name__ == "__main__":
    main()
