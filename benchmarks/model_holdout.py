"""Does the calibrated model hold on configurations it was not fitted to? (issue 48)

    python benchmarks/model_holdout.py [--runs benchmarks/results/real_scr_grid.json]

The runs: the real SCR v3.1.0 on this machine, one job under every configuration of a grid
(benchmarks/real_scr_tuning.py: copy type x file buffer x flush type, cadence and transfer-
thread binding, and bypass), each timed per checkpoint, with SCR_DEBUG's flush times. They are
split into groups of configurations that share one dimension's value (all PARTNER runs; all
asynchronous flushes with threads bound to the ranks' cores; ...). For each group, the rates
are fitted (`scrtune calibrate`'s fit) to every run outside it, and the group's blocking times
predicted. Reported: per group and over all held-out predictions, the median relative error and
the rank correlation with what was measured; and a constant guess (the median blocking time of
the runs fitted to) on the same group, which the model must beat.
Goals (issue 48): held-out median error <= 25%, rank correlation >= 0.9, better than the
constant on every group.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from scrtune.cli.study_cmd import read_workload  # noqa: E402
from scrtune.intents.inputs import load_profile  # noqa: E402
from scrtune.study import fit as fitting  # noqa: E402


def groups_of(name: str) -> list[str]:
    """The groups a configuration belongs to: its copy type, its flush kind, its buffer."""
    words = name.split()
    if "bypass" in words:
        return ["bypass"]
    if "defaults" in words:
        return ["SCR defaults"]
    if "recommend" in words:
        return ["scrtune's recommendation"]
    copy = next((w for w in words if w in ("SINGLE", "PARTNER", "XOR")), "?")
    buffer = next((w for w in words if w.endswith("MB")), "?")
    flush = " ".join(words[words.index(buffer) + 1:]) if buffer in words else "?"
    return [f"copy {copy}", f"buffer {buffer}", f"flush {flush}"]


def held_out(path: str) -> dict:
    with open(path) as handle:
        grid = json.load(handle)
    profile = load_profile(os.path.join(ROOT, grid["profile"]))
    load, costs, metadata_s = read_workload([os.path.join(ROOT, grid["trace"])], profile,
                                            "validate")
    runs = fitting.load_runs(path)
    rows = fitting.measured(runs, profile)
    blocking_s = fitting.predictor(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                   metadata_s)
    flush_s = fitting.predictor(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                metadata_s, what="flush_s")
    members: dict[str, list] = {}
    for row in rows:
        for group in groups_of(row.name):
            members.setdefault(group, []).append(row)
    report, everything = {}, {}
    for group, inside in sorted(members.items()):
        names = {row.name for row in inside}
        outside = [row for row in rows if row.name not in names]
        rates = fitting.fit_rates(outside, blocking_s, runs.nodes, profile=profile,
                                  flush_s=flush_s)
        constant = statistics.median(row.blocking_s for row in outside)
        predicted = {row.name: blocking_s(rates, row) for row in inside}
        if group.startswith("copy"):  # the copy groups partition the cached runs
            everything.update(predicted)
        report[group] = {
            "runs": len(inside),
            "median_error": _median_error(inside, predicted),
            "constant_error": _median_error(inside, {r.name: constant for r in inside}),
            "rank_correlation": fitting.spearman([r.blocking_s for r in inside],
                                                 [predicted[r.name] for r in inside])
            if len(inside) > 2 else None}
    held = [row for row in rows if row.name in everything]
    return {"runs": path, "groups": report,
            "all_held_out": {"runs": len(held), "median_error": _median_error(held, everything),
                             "rank_correlation": fitting.spearman(
                                 [r.blocking_s for r in held], [everything[r.name] for r in held])}}


def _median_error(rows, predicted: dict[str, float]) -> float:
    return statistics.median(abs(predicted[r.name] - r.blocking_s) / r.blocking_s for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=os.path.join(HERE, "results", "real_scr_grid.json"))
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    report = held_out(args.runs)
    print(f"{'group held out':32} {'runs':>4} {'median error':>12} {'constant':>9} "
          f"{'rank corr':>9}")
    for group, row in report["groups"].items():
        corr = "" if row["rank_correlation"] is None else f"{row['rank_correlation']:.2f}"
        print(f"{group:32} {row['runs']:4} {row['median_error']:12.0%} "
              f"{row['constant_error']:9.0%} {corr:>9}")
    whole = report["all_held_out"]
    print(f"every cached run, its copy type held out: {whole['runs']} runs, median error "
          f"{whole['median_error']:.0%}, rank correlation {whole['rank_correlation']:.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
