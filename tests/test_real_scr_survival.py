"""What each redundancy scheme scrtune emits survives, on the real SCR v3.1.0 (issue 46).

On the fake Slurm of ../shared/slurm (each node its own /dev/shm, where SCR keeps its cache and
control files): four nodes, one rank each, write N checkpoints and the step ends without
SCR_Finalize; then one node's /dev/shm is wiped (the node is lost) and a new step of the same
allocation restores what SCR offers. The expectation is the intent's model, not SCR's answer:
SINGLE survives no node loss; PARTNER and XOR survive one; a multi-level pattern (XOR every
k-th) restores its last XOR checkpoint, at every position of the cycle. Nothing is flushed
(SCR_FLUSH beyond the run), so a restore comes from the cache alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrtune.intents.redundancy import Redundancy
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.mapping import redundancy_settings
from tests.conftest import SLURM_STATE, require_real_scr, scr_environment, wait_until
from tests.test_real_scr_configs import fake_host_shim  # noqa: F401 - the fixture
from tests.test_tuned_scr import mpirun

pytestmark = [pytest.mark.real_scr, pytest.mark.slurm]
APP = Path(__file__).parent / "tracing" / "survival_app.py"
JOB = Path(__file__).parent / "tracing" / "survival_job.sh"
NODES = 4
LOST = ("n2",)


def _strings(scheme: str, every: int, folder: Path, flush_every: int = 1000) -> None:
    """The SCR_Config strings scrtune's mapping renders for the scheme, with no flush unless
    every `flush_every`-th checkpoint."""
    params: dict[str, str] = {"SCR_CACHE_BYPASS": "0", "SCR_FLUSH": str(flush_every)}
    redundancy = Redundancy(scheme=scheme, set_size=NODES, set_failures=2, xor_every=every,
                            candidates=())
    descriptors = redundancy_settings(redundancy, params)
    (folder / "strings").write_text(
        "\n".join(ScrConfig.build(params, descriptors).scr_config()) + "\n")


def _wait_for(path: Path, job: str, timeout_s: float = 900) -> None:
    def state() -> str:
        return subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                              text=True).stdout.strip()

    wait_until(path.exists, timeout_s, lambda: f"job {job} {state() or 'ended'}",
               possible=lambda: bool(state()) or path.exists(), poll_s=0.1)


def _wipe_shm(node: str) -> None:
    """The node is lost: its /dev/shm (SCR's cache and control files) is gone."""
    with open(os.path.join(SLURM_STATE, "run", f"slurmd-{node}.pid")) as handle:
        slurmd = handle.read().strip()
    subprocess.run(["nsenter", "-t", slurmd, "-m", "--", "sh", "-c", "rm -rf /dev/shm/*"],
                   check=True, timeout=30)


def _survives(real_scr: str, folder: Path, scheme: str, every: int, written: int,
              lost: tuple[str, ...] = LOST, flush_every: int = 1000) -> int:
    """The step every rank restored after the `lost` nodes were (0: nothing)."""
    (folder / "prefix").mkdir(parents=True)
    (folder / "out").mkdir()
    _strings(scheme, every, folder, flush_every)
    env = scr_environment(real_scr, "/dev/shm", PATH=f"{Path(sys.executable).parent}:"
                          f"{os.environ['PATH']}")
    env.pop("SCR_CNTL_BASE")
    env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    job = subprocess.run(
        ["sbatch", "--parsable", "-N", str(NODES), "--ntasks-per-node=1", "--chdir",
         str(folder / "prefix"), "-o", str(folder / "job.out"), str(JOB), str(folder),
         str(written), str(APP)], env=env, capture_output=True, text=True, timeout=60,
        check=True).stdout.strip().split(";")[0]
    _wait_for(folder / "written", job)
    for node in lost:
        _wipe_shm(node)
    (folder / "lost").touch()
    deadline = time.monotonic() + 180
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True,
                         text=True).stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    output = (folder / "job.out").read_text()
    restored = [json.loads((folder / "out" / f"rank-{r}.json").read_text())["restored"]
                for r in range(NODES)]
    assert len(set(restored)) == 1, (restored, output[-3000:])  # every rank the same
    return restored[0]


@pytest.mark.parametrize("scheme, lost, expected", [
    ("SINGLE", LOST, 0), ("PARTNER", LOST, 3), ("XOR", LOST, 3), ("XOR", ("n2", "n3"), 0),
    ("RS", ("n2", "n3"), 3)])
def test_a_single_level_scheme_survives_what_it_promises(scheme, lost, expected, slurm_nodes,
                                                         tmp_path):
    """One lost node for SINGLE, PARTNER and XOR; two in one set for XOR (beyond it) and for
    RS with k=2 parity blocks (within it)."""
    if len(slurm_nodes) < NODES:
        pytest.skip(f"{NODES} idle Slurm nodes needed")
    assert _survives(require_real_scr(), tmp_path, scheme, 1, 3, lost) == expected


@pytest.mark.parametrize("scheme, lost, flush_every, expected", [
    ("SINGLE", LOST, 3, 3), ("SINGLE", LOST, 2, 4), ("PARTNER", LOST, 2, 5),
    ("PARTNER", ("n2", "n3"), 2, 4)])
def test_a_loss_the_cache_cannot_rebuild_goes_back_to_the_last_flushed_checkpoint(
        scheme, lost, flush_every, expected, slurm_nodes, tmp_path):
    """What the flush cadence weighs (issue 48): a failure the scheme cannot recover from the
    cache restores the newest checkpoint on the parallel file system, every k-th flushed, and
    one it can recover restores the newest in the cache whatever the cadence. So SINGLE's
    cadence is weighed against every storage loss and PARTNER's only against both partners'
    (5 checkpoints written, the job ends without SCR_Finalize)."""
    if len(slurm_nodes) < NODES:
        pytest.skip(f"{NODES} idle Slurm nodes needed")
    assert _survives(require_real_scr(), tmp_path, scheme, 1, 5, lost,
                     flush_every) == expected


@pytest.mark.parametrize("every", [2, 4, 8])
def test_a_multi_level_pattern_restores_its_last_xor_level_at_every_position(
        every, slurm_nodes, tmp_path):
    """SCR dropped the last XOR level with the cache size scrtune set (1, or 2 with async
    flush): "Failed to rebuild dataset", nothing to restart from."""
    if len(slurm_nodes) < NODES:
        pytest.skip(f"{NODES} idle Slurm nodes needed")
    for written in range(every, 2 * every + 1):  # a node lost after each checkpoint of a cycle
        expected = written // every * every  # the newest XOR checkpoint
        restored = _survives(require_real_scr(), tmp_path / f"after-{written}", "SINGLE+XOR",
                             every, written)
        assert restored == expected, (every, written, restored)


@pytest.mark.parametrize("every, written", [(4, 6), (2, 3)])
def test_a_multi_level_pattern_restores_its_xor_level_though_newer_checkpoints_were_flushed(
        every, written, slurm_nodes, tmp_path):
    """What the redundancy intent charges a multi-level pattern's node loss (issue 48): every
    checkpoint flushed (SCR_FLUSH=1), the newest in the prefix directory, and still SCR
    restores the newest it can rebuild in the cache, the last XOR level (SCR_Have_restart
    fetches only when the cache holds none): XOR every 4th, a node lost after the 6th, the
    4th. The intent took the lesser of the two."""
    if len(slurm_nodes) < NODES:
        pytest.skip(f"{NODES} idle Slurm nodes needed")
    restored = _survives(require_real_scr(), tmp_path, "SINGLE+XOR", every, written,
                         flush_every=1)
    assert (tmp_path / "prefix" / f"ckpt.{written}").is_dir()  # flushed, newer
    assert restored == written // every * every


@pytest.mark.parametrize("layout, asked, runs", [
    ((1, 1), "RS", "XOR"), ((1, 1, 1, 1), "RS", "RS"), ((2, 1, 1), "XOR", "SINGLE"),
    ((2, 1, 1), "PARTNER", "SINGLE"), ((2, 2), "XOR", "XOR")])
def test_a_redundancy_recommendation_fits_the_sets_the_run_really_forms(
        layout, asked, runs, fake_host_shim, tmp_path):  # noqa: F811
    """Sets span one rank per node: on exactly 2 nodes redset aborted SCR_Init with 2 parity
    blocks ("Invalid number of Reed-Solomon encoding blocks (2) for number of ranks in set 2"),
    though the daemon planned for 4; with 2, 1 and 1 ranks per node a set has one rank and XOR,
    PARTNER and RS all abort. TunedSCR knows the layout before SCR_Init, runs what fits and
    says so. (Layouts 2, 1, 1: the host-name shim, as `mpirun` places ranks.)"""
    from tests.test_hostile_replies import FakeDaemon

    real_scr = require_real_scr()
    answer = {"config_id": "planned", "runtime_actions": [],
              "scr": {"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": asked, "SCR_SET_SIZE": "4",
                      **({"SCR_SET_FAILURES": "2"} if asked == "RS" else {}),
                      "descriptors": []}}
    daemon = FakeDaemon(str(tmp_path / "requests.sock"), answer)
    (tmp_path / "prefix").mkdir()
    command = [mpirun()]
    ranks = [node for node, count in enumerate(layout) for _ in range(count)]
    for rank, node in enumerate(ranks):
        (tmp_path / f"cache-node{node}").mkdir(exist_ok=True)
        command += ([":"] if rank else []) + [
            "-n", "1", "-env", "SCRTUNE_FAKE_HOST", f"node{node}", "-env", "SCRTUNE_NODE",
            f"node{node}", "-env", "SCR_CACHE_BASE", str(tmp_path / f"cache-node{node}"),
            "-env", "LD_PRELOAD", fake_host_shim, sys.executable,
            str(APP.parent / "nodes_app.py"), "--endpoint", daemon.endpoint, "--out",
            str(tmp_path / "out.json")]
    env = scr_environment(real_scr, tmp_path / "cntl", SCR_JOB_ID="layout",
                          SCR_PREFIX=str(tmp_path / "prefix"))
    try:
        run = subprocess.run(command, cwd=tmp_path / "prefix", env=env, capture_output=True,
                             text=True, timeout=300)
    finally:
        daemon.close()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["copy_type"] == runs, result  # what SCR holds after SCR_Init
    assert f"SCR_COPY_TYPE={runs}" in result["applied"], result
    assert (f"{runs} instead" in run.stderr) is (runs != asked), run.stderr[-2000:]
