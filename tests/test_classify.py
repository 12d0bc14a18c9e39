"""Which regions and files are checkpoints, and how windows become job checkpoints."""

from __future__ import annotations

import json

import pytest

from scrtune.engine.classify import CheckpointPatterns, RegionKind, checkpoint_region_kind
from scrtune.engine.replay import ReplayOptions, replay

P = CheckpointPatterns()


@pytest.mark.parametrize(
    "name, cat, kind",
    [
        ("checkpoint.save", "CHECKPOINT", RegionKind.SAVE),
        ("checkpoint.save.model", "CHECKPOINT", RegionKind.SAVE),
        ("checkpoint.load", "CHECKPOINT", RegionKind.RESTORE),
        ("capture", "checkpoint", RegionKind.SAVE),  # DLIO / pydftracer ai.checkpoint
        ("restart", "checkpoint", RegionKind.RESTORE),
        ("PyTorchCheckpointing.save_checkpoint", "checkpoint", RegionKind.SAVE),
        ("PyTorchCheckpointing.load_checkpoint", "checkpoint", RegionKind.RESTORE),
        ("PyTorchCheckpointing.get_tensor_core", "checkpoint", RegionKind.AUX),
        ("PyTorchCheckpointing.checkpoint", "checkpoint", RegionKind.SAVE),  # DLIO 2.0's save
        ("PyTorchCheckpointing.save_state", "checkpoint", RegionKind.SAVE),
        ("PyTorchCheckpointing.finalize", "checkpoint", RegionKind.AUX),
        ("checkpoint", "CHECKPOINT", RegionKind.SAVE),
        ("checkpoint.init", "checkpoint", RegionKind.AUX),
        ("checkpoint.cleanup", "CHECKPOINT", RegionKind.AUX),
        ("CHECKPOINT", "app", RegionKind.SAVE),
        ("save_ckpt", "train", RegionKind.SAVE),
        ("train.step", "COMPUTE", None),
        ("TorchDataLoader.read", "data_loader", None),
    ],
)
def test_region_kinds(name, cat, kind):
    assert checkpoint_region_kind(name, cat, P) == kind


def _record(name, cat, ts, dur, pid=1, args=None, layer=6):
    return json.dumps(
        {
            "id": 1,
            "name": name,
            "cat": cat,
            "type": layer,
            "pid": pid,
            "tid": pid,
            "ts": ts,
            "dur": dur,
            "ph": 1,
            "args": args or {},
        }
    )


def _write(pid, ts, path="f1"):
    return _record("write", "POSIX", ts, 10, pid, {"ret": 1024, "fhash": path}, layer=3)


def test_same_step_saved_again_after_a_restart_is_another_checkpoint(tmp_path):
    hour = 3600 * 1_000_000
    lines = [
        _write(1, 1_000_100),
        _record("checkpoint.save", "CHECKPOINT", 1_000_000, 1000, 1, {"step": 50}),
        _write(2, 1_000_200),
        _record("checkpoint.save", "CHECKPOINT", 1_000_050, 1000, 2, {"step": 50}),
        _write(3, hour + 1_000_100),
        _record("checkpoint.save", "CHECKPOINT", hour + 1_000_000, 1000, 3, {"step": 50}),
    ]
    path = tmp_path / "t-app.pfw"
    path.write_text("\n".join(lines))
    summary = replay([str(path)])
    assert [(c.step, c.ranks, c.bytes_written) for c in summary.checkpoints] == [
        (50, 2, 2048),
        (50, 1, 1024),
    ]


def test_custom_path_pattern(tmp_path):
    lines = [
        json.dumps(
            {
                "name": "FH",
                "cat": "dftracer",
                "type": 1,
                "pid": 1,
                "tid": 1,
                "ph": 4,
                "args": {"name": "/lus/run/model_states/part0", "value": "aa"},
            }
        ),
        _write(1, 1_000_000, "aa"),
    ]
    path = tmp_path / "t-app.pfw"
    path.write_text("\n".join(lines))
    assert replay([str(path)]).checkpoints == []
    custom = ReplayOptions(patterns=CheckpointPatterns(path_patterns=("model_states",)))
    assert replay([str(path)], custom).checkpoints[0].bytes_written == 1024
