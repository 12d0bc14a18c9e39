"""The job's timeline with its badput segments, and the breakdown, as a PNG (headless)."""

from __future__ import annotations

from scrtune.goodput.calculator import BUCKETS, Report

COLORS = {"goodput": "#2ca02c", "checkpoint_save": "#1f77b4", "checkpoint_restore": "#17becf",
          "progress_lost": "#d62728", "restart": "#7f7f7f", "slowdown": "#ff7f0e",
          "startup": "#9467bd", "data_loading": "#8c564b", "custom": "#e377c2",
          "other": "#dddddd"}
SIZE_IN = (10.0, 4.0)
DPI = 100


def plot(report: Report, path: str, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on compute nodes
    import matplotlib.pyplot as plt

    figure, (timeline, breakdown) = plt.subplots(
        2, 1, figsize=SIZE_IN, dpi=DPI, gridspec_kw={"height_ratios": [1, 2]})
    origin = report.segments[0].start_s if report.segments else 0.0
    for segment in report.segments:
        timeline.barh(0, (segment.end_s - segment.start_s) / 60, left=(segment.start_s - origin)
                      / 60, color=COLORS[segment.bucket], edgecolor="none")
    timeline.set_yticks([])
    timeline.set_xlabel("minutes since the job started")
    timeline.set_title(title or f"goodput {report.goodput_pct:.1f}%")
    names = ["goodput", *BUCKETS]
    seconds = [report.effective_s, *(report.badput_s[b] for b in BUCKETS)]
    total = report.total_s or 1.0
    bars = breakdown.barh(names, [s / 60 for s in seconds], color=[COLORS[n] for n in names])
    for bar, value in zip(bars, seconds):
        breakdown.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                       f" {value / 60:.1f} min ({100 * value / total:.1f}%)", va="center",
                       fontsize=8)
    breakdown.invert_yaxis()
    breakdown.set_xlabel("minutes")
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)
