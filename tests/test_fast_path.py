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
from scrtune.events.reader import (
    FIRST_CHUNK_BYTES,
    Chunk,
    ReadProblems,
    expand_paths,
    iter_chunks,
)
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
    for first_bytes in (FIRST_CHUNK_BYTES, 1, 1000):
        chunks = list(iter_chunks(str(path), ReadProblems(), chunk_bytes, first_bytes))
        assert all(isinstance(c, Chunk) for c in chunks)
        assert b"\n".join(c.joined() for c in chunks) == content[:-1]


@pytest.mark.parametrize("compressed", [False, True])
def test_the_first_chunk_is_small(tmp_path, compressed):
    """The first chunk is parsed before the file's generation is known (the Python path):
    it holds about FIRST_CHUNK_BYTES, the next ones a full chunk each."""
    content = b"".join(b'{"id":%d,"name":"write"}\n' % n for n in range(200_000))
    path = tmp_path / ("t-app.pfw.gz" if compressed else "t-app.pfw")
    path.write_bytes(gzip.compress(content) if compressed else content)
    sizes = [len(c.joined()) for c in iter_chunks(str(path), ReadProblems(), 1 << 20)]
    assert FIRST_CHUNK_BYTES - 40 <= sizes[0] <= FIRST_CHUNK_BYTES
    assert all((1 << 20) - 40 <= size <= (1 << 20) + 40 for size in sizes[1:-1])


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


def _records(batch):
    """A batch's records as sorted tuples of resolved values (the C path puts the lines it
    leaves to Python after its own rows)."""
    tables = {"name": batch.names, "cat": batch.cats, "file": batch.files, "host": batch.hosts}
    columns = {k: v.tolist() for k, v in batch.columns.items()}
    rows = []
    for i in range(len(batch)):
        rows.append(tuple(sorted(
            (k, tables[k][v] if k in tables and v >= 0 else v) for k, v in
            ((k, col[i]) for k, col in columns.items()))))
    return sorted(rows, key=repr)  # a value may be a str in one row and an int in another


def _edge_lines():
    """Lines that probe the scanner's word-at-a-time string search and its number checks:
    a quote or backslash at every offset of a word, 17 to 20 digits, leading zeros, signs,
    floats, literals, and tokens that are not JSON. One host, as in any trace file."""
    template = ('{"id":1,"name":"%s","cat":"POSIX","type":3,"pid":%s,"tid":7,"ts":%s,'
                '"dur":%s,"ph":1,"args":{"hhash":"node1","ret":%s,"count":%s,"fhash":"%s"}}')
    names = ["", "w", "write", "x" * 7, "x" * 8, "x" * 9, "y" * 16, "z" * 23]
    names += ["a" * k + "\\\\" + "b" for k in range(10)]  # escaped backslash: Python parses it
    names += ["a" * k + '\\"' for k in range(10)]
    numbers = ["0", "-0", "7", "-3", "00012", "1" * 17, "9" * 18, "1" * 19, "9" * 20,
               "1.5", "2e3", "-", "12a", "1.", "1e", "-1.5E+2", "true", "nul", "null", "01.5"]
    lines = []
    for i, name in enumerate(names):
        for j, number in enumerate(numbers):
            ts = number if (i + j) % 3 == 0 else str(1000 + i)
            ret = number if (i + j) % 3 == 1 else "4096"
            pid = number if (i + j) % 3 == 2 else "5"
            other = number if (i + j) % 2 else "55"  # an argument only skipped over
            lines.append(template % (name, pid, ts, "2", ret, other, "f" * (i % 19)))
    return lines


def test_scanner_edges_agree_with_python():
    """Every token edge gives the C path the same records (and the same invalid count) as the
    Python parser."""
    block = "\n".join(_edge_lines()).encode()
    context = FileContext(Generation.DFTRACER_2)
    fast, _ = parse_block(block, context, fast=True)
    slow, _ = parse_block(block, context, fast=False)
    assert fast.lines == slow.lines
    assert (fast.records, fast.invalid_lines) == (slow.records, slow.invalid_lines)
    assert _records(fast) == _records(slow)
    assert 0 < len(fast) < fast.lines  # both paths and some invalid lines were exercised


def _off_template_lines():
    """DFTracer's own layout, every prefix of it, and the ways a line can leave it: spaces,
    another key order, no args, other phases, odd ids, trailing bytes, keys after args, a
    string cut at the end of its line."""
    base = ('{"id":12,"name":"write","cat":"POSIX","type":3,"pid":5,"tid":7,'
            '"ts":1795301712581819,"dur":42,"ph":1,'
            '"args":{"hhash":"node1","ret":4096,"fhash":"f1"}}')
    variants = [base[:cut] for cut in range(len(base))]
    swaps = [(',"name"', ', "name"'), ('"id":12', '"id" : 12'), ('"ph":1', '"ph":12'),
             ('"ph":1', '"ph":1.0'), ('"ph":1', '"ph":"1"'), ('"id":12', '"id":1.5'),
             ('"id":12', '"id":"x"'), ('"id":12,', ''), ('"type":3', '"type":-1'),
             ('"ts":1795301712581819', '"ts":-5'), ('"dur":42', '"dur":-1'),
             (',"args":{"hhash":"node1","ret":4096,"fhash":"f1"}', ''),
             ('"args":{"hhash":"node1","ret":4096,"fhash":"f1"}', '"args":{}'),
             ('"fhash":"f1"}', '"fhash":"f1","x":{"y":1}}'),
             ('"fhash":"f1"}}', '"fhash":"f1"},"extra":1}'),
             ('"name":"write"', '"name":"wr\\"ite"'), ('"name":"write"', '"name":5'),
             ('"pid":5,"tid":7', '"tid":7,"pid":5'), ('"ts":1795301712581819,', ''),
             ('"ph":1,', '"ph":1,"ph":3,'), ('"ts":1795301712581819', '"ts":17953017125818190'),
             ('{"id"', '{ "id"'), ('"id":12', '"id":012'), ('{"hhash"', '{ "hhash"'),
             ('"node1","ret"', '"node1" , "ret"'), ('"hhash":"node1",', ''),
             ('"ret":4096,"fhash":"f1"', '"fhash":"f1","hhash":"node1"')]
    for old, new in swaps:
        assert old in base
        variants.append(base.replace(old, new, 1))
    variants += [base + tail for tail in (" ", "\r", "\t", "}", "x", " }")]
    # two invalid lines that read as one valid event if a string ran on past its line's end
    # (the scan reads a line in DFTracer's layout up to the end of the buffer, not of the line)
    variants += ['{"id":1,"name":"a',
                 '","cat":"POSIX","type":3,"pid":5,"tid":7,"ts":1,"dur":1,"ph":1}']
    return [base] + variants


def test_lines_off_the_template_agree_with_python():
    """The scan reads DFTracer's layout by literal keys and everything else by the general
    scanner: on every variant the C path gives the Python parser's records and invalid count.
    Lines without a host go in a block of their own: Python gives a block's rows one host (a
    file is written on one host), the C path each row its own."""
    lines = _off_template_lines()
    context = FileContext(Generation.DFTRACER_2)
    totals = [0, 0]
    for hosted in (True, False):
        block = "\n".join(line for line in lines if ("hhash" in line) == hosted).encode()
        fast, _ = parse_block(block, context, fast=True)
        slow, _ = parse_block(block, context, fast=False)
        assert fast.lines == slow.lines
        assert (fast.records, fast.invalid_lines) == (slow.records, slow.invalid_lines)
        assert _records(fast) == _records(slow)
        totals = [totals[0] + slow.records, totals[1] + slow.invalid_lines]
    assert totals[0] > 10 and totals[1] > 100


def _repeating_lines():
    """Lines whose heads (name to tid) and tails (from "ph" to the end) repeat the previous
    line's or the one's before, which the scan reads by comparing bytes, mixed with lines
    that only start like a remembered one: a tail followed by more bytes, cut short, with a
    value changed after the compared bytes, or at the end of the block."""
    heads = [',"name":"write","cat":"POSIX","type":3,"pid":5,"tid":7,"ts":',
             ',"name":"lseek64","cat":"POSIX","type":3,"pid":5,"tid":7,"ts":',
             ',"name":"write","cat":"POSIX","type":3,"pid":5,"tid":8,"ts":',
             ',"name":"read","cat":"STDIO","type":3,"pid":6,"tid":7,"ts":',
             ',"name":"checkpoint.save","cat":"checkpoint","type":6,"pid":5,"tid":7,"ts":']
    tails = [',"ph":1,"args":{"hhash":"node1","ret":4096,"fhash":"f1"}}',
             ',"ph":1,"args":{"hhash":"node1","ret":0,"whence":1,"fhash":"f1"}}',
             ',"ph":1,"args":{"hhash":"node1","ret":4096,"fhash":"f2"}}',
             ',"ph":1,"args":{"hhash":"node1","step":3,"epoch":1}}',
             ',"ph":1,"args":{"hhash":"node1"}}']  # all on one host, as a file's lines are
    odd = ["", " ", "x", "}", "\r", ',"x":1}', "0"]
    lines = []
    for i in range(1200):
        head = heads[(i // 3) % 4 if i % 5 else (i // 2) % 2]  # runs, and alternations
        tail = tails[(i // 2) % 5 if i % 7 else i % 2]
        if i % 23 == 0:  # a region (Python reads step and epoch on regions only)
            head, tail = heads[4], tails[3]
        elif tail == tails[3]:
            tail = tails[0]
        if i % 11 == 0:
            tail += odd[(i // 11) % len(odd)]
        if i % 13 == 0:
            tail = tail[: (i * 7) % len(tail)]
        ts = "-3" if i % 17 == 0 else str(1_000_000 + i)
        lines.append(f'{{"id":{i}{head}{ts},"dur":{i % 50}{tail}')
    lines.append(lines[-2][:60])  # a remembered head, cut at the end of the block
    return lines


def _agreeing_batches(lines: list[str]):
    """The lines parsed by the C path and by Python, which agree on every record and invalid
    line; (fast, slow)."""
    block = "\n".join(lines).encode()
    context = FileContext(Generation.DFTRACER_2)
    fast, _ = parse_block(block, context, fast=True)
    slow, _ = parse_block(block, context, fast=False)
    assert fast.lines == slow.lines == len(lines)
    assert (fast.records, fast.invalid_lines) == (slow.records, slow.invalid_lines)
    assert [s.line for s in fast.invalid_samples] == [s.line for s in slow.invalid_samples]
    assert _records(fast) == _records(slow)
    return fast, slow


def test_repeated_heads_and_tails_agree_with_python():
    """The scan's remembered heads and tails give the Python parser's records and invalid
    lines, and the same whether the lines come in one buffer or cut across two."""
    lines = _repeating_lines()
    context = FileContext(Generation.DFTRACER_2)
    fast, slow = _agreeing_batches(lines)
    assert slow.records > 800 and slow.invalid_lines > 100
    for cut in (1, 2, 3, 500, len(lines) - 1):
        encoded = [line.encode() for line in lines]
        chunk = Chunk(b"\n".join(encoded[:cut]), memoryview(b"\n".join(encoded[cut:])))
        in_place, _ = parse_block(chunk, context, fast=True)
        assert (in_place.records, in_place.invalid_lines) == (fast.records, fast.invalid_lines)
        assert _records(in_place) == _records(fast)


def _lines_with_changing_integers():
    """Calls whose tails repeat but for their integers (offsets, byte counts, steps), which
    the scan reads in place of a remembered tail's: values of other widths, and every way an
    integer's place can hold something else (floats, leading zeros, 19 digits, strings,
    spaces, duplicate keys, more integers than the scan notes). 150 names on 3 threads fill
    the scan's cache of heads, so heads are also evicted and read again. Step and epoch are
    read on regions only: not on calls, nor on regions of an I/O category in any case
    (Python's str.upper() makes "\\u017f" an "S")."""
    names = ["write", "read", "lseek64"] + [f"region.{i:03d}.x" for i in range(147)]
    tails = ['{"hhash":"h1","ret":%s,"count":%s,"fhash":"f%s"}',
             '{"hhash":"h1","ret":%s,"whence":%s,"offset":%s,"fhash":"f1"}',
             '{"hhash":"h1","step":%s,"epoch":%s,"count":%s}',
             '{"hhash":"h1","a":%s,"b":%s,"c":%s,"d":%s,"e":%s,"ret":%s,"step":%s}',
             '{"hhash":"h1","ret":%s,"ret":%s,"epoch":%s}']
    odd = ["1.5", "01", "-0", "1e3", '"7"', " 5", "true", "null", "1234567890123456789",
           "-123456789012345678", "[1]"]
    lines = []
    for i in range(4000):
        name = names[i % 3] if i % 4 else names[(i * 7) % len(names)]
        layer = 3 if name in ("write", "read", "lseek64") else 6
        calls_tail = tails[(i // 9) % 2 + 3 * (i % 31 == 0)]
        tail = tails[(i // 5) % len(tails)] if layer == 6 else calls_tail
        values = [str((i * 37 + k * 11) % (10 ** (1 + (i + k) % 7))) for k in range(7)]
        if i % 13 == 0:
            values[(i // 13) % 3] = odd[(i // 13) % len(odd)]
        args = tail % tuple(values[:tail.count("%s")])
        cat = f"c{layer}"
        if layer == 6 and i % 17 == 0:  # I/O categories on regions: no step or epoch read
            cat = ["Stdio", "po\u017fix", "\ufb06DIO", "posix", "POSIXX"][(i // 17) % 5]
        head = f'"name":"{name}","cat":"{cat}","type":{layer},"pid":5,"tid":{7 + i % 3}'
        lines.append(f'{{"id":{i},{head},"ts":{1000 + i},"dur":{i % 9},"ph":1,"args":{args}}}')
    return lines


def test_tails_with_changing_integers_agree_with_python():
    _, slow = _agreeing_batches(_lines_with_changing_integers())
    assert slow.records > 3500 and slow.invalid_lines > 20
    sizes = set(slow.columns["size_bytes"].tolist())
    steps = set(slow.columns["step"].tolist())
    assert len(sizes) > 100 and len(steps) > 100  # the integers did change


def _nested(depth: int) -> str:
    return "[" * (depth - 1) + '{"k":1}' + "]" * (depth - 1)


_NESTED_TAKEN = ['{}', '[]', '{"a":{"b":[1,2,{"c":"}"}]},"d":[]}', '[1, "x", true, null, 1.5e3]',
                 '{ "k" : [ {"q":"]"} , [ ] ] }', '{"a":[{"b":{"c":[[["deep"]]]}}]}', _nested(16)]
# not JSON (Python counts the line invalid), or what the scan leaves to Python to decide
_NESTED_LEFT = ['{"a":1,}', '[1,]', '{"a" 1}', '[1 2]', '{"a":[}', '[{"a":1]}', '{"a":01}',
                '{1:2}', '{"a":"x\\"y"}', '[tru]', '{"a":[1', _nested(17)]


def _lines_with_nested_values() -> tuple[list[str], set[int]]:
    """Lines with objects and arrays among their args (as DFTracer's `end` event has), or at
    their top level; and the numbers of those the scan must leave to Python."""
    lines, left = [], set()
    for i, value in enumerate(_NESTED_TAKEN + _NESTED_LEFT):
        for line in (
                f'{{"id":{i},"name":"end","cat":"dftracer","type":1,"pid":5,"tid":5,'
                f'"ts":{1000 + i},"dur":0,"ph":1,"args":{{"hhash":"h1","cfg":{value},"ret":7}}}}',
                f'{{"name":"write","cat":"POSIX","extra":{value},"ts":{2000 + i},"ph":1,'
                f'"dur":3,"pid":5,"tid":6,"type":3,'
                f'"args":{{"hhash":"h1","fhash":"f1","ret":{i}}}}}'):
            if value in _NESTED_LEFT:
                left.add(len(lines))
            lines.append(line)
    # brackets that do not pair, though they are as many as the line needs
    left.add(len(lines))
    lines.append('{"id":99,"name":"end","cat":"dftracer","type":1,"pid":5,"tid":5,"ts":1099,'
                 '"dur":0,"ph":1,"args":{"hhash":"h1","cfg":[{"a":1]}}')
    return lines, left


def test_nested_values_are_skipped_as_python_skips_them():
    """The scan skips objects and arrays it does not read, as the Python parser does; what is
    not JSON, and nesting deeper than it follows, it leaves to Python, which decides."""
    lines, left = _lines_with_nested_values()
    fast, slow = _agreeing_batches(lines)
    # valid JSON left to Python: a string with an escape, nesting past the scan's depth
    assert slow.records == 2 * (len(_NESTED_TAKEN) + 2)
    fallback = parse._fastparse.parse("\n".join(lines).encode())[7]
    assert {line for line, _ in fallback} == left


def test_messages_parse_in_place_as_their_joined_lines():
    """The daemon hands the parser its messages as they arrived, each without its trailing
    newlines: the batch is the joined block's, with the same numbers for invalid lines."""
    from scrtune.daemon.intake import parse_messages

    with gzip.open(only_file("v2_python_api"), "rb") as handle:
        lines = [line for line in handle.read().split(b"\n") if line]
    lines[50] = lines[50][:40]  # cut short: invalid, and its line number must carry over
    lines.insert(120, b"")  # an empty line inside a message
    cuts = [0, 7, 8, 100, 101, 400, len(lines)]
    messages = [b"\n".join(lines[a:b]) + b"\n" * (i % 3)
                for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    (batch,) = parse_messages(messages).batches
    joined = b"\n".join(message.rstrip(b"\n") for message in messages)
    expected, _ = parse_block(joined, FileContext(Generation.DFTRACER_2))
    assert (batch.records, batch.lines, batch.invalid_lines) == \
        (expected.records, expected.lines, expected.invalid_lines)
    assert [s.line for s in batch.invalid_samples] == [s.line for s in expected.invalid_samples]
    assert batch.invalid_lines == 1 and batch.hash_defs == expected.hash_defs
    assert _records(batch) == _records(expected)


@pytest.mark.skipif(parse._fastparse is None, reason="built without a C compiler")
def test_columns_outlive_their_parse_and_can_be_written():
    """The scan hands its columns to numpy without a copy: an array stays valid, and writable,
    after the parse result and its other columns are gone and other parses reuse the memory."""
    import gc

    block = "\n".join(_off_template_lines()[:1] * 3000).encode()
    (ts_us,) = [parse.np.frombuffer(parse._fastparse.parse(block)[2]["ts_us"], dtype="<i8")]
    gc.collect()
    for _ in range(5):
        parse._fastparse.parse(block.replace(b"1795301712581819", b"1000000000000000"))
    assert len(ts_us) == 3000 and (ts_us == 1795301712581819).all()
    ts_us[0] = 5
    assert ts_us[0] == 5
    empty = parse._fastparse.parse(b"not a trace line")
    assert empty[0] == 0 and bytes(empty[2]["ts_us"]) == b""
    # lines far shorter than the scan sizes its columns for: they grow, and agree with Python
    short = b"\n".join(b'{"name":"w","ph":1,"ts":%d,"dur":1}' % i for i in range(3000))
    context = FileContext(Generation.DFTRACER_2)
    fast, _ = parse_block(short, context, fast=True)
    slow, _ = parse_block(short, context, fast=False)
    assert len(fast) == 3000 and _records(fast) == _records(slow)
