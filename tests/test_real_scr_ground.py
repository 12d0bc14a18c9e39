"""Ground the client in what the real SCR v3.1.0 does (issue 42): retention that cannot delete
the newest checkpoint, a run that checkpoints from its first launch, and outputs labelled with
the configuration SCR resolved, not the one asked for. Ground truth: the files SCR restored and
SCR_DEBUG's printout of the values it runs with."""

from __future__ import annotations

import os
import re

import pytest

from tests.test_daemon import client_for, feed, start_daemon, stop
from tests.test_real_scr import DEBUG_LINE, _profile, run_app

pytestmark = pytest.mark.real_scr


def test_an_uninformed_daemon_keeps_every_checkpoint_so_reused_names_restart_newest(
        real_scr, tmp_path) -> None:
    """Every checkpoint writes ckpt/rank_N.dat again. With SCR_PREFIX_SIZE=2 (once served even
    before any trace), SCR deleted the retired checkpoint's files, the newest one's, and the
    relaunch started over."""
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    daemon = start_daemon(directory)
    try:
        assert "SCR_PREFIX_SIZE" not in client_for(directory).recommend().result["scr"]
        _, first = run_app(real_scr, tmp_path, 2, directory, "--steps", "4")
        _, again = run_app(real_scr, tmp_path, 2, directory, "--steps", "1", "--restart")
    finally:
        stop(daemon)
    # stated as SCR's own default, keep every checkpoint (decided.py: a site's file may not
    # retire them)
    assert all([s for s in r["applied"] if s.startswith("SCR_PREFIX_SIZE")] ==
               ["SCR_PREFIX_SIZE=0"] for r in first)
    assert all(r["written"] == [1, 2, 3, 4] for r in first)
    assert all(r["restored"] == {"name": "ckpt.4", "step": 4} for r in again)


@pytest.mark.parametrize("channel", ["environment", "config file"])
def test_shadowed_values_are_reported_and_outputs_carry_what_scr_ran(real_scr, tmp_path,
                                                                       channel) -> None:
    """SCR takes the environment, then the user config file, before SCR_Config: the value
    asked for is reported as shadowed, and the run's outputs are not labelled with the
    daemon's configuration."""
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    daemon = start_daemon(directory, "--system", _profile(tmp_path))
    try:
        feed(directory)
        served = client_for(directory).recommend().result
        asked = served["scr"]["SCR_CACHE_BYPASS"]
        assert asked == "0"  # the profile makes caching pay
        (tmp_path / "plain").mkdir()
        _, plain = run_app(real_scr, tmp_path / "plain", 2, directory)
        other = "1"
        if channel == "environment":
            env = {"SCR_CACHE_BYPASS": other}
        else:
            conf = tmp_path / "user.conf"
            conf.write_text(f"SCR_CACHE_BYPASS={other}\n")
            env = {"SCR_CONF_FILE": str(conf)}
        run, shadowed = run_app(real_scr, tmp_path, 2, directory, env=env)
    finally:
        stop(daemon)
    assert all(r["shadowed"] == {} and r["label"] == served["config_id"] for r in plain)
    printed = dict(DEBUG_LINE.findall(run.stdout + run.stderr))
    assert printed["SCR_CACHE_BYPASS"] == other  # what SCR itself says it runs
    for result in shadowed:
        assert result["shadowed"] == {"SCR_CACHE_BYPASS": [asked, other]}
        assert result["resolved"]["SCR_CACHE_BYPASS"] == other
        assert result["label"].startswith("scr-") and result["label"] != served["config_id"]
    assert len({r["label"] for r in shadowed}) == 1
    assert re.search(r"SCR runs other values than asked for.*SCR_CACHE_BYPASS=" + asked,
                     run.stderr), run.stderr[-2000:]


def test_a_run_without_any_cadence_checkpoints_at_the_default_interval(real_scr,
                                                                        tmp_path) -> None:
    """SCR_CHECKPOINT_INTERVAL, _SECONDS and _OVERHEAD default to 0: SCR_Need_checkpoint never
    says yes. With no daemon to measure one, TunedSCR's default interval makes the run
    checkpoint; SCR's own cadence, where set, is left to decide; default 0 says it never will."""
    nobody = str(tmp_path / "no-daemon")
    args = ("--daemon-timeout-s", "0.2", "--when-needed", "--steps", "6", "--compute-s", "0.1")
    _, timed = run_app(real_scr, tmp_path, 2, nobody, *args, "--default-interval-s", "0.15")
    assert all(len(r["written"]) >= 2 for r in timed), timed[0]["written"]
    _, by_scr = run_app(real_scr, tmp_path, 2, nobody, *args, "--default-interval-s", "0.15",
                        env={"SCR_CHECKPOINT_INTERVAL": "3"})
    assert all(r["written"] == [3, 6] for r in by_scr)  # SCR's every 3rd call, nothing added
    run, never = run_app(real_scr, tmp_path, 2, nobody, *args, "--default-interval-s", "0")
    assert all(r["written"] == [] for r in never)
    assert "need_checkpoint() never says yes" in run.stderr


def test_plain_mpirun_jobs_get_control_directories_of_their_own(real_scr, tmp_path) -> None:
    """Without a resource manager SCR's job id is `defjobid`: two jobs of a user on a node
    shared one control directory, and the second job restored the first one's checkpoint from
    the cache. TunedSCR gives each prefix its own SCR_JOB_ID; a relaunch on the same prefix
    still restores its own newest checkpoint."""
    nobody, control = str(tmp_path / "no-daemon"), tmp_path / "cntl"
    cached = {"SCR_CACHE_BYPASS": "0", "SCR_CACHE_BASE": str(tmp_path / "cache"),
              "SCR_FLUSH": "0"}
    args = ("--daemon-timeout-s", "0.2")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    _, wrote = run_app(real_scr, first, 2, nobody, *args, env=cached, control=control)
    run, other = run_app(real_scr, second, 2, nobody, *args, "--restart", env=cached,
                         control=control)
    _, again = run_app(real_scr, first, 2, nobody, *args, "--restart", env=cached,
                       control=control)
    assert all(r["written"] == [1, 2, 3] for r in wrote)
    assert all(r["restored"] == {"name": None} for r in other)  # nothing of the first job's
    printed = dict(DEBUG_LINE.findall(run.stdout + run.stderr))
    assert printed["SCR_JOB_ID"].startswith("prefix-")  # what SCR says it runs as
    ids = {r["held"].get("SCR_JOB_ID") for r in wrote + other}
    assert all(r["restored"] == {"name": "ckpt.3", "step": 3} for r in again)
    jobs = sorted(p.name for p in control.rglob("scr.*") if p.is_dir())
    assert len(jobs) == 2 and "scr.defjobid" not in jobs, (jobs, ids)
