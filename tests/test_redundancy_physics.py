"""The redundancy intent against the failure physics, at encode costs measured on the real SCR
(issue 46: "RS is chosen only at node MTBF <= 1 day ... check that this is what the physics
says, with the measured encode costs").

benchmarks/redundancy_encode.py measured SINGLE, PARTNER, XOR and RS through the real SCR v3.1.0
on 4 fake nodes (benchmarks/results/redundancy_encode.json); benchmarks/redundancy_physics.py
simulates failures, restarts and SCR_Init's rebuild for every candidate of the intent over a
grid of 100 profiles. The intent used to read the XOR's cached files at the write rate (XOR
over-predicted 1.85x) and to let storage losses add up over a whole checkpoint segment (SCR
rebuilds in the next SCR_Init): it chose PARTNER where XOR wastes less in 24 of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scrtune.intents.inputs import StorageTier, SystemProfile, WorkloadStats
from scrtune.intents.redundancy import derive, encode_s

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "benchmarks")
MEASURED = os.path.join(BENCH, "results", "redundancy_encode.json")
GIB = 2.0 ** 30


def test_the_intents_choice_is_the_simulated_best_at_measured_encode_costs(tmp_path):
    rows_path, cadence_path = tmp_path / "rows.json", tmp_path / "cadence.json"
    interval_path = tmp_path / "interval.json"
    sync_path, sync_interval_path = tmp_path / "sync.json", tmp_path / "sync_interval.json"
    done = subprocess.run([sys.executable, os.path.join(BENCH, "redundancy_physics.py"),
                           "--encode", MEASURED, "--json", str(rows_path),
                           "--cadence-json", str(cadence_path),
                           "--interval-json", str(interval_path),
                           "--sync-json", str(sync_path),
                           "--sync-interval-json", str(sync_interval_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    _flush_cadence_is_the_simulated_best(json.loads(cadence_path.read_text()))
    _interval_is_the_simulated_best(json.loads(interval_path.read_text()))
    _a_synchronous_flush_share_is_the_simulated_best(
        json.loads(sync_path.read_text()), json.loads(sync_interval_path.read_text()))
    rows = json.loads(rows_path.read_text())
    assert len(rows) == 100
    wrong = [r for r in rows if r["best_waste"] < 0.5
             and r["chosen_waste"] > r["best_waste"] * 1.02 + 1e-4]
    assert wrong == []
    # RS's encode was modelled at half what the real SCR took: where failures come so fast that
    # the best scheme wastes half the job, RS was chosen on 2 profiles where PARTNER or
    # SINGLE+XOR/2 wins
    assert [r for r in rows if r["chosen"] == "RS"
            and r["chosen_waste"] > r["best_waste"] * 1.02 + 1e-4] == []
    # the grid spans the schemes: the check is not won by one scheme everywhere
    assert {r["simulated_best"] for r in rows} >= {"XOR", "PARTNER", "SINGLE+XOR/2"}


def _flush_cadence_is_the_simulated_best(rows: list[dict]) -> None:
    """Issue 48: the flush cadence weighed every storage loss as needing the parallel file
    system's copy, so PARTNER flushed as often as SINGLE, and `study` ranked PARTNER flushing
    every 4th above `recommend`'s every 2nd. Simulated with flush costs and restarts, the
    cadence each scheme is now given is the best within noise; the rule before is worse on
    most PARTNER profiles."""
    def beyond_noise(row: dict, waste: str) -> bool:
        return row["best_waste"] < 0.5 and row[waste] > row["best_waste"] * 1.02 + 1e-4

    assert len(rows) == 200
    assert [r for r in rows if beyond_noise(r, "chosen_waste")] == []
    before = [r for r in rows if beyond_noise(r, "before_waste")]
    assert len(before) >= 30 and {r["scheme"] for r in before} == {"PARTNER"}
    # the schemes' cadences differ, and the simulation agrees: SINGLE flushes more often
    single = {(r["nodes"], r["node_mtbf_h"], r["loss_share"], r["per_node_gib"]): r
              for r in rows if r["scheme"] == "SINGLE"}
    partner = [r for r in rows if r["scheme"] == "PARTNER"]
    assert sum(r["best_every"] > single[(r["nodes"], r["node_mtbf_h"], r["loss_share"],
                                         r["per_node_gib"])]["best_every"]
               for r in partner) >= 30


def _a_synchronous_flush_share_is_the_simulated_best(rows: list[dict], intervals: list[dict]
                                                    ) -> None:
    """Issue 48: on a build without PTHREAD the redundancy and interval intents left out the
    flush share every checkpoint pays (the cache intent charged every scheme the chosen one's),
    and a synchronous flush's lag counted one checkpoint more than it loses. Simulated with the
    job waiting for every k-th checkpoint's flush, each scheme at the cadence and interval the
    intents now give it: the choice and the interval are the best within noise everywhere
    (hopeless profiles too); the choice before was worse beyond noise on some."""
    def beyond_noise(row: dict, waste: str) -> bool:
        return row[waste] > row["best_waste"] * 1.02 + 1e-4

    assert len(rows) == 100 and [r for r in rows if beyond_noise(r, "chosen_waste")] == []
    assert len([r for r in rows if r["best_waste"] < 0.5
                and beyond_noise(r, "before_waste")]) >= 3
    assert len(intervals) >= 20
    assert [r for r in intervals if r["best_waste"] < 0.5
            and beyond_noise(r, "chosen_waste")] == []


def _interval_is_the_simulated_best(rows: list[dict]) -> None:
    """Issue 48: SCR_CHECKPOINT_SECONDS was Daly's interval for the trace's checkpoint alone,
    while the scheme set beside it encodes every checkpoint and its flush cadence was weighed
    at Daly's interval for both: a PARTNER job on 512 Corona nodes checkpointed every 214 s
    where its own model said 469 s. Simulated with failures, restarts and rebuilds, the
    interval now set is the best of the intervals tried within noise wherever the job
    caches; the rule before is worse beyond it on many."""
    def beyond_noise(row: dict, waste: str) -> bool:
        return row["best_waste"] < 0.5 and row[waste] > row["best_waste"] * 1.02 + 1e-4

    assert len(rows) >= 50  # the recommendation caches on most of the grid
    assert [r for r in rows if beyond_noise(r, "chosen_waste")] == []
    assert len([r for r in rows if beyond_noise(r, "before_waste")]) >= 15
    # the intervals tried bracket the best: it lies inside them, not at either end
    assert all(r["chosen_s"] / 4 < r["best_s"] < r["chosen_s"] * 4 for r in rows
               if r["best_waste"] < 0.5)


def test_xor_reads_its_cached_files_at_the_read_rate():
    size = 4 * GIB
    slow_read = encode_s("XOR", size, write_bps=1 * GIB, read_bps=1 * GIB, net_bps=8 * GIB,
                         set_size=4)
    fast_read = encode_s("XOR", size, write_bps=1 * GIB, read_bps=8 * GIB, net_bps=8 * GIB,
                         set_size=4)
    assert slow_read - fast_read == pytest.approx(size / GIB - size / (8 * GIB))
    # with the read nearly free, XOR's third of a parity write beats PARTNER's whole copy
    assert fast_read < encode_s("PARTNER", size, 1 * GIB, 8 * GIB, 8 * GIB, 4)


def test_rs_pays_its_parity_arithmetic_on_as_many_cores_as_ranks():
    """redset multiplies k bytes for every byte of a rank's data, on the rank's core: the
    encode grows by k·B / (rate x min(ranks, cores)) per node, RS alone."""
    size, ranks, nodes = 8 * GIB, 8, 64
    stats = WorkloadStats(ranks=ranks * nodes, hosts=nodes, checkpoints=4,
                          ckpt_bytes=size * nodes, ckpt_dur_s=4.0, restore_dur_s=60.0)

    def encodes(**profile) -> dict[str, float]:
        intent = derive(stats, SystemProfile(
            node_mtbf_s=3600.0, node_loss_share=1.0, network_bytes_per_s=4 * GIB,
            node_local=StorageTier(path="/l", write_bytes_per_s=2 * GIB,
                                   read_bytes_per_s=8 * GIB), **profile)).value
        return {c.scheme: c.encode_s for c in intent.candidates}

    free = encodes(cores_per_node=32, rs_arithmetic_bytes_per_s=1e15)
    for cores, rate, busy in ((32, 1e9, ranks), (4, 1e9, 4), (4, 2e9, 4)):
        paid = encodes(cores_per_node=cores, rs_arithmetic_bytes_per_s=rate)
        assert paid["RS"] - free["RS"] == pytest.approx(2 * size / (rate * busy), rel=1e-6)
        assert {k: v for k, v in paid.items() if k != "RS"} == \
            {k: v for k, v in free.items() if k != "RS"}
    # unmeasured: the default rate, and the evidence says it was assumed
    assumed = derive(stats, SystemProfile(cores_per_node=32, node_mtbf_s=3600.0,
                                          node_loss_share=1.0)).evidence
    assert any("RS parity arithmetic" in line and "assumed" in line for line in assumed)


def test_losses_are_fatal_only_until_the_rebuild_not_over_a_whole_interval():
    """XOR's fatal share is set by the restart (SCR_Init rebuilds the lost node), so a long
    interval between checkpoints does not make it larger."""
    def fatal(ckpt_bytes: float) -> float:
        stats = WorkloadStats(ranks=8, hosts=8, checkpoints=4, ckpt_bytes=ckpt_bytes,
                              ckpt_dur_s=ckpt_bytes / 8 / GIB, restore_dur_s=60)
        profile = SystemProfile(node_mtbf_s=86400, node_loss_share=1.0,
                                node_local=StorageTier(path="/l", write_bytes_per_s=GIB,
                                                       read_bytes_per_s=8 * GIB))
        xor = {c.scheme: c for c in derive(stats, profile).value.candidates}["XOR"]
        return xor.fatal_share, xor.interval_s

    small, small_interval = fatal(8 * GIB)
    large, large_interval = fatal(8 * 64 * GIB)
    assert large_interval > 5 * small_interval
    # 7 others x rate x (restart 60 s + checkpoint and encode)
    assert small == pytest.approx(7 * (60 + 1 + 0.125 + 1 / 8 + 1 / 7) / 86400, rel=0.01)
    assert large < 2.5 * small


def test_a_multi_level_node_loss_goes_back_to_its_xor_level_however_often_it_flushes():
    """SCR restores the newest checkpoint its cache can rebuild, a multi-level pattern's last
    XOR level, though the parallel file system holds newer flushed ones
    (test_real_scr_survival: XOR every 4th, every checkpoint flushed, a node lost after the
    6th: the 4th restored). The intent charged the lesser of that and the flush's lag, so a
    fast file system made XOR every 8th look better than every 4th (7.54% against 7.70% at 40
    GiB/s, a flush every 2nd checkpoint), a loss SCR does not spare."""
    stats = WorkloadStats(ranks=8, hosts=8, checkpoints=4, ckpt_bytes=8 * 4 * GIB,
                          ckpt_dur_s=4.0, restore_dur_s=60)
    for pfs_gib in (4, 40, 400):
        profile = SystemProfile(
            node_mtbf_s=86400, node_loss_share=1.0, nodes=8,
            node_local=StorageTier(path="/l", write_bytes_per_s=GIB, read_bytes_per_s=8 * GIB),
            parallel=StorageTier(path="/p", write_bytes_per_s=pfs_gib * GIB,
                                 scaling_per_doubling=2.0))
        levels = {c.scheme: c for c in derive(stats, profile).value.candidates
                  if c.scheme.startswith("SINGLE+XOR/")}
        for every in (2, 4, 8):
            level = levels[f"SINGLE+XOR/{every}"]
            assert level.lost_intervals == pytest.approx((every - 1) / 2), (pfs_gib, every)
        assert levels["SINGLE+XOR/2"].waste_share < levels["SINGLE+XOR/4"].waste_share \
            < levels["SINGLE+XOR/8"].waste_share
        if pfs_gib >= 40:  # the cadence that let a flush stand for the XOR level
            assert levels["SINGLE+XOR/8"].flush_every <= 2


@pytest.mark.real_scr
@pytest.mark.alone  # timed encodes (tests/alone.py)
def test_the_encode_benchmark_measures_every_scheme_through_the_real_scr(real_scr, tmp_path):
    """And XOR's and RS's encodes, as SCR itself timed them (SCR_DEBUG's `scr_reddesc_apply`
    seconds), are what the formula gives, RS's with the parity arithmetic `scrtune profile`
    measures, within a factor of two. The encode was once the difference of two schemes'
    whole checkpoints: beside one busy loop (a CI run, 2026-11-30) their write times spread
    so that PARTNER's median came out below SINGLE's and the formula 3.7x that difference.
    Timed by SCR, with the write rate from the ranks' write phase (2026-11-30, idle, one and
    two busy loops): RS 1.14x, 0.92x, 1.32x (without the arithmetic 0.67x, 0.68x, 0.96x), XOR
    0.98x, 0.85x, 0.95x."""
    env = {**os.environ, "SCRTUNE_SCR_PREFIX": real_scr,
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    out = tmp_path / "encode.json"
    done = subprocess.run([sys.executable, os.path.join(BENCH, "redundancy_encode.py"),
                           "--reps", "3", "--steps", "4", "--tensor-mib", "32", "--pfs",
                           str(tmp_path / "pfs"), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    measured = json.loads(out.read_text())
    assert set(measured["runs"]) == {"SINGLE", "PARTNER", "XOR", "RS"}
    assert all(len(times) == 9 and min(times) > 0 for times in measured["runs"].values())
    # one encode a checkpoint, timed by SCR: SINGLE's is ER's bookkeeping alone
    assert all(len(times) == 9 for times in measured["scr_encode_s"].values())
    encode = measured["scr_encode_median_s"]
    assert encode["SINGLE"] == 0 and min(encode["PARTNER"], encode["XOR"], encode["RS"]) > 0
    assert measured["read_bytes_per_s"] > 0 and measured["rs_arithmetic_bytes_per_s"] > 0
    with_arithmetic = measured["model_encode_s"]["RS"] / encode["RS"]
    without = measured["model_encode_s_without_arithmetic"]["RS"] / encode["RS"]
    assert 0.5 < with_arithmetic < 2.0, (with_arithmetic, without, encode)
    xor = measured["model_encode_s"]["XOR"] / encode["XOR"]  # nothing of XOR's fitted
    assert 0.5 < xor < 2.0, (xor, encode)
