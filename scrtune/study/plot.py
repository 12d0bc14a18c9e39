"""The study as a picture: predicted blocking checkpoint time and expected loss (100% minus
goodput) against the node count, for the best configurations and bypass, with the node count
from which caching beats writing straight to the parallel file system.

Configurations whose drawn lines coincide at every node count (settings that cannot make a
difference to blocking or goodput) are drawn once, their legend entry saying how many they
stand for.
"""

from __future__ import annotations

from scrtune.study.study import Row, Study
from scrtune.units import human_seconds, plural

TOP = 6
SIZE_IN = (11.0, 6.5)
DPI = 100
STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P")


def _distinct(rows: list[Row]) -> list[tuple[Row, int]]:
    """Rows whose drawn lines coincide merged: (the first such row, how many it stands for).
    What is drawn is blocking and goodput: rows that differ only in their flush time drew one
    line over another, 7 series listed and 5 seen (issue 49)."""
    merged: dict[tuple, list[Row]] = {}
    for row in rows:
        key = tuple((float(f"{p.blocking_s:.4g}"), float(f"{p.goodput:.6g}"))
                    for p in row.predictions)
        merged.setdefault(key, []).append(row)
    return [(group[0], len(group)) for group in merged.values()]


def _chosen(result: Study) -> list[tuple[Row, int]]:
    """The best configurations by goodput at the largest node count, and bypass."""
    distinct = sorted(_distinct(result.rows), key=lambda item: -item[0].predictions[-1].goodput)
    chosen = distinct[:TOP]
    bypass = next((item for item in distinct if item[0].config.bypass), None)
    if bypass is not None and bypass not in chosen:
        chosen.append(bypass)
    return chosen


def _seconds(value: float, _position: int) -> str:
    return human_seconds(value) if value >= 1 else f"{value * 1e3:g} ms"


def plot(result: Study, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    figure, (blocking, goodput) = plt.subplots(1, 2, figsize=SIZE_IN, dpi=DPI)
    for index, (row, count) in enumerate(_chosen(result)):
        label = row.label + (f"  (+{count - 1} drawn the same)" if count > 1 else "")
        style = dict(color="black", linestyle="--", linewidth=2.2, marker="o") \
            if row.config.bypass else dict(linestyle=STYLES[index % len(STYLES)],
                                           marker=MARKERS[index % len(MARKERS)])
        blocking.plot(result.nodes, [p.blocking_s for p in row.predictions], label=label,
                      **style)
        goodput.plot(result.nodes, [100 * (1 - p.goodput) for p in row.predictions], **style)
    for axis in (blocking, goodput):
        axis.set_xscale("log", base=2)
        axis.set_xticks(result.nodes, [str(n) for n in result.nodes])
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("nodes")
        axis.grid(True, which="major", alpha=0.3)
        if result.crossover_nodes:
            axis.axvline(result.crossover_nodes, color="grey", linestyle=":")
    blocking.set_yscale("log")
    blocking.yaxis.set_major_formatter(FuncFormatter(_seconds))
    blocking.yaxis.set_minor_formatter(FuncFormatter(_seconds))
    blocking.tick_params(axis="both", which="both", labelsize=8)  # one size for every label
    blocking.set_ylabel("predicted blocking time per checkpoint")
    blocking.set_title("time the job waits at each checkpoint", fontsize=10)
    # goodput is near 100% for every configuration: its complement, on a log scale, tells them
    # apart (and lower is better in both panels)
    goodput.set_yscale("log")
    goodput.set_ylabel("expected loss: 100% - goodput")
    goodput.set_title("wall time lost to checkpoints, restarts and lost work", fontsize=10)
    for which in ("major", "minor"):
        getattr(goodput.yaxis, f"set_{which}_formatter")(
            FuncFormatter(lambda v, _p: f"{v:.2g}%"))
    goodput.tick_params(axis="both", which="both", labelsize=8)
    crossover = (f"caching blocks less than bypass from {plural(result.crossover_nodes, 'node')} "
                 "(dotted line)" if result.crossover_nodes else
                 "bypass blocks less at every node count studied")
    figure.suptitle(f"SCR configurations predicted for this workload, {result.ranks_per_node} "
                    f"ranks per node: {crossover}", fontsize=11)
    figure.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.16, 1, 0.95))
    figure.savefig(path, format="png")
    plt.close(figure)
