"""The feedback loop on recorded sequences of outputs: keep what helped, revert what hurt."""

from __future__ import annotations

import pytest

from scrtune.goodput.tuner import Output, badput_per_step, experiments, mtbf_estimate


def outputs(config: str, start: float, saves: list[float], steps: int = 100) -> list[Output]:
    return [Output(config=config, wall_s=start + i, save_s=s, steps=steps)
            for i, s in enumerate(saves)]


def test_a_change_that_helped_is_kept_and_one_that_hurt_is_reverted():
    recorded = (outputs("default", 0, [10.0, 10.5, 9.8, 10.2])
                + outputs("file-buf-1.75G", 10, [4.1, 3.9, 4.0, 4.2])  # helped: ~2.5x faster
                + outputs("single-to-xor", 20, [6.2, 5.9, 6.1]))  # hurt: slower than 4
    found = experiments(recorded, predicted={"default": 0.10, "file-buf-1.75G": 0.04,
                                             "single-to-xor": 0.036})
    assert [(e.before, e.after, e.verdict) for e in found] == [
        ("default", "file-buf-1.75G", "kept"), ("file-buf-1.75G", "single-to-xor", "reverted")]
    assert found[0].measured_before == pytest.approx(0.10125)
    assert found[0].measured_after == pytest.approx(0.0405)
    assert found[0].predicted_change == pytest.approx(-0.6)
    assert found[1].predicted_change == pytest.approx(-0.1)  # predicted better, measured worse


def test_a_change_within_the_noise_is_reverted():
    recorded = outputs("a", 0, [10, 14, 6, 12]) + outputs("b", 10, [9.5, 13, 7, 11])
    (found,) = experiments(recorded)
    assert found.verdict == "reverted" and found.noise > 0.05


def test_too_few_outputs_are_still_measuring():
    (found,) = experiments(outputs("a", 0, [10, 10, 10]) + outputs("b", 10, [4, 4]))
    assert found.verdict == "measuring"


def test_mtbf_prior_updated_by_observed_crashes():
    assert mtbf_estimate(86400 * 365, 0, 0) == 86400 * 365
    # two crashes in ten days pull a 1-year prior down to about 4 months
    assert mtbf_estimate(86400 * 365, 2, 86400 * 10) == pytest.approx(86400 * 375 / 3)


def test_badput_per_step_and_noise():
    mean, noise = badput_per_step(outputs("a", 0, [10, 10, 10, 10]))
    assert mean == 0.1 and noise == 0


def _loop(tmp_path, save_after: float):
    import json
    import os
    import time

    from tests.test_daemon import client_for, feed, start_daemon, stop

    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    proc = start_daemon(directory)
    try:
        client = client_for(directory)
        first = client.recommend().result["config_id"]
        now = time.time()

        def outputs(config, save_s, at):
            for i in range(4):
                detail = json.dumps({"config": config, "save_s": save_s, "steps": 100})
                assert client.record("job", "checkpoint_save_finished", at + i, detail=detail).ok

        outputs(first, 10.0, now)
        feed(directory)  # the daemon learns: its recommendation changes
        second = client.recommend().result["config_id"]
        assert second != first
        outputs(second, save_after, now + 100)
        status = client.status().result
        served = client.recommend().result["config_id"]
        stop(proc)
        proc = start_daemon(directory)  # a restarted daemon measures from the recorded saves
        restarted = client_for(directory).status().result["experiments"]
        assert json.dumps(restarted) == json.dumps(status["experiments"])  # NaN != NaN
        return first, second, status, served
    finally:
        stop(proc)


def test_daemon_reverts_a_change_that_hurt(tmp_path):
    first, second, status, served = _loop(tmp_path, save_after=15.0)
    (experiment,) = status["experiments"]
    assert (experiment["before"], experiment["after"], experiment["verdict"]) == \
        (first, second, "reverted")
    assert served == first  # the configuration before the change is served again


def test_daemon_keeps_a_change_that_helped(tmp_path):
    first, second, status, served = _loop(tmp_path, save_after=4.0)
    assert status["experiments"][0]["verdict"] == "kept"
    assert served != first  # kept: no going back (new measurements may suggest a next change)


def test_observed_crashes_lower_the_mtbf_the_daemon_plans_with(tmp_path):
    import os

    from tests.test_daemon import client_for, start_daemon, stop

    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    proc = start_daemon(directory)
    try:
        client = client_for(directory)
        prior = client.status().result["job_mtbf_s"]
        for at in (1000.0, 2000.0, 3000.0):  # started three times, never terminated: 2 crashes
            client.record("job", "job_started", at)
        assert client.status().result["job_mtbf_s"] < prior / 2
    finally:
        stop(proc)
