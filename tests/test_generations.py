"""Every tracer generation we have real traces of, read into the figures its workload wrote.

Expected figures come from the workloads, not from scrtune: the mock checkpoint (shared
traces README) writes 1 + 4 + 8 + 8 MiB of optimizer files in 4 KiB, 64 KiB, 1 MiB and 4 MiB
calls, two 128-byte numpy headers and a `latest` pointer per save; tests/tracing/ckpt_workload.py
writes 2 files x 2 MiB in 256 KiB calls per save over 3 steps.
"""

from __future__ import annotations

import pytest

from scrtune.engine.replay import replay
from scrtune.events.model import Generation
from scrtune.events.reader import expand_paths
from tests.conftest import data

MIB = 1 << 20
MOCK_SAVE_BYTES = (1 + 4 + 8 + 8) * MIB + 2 * 128


def summary_of(folder: str):
    return replay(expand_paths([data(folder)]))


@pytest.mark.parametrize(
    "folder, generation, records",
    [
        ("v2_python_api", Generation.DFTRACER_2, 888),
        ("v2_preload_hybrid", Generation.DFTRACER_2, 885),
        ("v2_no_metadata", Generation.DFTRACER_2, 885),
        ("v2_aggregated", Generation.DFTRACER_2, 102),
        ("v2_c_preload", Generation.DFTRACER_2, 107),
        ("v2_service", Generation.DFTRACER_2, 63),
        ("v1_0_11", Generation.DFTRACER_1_HEX, 886),
        ("v1_0_8", Generation.DFTRACER_1_INT, 115),
        ("dlio_profiler_0_0_6", Generation.DLIO_PROFILER, 100),
    ],
)
def test_generation_and_record_count(folder, generation, records):
    summary = summary_of(folder)
    assert summary.records == records
    assert summary.invalid_lines == 0
    assert generation.value in {g.generation for g in summary.generations}


@pytest.mark.parametrize("folder", ["v2_python_api", "v2_preload_hybrid", "v1_0_11"])
def test_mock_checkpoint_bytes_files_and_sizes(folder):
    summary = summary_of(folder)
    assert [c.step for c in summary.checkpoints] == [100, 200]
    for checkpoint in summary.checkpoints:
        # + the `latest` pointer file's few bytes
        assert MOCK_SAVE_BYTES < checkpoint.bytes_written < MOCK_SAVE_BYTES + 100
        assert checkpoint.files == 7  # 2 shards, 4 optimizer files, latest.tmp
        assert checkpoint.bytes_per_file.max_bytes == 8 * MIB  # the two 8 MiB optimizer files
        assert checkpoint.bytes_per_file.median_bytes == MIB
        assert checkpoint.found_by == "region"
        assert checkpoint.ranks == 1
    modes = {m.size_bytes: m for m in summary.write_sizes}
    assert modes[MIB].calls == 16 and modes[4 * MIB].calls == 4 and modes[64 << 10].calls == 128
    assert modes[MIB].bytes_share == pytest.approx(16 / 42, abs=1e-3)
    assert [r.kind for r in summary.restores] == ["restore", "restore"]
    assert summary.hosts == ["vm"]


@pytest.mark.parametrize("folder", ["v1_0_8", "dlio_profiler_0_0_6"])
def test_own_workload_under_older_tracers(folder):
    summary = summary_of(folder)
    assert [c.step for c in summary.checkpoints] == [1, 2, 3]
    assert all(c.bytes_written == 4 * MIB and c.files == 2 for c in summary.checkpoints)
    assert [(m.size_bytes, m.bytes_share) for m in summary.write_sizes] == [(256 << 10, 1.0)]
    assert len(summary.restores) == 2 and all(r.bytes_read == 4 * MIB for r in summary.restores)
    assert summary.hosts == ["vm"]
    assert summary.bandwidth[0].prefix == "/tmp/gen"  # plain names and integer hashes resolved


def test_dlio_training_run_with_forked_reader():
    summary = summary_of("dlio_train_ckpt")
    assert len(summary.checkpoints) == 3  # one checkpoint per epoch
    assert sum(c.bytes_written for c in summary.checkpoints) == pytest.approx(221e6, rel=0.01)
    assert all(c.name == "PyTorchCheckpointing.save_checkpoint" for c in summary.checkpoints)
    assert summary.ranks == 1 and summary.processes == 2  # the DataLoader worker is no rank
    assert summary.write_sizes[0].size_bytes > 16 * MIB  # torch.save's large tensor writes
    # the worker's file hashes are named only in the parent's trace: resolved across files
    assert all(not b.prefix.startswith("(unresolved") for b in summary.bandwidth)


def test_forked_reader_alone_reports_unresolved_hashes():
    fork = [p for p in expand_paths([data("dlio_train_ckpt")]) if p.endswith("-fork.pfw.gz")]
    summary = replay(fork)
    assert {b.prefix for b in summary.bandwidth} == {"(unresolved file hashes)"}


def test_no_metadata_says_what_cannot_be_derived():
    summary = summary_of("v2_no_metadata")
    assert not summary.has_io_args
    assert any("write sizes" in m for m in summary.missing_statistics)
    assert any("DFTRACER_INC_METADATA=1" in w for w in summary.warnings)
    assert summary.write_sizes == [] and summary.bandwidth == []
    assert len(summary.checkpoints) == 2  # regions still mark the checkpoints and their time
    assert all(c.bytes_written == 0 and c.dur_us > 0 for c in summary.checkpoints)


def test_c_program_checkpoint_found_by_path():
    summary = summary_of("v2_c_preload")
    (checkpoint,) = summary.checkpoints
    assert checkpoint.found_by == "path"
    assert checkpoint.bytes_written >= 16 * MIB  # 16 x 1 MiB pwrite + 64 x 4 KiB + fwrite
    assert summary.write_sizes[0].size_bytes == MIB
    assert summary.ops and {"pwrite", "fsync", "fdatasync", "fwrite"} <= {
        o.name for o in summary.ops
    }


def test_aggregated_records_are_counted_and_flagged():
    summary = summary_of("v2_aggregated")
    write = {o.name: o for o in summary.ops}["write"]
    assert write.calls > write.bytes // (4 << 20)  # dft_cnt expands to calls
    assert write.bytes > 0
    assert any("aggregated" in w for w in summary.warnings)


def test_service_counters():
    summary = summary_of("v2_service")
    assert summary.cpu_counters == 2  # cpu-0 and cpu-1 of the 2-core VM
    assert summary.checkpoints == []
