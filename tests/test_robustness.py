"""Bad input: counted and skipped, read up to the damage, one-line errors; never a traceback."""

from __future__ import annotations

import gzip
import json

import pytest

from scrtune.engine.replay import replay
from scrtune.errors import TraceError
from scrtune.events.reader import ReadProblems, expand_paths, iter_blocks
from tests.conftest import data, only_file

# What DFTracer printed for a region named `weird "quoted" \ name`: it does not escape JSON.
UNESCAPED = [
    b'{"id":900,"name":"weird "quoted" \\ name","cat":"CHECKPOINT","type":6,"pid":4210,'
    b'"tid":4210,"ts":1795301712999000,"dur":10,"ph":1,"args":{"hhash":"6882804a826580cd"}}',
    b'{"id":901,"name":"ok","cat":"COMPUTE","type":6,"pid":4210,"tid":4210,"ts":17953017129',
    b"\x00\xff garbage",
]


def _lines(path: str) -> list[bytes]:
    with gzip.open(path, "rb") as handle:
        return handle.read().split(b"\n")


def test_invalid_lines_counted_with_their_line_numbers(tmp_path):
    lines = _lines(only_file("v2_python_api"))
    mixed = lines[:10] + [UNESCAPED[0]] + lines[10:500] + UNESCAPED[1:] + lines[500:]
    path = tmp_path / "mixed-app.pfw"
    path.write_bytes(b"\n".join(mixed))
    summary = replay([str(path)])
    assert summary.invalid_lines == 3
    assert summary.records == 888  # nothing valid was lost
    samples = summary.generations[0].invalid_samples
    assert [s["line"] for s in samples] == [11, 502, 503]
    assert len(summary.checkpoints) == 2


def test_truncated_gzip_read_up_to_the_damage(tmp_path):
    source = open(only_file("v2_python_api"), "rb").read()
    path = tmp_path / "crashed-app.pfw.gz"
    path.write_bytes(source[: len(source) * 2 // 3])
    summary = replay([str(path)])
    report = summary.generations[0]
    assert report.truncated
    assert any("truncated" in w for w in summary.warnings)
    assert 0 < summary.records < 888
    assert summary.invalid_lines <= 1  # at most the line cut in half


def test_corrupted_gzip_stops_at_the_damage_with_a_warning(tmp_path):
    source = bytearray(open(only_file("v2_python_api"), "rb").read())
    middle = len(source) // 2
    source[middle : middle + 64] = b"\xff" * 64
    path = tmp_path / "damaged-app.pfw.gz"
    path.write_bytes(bytes(source))
    summary = replay([str(path)])
    assert summary.generations[0].truncated
    assert any("damaged" in w or "truncated" in w for w in summary.warnings)


def test_multi_member_gzip_is_read_to_the_end(tmp_path):
    lines = _lines(only_file("v2_python_api"))
    path = tmp_path / "members-app.pfw.gz"
    with open(path, "wb") as out:  # one gzip member per flush, as dftracer 2.x writes
        for start in range(0, len(lines), 100):
            out.write(gzip.compress(b"\n".join(lines[start : start + 100]) + b"\n"))
    summary = replay([str(path)])
    assert summary.records == 888 and not summary.generations[0].truncated


@pytest.mark.parametrize("block_bytes", [997, 64 << 10])
def test_gzip_members_and_padding_inflate_to_their_bytes(tmp_path, block_bytes):
    """Members that straddle reads, output cut at the block size (the inflater holds the rest
    until asked again), zeros padding the end: the blocks join to exactly the members' bytes.
    A damaged checksum in the last member stops the read there with a warning."""
    lines = _lines(only_file("v2_python_api"))
    members = [b"\n".join(lines[start:start + 150]) + b"\n" for start in range(0, 888, 150)]
    path = tmp_path / "members-app.pfw.gz"
    path.write_bytes(b"".join(gzip.compress(m) for m in members) + b"\0" * 512)
    problems = ReadProblems()
    blocks = list(iter_blocks(str(path), problems, block_bytes, 100))
    assert b"".join(blocks) == b"".join(members) and not problems.warnings
    assert len(blocks[0]) == 100 and max(map(len, blocks)) <= block_bytes
    damaged = bytearray(path.read_bytes()[:-512])
    damaged[-8] ^= 1  # the last member's CRC
    path.write_bytes(bytes(damaged))
    problems = ReadProblems()
    read = b"".join(iter_blocks(str(path), problems, block_bytes, 100))
    assert b"".join(members[:-1]) == read[:len(b"".join(members[:-1]))]
    assert problems.truncated and "damaged" in problems.warnings[0]


def test_empty_file_is_read_and_reported(tmp_path):
    (tmp_path / "x-preload.pfw").write_bytes(b"")
    summary = replay([str(tmp_path / "x-preload.pfw")])
    assert summary.records == 0
    assert any("empty" in w for w in summary.warnings)


def test_missing_path_is_one_clear_error():
    with pytest.raises(TraceError, match="nope.pfw: no such file"):
        expand_paths(["/definitely/nope.pfw"])


def test_a_directory_without_traces_and_a_pipe_are_named_for_what_they_are(tmp_path):
    import os

    (tmp_path / "state.sqlite").write_bytes(b"")
    with pytest.raises(TraceError, match="a directory with no trace file"):
        expand_paths([str(tmp_path)])
    fifo = tmp_path / "live.pfw"
    os.mkfifo(fifo)  # reading it would wait for a writer: refused instead
    with pytest.raises(TraceError, match="not a regular file"):
        expand_paths([str(fifo)])


def test_file_gone_between_listing_and_reading_is_reported(tmp_path):
    gone = tmp_path / "gone-app.pfw"  # listed, then deleted before it was read
    summary = replay([str(gone), only_file("v2_python_api")])
    assert summary.records == 888
    unreadable = [g for g in summary.generations if g.generation == "unreadable"]
    assert len(unreadable) == 1 and "gone-app.pfw" in unreadable[0].warnings[0]


def test_nothing_readable_raises(tmp_path):
    with pytest.raises(TraceError):
        replay([str(tmp_path / "gone-app.pfw")])


def test_numbers_as_strings_and_bracket_framing(tmp_path):
    # DLIO Profiler era: numbers are JSON strings; `[` first, no closing `]`.
    record = {
        "id": "1",
        "name": "write",
        "cat": "POSIX",
        "pid": "7",
        "tid": "7",
        "ts": "1000000",
        "dur": "5",
        "ph": "X",
        "args": {"hostname": "n1", "ret": "4096", "fname": "/p/ckpt/a"},
    }
    path = tmp_path / "old-app.pfw"
    path.write_text("[\n " + json.dumps(record) + "\n")
    summary = replay([str(path)])
    assert summary.records == 1 and summary.invalid_lines == 0
    assert summary.checkpoints[0].bytes_written == 4096
    assert summary.checkpoints[0].found_by == "path"


def test_scr_metadata_is_not_a_checkpoint(tmp_path):
    """SCR writes its index and summaries under $SCR_PREFIX/.scr/ at every flush; read as
    checkpoints (a run without checkpoint regions), they made 11-13 s "checkpoints" and a
    16.6 h interval. A dataset's files in SCR's cache are checkpoint data."""
    def write(ts_s: float, path: str) -> str:
        return json.dumps({"id": 1, "name": "write", "cat": "POSIX", "pid": 7, "tid": 7,
                           "ts": int(ts_s * 1e6), "dur": 50, "ph": "X",
                           "args": {"hostname": "n1", "ret": 4096, "fname": path}})
    lines = [write(t, f"/lus/ckpt-prefix/.scr/scr.dataset.{n}/summary.scr")
             for n, t in enumerate((1.0, 7.0, 13.0, 19.0), start=1)]
    lines += [write(25.0, "/lus/ckpt-prefix/.scr/index.scr")]
    path = tmp_path / "meta-app.pfw"
    path.write_text("[\n" + "\n".join(lines) + "\n")
    assert replay([str(path)]).checkpoints == []
    cached = [write(t, f"/dev/shm/u/scr.77/scr.dataset.{n}/rank_0.pt")
              for n, t in enumerate((1.0, 7.0), start=1)]
    path.write_text("[\n" + "\n".join(lines + cached) + "\n")
    found = replay([str(path)]).checkpoints
    assert [c.found_by for c in found] == ["path", "path"]
    assert [c.bytes_written for c in found] == [4096, 4096]


def test_directory_and_glob_expansion():
    by_dir = expand_paths([data("dlio_train_ckpt")])
    by_glob = expand_paths([data("dlio_train_ckpt", "*.pfw.gz")])
    assert by_dir == by_glob and len(by_dir) == 2


# Damage that once escaped the parsers as exceptions (found by fuzzing mutated real traces).
BROKEN_VALUES = [
    # not UTF-8, on a line the C path leaves to Python (a float duration)
    b'{"id":910,"name":"wr\xffite","cat":"POSIX","type":3,"pid":4210,"tid":4210,'
    b'"ts":1795301712999000,"dur":1.5,"ph":1,"args":{"ret":4096}}',
    # beyond int64
    b'{"id":911,"name":"write","cat":"POSIX","type":3,"pid":4210,"tid":4210,'
    b'"ts":99999999999999999999999,"dur":3,"ph":1,"args":{"ret":4096}}',
    # a pid beyond 32 bits beside the file's own pid
    b'{"id":912,"name":"write","cat":"POSIX","type":3,"pid":4e10,"tid":4210,'
    b'"ts":1795301712999100,"dur":3,"ph":1,"args":{"ret":4096}}',
    # an aggregated record whose sums overflow
    b'{"id":913,"name":"write","cat":"POSIX","type":3,"pid":4210,"tid":4210,'
    b'"ts":1795301712999200,"ph":3,"args":{"dft_cnt":3,"dur":1e300,"ret":4e18}}',
]


@pytest.mark.parametrize("fast", [True, False], ids=["c-path", "pure-python"])
def test_broken_values_are_counted_or_read_never_raised(tmp_path, monkeypatch, fast):
    from scrtune.events import parse

    monkeypatch.setattr(parse, "FAST_PATH", fast)
    lines = _lines(only_file("v2_python_api"))
    path = tmp_path / "broken-app.pfw"
    path.write_bytes(b"\n".join(lines[:20] + BROKEN_VALUES + lines[20:]))
    summary = replay([str(path)])
    assert summary.records + summary.invalid_lines == 888 + len(BROKEN_VALUES)
    # the one that is not UTF-8 and the time beyond int64 (issue 12: it was read as 0, a run
    # starting in 1970); the rest read as unknowns
    assert summary.invalid_lines == 2
    assert len(summary.checkpoints) == 2


def test_the_daemon_parser_survives_the_same_values():
    from scrtune.daemon.intake import parse_messages

    lines = _lines(only_file("v2_python_api"))
    parsed = parse_messages([b"\n".join(lines[:20] + BROKEN_VALUES), gzip.compress(
        b"\n".join(BROKEN_VALUES + lines[20:]))])
    assert parsed.invalid_messages == 0
    assert sum(b.records + b.invalid_lines for b in parsed.batches) == 888 + 2 * len(BROKEN_VALUES)
