"""Aggregated traces (DFTRACER_ENABLE_AGGREGATION=1): checkpoints counted from `ph:3` region
records, with their durations, and said to lack per-checkpoint detail. They once replayed as
"none found" and a goodput of 0%."""

from __future__ import annotations

import gzip
import json

import msgspec

from scrtune.engine.replay import ReplayOptions, replay
from scrtune.engine.stats import Stats
from scrtune.engine.summary import finish
from tests.conftest import only_file

TRACE = only_file("v2_aggregated")


def _records(name: str) -> list[dict]:
    with gzip.open(TRACE, "rt") as handle:
        return [r for r in map(json.loads, handle) if r.get("name") == name and r["ph"] == 3]


def test_saves_and_loads_are_counted_with_their_durations() -> None:
    summary = replay([TRACE], ReplayOptions(workers=1))
    saves, loads = _records("checkpoint.save"), _records("checkpoint.load")
    assert len(summary.checkpoints) == sum(r["args"]["dft_cnt"] for r in saves) == 4
    assert len(summary.restores) == sum(r["args"]["dft_cnt"] for r in loads) == 4
    # the outer `checkpoint.save`, not its parts (`checkpoint.save.model`, ...)
    assert sorted(c.dur_us for c in summary.checkpoints) == sorted(r["args"]["dur"]
                                                                 for r in saves)
    assert {c.found_by for c in summary.checkpoints + summary.restores} == {"aggregated"}
    assert {c.name for c in summary.checkpoints} == {"checkpoint.save"}
    assert len(summary.intervals) == 3
    assert any("aggregated regions" in w and "bytes, files" in w for w in summary.warnings)


def test_saves_and_loads_of_one_window_do_not_overlap() -> None:
    summary = replay([TRACE], ReplayOptions(workers=1))
    spans = sorted((c.start_us, c.start_us + c.dur_us)
                   for c in summary.checkpoints + summary.restores)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_goodput_of_an_aggregated_trace(run_cli) -> None:
    result = run_cli("goodput", TRACE, "--format", "json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["goodput_pct"] > 0 and not body["errors"]
    assert body["badput_s"]["checkpoint_save"] > 0.5  # four saves of about 0.15 s


def test_aggregated_counts_survive_serialisation() -> None:
    stats = Stats()
    from scrtune.engine.replay import read_file

    read_file(stats, TRACE)
    again = Stats.from_bytes(stats.to_bytes())
    assert msgspec.to_builtins(finish(again)) == msgspec.to_builtins(finish(stats))
