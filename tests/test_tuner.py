"""The feedback loop (issue 44): experiments only where they can matter, verdicts with a stated
false-keep rate, a failure rate learned from the job's own crashes, and one story told by the
daemon's log and `status`. Simulated jobs with seeded noise (tests/loop_sim.py)."""

from __future__ import annotations

import math
import random

import pytest

from scrtune.daemon.protocol import Status
from scrtune.daemon.service import Service
from scrtune.goodput.store import Store
from scrtune.goodput.tuner import (
    FALSE_KEEP_RATE,
    MAX_SAMPLES,
    MIN_SAMPLES,
    PRIOR_WEIGHT_S,
    Output,
    experiments,
    mtbf_estimate,
    t_quantile,
)
from scrtune.intents.inputs import SystemProfile
from tests.loop_sim import SimJob

YEAR_S = 365 * 86400.0


def outputs(config: str, start: float, saves: list[float], steps: int = 100,
            compute_s: float = 0.0) -> list[Output]:
    return [Output(config=config, wall_s=start + i, save_s=s, steps=steps, compute_s=compute_s)
            for i, s in enumerate(saves)]


def noisy(rng: random.Random, mean: float, count: int, sigma: float) -> list[float]:
    return [mean * math.exp(rng.gauss(0, sigma)) for _ in range(count)]


# -- verdicts ---------------------------------------------------------------------------------
def test_a_change_that_helped_is_kept_and_one_that_hurt_is_reverted():
    recorded = (outputs("default", 0, [10.0, 10.5, 9.8, 10.2])
                + outputs("file-buf-1.75G", 10, [4.1, 3.9, 4.0, 4.2])  # helped: ~2.5x faster
                + outputs("single-to-xor", 20, [6.2, 5.9, 6.1]))  # hurt: slower than 4
    found = experiments(recorded, predicted={"file-buf-1.75G": -0.6, "single-to-xor": -0.1})
    assert [(e.before, e.after, e.verdict) for e in found] == [
        ("default", "file-buf-1.75G", "kept"), ("file-buf-1.75G", "single-to-xor", "reverted")]
    assert found[0].measure == "blocking s"  # no compute times recorded: blocking per output
    assert found[0].measured_before == pytest.approx(10.125)
    assert found[0].measured_after == pytest.approx(4.0)  # decided at the 3rd output
    assert found[0].predicted_change == pytest.approx(-0.6)
    assert found[1].why == "measured worse beyond the noise"
    assert "kept after 3 outputs against 4" in found[0].summary()


def test_a_change_within_the_noise_is_measured_on_until_it_is_given_up():
    rng = random.Random(5)
    recorded = outputs("a", 0, noisy(rng, 10, 8, 0.3))
    recorded += outputs("b", 100, noisy(rng, 9.5, MAX_SAMPLES - 1, 0.3))
    (found,) = experiments(recorded)
    assert found.verdict == "measuring" and found.noise > 0.05
    recorded += outputs("b", 200, noisy(rng, 9.5, 1, 0.3))
    (found,) = experiments(recorded)
    assert found.verdict == "reverted" and found.outputs_after == MAX_SAMPLES
    assert "no gain beyond the noise" in found.why


def test_too_few_outputs_are_still_measuring():
    (found,) = experiments(outputs("a", 0, [10, 10, 10]) + outputs("b", 10, [4, 4]))
    assert found.verdict == "measuring"


@pytest.mark.parametrize("p, df, table", [(0.975, 1, 12.706), (0.975, 10, 2.228),
                                           (0.95, 5, 2.015), (0.99, 30, 2.457),
                                           (0.995, 3.0, 5.841)])
def test_the_t_quantile_is_the_published_tables(p, df, table):
    """Student's t quantiles as printed in the tables (3 decimals); Welch's fractional
    degrees of freedom are taken to 0.01, so a look's new float finds the cached answer."""
    assert t_quantile(p, df) == pytest.approx(table, abs=5e-4)
    assert t_quantile(p, df + 0.004) == t_quantile(p, df)
    assert t_quantile(p, df + 0.5) < t_quantile(p, df)  # more freedom, a thinner tail


@pytest.mark.parametrize("sigma", [0.1, 0.4])
def test_under_pure_noise_the_false_keep_rate_holds(sigma):
    """A change that does nothing, 2,000 seeds, each measured to its verdict: kept at most
    FALSE_KEEP_RATE of the time (the binomial margin of 2,000 draws added)."""
    kept = 0
    for seed in range(2000):
        rng = random.Random(seed)
        recorded = outputs("a", 0, noisy(rng, 3.0, 3 + seed % 10, sigma), compute_s=60)
        recorded += outputs("b", 100, noisy(rng, 3.0, MAX_SAMPLES, sigma), compute_s=60)
        (found,) = experiments(recorded)
        assert found.verdict in ("kept", "reverted")
        kept += found.verdict == "kept"
    margin = 3 * math.sqrt(FALSE_KEEP_RATE * (1 - FALSE_KEEP_RATE) / 2000)
    assert kept / 2000 <= FALSE_KEEP_RATE + margin, kept


def test_looking_after_every_output_needs_the_per_look_level(monkeypatch):
    """The same noise judged at the full level at every look keeps more no-op changes than
    the bound allows: the correction is what holds it (the test above can fail)."""
    from scrtune.goodput import tuner

    monkeypatch.setattr(tuner, "LOOKS", 1)
    kept = 0
    for seed in range(1000):
        rng = random.Random(seed)
        recorded = outputs("a", 0, noisy(rng, 3.0, 6, 0.4), compute_s=60)
        recorded += outputs("b", 100, noisy(rng, 3.0, MAX_SAMPLES, 0.4), compute_s=60)
        kept += experiments(recorded)[0].verdict == "kept"
    assert kept / 1000 > 1.5 * FALSE_KEEP_RATE, kept


def test_a_real_twofold_gain_is_kept_within_the_stated_outputs():
    """Half the blocking time at 30% noise per output, against a run of 12 baseline outputs:
    kept in at least 19 of 20 seeds, within MAX_SAMPLES outputs, most within 6."""
    used = []
    for seed in range(200):
        rng = random.Random(seed)
        recorded = outputs("a", 0, noisy(rng, 4.0, 12, 0.3), compute_s=60)
        recorded += outputs("b", 100, noisy(rng, 2.0, MAX_SAMPLES, 0.3), compute_s=60)
        (found,) = experiments(recorded)
        if found.verdict == "kept":
            used.append(found.outputs_after)
    assert len(used) >= 190 and max(used) <= MAX_SAMPLES
    assert sorted(used)[len(used) // 2] <= 6


# -- the failure rate -------------------------------------------------------------------------
def test_observed_crashes_move_the_mtbf_as_the_stated_prior_says():
    prior = 2.5 * YEAR_S
    assert mtbf_estimate(prior, 0, 0) == prior
    assert mtbf_estimate(prior, 0, 30 * 86400) == prior  # no crash: never above the profile's
    # 7 crashes in 216 s (issue 44: the old prior made that 228 days): the prior is worth
    # PRIOR_WEIGHT_S of the job's running, so (W + T) / (W / M + n)
    expected = (PRIOR_WEIGHT_S + 216) / (PRIOR_WEIGHT_S / prior + 7)
    assert mtbf_estimate(prior, 7, 216) == pytest.approx(expected)
    assert 30 < expected < 45  # the job crashed every 31 s
    assert mtbf_estimate(prior, 180, 3600) == pytest.approx(
        (PRIOR_WEIGHT_S + 3600) / (PRIOR_WEIGHT_S / prior + 180))  # -> the observed 20 s
    assert mtbf_estimate(prior, 7, 216, prior_weight_s=0) == pytest.approx(216 / 7)


def test_the_daemon_plans_with_the_mtbf_its_crashes_say(tmp_path):
    service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile(nodes=2))
    job = SimJob(service, cost_s=lambda scr: 2.0, noise=0.0)
    for _ in range(8):  # 8 launches, 7 crashed (no end recorded)
        job.launch(outputs=1, crash=True)
    job.launch(outputs=1)
    status = service.status(Status())
    seen = status["failures"]
    assert seen["crashes"] == 8 and seen["prior_weight_s"] == PRIOR_WEIGHT_S
    assert status["job_mtbf_s"] == pytest.approx(mtbf_estimate(
        seen["prior_mtbf_s"], 8, seen["observed_s"]))
    # the interval planned with it, not with the profile's 2.5 years
    daly = next(i for i in status["latest"]["intents"] if i["name"] == "interval")["value"]
    assert daly["checkpoint_seconds"] < 120


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
                # a job at TunedSCR's default cadence (SCR had none): 60 s of compute each
                detail = json.dumps({"config": config, "save_s": save_s, "steps": 100,
                                     "compute_s": 60.0, "due": 1, "interval_s": 60.0})
                assert client.record("job", "checkpoint_save_finished", at + 100 * i,
                                     detail=detail).ok

        outputs(first, 10.0, now)
        feed(directory)  # the daemon learns: its recommendation changes
        second = client.recommend().result["config_id"]
        assert second != first
        outputs(second, save_after, now + 1000)
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


def test_a_change_superseded_before_its_verdict_is_abandoned_not_measuring_forever():
    """A crash served a shorter cadence while the last change was measuring: that change
    is neither kept nor reverted, and says so."""
    recorded = (outputs("a", 0, [3.0, 3.1, 2.9, 3.0], compute_s=60)
                + outputs("b", 10, [2.9, 3.0], compute_s=60)
                + outputs("c", 20, [3.0], compute_s=60))
    first, second = experiments(recorded)
    assert (first.verdict, first.why) == ("abandoned", "c was served before a verdict")
    assert "abandoned after 2 outputs" in first.summary()
    assert second.verdict == "measuring" and second.before == "a"


def test_a_change_with_no_baseline_to_compare_is_unjudged_once_it_can_be_one():
    """A cadence served after crashes, before its baseline had 3 outputs, stayed measuring
    after 50 outputs on the real stack, and blocked every later experiment; then it waited
    12 outputs, which on the Slurm example held the cache tier back past the job's end. Its
    baseline gets no more outputs while it runs: with the 3 outputs a baseline needs, it
    stays, and the next change is judged against them."""
    recorded = outputs("a", 0, [3.0], compute_s=60)
    recorded += outputs("b", 10, [2.0] * (MIN_SAMPLES - 1), compute_s=60)
    assert experiments(recorded)[0].verdict == "measuring"
    recorded += outputs("b", 100, [2.0], compute_s=60)
    (found,) = experiments(recorded)
    assert found.verdict == "unjudged" and "nothing to compare with" in found.why
    assert found.outputs_after == MIN_SAMPLES
    recorded += outputs("c", 200, [1.0] * 3, compute_s=60)  # judged against b's outputs now
    assert [(e.before, e.verdict) for e in experiments(recorded)] == [
        ("a", "unjudged"), ("b", "kept")]


def test_an_experiment_measured_against_one_output_says_its_noise_is_not_measurable():
    """The closed-loop benchmark's status read "-26% ± inf%" for a change measured against the
    one output the configuration before it had."""
    from scrtune.goodput.tuner import Experiment

    found = Experiment(before="a", after="b", started_s=0.0, predicted_change=math.nan,
                       measured_before=0.1749, measured_after=0.1303, noise=math.inf,
                       verdict="unjudged", outputs_before=1, outputs_after=12)
    assert "(-26%, noise not measurable)" in found.summary()
    assert "inf" not in found.summary()
