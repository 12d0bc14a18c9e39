"""`scrtune replay` as a user runs it: a real subprocess, exit codes, JSON, the shipped example."""

from __future__ import annotations

import json

import pytest

from tests.conftest import data, only_file


def test_example_works_with_no_traces_of_ones_own(run_cli):
    result = run_cli("replay", "--example")
    assert result.returncode == 0, result.stderr
    assert "checkpoints (saves): 2" in result.stdout
    assert "dominant write sizes" in result.stdout


def test_json_has_the_documented_keys(run_cli):
    result = run_cli("replay", data("v2_python_api"), "--format", "json")
    assert result.returncode == 0
    out = json.loads(result.stdout)
    for key in ("records", "invalid_lines", "generations", "ranks", "checkpoints", "write_sizes"):
        assert key in out
    assert out["records"] == 888 and out["ranks"] == 1
    assert {"bytes_written", "files", "start_us", "dur_us"} <= set(out["checkpoints"][0])
    assert {"size_bytes", "bytes_share"} <= set(out["write_sizes"][0])
    assert out["generations"][0]["generation"] == "dftracer-2.x"


def test_invalid_lines_still_exit_zero_and_verbose_lists_them(run_cli, tmp_path):
    path = tmp_path / "bad-app.pfw"
    path.write_bytes(open(only_file("v2_preload_hybrid"), "rb").read() + b'\n{"name":"x "y""}\n')
    result = run_cli("replay", str(path), "--verbose")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # tables wrap long lines at 100 columns
    assert f"invalid: {path}:887:" in text  # 886 is the blank line before it
    assert "1 invalid line skipped" in text


def test_nothing_readable_is_exit_two_with_one_line(run_cli, tmp_path):
    result = run_cli("replay", str(tmp_path / "missing.pfw.gz"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "missing.pfw.gz" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_arguments_are_exit_two(run_cli):
    assert run_cli("replay").returncode == 2
    assert run_cli("replay", "--example", "--format", "xml").returncode == 2
    bad = run_cli("replay", "--example", "--ckpt-pattern", "(")
    assert bad.returncode == 2 and "--ckpt-pattern" in bad.stderr


@pytest.mark.parametrize("args, named", [
    (("interval", "--ckpt-cost", "nan", "--mtbf", "100"), "--ckpt-cost"),
    (("interval", "--ckpt-cost", "300", "--mtbf", "inf"), "--mtbf"),
    (("interval", "--model", "multilevel", "--level", "1:100", "--level", "1e308:1e-300"),
     "--level"),  # once an OverflowError traceback
    (("interval", "--model", "multilevel", "--level", "1:nan"), "--level"),
    (("replay", "--example", "--horizon-s", "-inf"), "--horizon-s"),
    (("goodput", "--log", "job.log", "--now", "nan"), "--now"),
])
def test_numbers_that_are_not_finite_are_one_line_errors(run_cli, args, named):
    result = run_cli(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and named in result.stderr


def test_help_shows_an_example_and_exit_codes(run_cli):
    result = run_cli("replay", "--help")
    assert result.returncode == 0
    assert "examples:" in result.stdout and "exit codes" in result.stdout
    # one example a line: joined by " | " they read as a shell pipe (issue 49)
    assert "  scrtune replay --example\n" in result.stdout and " | " not in result.stdout


def test_unrelated_runs_in_one_replay_are_warned_of(run_cli, tmp_path):
    """Two runs' same-numbered checkpoints used to merge into one without a word."""
    import shutil

    for folder in ("v2_python_api", "v2_aggregated"):
        shutil.copy(only_file(folder), tmp_path)
    mixed = json.loads(run_cli("replay", str(tmp_path), "--format", "json").stdout)
    assert any("2 different command lines" in w for w in mixed["warnings"])
    # one run: its parent and its forked DataLoader worker, one command line
    one = json.loads(run_cli("replay", data("dlio_train_ckpt"), "--format", "json").stdout)
    assert not any("command lines" in w for w in one["warnings"])
