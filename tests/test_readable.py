"""What a person reads: tables within 100 columns, long lists cut short, units and numbers in
words that read right."""

from __future__ import annotations

import json
import os

import pytest

from scrtune.units import human_bytes, human_seconds, ordinal, plural, ranges
from tests.conftest import DATA
from tests.tracing.largetrace import build

FOLDERS = sorted(d for d in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, d)))


@pytest.mark.parametrize("folder", FOLDERS)
@pytest.mark.parametrize("command", ["replay", "recommend", "study", "goodput"])
def test_tables_fit_in_100_columns(run_cli, folder, command) -> None:
    result = run_cli(command, os.path.join(DATA, folder))
    if result.returncode == 2:  # e.g. nothing to study in a trace without checkpoints
        assert "Traceback" not in result.stderr
        assert result.stderr.splitlines()[-1].startswith(f"scrtune {command}: error: ")
        return
    widest = max(result.stdout.splitlines(), key=len)
    assert len(widest) <= 100, widest
    # and a table fits by itself: fit() must never have to break a table's header row
    for header in (line for line in result.stdout.splitlines() if line.startswith("#  ")):
        assert header.split()[-1] in ("sizes", "share", "evidence", "bandwidth"), header


def test_long_checkpoint_lists_show_first_and_last_unless_verbose(run_cli, tmp_path) -> None:
    trace = tmp_path / "long-app.pfw"
    build(os.path.join(DATA, "v2_python_api", os.listdir(os.path.join(DATA, "v2_python_api"))[0]),
          str(trace), 20_000)
    total = len(json.loads(run_cli("replay", str(trace), "--format", "json").stdout)
                ["checkpoints"])
    assert total > 20
    short = run_cli("replay", str(trace)).stdout
    assert f"checkpoints (saves): {total:,}" in short
    assert f"{total - 10:,} more (-v lists all)" in short
    rows = [line for line in short.splitlines() if line[:1].isdigit()]
    assert [r.split()[0] for r in rows[:10]] == [str(i) for i in range(5)] + \
        [str(i) for i in range(total - 5, total)]
    full = run_cli("replay", str(trace), "-v").stdout
    assert "more (-v lists all)" not in full
    assert sum(1 for line in full.splitlines() if line[:1].isdigit()) >= total


def test_recommend_table_shows_the_flush_cadence_json_gives(run_cli, tmp_path) -> None:
    profile = tmp_path / "big.toml"
    profile.write_text("nodes = 64\n[node_local]\npath = \"/l/ssd\"\nwrite_bytes_per_s = 2e10\n"
                       "[parallel]\npath = \"/p/scratch\"\nwrite_bytes_per_s = 1e6\n"
                       "scaling_per_doubling = 1.0\n")
    trace = os.path.join(DATA, "v2_python_api")
    body = json.loads(run_cli("recommend", trace, "--system", str(profile), "--format",
                              "json").stdout)
    every = next(a for a in body["runtime_actions"] if a["kind"] == "flush_every")["every"]
    table = run_cli("recommend", trace, "--system", str(profile)).stdout
    shown = "every checkpoint" if every == 1 else f"every {ordinal(every)} checkpoint"
    assert f"flush_every: {shown}" in table
    assert "flush_every: 0" not in table


def test_units_and_words() -> None:
    assert ranges([8, 9, 10, 47, 11, 3, 0, 1]) == "0-1, 3, 8-11, 47"
    assert ranges(range(8, 48)) == "8-47"
    assert plural(1, "run") == "1 run" and plural(2, "run") == "2 runs"
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 22, 101)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "22nd", "101st"]  # not "2th"
    assert plural(3, "process", "processes") == "3 processes"
    assert human_bytes(3 << 30) == "3.0 GiB" and human_bytes(512) == "512 B"
    assert human_seconds(5) == "5.00 s" and human_seconds(7200) == "2.0 h"
    assert human_seconds(5 * 86400) == "5.0 days"


def _texts(figure) -> list[str]:
    texts = [t.get_text() for t in figure.findobj(lambda o: hasattr(o, "get_text"))]
    return [t for t in texts if t]


def test_study_plot_tells_its_story(tmp_path, monkeypatch) -> None:
    """No title, 2^k ticks, 6x10^-1 labels, identical rows on top of each other and no
    crossover: each is checked on the figure itself."""
    pytest.importorskip("matplotlib")
    import subprocess

    import matplotlib.pyplot as plt
    import msgspec

    from scrtune.study import plot as study_plot
    from scrtune.study.study import Study
    from tests.conftest import SCRTUNE

    out = subprocess.run([*SCRTUNE, "study", "--example", "--format", "json"],
                         capture_output=True, check=True).stdout
    result = msgspec.json.decode(out, type=Study)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at
    study_plot.plot(result, str(tmp_path / "s.png"))
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    texts = _texts(figures[0])
    assert any("caching blocks less than bypass" in t or "bypass blocks less" in t for t in texts)
    ticks = [t.get_text() for t in figures[0].axes[0].get_xticklabels()]
    assert ticks == [str(n) for n in result.nodes]
    assert not any("^" in t or "times" in t for t in texts)  # no 2^1 or 6x10^-1
    legend = {t for t in texts if t.startswith(("cache", "bypass"))}
    distinct = study_plot._distinct(result.rows)
    assert len(legend) == len(study_plot._chosen(result)) <= len(distinct)
    assert sum(count for _, count in distinct) == len(result.rows)
    # every series listed is seen: no two draw the same lines (7 listed, 5 seen: issue 49)
    drawn = [tuple((float(f"{p.blocking_s:.4g}"), float(f"{p.goodput:.6g}"))
                   for p in row.predictions) for row, _ in study_plot._chosen(result)]
    assert len(set(drawn)) == len(drawn)
    sizes = {label.get_fontsize() for axis in figures[0].axes
             for label in axis.get_xticklabels(which="both") + axis.get_yticklabels(which="both")
             if label.get_text()}
    assert len(sizes) == 1, sizes  # one size for every tick label


def test_goodput_plot_reads_in_the_unit_of_the_job(tmp_path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from scrtune.goodput.calculator import compute
    from scrtune.goodput.plot import plot
    from tests.test_goodput import PRIMER

    report = compute(PRIMER)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot(report, str(tmp_path / "g.png"), "primer")
    texts = _texts(figures[0])
    assert report.total_s == 200 * 60
    assert any("(h)" in t for t in texts)  # 200 minutes read as 3.3 hours, not 12,000 s
    assert "Checkpoint saving" in texts and "checkpoint_save" not in texts
    assert not any(t.startswith("Job restart") for t in texts) or report.badput_s["restart"]
