"""Bad input to every command: one line on stderr naming what is wrong, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.conftest import SCRTUNE, free_port

GOOD_PROFILE = """cores_per_node = 48
memory_per_node_bytes = 274877906944
node_mtbf_s = {mtbf}
scr_version = "{version}"
flush_types = {flush_types}
"""


def _one_line_error(result, *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def _profile(tmp_path, mtbf="1e8", version="3.1.0", flush_types='["SYNC", "PTHREAD"]') -> str:
    path = tmp_path / "sys.toml"
    path.write_text(GOOD_PROFILE.format(mtbf=mtbf, version=version, flush_types=flush_types))
    return str(path)


@pytest.mark.parametrize("mtbf", ["inf", "nan", "-1", "0"])
def test_profile_mtbf_must_be_positive_and_finite(run_cli, tmp_path, mtbf) -> None:
    result = run_cli("recommend", "--example", "--system", _profile(tmp_path, mtbf=mtbf))
    _one_line_error(result, "sys.toml", "node_mtbf_s")


@pytest.mark.parametrize("version, flush_types, field", [
    ("9.9", '["SYNC"]', "scr_version"),
    ("3.1.0", '["sync"]', "flush_types"),
    ("3.1.0", "[]", "flush_types"),
])
def test_profile_versions_and_flush_types_are_known(run_cli, tmp_path, version, flush_types,
                                                     field) -> None:
    path = _profile(tmp_path, version=version, flush_types=flush_types)
    _one_line_error(run_cli("recommend", "--example", "--system", path), field)


def test_profile_scr_version_sets_the_target(run_cli, tmp_path) -> None:
    path = tmp_path / "v2.toml"
    path.write_text('scr_version = "2.0.0"\nost_count = 8\n')
    result = run_cli("recommend", "--example", "--system", str(path), "--format", "json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["target_version"] == "2.0.0"
    striping = next(i for i in body["intents"] if i["name"] == "striping")
    assert not any("ignores SCR_FLUSH_WIDTH" in e for e in striping["evidence"])
    assert body["scr"]["SCR_FLUSH_WIDTH"] == str(striping["value"]["flush_width"])
    v3 = json.loads(run_cli("recommend", "--example", "--format", "json").stdout)
    assert v3["target_version"] == "3.1.0" and "SCR_FLUSH_WIDTH" not in v3["scr"]


def test_recommend_refuses_absurd_node_counts(run_cli) -> None:
    _one_line_error(run_cli("recommend", "--example", "--nodes", "100000000000000000000"),
                    "--nodes")


@pytest.mark.parametrize("args, words", [
    (("status", "--timeout-s", "3e6"), ("--timeout-s",)),
    (("query", "--timeout-s", "2e7"), ("--timeout-s",)),
    (("daemon", "--metrics-port", "-1"), ("--metrics-port",)),
    (("daemon", "--metrics-port", "70000"), ("--metrics-port",)),
    (("daemon", "--dftracer-endpoint", "garbage"), ("--dftracer-endpoint", "garbage")),
    (("daemon", "--tcp", "99999"), ("--tcp",)),
    (("interval", "--ckpt-cost", "5", "--mtbf", "100", "--level", "1:2"), ("--level",)),
    (("interval", "--model", "multilevel", "--level", "30:1000", "--level", "5:100000"),
     ("cheapest first",)),
])
def test_argument_errors(run_cli, tmp_path, args, words) -> None:
    env = {**os.environ, "SCRTUNE_DIR": str(tmp_path / "d")}
    _one_line_error(run_cli(*args, env=env, timeout=30), *words)


@pytest.mark.parametrize("address, endpoint", [
    ("[::1]:{port}", "tcp://[::1]:{port}"),
    ("::1:{port}", "tcp://[::1]:{port}"),
])
def test_daemon_on_ipv6_loopback_in_a_directory_it_creates(tmp_path, address, endpoint) -> None:
    port = free_port("::1")
    directory = tmp_path / "not" / "yet"
    daemon = subprocess.Popen([*SCRTUNE, "daemon", "--tcp", address.format(port=port),
                               "--dir", str(directory), "--foreground"],
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = subprocess.run([*SCRTUNE, "status", "--format", "json", "--endpoint",
                                     endpoint.format(port=port), "--dir", str(directory)],
                                    capture_output=True, text=True)
            if status.returncode == 0:
                break
            time.sleep(0.2)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == daemon.pid
        assert directory.is_dir()
    finally:
        daemon.terminate()
        daemon.wait(10)
    assert "Traceback" not in daemon.stderr.read()


@pytest.mark.parametrize("content", [b"", b'{"a": 1}\n', b"\x7fELF\x02\x01\x01" + bytes(200)])
def test_replay_of_files_without_trace_records_exits_2(run_cli, tmp_path, content) -> None:
    path = tmp_path / "x.pfw"
    path.write_bytes(content)
    _one_line_error(run_cli("replay", str(path)), "no trace events", str(path))


@pytest.mark.parametrize("argv", [
    ("interval", "--ckpt-cost", "300", "--mtbf", "200"),
    ("interval", "--ckpt-cost", "5000", "--mtbf", "86400", "--restart", "90000", "--model",
     "daly1"),
])
def test_interval_says_when_the_job_cannot_progress(run_cli, argv) -> None:
    result = run_cli(*argv)
    assert result.returncode == 1, result.stderr
    assert "cannot progress" in result.stdout and "%" not in result.stdout.split(":")[0]
    body = json.loads(run_cli(*argv, "--format", "json").stdout)
    assert body["progress"] is False and body["interval_s"] is None


def test_interval_decides_progress_with_the_model_that_gives_the_interval(run_cli) -> None:
    """Daly's published case (Daly 2006, FGCS 22: checkpoint 5 min, restart 10 min, MTBF
    15 min): his optimum is 9.14 min and his complete model's waste about 80%. The job
    progresses; the first-order sum (149%) said it could not (issue 48)."""
    argv = ("interval", "--ckpt-cost", "300", "--restart", "600", "--mtbf", "900")
    result = run_cli(*argv, "--format", "json")
    assert result.returncode == 0, result.stdout
    body = json.loads(result.stdout)
    assert body["progress"] is True
    assert body["interval_s"] / 60 == pytest.approx(9.14, abs=0.01)
    assert body["expected_waste"] == pytest.approx(0.80, abs=0.005)
    # the first-order interval is judged by the first-order waste, as before
    assert run_cli(*argv, "--model", "daly1").returncode == 1


def test_interval_levels_read_in_words(run_cli) -> None:
    result = run_cli("interval", "--model", "multilevel", "--level", "5:21600",
                     "--level", "60:200000")
    assert result.returncode == 0
    assert "level 1: every checkpoint (" in result.stdout
    assert "level 2: every 11 checkpoints" in result.stdout


def test_extra_hint_names_how_scrtune_was_installed() -> None:
    from scrtune.extras import install_hint

    hint = install_hint("matplotlib", "plot")
    assert hint.startswith("pip install matplotlib")
    assert "pip install 'scrtune[plot]'" not in hint


def test_help_of_every_command_documents_every_option() -> None:
    import argparse

    from scrtune.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, child in commands.choices.items():
        for action in child._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"scrtune {name} {action.option_strings[0]} has no help"



def test_forward_help_states_the_forwarders_own_retry_times(monkeypatch) -> None:
    """The help's retry figures come from the forwarder, so a change to its backoff shows."""
    import argparse

    from scrtune.cli.main import build_parser
    from scrtune.client import forward

    monkeypatch.setattr(forward, "RETRY_FIRST_S", 0.125)
    monkeypatch.setattr(forward, "RETRY_MAX_S", 7.5)
    parser = build_parser(["forward", "--help"])
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    help_text = commands.choices["forward"].format_help().replace("\n", " ")
    assert "after 0.125 s, doubling to 7.5 s or this" in " ".join(help_text.split())



def test_replay_mpi_without_mpi4py_is_one_line(run_cli, tmp_path) -> None:
    blocked = tmp_path / "mpi4py"
    blocked.mkdir()
    (blocked / "__init__.py").write_text("raise ImportError('mpi4py blocked for this test')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    _one_line_error(run_cli("replay", "--example", "--mpi", env=env), "--mpi", "mpi4py")
    launched = {**env, "PMI_SIZE": "4"}  # as under mpirun -n 4
    _one_line_error(run_cli("replay", "--example", env=launched), "mpi4py")


@pytest.mark.parametrize("command", ["goodput", "study", "recommend"])
def test_truncated_traces_are_warned_of_by_every_command(run_cli, tmp_path, command) -> None:
    from tests.conftest import data

    source = data("dlio_train_ckpt", "trace-0-of-1-d57634e76faaade9-app.pfw.gz")
    whole = open(source, "rb").read()
    cut = tmp_path / "trace-0-of-1-d57634e76faaade9-app.pfw.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])  # as a crashed job leaves it
    result = run_cli(command, str(cut))
    assert "Traceback" not in result.stderr
    assert "truncated" in result.stderr and str(cut) in result.stderr
