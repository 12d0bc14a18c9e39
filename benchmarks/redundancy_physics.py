"""Does the redundancy intent choose what the failure physics says, at measured encode costs?

    python benchmarks/redundancy_physics.py [--encode benchmarks/results/redundancy_encode.json]

The redundancy intent (scrtune/intents/redundancy.py) picks a scheme by a closed-form expected
waste. This checks its choice against an event simulation that shares none of its formulas
but Daly's interval: node failures arrive as a Poisson process (rate nodes / node MTBF); a share
of them loses the node's storage; the job restarts (restart time R) and SCR rebuilds the lost
node's files in SCR_Init, so a redundant checkpoint is lost only when more nodes of the failed
node's set lose their storage before that rebuild (during R and the rebuild, a window the
simulation draws from the same per-node rate); a lost checkpoint costs a restart from the
parallel file system (the lag the intent uses); a multi-level pattern (SINGLE every
checkpoint, XOR every k-th) falls back to its last XOR level. Encode costs per byte come from
benchmarks/redundancy_encode.py's run of the real SCR (PARTNER, XOR and RS over 4 fake nodes),
not from the intent's formulas.

For each profile of a grid (nodes, node MTBF, share of failures that lose storage, checkpoint
bytes per node) every candidate the intent considered is simulated at the interval the intent
gave it, with common random numbers; the simulated best and the intent's choice are compared.
Reported: the profiles where they differ by more than the simulation's noise, and where RS is
the simulated best.

The flush cadence (issue 48): for SINGLE and PARTNER on every profile, with a parallel file
system whose aggregate grows with the nodes (each node flushes at a tenth of its cache rate),
the job is simulated flushing every k-th checkpoint synchronously for every k the intent may
set; the checkpoints since the last finished flush are tracked across restarts, and a failure
the cache cannot recover from goes back to the last flushed one. The cadence the intent gave
each scheme is compared with the simulated best, and so is the rule before, which weighed
every storage loss as needing the flush (PARTNER then flushed as often as SINGLE).

The checkpoint interval (issue 48): on every profile where the recommendation caches, the job
is simulated with the chosen scheme and its flush cadence at the SCR_CHECKPOINT_SECONDS the
recommendation sets, at multiples of it a factor sqrt(2) apart, and at the rule before (Daly's
interval for the measured checkpoint, without the scheme's encode, which every checkpoint also
pays).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from dataclasses import dataclass

import msgspec
from failure_sim import RESTART_S, simulate, simulate_flushes  # beside this file

from scrtune.goodput.intervals import daly
from scrtune.intents.cache import caches
from scrtune.intents.inputs import ScrRates, StorageTier, SystemProfile, WorkloadStats
from scrtune.intents.interval import derive as derive_interval
from scrtune.intents.model import (
    MAX_FLUSH_EVERY,
    MAX_SECONDS,
    flush_every,
    flush_s,
    recommended_interval_s,
)
from scrtune.intents.redundancy import Candidate, derive, pfs_lag_intervals

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
HOPELESS_WASTE = 0.5
GRID = {"nodes": (4, 16, 64, 256, 1024), "node_mtbf_s": (2 * HOUR_S, 12 * HOUR_S, DAY_S,
                                                        7 * DAY_S, 365 * DAY_S),
        "loss_share": (0.25, 1.0), "per_node_gib": (2, 32)}


@dataclass(frozen=True)
class Measured:
    """What benchmarks/redundancy_encode.py measured through the real SCR."""

    local: float  # the node-local write rate (SINGLE), bytes/s
    read: float  # its read rate
    per_byte: dict[str, float]  # each scheme's encode seconds per byte
    rs_arithmetic: float  # a fake node's share of RS's parity arithmetic, bytes/s; 0: unknown


def measured_rates(path: str) -> Measured:
    with open(path) as handle:
        data = json.load(handle)
    size = data["per_node_bytes"]
    median = data["median_s"]
    return Measured(size / median["SINGLE"], data["read_bytes_per_s"], {
        name: max(median[name] - median["SINGLE"], 0.0) / size
        for name in ("PARTNER", "XOR", "RS")}, data.get("rs_arithmetic_bytes_per_s", 0.0))


def _scheme_encode_s(scheme: str, per_byte: dict[str, float], size: float) -> float:
    name, _, every = scheme.partition("/")
    if name == "SINGLE":
        return 0.0
    if name == "SINGLE+XOR":
        return per_byte["XOR"] * size / int(every)
    return per_byte[name] * size


def _profile(node_mtbf_s: float, loss_share: float, measured: Measured,
             flush_scaling: float = 1.0) -> SystemProfile:
    local = measured.local
    # the encode rate the intent is given: PARTNER's measured transfer
    encode = 1.0 / max(measured.per_byte["PARTNER"] - 1.0 / local, 1e-12)
    rates = ScrRates(source="redundancy_encode", app_pfs_write_bytes_per_s=local,
                     cache_write_bytes_per_s=local, encode_bytes_per_s=encode,
                     flush_bytes_per_s=local / 10)
    # flush_scaling 2: the parallel file system's aggregate grows with the nodes, so each
    # node flushes at a tenth of its cache rate at any scale
    return SystemProfile(node_mtbf_s=node_mtbf_s, node_loss_share=loss_share, scr_rates=rates,
                         node_local=StorageTier(path="/dev/shm", write_bytes_per_s=local,
                                                read_bytes_per_s=measured.read),
                         parallel=StorageTier(path="/pfs", write_bytes_per_s=local / 10,
                                              scaling_per_doubling=flush_scaling),
                         rs_arithmetic_bytes_per_s=measured.rs_arithmetic)


def _jobs(local: float):
    """Each profile of the grid, numbered (the seed of its random draws), with its
    checkpoint's bytes per node and the workload the intents are given."""
    for seed, point in enumerate(itertools.product(*GRID.values())):
        nodes, gib = point[0], point[3]
        size = gib * 2.0 ** 30
        yield seed, point, size, WorkloadStats(
            ranks=nodes, hosts=nodes, checkpoints=4, ckpt_bytes=size * nodes,
            ckpt_dur_s=size / local, restore_dur_s=RESTART_S)


def _chosen(intent) -> str:
    """The intent's scheme as its candidates name it (SINGLE+XOR with its cycle)."""
    return intent.scheme + (f"/{intent.xor_every}" if intent.scheme == "SINGLE+XOR" else "")


def compare(measured: Measured) -> list[dict]:
    rows = []
    for seed, (nodes, mtbf, loss, gib), size, stats in _jobs(measured.local):
        profile = _profile(mtbf, loss, measured)
        intent = derive(stats, profile).value
        # each scheme's parallel-file-system copy lags by the flush cadence it was given
        simulated = {c.scheme: simulate(c, stats.ckpt_dur_s,
                                        _scheme_encode_s(c.scheme, measured.per_byte, size), nodes,
                                        intent.set_size, mtbf, loss,
                                        pfs_lag_intervals(c.flush_every), seed)
                     for c in intent.candidates}
        rows.append(_choice_row((nodes, mtbf, loss, gib), _chosen(intent), simulated))
    return rows


def compare_synchronous(measured: Measured) -> list[dict]:
    """A build that flushes only synchronously (no PTHREAD): every scheme simulated flushing
    every k-th checkpoint as the intent set it (the job waits for each flush; a failure the
    cache cannot recover from goes back to the last flushed checkpoint), on profiles whose
    parallel file system scales, as in `compare_cadence`. Also the choice the intents made
    before they weighed each scheme's own flush share (as on a build with PTHREAD), simulated
    the same way."""
    rows = []
    for seed, (nodes, mtbf, loss, gib), size, stats in _jobs(measured.local):
        scaling = _profile(mtbf, loss, measured, flush_scaling=2.0)
        profile = _synchronous(scaling)
        flush = flush_s(stats, profile)
        intent, before = derive(stats, profile).value, derive(stats, scaling).value
        simulated = {c.scheme: _wasted_at(c, c.interval_s, (
            stats.ckpt_dur_s, _scheme_encode_s(c.scheme, measured.per_byte, size), nodes,
            intent.set_size, mtbf, loss, seed), flush) for c in intent.candidates}
        row = _choice_row((nodes, mtbf, loss, gib), _chosen(intent), simulated)
        old = next(c for c in before.candidates if c.scheme == _chosen(before))
        rows.append({**row, "before": old.scheme, "before_waste": _wasted_at(old, old.interval_s, (
            stats.ckpt_dur_s, _scheme_encode_s(old.scheme, measured.per_byte, size), nodes,
            intent.set_size, mtbf, loss, seed), flush)})
    return rows


def _synchronous(profile: SystemProfile) -> SystemProfile:
    """The profile of a build without PTHREAD: every flush synchronous."""
    return msgspec.structs.replace(profile, flush_types=("SYNC",))


def _choice_row(point: tuple, chosen: str, simulated: dict[str, float]) -> dict:
    nodes, mtbf, loss, gib = point
    best = min(simulated, key=simulated.__getitem__)
    return {"nodes": nodes, "node_mtbf_h": mtbf / HOUR_S, "loss_share": loss,
            "per_node_gib": gib, "chosen": chosen, "simulated_best": best,
            "chosen_waste": simulated[chosen], "best_waste": simulated[best],
            "rs_waste": simulated.get("RS"), "xor_waste": simulated.get("XOR")}


def compare_cadence(measured: Measured) -> list[dict]:
    """For SINGLE and PARTNER on every profile: the flush cadence the intent gave the scheme
    against the simulated best of every cadence the intent may set (1 to 10, at most a day of
    segments), each flush synchronous at the intent's flush time."""
    rows = []
    for seed, (nodes, mtbf, loss, gib), size, stats in _jobs(measured.local):
        profile = _profile(mtbf, loss, measured, flush_scaling=2.0)
        intent = derive(stats, profile).value
        flush = flush_s(stats, profile)
        for candidate in intent.candidates:
            if candidate.scheme not in ("SINGLE", "PARTNER"):
                continue
            encode = _scheme_encode_s(candidate.scheme, measured.per_byte, size)
            segment = candidate.interval_s + stats.ckpt_dur_s + encode
            most = max(1, min(MAX_FLUSH_EVERY, int(MAX_SECONDS // segment)))
            wastes = {k: simulate_flushes(candidate, stats.ckpt_dur_s, encode, flush, k, nodes,
                                          intent.set_size, mtbf, loss, seed)
                      for k in range(1, most + 1)}
            best = min(wastes, key=wastes.__getitem__)
            # the rule before (issue 48): every storage loss weighed as needing the flush
            before = flush_every(stats, profile, candidate.interval_s)
            rows.append({"nodes": nodes, "node_mtbf_h": mtbf / HOUR_S, "loss_share": loss,
                         "per_node_gib": gib, "scheme": candidate.scheme, "flush_s": flush,
                         "chosen_every": candidate.flush_every, "best_every": best,
                         "chosen_waste": wastes[candidate.flush_every],
                         "best_waste": wastes[best], "before_every": before,
                         "before_waste": wastes[before]})
    return rows


INTERVAL_FACTORS = (0.25, 0.35, 0.5, 0.71, 1.0, 1.41, 2.0, 2.83, 4.0)


def compare_interval(measured: Measured, synchronous: bool = False) -> list[dict]:
    """For every profile where the recommendation caches: the job simulated with its chosen
    scheme and flush cadence at the interval SCR_CHECKPOINT_SECONDS sets, at multiples of it
    (a factor sqrt(2) apart), and at the rule before (Daly's for the measured checkpoint,
    without the scheme's encode). `synchronous`: on a build without PTHREAD, each flush
    simulated as the job waits for it (as in `compare_synchronous`), and the rule before is
    the interval set before each scheme's flush share was weighed."""
    rows = []
    for seed, (nodes, mtbf, loss, gib), size, stats in _jobs(measured.local):
        scaling = _profile(mtbf, loss, measured, flush_scaling=2.0 if synchronous else 1.0)
        profile = _synchronous(scaling) if synchronous else scaling
        if not caches(stats, profile):
            continue
        intent = derive(stats, profile).value
        chosen = _chosen(intent)
        candidate = next(c for c in intent.candidates if c.scheme == chosen)
        encode = _scheme_encode_s(chosen, measured.per_byte, size)
        chosen_s = float(derive_interval(stats, profile).value.checkpoint_seconds)
        flush = flush_s(stats, profile) if synchronous else None
        before_s = float(derive_interval(stats, scaling).value.checkpoint_seconds) \
            if synchronous else recommended_interval_s(daly(stats.ckpt_dur_s, mtbf / nodes))
        job = (stats.ckpt_dur_s, encode, nodes, intent.set_size, mtbf, loss, seed)
        tried = {at: _wasted_at(candidate, at, job, flush)
                 for at in [chosen_s * factor for factor in INTERVAL_FACTORS] + [before_s]}
        best = min(tried, key=tried.__getitem__)
        rows.append({"nodes": nodes, "node_mtbf_h": mtbf / HOUR_S, "loss_share": loss,
                     "per_node_gib": gib, "scheme": chosen, "chosen_s": chosen_s,
                     "chosen_waste": tried[chosen_s], "best_s": best,
                     "best_waste": tried[best], "before_s": before_s,
                     "before_waste": tried[before_s]})
    return rows


def _wasted_at(candidate: Candidate, at_s: float, job: tuple, flush_s: float | None) -> float:
    """The candidate simulated at another interval: with its synchronous flushes where
    `flush_s` is given, else with its parallel-file-system copy lagging by its cadence."""
    moved = msgspec.structs.replace(candidate, interval_s=at_s)
    cost_s, encode_s, nodes, set_size, mtbf_s, loss, seed = job
    if flush_s is None:
        return simulate(moved, cost_s, encode_s, nodes, set_size, mtbf_s, loss,
                        pfs_lag_intervals(candidate.flush_every), seed)
    return simulate_flushes(moved, cost_s, encode_s, flush_s, candidate.flush_every, nodes,
                            set_size, mtbf_s, loss, seed)


def _row(row: dict) -> str:
    return (f"{row['nodes']} nodes, node MTBF {row['node_mtbf_h']:g} h, {row['loss_share']:.0%} "
            f"lose storage, {row['per_node_gib']} GiB/node: chose {row['chosen']} "
            f"(waste {row['chosen_waste']:.1%}), simulated best {row['simulated_best']} "
            f"({row['best_waste']:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encode", default=os.path.join(os.path.dirname(__file__), "results",
                                                         "redundancy_encode.json"))
    parser.add_argument("--json", help="write every profile's row here")
    parser.add_argument("--cadence-json", help="write every flush-cadence row here")
    parser.add_argument("--interval-json", help="write every checkpoint-interval row here")
    parser.add_argument("--sync-json", help="write every row of a SYNC-only build here")
    parser.add_argument("--sync-interval-json",
                        help="write every checkpoint-interval row of a SYNC-only build here")
    args = parser.parse_args()
    measured = measured_rates(args.encode)
    rows = compare(measured)
    # common random numbers: a difference under 2% of the waste is within the noise
    worse = [r for r in rows if r["chosen_waste"] > r["best_waste"] * 1.02 + 1e-4]
    # where even the best scheme wastes half the job, failures come faster than checkpoints
    # and restarts: the job's problem is not its redundancy (`scrtune interval` says so)
    hopeless = [r for r in worse if r["best_waste"] >= HOPELESS_WASTE]
    worse = [r for r in worse if r["best_waste"] < HOPELESS_WASTE]
    rs_best = [r for r in rows if r["simulated_best"] == "RS"]
    rs_chosen = [r for r in rows if r["chosen"] == "RS"]
    print(f"{len(rows)} profiles; encode per GiB: " + ", ".join(
        f"{k} {v * 2 ** 30:.2f} s" for k, v in measured.per_byte.items()) +
        f"; node-local write {measured.local / 2 ** 30:.2f} GiB/s, read "
        f"{measured.read / 2 ** 30:.2f} GiB/s, RS arithmetic "
        + (f"{measured.rs_arithmetic / 1e9:.2f} GB/s" if measured.rs_arithmetic
           else "not measured"))
    print(f"intent's choice worse than the simulated best beyond noise: {len(worse)}; "
          f"more where the best still wastes {HOPELESS_WASTE:.0%} or more: {len(hopeless)}")
    for row in worse + hopeless:
        print(f"  {_row(row)}")
    print(f"RS the simulated best: {len(rs_best)}; RS chosen: {len(rs_chosen)}")
    for row in rs_best + rs_chosen:
        print(f"  {_row(row)}")
    cadence = compare_cadence(measured)
    late = _beyond_noise(cadence, "chosen_waste")
    before = _beyond_noise(cadence, "before_waste")
    print(f"flush cadence, SINGLE and PARTNER on {len(cadence) // 2} profiles whose parallel "
          f"file system scales: the intent's worse than the simulated best beyond noise: "
          f"{len(late)}; every storage loss weighed as fatal (the rule before): {len(before)}")
    for row in late:
        print(f"  {_cadence_row(row)}")
    intervals = compare_interval(measured)
    off = _report_interval(intervals, "checkpoint interval", "SCR_CHECKPOINT_SECONDS worse",
                           "Daly's for the checkpoint without its encode (the rule before)", "")
    synchronous = _report_synchronous(measured)
    for path, written in ((args.json, rows), (args.cadence_json, cadence),
                          (args.interval_json, intervals), (args.sync_json, synchronous.rows),
                          (args.sync_interval_json, synchronous.intervals)):
        if path:
            with open(path, "w") as handle:
                json.dump(written, handle, indent=1)
    sys.exit(1 if worse or late or off or synchronous.off else 0)


@dataclass(frozen=True)
class SynchronousReport:
    rows: list[dict]  # each profile's scheme choice against the simulation
    intervals: list[dict]  # each caching profile's interval against the simulation
    off: list[dict]  # the rows of either beyond noise


def _report_synchronous(measured: Measured) -> SynchronousReport:
    """A build without PTHREAD: each scheme's choice and the interval set, against the
    simulation with the job waiting for every flush, printed."""
    rows = compare_synchronous(measured)
    worse = _beyond_noise(rows, "chosen_waste")
    print(f"a build that flushes only synchronously, {len(rows)} profiles whose parallel file "
          f"system scales: the intent's choice worse than the simulated best beyond noise: "
          f"{len(worse)}; the choice before each scheme's flush share was weighed: "
          f"{len(_beyond_noise(rows, 'before_waste'))}; where the best wastes "
          f"{HOPELESS_WASTE:.0%} or more: "
          f"{sum(r['best_waste'] >= HOPELESS_WASTE for r in rows)}")
    for row in worse:
        print(f"  {_row(row)}")
    intervals = compare_interval(measured, synchronous=True)
    off = _report_interval(intervals, "  its checkpoint interval", "worse",
                           "the interval set before", "  ")
    return SynchronousReport(rows, intervals, worse + off)


def _report_interval(intervals: list[dict], heading: str, chosen: str, before: str,
                     indent: str) -> list[dict]:
    """The interval set against the simulated best: the profiles beyond noise, printed."""
    off = _beyond_noise(intervals, "chosen_waste")
    print(f"{heading}, on {len(intervals)} profiles where the recommendation caches: {chosen} "
          f"than the simulated best beyond noise: {len(off)}; {before}: "
          f"{len(_beyond_noise(intervals, 'before_waste'))}")
    for row in off:
        print(f"{indent}  {_interval_said(row)}")
    return off


def _beyond_noise(rows: list[dict], waste: str) -> list[dict]:
    return [r for r in rows if r["best_waste"] < HOPELESS_WASTE
            and r[waste] > r["best_waste"] * 1.02 + 1e-4]


def _cadence_row(row: dict) -> str:
    return (f"{row['scheme']}, {row['nodes']} nodes, node MTBF {row['node_mtbf_h']:g} h, "
            f"{row['loss_share']:.0%} lose storage, {row['per_node_gib']} GiB/node: flush every "
            f"{row['chosen_every']} (waste {row['chosen_waste']:.1%}), simulated best every "
            f"{row['best_every']} ({row['best_waste']:.1%})")


def _interval_said(row: dict) -> str:
    return (f"{row['scheme']}, {row['nodes']} nodes, node MTBF {row['node_mtbf_h']:g} h, "
            f"{row['loss_share']:.0%} lose storage, {row['per_node_gib']} GiB/node: every "
            f"{row['chosen_s']:.0f} s (waste {row['chosen_waste']:.2%}), simulated best every "
            f"{row['best_s']:.0f} s ({row['best_waste']:.2%})")


if __name__ == "__main__":
    main()
