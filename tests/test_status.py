"""`scrtune status` shows what the events so far say (issue 42: after 46,646 records it showed the
intents of the first, uninformed recommendation, "no write sizes"), beside what the job is
served, and a polled status recomputes at most every STATUS_REFRESH_S."""

from __future__ import annotations

import gzip

from scrtune.daemon import service as service_module
from scrtune.daemon.intake import parse_messages
from scrtune.daemon.protocol import Recommend, Status
from scrtune.daemon.service import Service
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile
from tests.conftest import only_file


def _evidence(recommendation: dict, intent: str) -> str:
    return next(i["evidence"][0] for i in recommendation["intents"] if i["name"] == intent)


def _trace() -> bytes:
    return gzip.open(only_file("v2_python_api")).read()  # 1, 4 MiB and 64 KiB writes


def test_status_shows_the_intents_of_the_events_so_far_not_the_first_served(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr(service_module, "STATUS_REFRESH_S", 0.0)
    service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile())
    first = service.recommend(Recommend())  # a job's SCR_Init before any trace arrived
    assert "no checkpoint file sizes" in _evidence(first, "write_sizes")
    service.take(parse_messages([_trace()]))
    status = service.status(Status())
    assert status["recommendation"]["config_id"] == first["config_id"]  # still what was served
    assert status["latest"]["config_id"] != first["config_id"]
    assert "1.0 MiB" in _evidence(status["latest"], "write_sizes")
    assert "mean of 2" in _evidence(status["latest"], "interval")  # the trace's 2 checkpoints


def test_a_polled_status_does_not_recompute_within_the_refresh_period(tmp_path, monkeypatch):
    monkeypatch.setattr(service_module, "STATUS_REFRESH_S", 3600.0)
    service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile())
    before = service.status(Status())["latest"]
    service.take(parse_messages([_trace()]))
    assert service.status(Status())["latest"]["config_id"] == before["config_id"]
    monkeypatch.setattr(service_module, "STATUS_REFRESH_S", 0.0)
    assert service.status(Status())["latest"]["config_id"] != before["config_id"]


def test_a_query_before_any_event_says_it_is_uninformed_and_prefers_given_traces(daemon,
                                                                                 run_cli):
    """A job script's query ran before the job's events arrived: uninformed 7 of 7, without a
    word. It says so; given traces of an earlier run, it recommends from them instead."""
    import json

    from tests.test_daemon import feed

    directory, _ = daemon
    blind = run_cli("query", "--dir", directory, "--format", "json")
    assert blind.returncode == 0 and json.loads(blind.stdout)["informed"] is False
    assert "no trace events or checkpoints of this job yet" in blind.stderr
    traced = run_cli("query", "--dir", directory, "--format", "env", "--trace",
                     only_file("v2_python_api"))
    assert traced.returncode == 0 and "SCR_CHECKPOINT_SECONDS" in traced.stdout, traced
    assert "no trace events" not in traced.stderr
    feed(directory)
    informed = run_cli("query", "--dir", directory, "--format", "json")
    assert json.loads(informed.stdout)["informed"] is True and informed.stderr == ""
