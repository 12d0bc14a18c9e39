"""`scrtune profile`: real files written, synced and read back in two directories, within the
time given; the profile it writes is the one recommend, study and the daemon read."""

from __future__ import annotations

import json
import os

import pytest

from scrtune.intents.inputs import load_profile
from scrtune.probe.dirty import dirty_allowance_bytes
from scrtune.probe.storage import CallTiming, fit_line, fs_type, measure_tier
from tests.test_cli_errors import _one_line_error

pytestmark = pytest.mark.alone  # it measures the machine (tests/alone.py)

BUDGET_S = 3.0


@pytest.fixture
def tiers(tmp_path):
    local, parallel = tmp_path / "local", tmp_path / "pfs"
    local.mkdir()
    parallel.mkdir()
    return str(local), str(parallel)


def test_profile_writes_a_profile_that_recommend_reads(run_cli, tmp_path, tiers) -> None:
    out = tmp_path / "sys.toml"
    result = run_cli("profile", "--local", tiers[0], "--parallel", tiers[1], "-o", str(out),
                     "--time-s", str(BUDGET_S), "--sizes", "4KB,1MB", "--max-file-bytes", "64MB")
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout and "latency" in result.stdout
    # that deadlines, not file sizes, end the measurements is shown by what a tier wrote
    # (test_a_tier_is_measured_within_its_budget_whatever_the_file_cap), not by a clock
    profile = load_profile(str(out))
    assert profile.cores_per_node == len(os.sched_getaffinity(0))
    assert profile.memory_per_node_bytes > 1 << 28
    assert 1.0 <= profile.busy_core_slowdown < 100  # measured, not the study's 10 by default
    # a fresh page costs a fault and a zeroing beyond a written one: measured, not left at 0
    assert profile.fresh_memory_bytes_per_s > 0
    assert profile.rs_arithmetic_bytes_per_s > 0  # measured, not left to the default
    # a transfer thread's busy share at each buffer size the study interpolates between
    assert [s.buffer_bytes for s in profile.transfer_thread_shares] == [1 << 20, 8 << 20,
                                                                         64 << 20]
    assert all(0 < s.busy_share <= 1 for s in profile.transfer_thread_shares)
    # the kernel's background writeback threshold, as /proc says it (issue 48: bypass writes
    # beyond it went at the file system's rate)
    assert profile.parallel is not None and profile.node_local is not None
    assert profile.parallel.dirty_allowance_bytes == pytest.approx(
        dirty_allowance_bytes(), rel=0.2) and profile.parallel.dirty_allowance_bytes > 0
    assert profile.node_local.dirty_allowance_bytes == 0  # SCR's cache is never written back
    for tier, path in ((profile.node_local, tiers[0]), (profile.parallel, tiers[1])):
        assert tier.path == path
        assert tier.write_bytes_per_s > 1e6 and tier.read_bytes_per_s > 1e6
        assert tier.write_latency_s >= 0 and tier.read_latency_s >= 0
    assert not [p for t in tiers for p in os.listdir(t)]  # its scratch files are gone
    text = out.read_text()
    assert "node_mtbf_s" in text and "not measured" in text  # what one node cannot know
    used = run_cli("recommend", "--example", "--system", str(out), "--format", "json")
    assert used.returncode == 0, used.stderr
    assert json.loads(used.stdout)["profile"] == f"file {out}"


def test_profile_on_stdout_and_as_json(run_cli, tmp_path, tiers) -> None:
    shown = run_cli("profile", "--local", tiers[0], "--parallel", tiers[1], "-o", "-",
                    "--time-s", "2", "--sizes", "64KB")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# System profile") and "[parallel]" in shown.stdout
    out = tmp_path / "p.toml"
    machine = run_cli("profile", "--local", tiers[0], "--parallel", tiers[1], "-o", str(out),
                      "--time-s", "2", "--sizes", "64KB,1MB", "--format", "json")
    assert machine.returncode == 0, machine.stderr
    found = json.loads(machine.stdout)
    assert found["profile"] == str(out) and found["fresh_memory_bytes_per_s"] > 0
    assert "fresh_memory_bytes_per_s = " in shown.stdout and "fresh memory" in shown.stderr
    assert found["rs_arithmetic_bytes_per_s"] > 0
    assert [s["buffer_bytes"] for s in found["transfer_thread_shares"]] == [1 << 20, 8 << 20,
                                                                            64 << 20]
    assert "transfer_thread_shares = [{buffer_bytes = 1048576, busy_share = " in shown.stdout
    assert "busy share of a core with buffers of 1.0 MiB" in " ".join(shown.stderr.split())
    assert "rs_arithmetic_bytes_per_s = " in shown.stdout
    assert "RS parity arithmetic" in " ".join(shown.stderr.split())
    sizes = {t["size_bytes"] for t in found["parallel"]["timings"]}
    assert sizes == {64 << 10, 1 << 20}
    assert all(t["calls"] >= 1 and t["dur_s"] > 0 for t in found["local"]["timings"])


def test_profile_refuses_what_it_cannot_use(run_cli, tmp_path, tiers) -> None:
    existing = tmp_path / "sys.toml"
    existing.write_text("# mine\n")
    _one_line_error(run_cli("profile", "--local", tiers[0], "--parallel", tiers[1], "-o",
                            str(existing)), "sys.toml exists", "--force")
    assert existing.read_text() == "# mine\n"
    _one_line_error(run_cli("profile", "--local", tiers[0], "--parallel",
                            str(tmp_path / "nowhere"), "-o", "-"), "nowhere", "not a directory")
    _one_line_error(run_cli("profile", "--sizes", "4KB,lots"), "--sizes", "lots")
    _one_line_error(run_cli("profile", "--sizes", "1e400"), "--sizes", "1e400")  # inf bytes
    _one_line_error(run_cli("profile", "--time-s", "0.5", "-o", "-"), "--time-s")


def test_latency_is_what_small_calls_cost_beyond_their_bytes() -> None:
    timings = [CallTiming(4096, "write", 1000, 1000 * (50e-6 + 4096 / 1e9)),
               CallTiming(16 << 20, "write", 10, 10 * (50e-6 + (16 << 20) / 1e9))]
    line = fit_line(timings)
    assert line.bytes_per_s == pytest.approx(1e9, rel=0.01)
    assert line.latency_s == pytest.approx(50e-6, rel=0.05)


def test_a_tier_is_measured_within_its_budget_whatever_the_file_cap(tmp_path) -> None:
    tier = measure_tier(str(tmp_path), (1 << 20,), streams=2, budget_s=1.0, cap_bytes=1 << 40)
    write, read = tier.timings
    # the deadline ended the writing, not the file cap (a quarter of the free space a stream)
    assert write.calls * (1 << 20) < tier.free_bytes // 8
    assert tier.fs_type == fs_type(str(tmp_path)) != "unknown"
    assert 1 <= read.calls <= write.calls  # read back until its end or its deadline
    assert tier.write_bytes_per_s > 0 and tier.read_bytes_per_s > 0


def test_the_study_uses_measured_read_rates_and_latencies() -> None:
    from scrtune.intents.inputs import StorageTier, SystemProfile
    from scrtune.study.model import DEFAULT_LATENCY_S, machine

    measured = StorageTier(path="/p", write_bytes_per_s=1e9, read_bytes_per_s=3e9,
                           write_latency_s=2e-3, read_latency_s=0.0)
    box = machine(SystemProfile(parallel=measured), costs=[])
    assert box.pfs_read.node_bytes_per_s == 3e9 and box.pfs_write.node_bytes_per_s == 1e9
    assert box.pfs_write.latency_s == 2e-3
    assert box.pfs_read.latency_s == DEFAULT_LATENCY_S  # 0 in the file: unknown


def test_the_dirty_allowance_is_the_kernels_background_threshold(tmp_path) -> None:
    """vm.dirty_background_bytes when set, else its ratio of MemAvailable; 0 when /proc
    cannot say (not Linux, or unreadable), never an exception."""
    vm, meminfo = tmp_path / "vm", tmp_path / "meminfo"
    vm.mkdir()
    (vm / "dirty_background_bytes").write_text("0\n")
    (vm / "dirty_background_ratio").write_text("10\n")
    meminfo.write_text("MemTotal:       25000000 kB\nMemAvailable:   20000000 kB\n")
    assert dirty_allowance_bytes(str(vm), str(meminfo)) == pytest.approx(2_048_000_000)
    (vm / "dirty_background_bytes").write_text("67108864\n")  # what --dirty-mb 256 sets
    assert dirty_allowance_bytes(str(vm), str(meminfo)) == 64 << 20
    for broken in ("-5\n", "many\n"):
        (vm / "dirty_background_bytes").write_text(broken)
        assert dirty_allowance_bytes(str(vm), str(meminfo)) == 0.0
    (vm / "dirty_background_bytes").write_text("0\n")
    meminfo.write_text("MemTotal:       25000000 kB\n")
    assert dirty_allowance_bytes(str(vm), str(meminfo)) == 0.0
    assert dirty_allowance_bytes(str(tmp_path / "absent"), str(meminfo)) == 0.0
