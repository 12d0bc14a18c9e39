"""TunedSCR over the real SCR v3.1.0 library, under mpirun: what SCR holds after SCR_Init is what
the daemon recommended, on every rank; checkpoints go through route_file and a restart finds
them; with no daemon, SCR runs on its own configuration (the documented fallback)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from scrtune.scr_config.catalogue import BY_NAME, Kind
from scrtune.scr_config.values import byte_count
from tests.conftest import scr_environment
from tests.test_daemon import client_for, feed, start_daemon, stop
from tests.test_tuned_scr import mpirun

pytestmark = pytest.mark.real_scr
APP = os.path.join(os.path.dirname(__file__), "tracing", "real_scr_app.py")
DEBUG_LINE = re.compile(r"SCR v3\.1\.0: rank 0 on [^:]+: (SCR_[A-Z_]+)=(\S*)$", re.MULTILINE)


def run_app(real_scr: str, tmp_path, ranks: int, daemon_dir: str, *args: str,
            env: dict | None = None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    prefix, out = tmp_path / "prefix", tmp_path / "out"
    for folder in (prefix, out, tmp_path / "cntl"):
        folder.mkdir(exist_ok=True)
    environ = scr_environment(real_scr, tmp_path / "cntl", SCRTUNE_DIR=daemon_dir, **(env or {}))
    run = subprocess.run([mpirun(), "-n", str(ranks), sys.executable, APP, "--out", str(out),
                          *args], cwd=prefix, env=environ, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return run, [json.loads((out / f"rank-{r}.json").read_text()) for r in range(ranks)]


def test_without_a_daemon_scr_runs_on_its_own_and_restarts(real_scr, tmp_path) -> None:
    cache = {"SCR_CACHE_BASE": str(tmp_path / "cache")}
    nobody = str(tmp_path / "no-daemon")
    _, ranks = run_app(real_scr, tmp_path, 2, nobody, "--daemon-timeout-s", "0.2", env=cache)
    assert all(r["applied"] == ["SCR_DEBUG=1"] for r in ranks)  # SCR's own settings only
    assert all(r["written"] == [1, 2, 3] and r["restored"] == {"name": None} for r in ranks)
    for rank in (0, 1):  # bypass (SCR's default): the files are in the prefix
        text = (tmp_path / "prefix" / "ckpt" / f"rank_{rank}.dat").read_bytes()
        assert text.startswith(f"rank {rank} step 3\n".encode())
    _, again = run_app(real_scr, tmp_path, 2, nobody, "--daemon-timeout-s", "0.2", "--restart",
                       env=cache)
    assert all(r["restored"] == {"name": "ckpt.3", "step": 3} for r in again)
    assert all(r["written"] == [4, 5, 6] for r in again)


def _profile(tmp_path) -> str:
    """A node-local tier much faster than the parallel one, and frequent failures: caching,
    and a checkpoint interval, on this machine's cores."""
    path = tmp_path / "sys.toml"
    path.write_text(f"""node_mtbf_s = 3600.0
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
