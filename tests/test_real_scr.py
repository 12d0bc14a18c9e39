"""TunedSCR over the real SCR v3.1.0 library, under mpirun: what SCR holds after SCR_Init is what
the daemon recommended, on every rank; checkpoints go through route_file and a restart finds
them; with no daemon, SCR runs on its own configuration (the documented fallback)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from scrtune.scr_config.catalogue import BY_NAME, Kind
from scrtune.scr_config.values import byte_count
from tests.conftest import SCRTUNE, scr_environment
from tests.test_daemon import client_for, feed, start_daemon, stop
from tests.test_tuned_scr import mpirun

pytestmark = pytest.mark.real_scr
APP = os.path.join(os.path.dirname(__file__), "tracing", "real_scr_app.py")
DEBUG_LINE = re.compile(r"SCR v3\.1\.0: rank 0 on [^:]+: (SCR_[A-Z_]+)=(\S*)$", re.MULTILINE)


def run_app(real_scr: str, tmp_path, ranks: int, daemon_dir: str, *args: str,
            env: dict | None = None,
            control=None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The app on `ranks` ranks in tmp_path/prefix (SCR's prefix: the working directory),
    SCR's control directory under `control` (default tmp_path/cntl)."""
    prefix, out, control = tmp_path / "prefix", tmp_path / "out", control or tmp_path / "cntl"
    for folder in (prefix, out, control):
        folder.mkdir(exist_ok=True)
    environ = scr_environment(real_scr, control, SCRTUNE_DIR=daemon_dir, **(env or {}))
    run = subprocess.run([mpirun(), "-n", str(ranks), sys.executable, APP, "--out", str(out),
                          *args], cwd=prefix, env=environ, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return run, [json.loads((out / f"rank-{r}.json").read_text()) for r in range(ranks)]


def test_without_a_daemon_scr_runs_on_its_own_and_restarts(real_scr, tmp_path) -> None:
    cache = {"SCR_CACHE_BASE": str(tmp_path / "cache")}
    nobody = str(tmp_path / "no-daemon")
    _, ranks = run_app(real_scr, tmp_path, 2, nobody, "--daemon-timeout-s", "0.2", env=cache)
    # SCR's own settings only, and a job id of its own (no resource manager names this job)
    assert all(r["applied"][1:] == ["SCR_DEBUG=1"] for r in ranks)
    assert len({r["applied"][0] for r in ranks}) == 1 and \
        ranks[0]["applied"][0].startswith("SCR_JOB_ID=prefix-")
    assert all(r["written"] == [1, 2, 3] and r["restored"] == {"name": None} for r in ranks)
    for rank in (0, 1):  # bypass (SCR's default): the files are in the prefix
        text = (tmp_path / "prefix" / "ckpt" / f"rank_{rank}.dat").read_bytes()
        assert text.startswith(f"rank {rank} step 3\n".encode())
    _, again = run_app(real_scr, tmp_path, 2, nobody, "--daemon-timeout-s", "0.2", "--restart",
                       env=cache)
    assert all(r["restored"] == {"name": "ckpt.3", "step": 3} for r in again)
    assert all(r["written"] == [4, 5, 6] for r in again)


def _profile(tmp_path, node_mtbf_s: float = 3600.0) -> str:
    """A node-local tier much faster than the parallel one, and frequent failures: caching,
    and a checkpoint interval, on this machine's cores."""
    path = tmp_path / "sys.toml"
    path.write_text(f"""node_mtbf_s = {node_mtbf_s}
flush_types = ["SYNC", "PTHREAD"]
[node_local]
path = "{tmp_path / 'cache'}"
write_bytes_per_s = 2e10
[parallel]
path = "{tmp_path / 'prefix'}"
write_bytes_per_s = 1e7
scaling_per_doubling = 1.0
""")
    return str(path)


# SCR_DEBUG prints the copy type as its code (src/scr_conf.h: SCR_COPY_SINGLE 1, ...)
COPY_CODES = {"SINGLE": "1", "PARTNER": "2", "XOR": "4", "FILE": "8", "RS": "16"}


def _as_scr_prints(name: str, value: str) -> str:
    """SCR_DEBUG prints byte counts as numbers (FILE_BUF_SIZE with %d) and the copy type as a
    code."""
    if name == "SCR_COPY_TYPE":
        return COPY_CODES[value.upper()]
    param = BY_NAME.get(name)
    if param is not None and param.kind is Kind.BYTES:
        return str(byte_count(value))
    return value


@pytest.mark.parametrize("ranks", [2, 4])
def test_recommendation_is_applied_identically_and_read_as_meant(real_scr, tmp_path,
                                                                  ranks) -> None:
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    daemon = start_daemon(directory, "--system", _profile(tmp_path))
    try:
        feed(directory)
        recommended = {k: v for k, v in client_for(directory).recommend().result["scr"].items()
                       if k != "descriptors"}
        assert recommended["SCR_CACHE_BYPASS"] == "0"  # the cache path is exercised
        run, results = run_app(real_scr, tmp_path, ranks, directory)
    finally:
        stop(daemon)
    applied = [r["applied"] for r in results]
    assert all(a == applied[0] for a in applied)  # SCR would abort otherwise
    strings = dict(s.split("=", 1) for s in applied[0] if not s.startswith("CKPT"))
    assert {k: strings[k] for k in recommended} == recommended
    printed = dict(DEBUG_LINE.findall(run.stdout + run.stderr))
    for name, value in recommended.items():
        assert results[0]["held"][name] == value, name  # SCR_Config query after SCR_Init
        assert printed[name] == _as_scr_prints(name, value), name  # SCR_DEBUG's own printout
    assert all(r["written"] == [1, 2, 3] for r in results)
    assert "Flush succeeded" in run.stdout + run.stderr or "scr_flush" in run.stdout


def _halt_list(real_scr: str, prefix) -> str:
    listed = subprocess.run([os.path.join(real_scr, "bin", "scr_halt"), "--list", str(prefix)],
                            capture_output=True, text=True, timeout=60,
                            env=scr_environment(real_scr, prefix))
    return listed.stdout + listed.stderr


def test_allow_restart_halts_through_real_scr_halt_and_the_job_script_relaunches(
        real_scr, tmp_path, monkeypatch) -> None:
    """The daemon halts a job that checkpoints far too often through the real scr_halt; SCR
    ends the run after its next checkpoint; `scrtune relaunch` clears the halt (scr_run would
    not launch otherwise) and the next run restores the last checkpoint. The job follows
    need_checkpoint() at SCR's cadence, served from a trace whose checkpoints cost 0.17 s;
    its own cost 1 s, at a node MTBF of a minute, calls for a longer interval, which SCR reads
    only at SCR_Init (a shorter one the client's timer would run at once: no relaunch). A job
    that checkpoints on its own cadence is never halted for one (issue 44)."""
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    monkeypatch.setenv("PATH", f"{real_scr}/bin:{os.environ['PATH']}")  # the daemon's scr_halt
    daemon = start_daemon(directory, "--system", _profile(tmp_path, node_mtbf_s=60),
                          "--allow-restart", "--prefix", str(prefix), "--restart-cost-s", "60",
                          "--end-time", str(time.time() + 10 * 86400))
    try:
        feed(directory)  # the trace of a job checkpointing every 0.24 s, each save 0.17 s
        served = client_for(directory).recommend().result["scr"]["SCR_CHECKPOINT_SECONDS"]
        # room for ten outputs: the daemon serves the longer interval after three under the
        # first one (four when the third's record reaches it after the fourth's recommend,
        # as on a busy machine), halts at the next, and SCR ends the run after the one after:
        # with five, a busy CI machine saw the run end before SCR read the halt
        _, first = run_app(real_scr, tmp_path, 2, directory, "--until-halt", "--steps", "400",
                           "--compute-s", "0.1", "--save-s", "1", "--when-needed")
        halt = client_for(directory).status().result["halt"]
        listed = _halt_list(real_scr, prefix)
        relaunch = subprocess.run([*SCRTUNE, "relaunch", "--dir", directory, "--format", "json"],
                                  capture_output=True, text=True, timeout=60)
        after = _halt_list(real_scr, prefix)
        _, second = run_app(real_scr, tmp_path, 2, directory, "--restart", "--steps", "1")
        again = subprocess.run([*SCRTUNE, "relaunch", "--dir", directory],
                               capture_output=True, text=True, timeout=60)
    finally:
        stop(daemon)
    assert halt["requested"] and halt["gain_s"] > 60, halt
    # the interval the run followed, SCR's, measured: longer ones pay for the relaunch
    interval = float(re.search(r"instead of ([0-9.]+) s", halt["reason"]).group(1))
    assert float(served) * 0.8 <= interval <= float(served) * 1.5 + 1, (served, halt)
    steps = first[0]["written"]
    assert all(r["halted"] and r["written"] == steps for r in first)  # agreed on every rank
    assert len(steps) < 60, "SCR never ended the run"
    assert "CheckpointsLeft: 0" in listed, listed
    assert relaunch.returncode == 0 and json.loads(relaunch.stdout)["relaunch"], relaunch
    assert "CheckpointsLeft" not in after and "ExitReason" not in after, after
    assert all(r["restored"] == {"name": f"ckpt.{steps[-1]}", "step": steps[-1]}
               for r in second)
    assert again.returncode in (0, 1) and again.stdout.startswith(("relaunch", "no relaunch"))
