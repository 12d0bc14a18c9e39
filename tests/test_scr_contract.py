"""The contract between the SCR double (fast unit tests) and the real SCR v3.1.0: one scripted
sequence of calls, the same observations expected of both. When the real library behaves
otherwise, this suite fails for `real`; when the double drifts, it fails for `double`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import real_scr_prefix, scr_environment
from tests.test_tuned_scr import mpirun

pytestmark = pytest.mark.mpi

APP = os.path.join(os.path.dirname(__file__), "tracing", "contract_app.py")

# What the real library returned (SCR's cffi module, v3.1.0), call by call.
CONTRACT = {
    "flags": [0, 1, 2],
    "query_unset": None,
    "set": None,
    "query_set": "2",
    "unset": None,
    "query_after_unset": None,
    "init": None,
    "query_after_init": "3",  # queries are allowed after SCR_Init
    "have_restart_fresh": None,  # the name of a loaded checkpoint, or None (not a tuple)
    "need_checkpoint_at_once": False,
    "need_checkpoint_after_interval": True,  # SCR_CHECKPOINT_SECONDS=1, 1.3 s later
    "start_output": None,
    "routed_is_str": True,
    "complete_output": True,
    "need_checkpoint_after_checkpoint": False,
    "should_exit": False,
    "finalize": None,
}


@pytest.mark.parametrize("impl", ["double", pytest.param("real", marks=pytest.mark.real_scr)])
def test_double_and_real_scr_keep_one_contract(impl, tmp_path, request) -> None:
    prefix = request.getfixturevalue("real_scr") if impl == "real" else real_scr_prefix()
    work, cntl = tmp_path / "prefix", tmp_path / "cntl"
    work.mkdir()
    cntl.mkdir()
    env = scr_environment(prefix or "", cntl, SCR_CACHE_BASE=str(tmp_path / "cache"))
    run = subprocess.run([mpirun(), "-n", "2", sys.executable, APP, "--impl", impl, "--out",
                          str(tmp_path)], cwd=work, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank-{rank}.json").read_text())
        assert seen == CONTRACT, {k: v for k, v in seen.items() if CONTRACT.get(k) != v}
