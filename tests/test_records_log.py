"""`scrtune daemon --records-log FILE`: the job's goodput records kept where they outlive the
node (issue 42: they lived only in rank 0's node-local temp dir), each once, readable by
`scrtune goodput --log`; a file that cannot be written never costs a record."""

from __future__ import annotations

import json
import socket

from scrtune.daemon.protocol import Record
from scrtune.daemon.records_log import RecordsLog
from scrtune.daemon.service import Service
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile


def _job(service: Service, resend: bool = False) -> None:
    steps = [("job_started", -1), ("checkpoint_save_started", -1),
             ("checkpoint_save_finished", 10), ("job_terminated", -1)]
    for number, (kind, step) in enumerate(steps):
        record = Record(job="llama", run=7, kind=kind, wall_s=1_795_000_000.0 + number,
                        step=step, record_id=f"r{number}")
        service.record(record)
        if resend:  # a late reply: the client sends it again
            assert service.record(record)["duplicate"] is True


def test_each_record_once_on_the_named_host_and_read_by_goodput(tmp_path, run_cli) -> None:
    service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile())
    service.records_log = RecordsLog(str(tmp_path / "goodput-%h.jsonl"))
    _job(service, resend=True)
    service.records_log.close()
    path = tmp_path / f"goodput-{socket.gethostname()}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["job_started", "checkpoint_save_started",
                                                "checkpoint_save_finished", "job_terminated"]
    assert lines[2]["step"] == 10 and all(line["run"] == 7 for line in lines)
    from_log = run_cli("goodput", "--log", str(path), "--format", "json")
    assert from_log.returncode == 0, from_log.stderr
    from_store = run_cli("goodput", "--db", str(tmp_path / "s.sqlite"), "--format", "json")
    assert json.loads(from_log.stdout) == json.loads(from_store.stdout)
    assert json.loads(from_log.stdout)["total_s"] == 3.0


def test_an_unwritable_log_is_said_once_and_every_record_still_stored(tmp_path,
                                                                       caplog) -> None:
    service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile())
    service.records_log = RecordsLog(str(tmp_path / "missing-dir" / "goodput.jsonl"))
    _job(service)
    assert service.store.event_count() == 4
    assert sum("--records-log" in r.message for r in caplog.records) == 1
