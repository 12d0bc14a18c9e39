"""The study's model against the real-SCR grid: as shipped, and calibrated with leave-one-out.

    python benchmarks/study_calibration.py [benchmarks/results/real_scr_grid.json]

Reads what benchmarks/real_scr_tuning.py measured (every configuration's blocking time per
checkpoint, medians of its repetitions) and the trace and profile it used. Two predictions per
configuration:

- shipped: `scrtune study`'s model (scrtune/study/model.py) with the measured profile and the
  trace's own call costs;
- calibrated: the same structure, with its rates fitted to the other configurations only
  (leave-one-out), in relative (log) error:
    bypass     B / app_write_bps                                   (the client's page cache)
    cache      B / local_bps + encode + flush blocking + per-checkpoint overhead
    encode     PARTNER B / net_bps; XOR B / net_bps + B / local_bps
    flush      F x ceil(file / SCR_FILE_BUF_SIZE) x call_s + B / flush_bps
    blocking   sync every k: flush / k; async: max(0, flush x slowdown - compute x k) / k
Printed: per configuration measured, shipped and calibrated seconds with their errors; the
median errors and the rank correlation (Spearman) of each model with the measurements.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import spearmanr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from scrtune.engine.replay import ReplayOptions, new_stats, read_files  # noqa: E402
from scrtune.engine.summary import finish  # noqa: E402
from scrtune.events.reader import expand_paths  # noqa: E402
from scrtune.intents.inputs import WorkloadStats, load_profile  # noqa: E402
from scrtune.scr_config.values import byte_count  # noqa: E402
from scrtune.study.calibrate import calibrate  # noqa: E402
from scrtune.study.model import Config, machine, predict  # noqa: E402

NODES, RANKS_PER_NODE = 2, 1
PARAMS = ("app_write_bps", "local_bps", "net_bps", "flush_bps", "call_s", "slowdown",
          "overhead_s")
START = np.log([1e9, 3e9, 5e9, 8e8, 1e-3, 2.0, 0.05])


def config_of(env: dict[str, str]) -> Config:
    """The study's Config for a grid environment (SCR's defaults where it says nothing)."""
    return Config(copy_type=env.get("SCR_COPY_TYPE", "XOR"),
                  bypass=env.get("SCR_CACHE_BYPASS", "1") == "1",
                  file_buf_bytes=byte_count(env.get("SCR_FILE_BUF_SIZE", "32MB")),
                  flush_async=env.get("SCR_FLUSH_ASYNC", "0") == "1",
                  threads_on_idle_cores=False,  # each fake node's only core computes
                  flush_every=int(env.get("SCR_FLUSH", "10")))


def calibrated(theta: np.ndarray, config: Config, load: WorkloadStats, compute_s: float
               ) -> float:
    app_bps, local_bps, net_bps, flush_bps, call_s, slowdown, overhead_s = np.exp(theta)
    per_rank = load.ckpt_bytes / load.ranks
    if config.bypass:
        return per_rank / app_bps
    files = max(load.ckpt_files / load.ranks, 1.0)
    encode = {"SINGLE": 0.0, "PARTNER": per_rank / net_bps,
              "XOR": per_rank / net_bps + per_rank / local_bps}.get(config.copy_type, 0.0)
    calls = files * math.ceil(per_rank / files / config.file_buf_bytes)
    flush = calls * call_s + per_rank / flush_bps
    every = max(config.flush_every, 1)
    waits = max(0.0, flush * slowdown - compute_s * every) if config.flush_async else flush
    return per_rank / local_bps + encode + waits / every + overhead_s


def fit(rows: list[tuple[Config, float]], load: WorkloadStats, compute_s: float) -> np.ndarray:
    def residuals(theta: np.ndarray) -> np.ndarray:
        return np.array([math.log(max(calibrated(theta, c, load, compute_s), 1e-6) / m)
                         for c, m in rows])

    return least_squares(residuals, START, loss="soft_l1").x


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results",
                                                              "real_scr_grid.json")
    with open(path) as handle:
        grid = json.load(handle)
    root = os.path.dirname(HERE)  # the paths in the file are the repository's
    profile = load_profile(os.path.join(root, grid["profile"]))
    stats = new_stats(ReplayOptions())
    read_files(stats, expand_paths([os.path.join(root, grid["trace"])]))
    costs = calibrate(stats, {profile.node_local.path: "local", profile.parallel.path: "pfs"})
    load = WorkloadStats.from_summary(finish(stats))
    steps = len(next(iter(grid["runs"].values()))[0]["per_checkpoint_s"])
    compute_s = float(grid["compute_s"])
    box = machine(profile, costs)
    measured = {name: statistics.median(r["blocking_s"] for r in runs) / steps
                for name, runs in grid["runs"].items()}
    configs = {name: config_of(grid["configs"][name]["env"]) for name in measured}
    shipped = {name: predict(load, box, configs[name], NODES, RANKS_PER_NODE).blocking_s
               for name in measured}
    loo = {}
    for name in measured:
        others = [(configs[o], measured[o]) for o in measured if o != name]
        loo[name] = calibrated(fit(others, load, compute_s), configs[name], load, compute_s)
    everything = fit([(configs[n], measured[n]) for n in measured], load, compute_s)
    print(f"machine: {grid['machine']}; {len(measured)} configurations, blocking seconds per "
          f"checkpoint (median of {len(next(iter(grid['runs'].values())))} runs)\n")
    print("| configuration | measured s | shipped model s | error | calibrated (LOO) s | error |")
    print("|---|---:|---:|---:|---:|---:|")

    def error(p: float, m: float) -> float:
        return abs(p - m) / m

    for name in sorted(measured, key=measured.get):
        m = measured[name]
        print(f"| {name} | {m:.3f} | {shipped[name]:.3f} | {100 * error(shipped[name], m):.0f}%"
              f" | {loo[name]:.3f} | {100 * error(loo[name], m):.0f}% |")
    for label, predicted in (("shipped", shipped), ("calibrated, leave-one-out", loo)):
        errors = [error(predicted[n], measured[n]) for n in measured]
        rho = spearmanr([measured[n] for n in measured], [predicted[n] for n in measured])[0]
        print(f"\n{label}: median error {100 * statistics.median(errors):.0f}%, largest "
              f"{100 * max(errors):.0f}%, rank correlation {rho:.2f}")
    print("\nfitted on all: " + ", ".join(f"{k} {v:.3g}" for k, v in
                                          zip(PARAMS, np.exp(everything))))


if __name__ == "__main__":
    main()
