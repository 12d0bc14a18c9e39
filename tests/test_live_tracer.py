"""A real program traced by the real tracer (dftracer 2.x wheel), replayed: the figures it
wrote come back, at more than one write size."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from scrtune.engine.replay import replay

pytest.importorskip("dftracer.python", reason="install the [test] extra (dftracer, pydftracer)")
WORKLOAD = os.path.join(os.path.dirname(__file__), "tracing", "ckpt_workload.py")


def trace_workload(
    tmp_path, write_size: int, steps: int = 3, files: int = 2, file_bytes: int = 1 << 20
) -> list[str]:
    ckpt = tmp_path / "ckpt"
    env = dict(
        os.environ,
        DFTRACER_ENABLE="1",
        DFTRACER_INC_METADATA="1",
        DFTRACER_INIT="FUNCTION",
        DFTRACER_DATA_DIR=str(ckpt),
        DFTRACER_LOG_FILE=str(tmp_path / "trace"),
    )
    subprocess.run(
        [
            sys.executable,
            WORKLOAD,
            "--dir",
            str(ckpt),
            "--log",
            str(tmp_path / "trace"),
            "--steps",
            str(steps),
            "--files",
            str(files),
            "--file-bytes",
            str(file_bytes),
            "--write-size",
            str(write_size),
            "--compute-s",
            "0.01",
        ],
        check=True,
        env=env,
        timeout=120,
        capture_output=True,
    )
    traces = glob.glob(str(tmp_path / "trace*.pfw*"))
    assert traces, "the tracer wrote no trace"
    return traces


@pytest.mark.parametrize("write_size", [64 << 10, 512 << 10])
def test_live_trace_reproduces_what_the_program_wrote(tmp_path, write_size):
    summary = replay(trace_workload(tmp_path, write_size))
    assert summary.generations[0].generation == "dftracer-2.x"
    assert [c.step for c in summary.checkpoints] == [1, 2, 3]
    for checkpoint in summary.checkpoints:
        assert checkpoint.bytes_written == 2 << 20
        assert checkpoint.files == 2
        assert checkpoint.write_calls == 2 * (1 << 20) // write_size
        assert checkpoint.ops["fsync"].calls == 2
    assert summary.write_sizes[0].size_bytes == write_size
    assert summary.write_sizes[0].bytes_share == 1.0
    assert [r.bytes_read for r in summary.restores] == [2 << 20, 2 << 20]
