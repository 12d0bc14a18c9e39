"""A held-out report of benchmarks/model_holdout.py: issue 48's goals, and the report printed
for people (model_holdout.py --json writes it for scripts; holdout_sweep.py scores it)."""

from __future__ import annotations

# issue 48's goals: held out, the median error at most this, the rank correlation at least
# this, and no group lost (`groups_lost`)
MAX_MEDIAN_ERROR = 0.25
MIN_RANK_CORRELATION = 0.9


def groups_lost(groups: dict[str, dict]) -> list[str]:
    """The groups of a report where the constant guess is as good as the model or better
    (a group too small to fit has no figures and is not counted)."""
    return [group for group, row in groups.items()
            if "median_error" in row and row["median_error"] >= row["constant_error"]]


def print_transferred(report: dict) -> None:
    print(f"{report['cached_runs']} cached runs of {report['runs']}, predicted with the rates "
          f"fitted to every run of {report['calibrated_on']}:")
    for name in ("calibrated", "profile_alone"):
        print(f"  {name.replace('_', ' '):13} median error {report[name]['median_error']:.0%}, "
              f"rank correlation {report[name]['rank_correlation']:.2f}")
    print(f"  a constant guess (the median of the runs fitted to): median error "
          f"{report['constant_error']:.0%}")


def print_held_out(report: dict) -> None:
    print(f"{'group held out':32} {'runs':>4} {'median error':>12} {'constant':>9} "
          f"{'rank corr':>9} {'runs agree':>10} {'spread':>6} {'floor':>5}")
    for group, row in report["groups"].items():
        if "median_error" not in row:
            print(f"{group:32} {row['runs']:4}  too few configurations outside it to fit "
                  f"({row['fitted_to']})")
            continue
        print(f"{group:32} {row['runs']:4} {row['median_error']:12.0%} "
              f"{row['constant_error']:9.0%} {_figure(row['rank_correlation']):>9} "
              f"{_figure(row['repeatability']):>10} {_share(row['spread']):>6} "
              f"{_share(row['one_value_floor'] or None):>5}")
    whole = report["all_held_out"]
    print(f"every cached run, its copy type held out: {whole['runs']} runs, median error "
          f"{whole['median_error']:.0%}, rank correlation {whole['rank_correlation']:.2f} "
          f"(fitted to every run, the model's form ranks them "
          f"{whole['form_rank_correlation']:.2f}; the runs agree with themselves to "
          f"{_figure(whole['repeatability'])}; a run lies {_share(whole['spread'])} from its "
          "configuration's median)")
    halves = whole.get("against_halves")
    if halves:
        classed = halves.get("class_means_rank")
        print(f"against the rest of the runs, split {halves['splits']} ways: the model ranks "
              f"them {halves['model_rank']:.2f}, the other runs of the same configurations "
              f"{halves['repeat_rank']:.2f}"
              + ("" if classed is None else
                 f", each copy type and flush kind's mean from those runs {classed:.2f}"))
    perfect = whole.get("without_error")
    if perfect:
        print(f"a model without error would rank these runs {perfect['median_rank']:.2f} "
              f"(10th-90th percentile {perfect['low_rank']:.2f}-{perfect['high_rank']:.2f} "
              f"over {perfect['draws']} draws of the runs' own noise)")
    others = whole.get("against_others")
    if others:
        _print_against_others(others)
    elif "against_others" in whole:
        print("against the other grids: fewer than three configurations in common")


def _print_against_others(others: dict) -> None:
    groups = others["groups"]
    lost = [f"{group} ({groups[group]['median_error']:.0%} against "
            f"{groups[group]['constant_error']:.0%})" for group in groups_lost(groups)]
    print(f"against the {others['grids']} other grids of this job ({others['configurations']} "
          f"configurations, {others['runs_a_configuration']:.0f} runs of each): the model "
          f"ranks them {others['model_rank']:.2f}, this grid's own runs "
          f"{others['own_runs_rank']:.2f}; median error {others['median_error']:.0%}; "
          + ("better than the constant on every group" if not lost else
             "the constant as good or better on " + ", ".join(lost)))
    apart = others.get("grids_another_day")
    if apart:
        print(f"{apart} of the {others['grids']} other grids measured on another day than "
              "this one: the machine's shift between days counts as the model's error here")


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"
