"""The job's timeline with its badput segments, and the breakdown, as a PNG (headless).

Times are drawn in the unit the job's length reads best in (s, min, h, days); only the
categories that took time are listed, by their names for people.
"""

from __future__ import annotations

from scrtune.goodput.calculator import BUCKETS, LABELS, Report
from scrtune.units import human_seconds, time_unit

COLORS = {"goodput": "#2ca02c", "checkpoint_save": "#1f77b4", "checkpoint_restore": "#17becf",
          "progress_lost": "#d62728", "restart": "#7f7f7f", "slowdown": "#ff7f0e",
          "startup": "#9467bd", "data_loading": "#8c564b", "custom": "#e377c2",
          "other": "#bbbbbb"}
NAMES = {"goodput": "Effective computation (goodput)", **LABELS}
SIZE_IN = (10.0, 5.0)
DPI = 100


def plot(report: Report, path: str, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on compute nodes
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    unit, per_unit = time_unit(report.total_s)
    figure, (timeline, breakdown) = plt.subplots(
        2, 1, figsize=SIZE_IN, dpi=DPI, gridspec_kw={"height_ratios": [1, 2]})
    origin = report.segments[0].start_s if report.segments else 0.0
    for segment in report.segments:
        timeline.barh(0, (segment.end_s - segment.start_s) / per_unit,
                      left=(segment.start_s - origin) / per_unit,
                      color=COLORS[segment.bucket], edgecolor="none")
    timeline.set_yticks([])
    timeline.set_xlabel(f"time since the job started ({unit})")
    timeline.set_xlim(0, max(report.total_s / per_unit, 1e-9))
    figure.suptitle(f"{title + ': ' if title else ''}goodput {report.goodput_pct:.1f}% of "
                    f"{human_seconds(report.total_s)}")
    shown = [b for b in BUCKETS if report.badput_s[b] > 0]
    names = ["goodput", *shown]
    seconds = [report.effective_s, *(report.badput_s[b] for b in shown)]
    timeline.legend(handles=[Patch(color=COLORS[n], label=NAMES[n]) for n in names],
                    loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(len(names), 4),
                    fontsize=8, frameon=False)
    total = report.total_s or 1.0
    bars = breakdown.barh([NAMES[n] for n in names], [s / per_unit for s in seconds],
                          color=[COLORS[n] for n in names])
    for bar, value in zip(bars, seconds):
        breakdown.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                       f" {human_seconds(value)} ({100 * value / total:.1f}%)", va="center",
                       fontsize=8)
    breakdown.invert_yaxis()
    breakdown.set_xlabel(f"time ({unit})")
    breakdown.set_xlim(0, max(seconds, default=0) / per_unit * 1.3 or 1)
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)
