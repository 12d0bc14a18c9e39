"""One set of trace-reading options for every command that reads traces (issue 49): a job whose
checkpoint files match none of the default patterns could be replayed but not tuned. The same
arguments are refused the same way everywhere."""

from __future__ import annotations

import json

import pytest

from tests.conftest import data

TRACE = data("v2_c_preload")  # one checkpoint, found by its path (`ckpt`)
NO_MATCH = ("--ckpt-pattern", "no-such-directory")


def _interval_evidence(stdout: str) -> str:
    intents = json.loads(stdout)["intents"]
    return next(i for i in intents if i["name"] == "interval")["evidence"][0]


def test_recommend_and_query_read_the_traces_with_the_patterns_given(run_cli, tmp_path):
    found = run_cli("recommend", TRACE, "--format", "json")
    assert "mean of 1 in the trace" in _interval_evidence(found.stdout)
    none = run_cli("recommend", TRACE, *NO_MATCH, "--format", "json")
    assert none.returncode == 0 and "no checkpoint" in _interval_evidence(none.stdout)
    queried = run_cli("query", "--dir", str(tmp_path / "no-daemon"), "--trace", TRACE,
                      *NO_MATCH, "--format", "json")
    assert queried.returncode == 0, queried.stderr
    assert "no checkpoint" in _interval_evidence(queried.stdout)


def test_study_calibrate_and_goodput_take_the_patterns_too(run_cli, tmp_path):
    assert run_cli("study", TRACE).returncode == 0
    studied = run_cli("study", TRACE, *NO_MATCH)
    assert studied.returncode == 2 and "no checkpoint" in studied.stderr
    grid = data("real_scr_grid")
    calibrate = ("calibrate", TRACE, "--runs", f"{grid}/runs.json", "--system",
                 f"{grid}/sys.toml", "-o")
    assert run_cli(*calibrate, str(tmp_path / "a.toml")).returncode == 0
    calibrated = run_cli(*calibrate, str(tmp_path / "b.toml"), *NO_MATCH)
    assert calibrated.returncode == 2 and "no checkpoint" in calibrated.stderr
    measured = json.loads(run_cli("goodput", TRACE, "--format", "json").stdout)
    unmarked = json.loads(run_cli("goodput", TRACE, *NO_MATCH, "--format", "json").stdout)
    assert measured["badput_s"]["checkpoint_save"] > 0
    assert unmarked["badput_s"]["checkpoint_save"] == 0


@pytest.mark.parametrize("argv", [
    ("replay", TRACE), ("recommend", TRACE), ("study", TRACE), ("goodput", TRACE),
    ("query", "--trace", TRACE),
])
def test_the_same_bad_arguments_are_refused_alike(run_cli, argv):
    for bad in (("--workers", "-1"), ("--ckpt-pattern", "("), ("--horizon-s", "0")):
        done = run_cli(*argv, *bad)
        assert done.returncode == 2, (argv, bad, done.stdout[-300:])
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert bad[0] in done.stderr


def test_nodes_and_example_are_refused_when_they_cannot_mean_anything(run_cli):
    for nodes in ("0", "-4"):
        done = run_cli("recommend", TRACE, "--nodes", nodes)
        assert done.returncode == 2 and "--nodes" in done.stderr
    for command in ("replay", "recommend", "study"):
        both = run_cli(command, "--example", TRACE)
        assert both.returncode == 2 and "--example" in both.stderr, command
