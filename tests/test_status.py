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
    assert "no write sizes" in _evidence(first, "write_sizes")
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
