"""What SCR's bypass adds to writing the same files straight to the parallel file system
(issue 48: the study saw bypass block seconds longer per checkpoint than the application
writing straight to Lustre; the model charged a few metadata calls).

    SCRTUNE_SCR_PREFIX=~/.cache/scrtune-real-scr/3.1.0 python benchmarks/bypass_direct.py

Two ranks on two fake nodes (benchmarks/real_scr_tuning.py's Bench) run the checkpointing job
of benchmarks/scr_ckpt_app.py under SCR with SCR_CACHE_BYPASS=1 (SCR v3's default), and with
--direct: the same files written straight to the directory without SCR, each checkpoint ended
by a barrier as SCR_Complete_output is. The runs alternate in a shuffled order. The direct job
is also traced by the real tracer, and `scrtune profile` measures the directories: from them,
the study's model predicts bypass (uncalibrated: the trace's own write rate at its own scale,
plus SCR's metadata calls per file). Reported: the median blocking time per checkpoint of each,
measured and modelled.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import real_scr_tuning  # noqa: E402 - beside this script

from scrtune.cli.study_cmd import read_workload  # noqa: E402
from scrtune.intents.inputs import load_profile  # noqa: E402
from scrtune.study.model import Config, machine, predict  # noqa: E402

BYPASS = real_scr_tuning.GridConfig({"SCR_CACHE_BYPASS": "1"})


def _modelled(trace: str, profile_path: str) -> dict[str, float]:
    profile = load_profile(profile_path)
    load, costs, metadata_s = read_workload([trace], profile, "validate")
    box = machine(profile, costs, metadata_s or 20e-6, traced=load)
    bypass = predict(load, box, Config(bypass=True), real_scr_tuning.RANKS, 1)
    untraced = predict(load, machine(profile, costs, metadata_s or 20e-6), Config(bypass=True),
                       real_scr_tuning.RANKS, 1)
    return {"bypass_s": bypass.blocking_s, "bypass_profile_rate_s": untraced.blocking_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--compute-s", type=float, default=0.5)
    parser.add_argument("--pfs", default=os.path.join(HERE, "work", "pfs"))
    parser.add_argument("--pfs-call-us", type=int, default=0)
    parser.add_argument("--json", default=os.path.join(HERE, "results", "bypass_direct.json"))
    args = parser.parse_args()
    args.app_args = ["--steps", str(args.steps), "--compute-s", str(args.compute_s)]
    os.makedirs(args.pfs, exist_ok=True)
    direct_args = copy.copy(args)
    direct_args.app_args = [*args.app_args, "--direct"]
    benches = {"bypass": real_scr_tuning.Bench(args),
               "direct": real_scr_tuning.Bench(direct_args)}
    work = os.path.abspath(os.path.splitext(args.json)[0])
    os.makedirs(work, exist_ok=True)
    profile = real_scr_tuning.measure_profile(benches["bypass"], os.path.join(work, "sys.toml"),
                                              time_s=10)
    trace = os.path.join(work, "trace")
    shutil.rmtree(trace, ignore_errors=True)
    os.makedirs(trace)
    benches["direct"].run(BYPASS, trace=trace)  # BYPASS's env is not read without SCR
    runs: dict[str, list[float]] = {name: [] for name in benches}
    order = list(benches)
    for rep in range(args.reps):
        random.Random(rep).shuffle(order)
        for name in order:
            runs[name] += benches[name].run(BYPASS)["per_checkpoint_s"]
            print(f"rep {rep + 1}/{args.reps} {name}", file=sys.stderr)
    median = {name: statistics.median(times) for name, times in runs.items()}
    modelled = _modelled(trace, profile)
    print(f"{real_scr_tuning.RANKS} ranks on 2 fake nodes, {args.steps} checkpoints a run, "
          f"{args.reps} runs each, pfs call cost {args.pfs_call_us} us; "
          f"{real_scr_tuning._machine()}")
    print(f"blocking per checkpoint, median: direct {median['direct']:.3f} s, SCR bypass "
          f"{median['bypass']:.3f} s (+{median['bypass'] - median['direct']:.3f} s); model's "
          f"bypass {modelled['bypass_s']:.3f} s from the direct trace's own rate, "
          f"{modelled['bypass_profile_rate_s']:.3f} s from the profile's rate alone")
    with open(args.json, "w") as handle:
        json.dump({"machine": real_scr_tuning._machine(), "app_args": args.app_args,
                   "pfs_call_us": args.pfs_call_us, "per_checkpoint_s": runs,
                   "median_s": median, "modelled_s": modelled,
                   "profile": os.path.relpath(profile, os.path.dirname(HERE)),
                   "trace": os.path.relpath(trace, os.path.dirname(HERE))}, handle, indent=1)
    for bench in benches.values():
        shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
