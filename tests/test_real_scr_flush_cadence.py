"""The flush cadence a recommendation serves, as the real SCR v3.1.0 flushes it.

A recommendation leaves out a value equal to SCR's compiled default, and SCR_FLUSH's is 10,
the furthest the parallel file system's copy may fall behind (intents/model.py's
MAX_FLUSH_EVERY): a job that should flush every 10th checkpoint is served no SCR_FLUSH and a
`flush_every` action of 10. SCR then flushes the checkpoints whose id is a multiple of 10, and
keeps counting ids across a restart. TunedSCR must not flag others OUTPUT by its own count
(which starts at each run): ground truth is the checkpoint directories SCR flushed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.mapping import _without_defaults
from tests.conftest import scr_environment
from tests.test_tuned_scr import mpirun

pytestmark = pytest.mark.real_scr
APP = Path(__file__).parent / "tracing" / "flush_cadence_app.py"


def run_app(real_scr: str, folder: Path, checkpoints: int, *args: str,
            wrap: list[str] | tuple[str, ...] = ()) -> dict:
    """flush_cadence_app.py on one rank in `folder`/prefix, serving `folder`/served.json, its
    cache and control files in `folder`; `wrap`: a command prefix (mpirun runs under it)."""
    out = folder / "out"
    out.mkdir(exist_ok=True)
    env = scr_environment(real_scr, folder / "cntl", SCR_CACHE_BASE=str(folder / "cache"))
    run = subprocess.run([*wrap, mpirun(), "-n", "1", sys.executable, str(APP), "--served",
                          str(folder / "served.json"), "--out", str(out), "--checkpoints",
                          str(checkpoints), *args], cwd=folder / "prefix", env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return json.loads((out / "rank-0.json").read_text())


def serve_every_tenth(folder: Path, params: dict[str, str]) -> None:
    """`folder`/served.json: the SCR parameters `params` (as served) with a flush cadence of 10,
    SCR's default, as a `flush_every` action."""
    served = {"scr": {**ScrConfig.build(params).as_json()["scr"], "descriptors": []},
              "runtime_actions": [{"kind": "flush_every", "every": 10}], "config_id": "c10"}
    (folder / "served.json").write_text(json.dumps(served))


def flushed_steps(folder: Path) -> list[int]:
    """The checkpoints SCR flushed to `folder`/prefix (a directory each)."""
    return sorted(int(path.name.split(".")[1]) for path in (folder / "prefix").glob("ckpt.*"))


def test_a_cadence_equal_to_scrs_default_is_flushed_on_scrs_ids_after_a_restart(
        real_scr, tmp_path) -> None:
    (tmp_path / "prefix").mkdir()
    params = _without_defaults({"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "SINGLE",
                                "SCR_FLUSH": "10"})
    assert "SCR_FLUSH" not in params  # SCR's default: left out, as every recommendation does
    serve_every_tenth(tmp_path, params)
    first = run_app(real_scr, tmp_path, 3)
    again = run_app(real_scr, tmp_path, 12, "--restart")
    assert first["written"] == [1, 2, 3] and again["restored"] == 3
    assert again["written"] == list(range(4, 16))
    # SCR_Finalize flushes the latest (3, 15); SCR itself the 10th. A flag by the second
    # run's own count would have flushed its 10th checkpoint, step 13, as well.
    assert flushed_steps(tmp_path) == [3, 10, 15]
    assert again["resolved"].get("SCR_FLUSH") == "10"  # stated (decided.py), read back
