"""Issue 45: a spool compacted (emptied once every record in it was acknowledged) took its next
record at the old end of the file, after a run of zero bytes, and the next client's adoption
lost the first unacknowledged record after them (2 of 3 recovered). A real process writes the
spool and is SIGKILLed; this one adopts what it left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from scrtune.client.spool import COMPACT_LINES, Spool

WRITER = """
import os, sys, time
from scrtune.client.spool import COMPACT_LINES, Spool
from scrtune.daemon.protocol import Record

def record(n):
    return Record(request_id=n, record_id=f"w-{n}", job="job", kind="step_finished",
                  wall_s=1.7e9 + n, step=n)

spool = Spool(sys.argv[1], "abc")
for n in range(COMPACT_LINES):  # acknowledged, then compacted away
    spool.add(record(n))
    spool.ack(f"w-{n}")
for n in range(COMPACT_LINES, COMPACT_LINES + 3):  # never acknowledged: the daemon was away
    spool.add(record(n))
print(os.path.getsize(spool.path), flush=True)
time.sleep(60)
"""


def test_records_after_a_compaction_are_adopted_all(tmp_path) -> None:
    directory = str(tmp_path / "spool")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, directory],
                              stdout=subprocess.PIPE, text=True)
    size = int(writer.stdout.readline())
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    [name] = [n for n in os.listdir(directory) if n.endswith(".spool")]
    with open(os.path.join(directory, name), "rb") as handle:
        assert b"\0" not in handle.read()  # no run of zeros before the new lines
    assert size < 2_000  # three records, not the compacted lines' length of zeros
    adopted = Spool(directory, "def").adopt()
    assert [r.step for r in adopted] == [COMPACT_LINES, COMPACT_LINES + 1, COMPACT_LINES + 2]


def test_a_spool_left_with_zeros_by_an_older_client_is_adopted_whole(tmp_path) -> None:
    """Spools written before the fix (zeros, then the records) lose nothing either."""
    import msgspec

    from scrtune.daemon.protocol import Record

    directory = tmp_path / "spool"
    directory.mkdir(mode=0o700)
    lines = b"".join(b"+" + msgspec.json.encode(Record(
        record_id=f"old-{n}", job="job", kind="step_finished", wall_s=1.7e9, step=n)) + b"\n"
        for n in range(3))
    (directory / f"{os.uname().nodename}-999999999-abc.spool").write_bytes(
        bytes(300_000) + lines)
    adopted = Spool(str(directory), "def").adopt()
    assert [r.step for r in adopted] == [0, 1, 2]
