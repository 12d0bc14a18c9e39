"""What each redundancy scheme costs per checkpoint on the real SCR library (issue 46).

    SCRTUNE_SCR_PREFIX=~/.cache/scrtune-real-scr/3.1.0 python benchmarks/redundancy_encode.py

Four MPI ranks, each its own "node" (the gethostname shim of benchmarks/real_scr_tuning.py, a
cache directory per node in /dev/shm), write --steps checkpoints of one tensor file each to the
cache under SINGLE, PARTNER, XOR (one set of 4) and RS (k=2 parity blocks over the same set),
nothing flushed until SCR_Finalize. Reported per scheme: the median blocking time per
checkpoint (Start_output to Complete_output, max over ranks) and the encode cost as SCR timed
it (SCR_DEBUG's `scr_reddesc_apply` seconds, rank 0's, beyond SINGLE's), next to what the
redundancy intent's formulas predict from SINGLE's write rate, PARTNER's measured transfer
and, for RS, the parity arithmetic `scrtune profile` measures (one core's, shared as the 4
fake nodes share the machine's cores), and without that arithmetic
(scrtune/intents/redundancy.py). SCR's own encode time, not the difference of two schemes'
whole checkpoints: beside a busy loop the checkpoints' write times spread so that PARTNER's
median came out below SINGLE's (2026-11-30: 0.227 s against 0.240 s), while SCR's encode
times stay apart. --json keeps the raw runs for benchmarks/redundancy_physics.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_scr_tuning  # noqa: E402 - beside this script

from scrtune.intents.inputs import rs_arithmetic_node_bytes_per_s  # noqa: E402
from scrtune.intents.redundancy import encode_s  # noqa: E402
from scrtune.probe.arithmetic import rs_arithmetic_bytes_per_s  # noqa: E402

NODES = 4
SCHEMES = {
    "SINGLE": {"SCR_COPY_TYPE": "SINGLE"},
    "PARTNER": {"SCR_COPY_TYPE": "PARTNER"},
    "XOR": {"SCR_COPY_TYPE": "XOR", "SCR_SET_SIZE": str(NODES)},
    "RS": {"SCR_COPY_TYPE": "RS", "SCR_SET_SIZE": str(NODES),
           "SCR_SET_FAILURES": "2"},
}


def predicted(write_s: float, partner_encode_s: float, per_node_bytes: float, read_bps: float,
              arithmetic_bps: float = math.inf) -> dict[str, float]:
    """The intent's encode formula with the node-local write rate from SINGLE's ranks'
    writes (`write_s`: the checkpoint's write phase), the measured read rate, the encode transfer
    rate from PARTNER's encode (B/W + B/L), and a fake node's share of RS's parity arithmetic
    (`arithmetic_bps`)."""
    local = per_node_bytes / write_s
    net = per_node_bytes / max(partner_encode_s - per_node_bytes / local, 1e-9)
    return {name: encode_s(name, per_node_bytes, local, read_bps, net, NODES, arithmetic_bps)
            for name in SCHEMES}


def fake_node_arithmetic_bytes_per_s() -> float:
    """`scrtune profile`'s RS arithmetic rate for one core, shared as the fake nodes share the
    machine's cores (each node's one rank, NODES ranks on the cores there are)."""
    per_core = rs_arithmetic_bytes_per_s(1.0)
    return rs_arithmetic_node_bytes_per_s(per_core, NODES, os.cpu_count() or 1) / NODES


def read_bytes_per_s(size: int) -> float:
    """The cache's read rate of a just-written file (what XOR and RS read back to encode)."""
    path = os.path.join("/dev/shm", f"scrtune-read-{os.getpid()}")
    with open(path, "wb") as out:
        out.write(os.urandom(1 << 20) * (size >> 20))
    times = []
    for _ in range(3):
        started = time.perf_counter()
        with open(path, "rb", buffering=0) as handle:
            while handle.read(16 << 20):
                pass
        times.append(time.perf_counter() - started)
    os.unlink(path)
    return size / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tensor-mib", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--pfs", default=os.path.join(os.path.dirname(__file__), "work", "pfs"))
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "redundancy_encode.json"))
    args = parser.parse_args()
    real_scr_tuning.RANKS = NODES
    args.pfs_call_us = 0
    size = args.tensor_mib << 20
    args.app_args = ["--steps", str(args.steps), "--compute-s", "0.2", "--meta-writes", "16",
                     "--tensor-files", "1", "--tensor-bytes", str(size),
                     "--tensor-write-bytes", str(min(size, 16 << 20))]
    os.makedirs(args.pfs, exist_ok=True)
    bench = real_scr_tuning.Bench(args)
    runs: dict[str, list[float]] = {name: [] for name in SCHEMES}
    encodes: dict[str, list[float]] = {name: [] for name in SCHEMES}  # SCR's, per checkpoint
    writes: dict[str, list[float]] = {name: [] for name in SCHEMES}  # the app's write phase
    order = list(SCHEMES)
    for rep in range(args.reps):
        random.Random(rep).shuffle(order)
        for name in order:
            env = {"SCR_CACHE_BYPASS": "0", "SCR_FLUSH": "0", "SCR_CACHE_SIZE": "2",
                   **SCHEMES[name]}
            # the first checkpoint also creates the cache directories: left out
            run = bench.run(real_scr_tuning.GridConfig(env))
            runs[name] += run["per_checkpoint_s"][1:]
            encodes[name] += run["encode_s"][1:]
            writes[name] += [phases[1] for phases in run["phases_s"][1:]]
            print(f"rep {rep + 1}/{args.reps} {name}", file=sys.stderr)
    per_node = size + 16 * 1024
    median = {name: statistics.median(times) for name, times in runs.items()}
    if not all(encodes.values()):
        sys.exit("redundancy_encode: SCR_DEBUG printed no scr_reddesc_apply time for "
                 + ", ".join(name for name, times in encodes.items() if not times))
    # beyond SINGLE's, which applies no redundancy (ER's bookkeeping: about 1 ms)
    bookkeeping_s = statistics.median(encodes["SINGLE"])
    scr_encode = {name: statistics.median(times) - bookkeeping_s
                  for name, times in encodes.items()}
    # the cache's write rate from the ranks' writes alone: SCR_Start_output's and
    # SCR_Complete_output's bookkeeping took 2-3 times as long here as writing 32 MiB
    write_s = statistics.median(writes["SINGLE"])
    read = read_bytes_per_s(size)
    arithmetic = fake_node_arithmetic_bytes_per_s()
    model = predicted(write_s, scr_encode["PARTNER"], per_node, read, arithmetic)
    before = predicted(write_s, scr_encode["PARTNER"], per_node, read)
    print(f"{NODES} ranks on {NODES} fake nodes, {args.tensor_mib} MiB per rank per checkpoint, "
          f"cache read {read / 2 ** 30:.1f} GiB/s, RS arithmetic {arithmetic / 1e9:.2f} GB/s "
          f"a fake node, {real_scr_tuning._machine()}")
    print(f"{'scheme':8} {'blocking s':>11} {'encode s':>9} {'model s':>8} {'no arith s':>11}")
    for name in SCHEMES:
        print(f"{name:8} {median[name]:11.3f} {scr_encode[name]:9.3f} {model[name]:8.3f} "
              f"{before[name]:11.3f}")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump({"machine": real_scr_tuning._machine(), "nodes": NODES,
                   "per_node_bytes": per_node, "read_bytes_per_s": read,
                   "rs_arithmetic_bytes_per_s": arithmetic, "runs": runs, "median_s": median,
                   "scr_encode_s": encodes, "scr_encode_median_s": scr_encode,
                   "write_phase_s": writes,
                   "model_encode_s": model, "model_encode_s_without_arithmetic": before},
                  handle, indent=1)


if __name__ == "__main__":
    main()
