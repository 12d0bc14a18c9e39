"""The C fast path and the pure-Python parser give the same statistics on every real trace."""

from __future__ import annotations

import gzip

import msgspec
import pytest

from scrtune.engine import ioagg
from scrtune.engine import replay as replay_module
from scrtune.engine.replay import replay
from scrtune.events import parse
from scrtune.events.model import Generation
from scrtune.events.parse import FileContext, parse_block
from scrtune.events.reader import Chunk, ReadProblems, expand_paths, iter_chunks
from tests.conftest import DATA, only_file
from tests.tracing.largetrace import build

pytestmark = pytest.mark.skipif(parse._fastparse is None, reason="C fast path not built")


def both_ways(paths, monkeypatch):
    """Replayed with both C paths (parser, fold) and with neither."""
    for module, fast in ((parse, True), (ioagg, ioagg._fastagg is not None)):
        monkeypatch.setattr(module, "FAST_PATH", fast)
    fast = msgspec.to_builtins(replay(paths))
    for module in (parse, ioagg):
        monkeypatch.setattr(module, "FAST_PATH", False)
    slow = msgspec.to_builtins(replay(paths))
    return fast, slow


@pytest.mark.parametrize("path", expand_paths([DATA]), ids=lambda p: p.split("/data/")[-1])
def test_every_real_trace_agrees(path, monkeypatch):
    fast, slow = both_ways([path], monkeypatch)
    assert fast == slow


def test_invalid_lines_and_their_numbers_agree(tmp_path, monkeypatch):
    with gzip.open(only_file("v2_python_api"), "rb") as handle:
        lines = handle.read().split(b"\n")
    lines[40] = lines[40].replace(b'"name":"write"', b'"name":"wr"ite"')  # unescaped quote
    lines[300] = lines[300][:50]  # cut short
    path = tmp_path / "bad-app.pfw"
    path.write_bytes(b"\n".join(lines))
    fast, slow = both_ways([str(path)], monkeypatch)
    assert fast == slow
    assert [s["line"] for s in fast["generations"][0]["invalid_samples"]] == [41, 301]


def test_many_chunks_agree(tmp_path, monkeypatch):
    big = tmp_path / "big-app.pfw.gz"
    build(only_file("v2_python_api"), str(big), 40_000)
    monkeypatch.setattr(replay_module, "iter_chunks",
                        lambda p, pr, *a, **k: parse_iter(p, pr))
    fast, slow = both_ways([str(big)], monkeypatch)
    assert fast == slow


def parse_iter(path, problems):
    from scrtune.events.reader import iter_chunks

    return iter_chunks(path, problems, 64 << 10)


@pytest.mark.parametrize("chunk_bytes", [1, 7, 300, 4096, 1 << 20])
@pytest.mark.parametrize("compressed", [False, True])
def test_chunks_rejoin_to_the_file(tmp_path, chunk_bytes, compressed):
    """Lines shorter and longer than a block: the chunks, joined, are the file's lines."""
    lines = [b"x" * (n * 37 % 911) for n in range(400)] + [b"", b"last"]
    content = b"\n".join(lines) + b"\n"
    path = tmp_path / ("t-app.pfw.gz" if compressed else "t-app.pfw")
    path.write_bytes(gzip.compress(content) if compressed else content)
    chunks = list(iter_chunks(str(path), ReadProblems(), chunk_bytes))
    assert all(isinstance(c, Chunk) for c in chunks)
    assert b"\n".join(c.joined() for c in chunks) == content[:-1]


def test_a_chunk_parses_as_its_joined_bytes():
    """The C parser reads a chunk's head and body in place; the result is the same as the
    joined copy's, invalid lines and their numbers included."""
    with gzip.open(only_file("v2_python_api"), "rb") as handle:
        lines = handle.read().split(b"\n")
    lines[7] = lines[7][:40]  # an invalid line in the head
    lines[120] = lines[120][:-9]  # and one in the body
    context = FileContext(Generation.DFTRACER_2)
    for cut in (1, 8, 9, 200, len(lines) - 1):
        chunk = Chunk(b"\n".join(lines[:cut]), memoryview(b"\n".join(lines[cut:])))
        in_place, _ = parse_block(chunk, context)
        copied, _ = parse_block(chunk.joined(), context)
        assert in_place.lines == copied.lines == len(lines)
        assert in_place.invalid_samples == copied.invalid_samples
        assert [s.line for s in in_place.invalid_samples][:2] == [7, 120]
        assert in_place.names == copied.names and in_place.records == copied.records
        for name, column in copied.columns.items():
            assert in_place.columns[name].tolist() == column.tolist()
