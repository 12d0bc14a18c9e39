"""The C fast path and the pure-Python parser give the same statistics on every real trace."""

from __future__ import annotations

import gzip

import msgspec
import pytest

from scrtune.engine import replay as replay_module
from scrtune.engine.replay import replay
from scrtune.events import parse
from scrtune.events.reader import expand_paths
from tests.conftest import DATA, only_file
from tests.tracing.largetrace import build

pytestmark = pytest.mark.skipif(parse._fastparse is None, reason="C fast path not built")


def both_ways(paths, monkeypatch):
    monkeypatch.setattr(parse, "FAST_PATH", True)
    fast = msgspec.to_builtins(replay(paths))
    monkeypatch.setattr(parse, "FAST_PATH", False)
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
