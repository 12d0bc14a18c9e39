"""Statistics combine exactly: split by chunk, file, worker process or rank, same summary."""

from __future__ import annotations

import gzip

import msgspec
import pytest

from scrtune.engine.replay import ReplayOptions, read_file, replay
from scrtune.engine.stats import Stats
from scrtune.engine.summary import finish
from scrtune.events.codec import CodecError, decode_batch, encode_batch
from scrtune.events.parse import FileContext, parse_lines
from scrtune.events.reader import ReadProblems, expand_paths, iter_chunks
from tests.conftest import data, only_file
from tests.tracing.largetrace import build


def as_json(summary) -> dict:
    return msgspec.to_builtins(summary)


def batches(path: str, chunk_bytes: int):
    context = FileContext()
    for block in iter_chunks(path, ReadProblems(), chunk_bytes):
        batch, context = parse_lines(block.joined().split(b"\n"), context)
        yield batch


@pytest.mark.parametrize("folder", ["v2_python_api", "dlio_train_ckpt", "v1_0_11", "v2_aggregated",
                                    "dlio_ckpt_workload"])
@pytest.mark.parametrize("cut", [0.3, 0.5, 0.8])
def test_split_inside_a_process_merges_exactly(folder, cut):
    """Regions arrive after the calls they enclose; a split between them must not matter."""
    paths = expand_paths([data(folder)])
    whole = Stats()
    parts = [Stats(), Stats()]
    all_batches = [b for p in paths for b in batches(p, 4096)]
    split = int(len(all_batches) * cut)
    for index, batch in enumerate(all_batches):
        whole.add(batch)
        parts[index >= split].add(batch)
    parts[0].merge(parts[1])
    assert parts[0].call_costs == whole.call_costs
    assert as_json(finish(parts[0])) == as_json(finish(whole))


def test_state_round_trips_through_bytes():
    stats = Stats()
    read_file(stats, only_file("v2_python_api"))
    copy = Stats.from_bytes(stats.to_bytes())
    assert as_json(finish(copy)) == as_json(finish(stats))


def test_worker_processes_give_the_same_summary(tmp_path):
    big = tmp_path / "big-app.pfw.gz"
    build(only_file("v2_python_api"), str(big), 60_000)
    one = replay([str(big)], ReplayOptions(workers=1))
    two = replay([str(big)], ReplayOptions(workers=2))
    assert as_json(one) == as_json(two)
    assert len(one.checkpoints) > 100 and one.records >= 60_000


def test_regions_in_one_file_claim_calls_in_another(tmp_path):
    """LD_PRELOAD + Python API: I/O in `-preload`, regions in `-app` of the same process."""
    with gzip.open(only_file("v2_python_api"), "rb") as handle:
        lines = handle.read().split(b"\n")
    io = [line for line in lines if b'"cat":"POSIX"' in line or b'"cat":"STDIO"' in line]
    rest = [line for line in lines if line not in io]
    (tmp_path / "job-abc-preload.pfw").write_bytes(b"\n".join(io))
    (tmp_path / "job-abc-app.pfw").write_bytes(b"\n".join(rest))
    split = replay(expand_paths([str(tmp_path)]))
    original = replay([only_file("v2_python_api")])
    assert [c.bytes_written for c in split.checkpoints] == [
        c.bytes_written for c in original.checkpoints
    ]
    assert [c.files for c in split.checkpoints] == [7, 7]


def test_batch_codec_round_trip_and_refusals():
    (batch,) = list(batches(only_file("v2_c_preload"), 1 << 20))
    again = decode_batch(encode_batch(batch))
    assert again.names == batch.names and again.hash_defs == batch.hash_defs
    assert all((again.columns[k] == batch.columns[k]).all() for k in batch.columns)
    with pytest.raises(CodecError, match="not an event batch"):
        decode_batch(b"\x93garbage")
    wire = msgspec.msgpack.decode(encode_batch(batch))
    wire[1] = 99  # [0] is the tag
    with pytest.raises(CodecError, match="wire version 99"):
        decode_batch(msgspec.msgpack.encode(wire))
