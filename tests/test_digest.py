"""The I/O digest the C parser sums while scanning equals the one built from the columns."""

from __future__ import annotations

import numpy as np
import pytest

from scrtune.engine.replay import ReplayOptions, new_stats
from scrtune.events import parse
from scrtune.events.digest import KEY_COLUMNS, IoDigest, digest_rows, sums_by_key
from scrtune.events.parse import FileContext, parse_block
from scrtune.events.reader import ReadProblems, expand_paths, iter_chunks
from tests.conftest import DATA
from tests.test_fast_path import _edge_lines

pytestmark = pytest.mark.skipif(parse._fastparse is None, reason="C fast path not built")


def canonical(digest: IoDigest):
    """What a digest says, whatever the order and repetition of its entries."""
    width = len(KEY_COLUMNS)
    entries = sums_by_key(digest.entries[:, :width], digest.entries[:, width:])
    threads = np.unique(digest.threads, axis=0) if len(digest.threads) else digest.threads
    span = (digest.first_ts_us, digest.last_end_us) if digest.complete_rows else None
    return entries.tolist(), threads.tolist(), span, digest.complete_rows


def parsed_batches(path: str, chunk_bytes: int):
    context = FileContext()
    for chunk in iter_chunks(path, ReadProblems(), chunk_bytes):
        batch, context = parse_block(chunk, context)
        yield batch


@pytest.mark.parametrize("path", expand_paths([DATA]), ids=lambda p: p.split("/data/")[-1])
def test_the_parsers_digest_is_the_columns_digest(path):
    """On every real trace, in small chunks (so C rows and Python rows share batches)."""
    digested = 0
    for batch in parsed_batches(path, 16 << 10):
        if batch.digest is None:  # the Python parser's batches: the engine digests the rows
            continue
        digested += 1
        assert canonical(batch.digest) == canonical(digest_rows(batch.columns))
    if path.endswith(".pfw.gz") and "v2" in path:
        assert digested  # DFTracer 2.x files take the C path


def test_edge_lines_digest_alike():
    block = "\n".join(_edge_lines()).encode()
    batch, _ = parse_block(block, FileContext(parse.Generation.DFTRACER_2), fast=True)
    assert batch.digest is not None and batch.digest.complete_rows == len(batch)
    assert canonical(batch.digest) == canonical(digest_rows(batch.columns))


def test_a_digest_counts_like_the_rows(tmp_path):
    """Statistics fed batches with their parser's digest equal those fed the same batches
    without one (the engine then digests the rows itself)."""
    paths = [p for p in expand_paths([DATA]) if "v2" in p][:3]
    assert paths
    with_digest, without = new_stats(ReplayOptions()), new_stats(ReplayOptions())
    for path in paths:
        for batch in parsed_batches(path, 64 << 10):
            with_digest.add(batch)
            batch.digest = None
            without.add(batch)
    assert with_digest.to_bytes() == without.to_bytes()
    assert with_digest.ops and with_digest.file_io and with_digest.threads
