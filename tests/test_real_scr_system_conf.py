"""A site's system config file against what scrtune decided, on the real SCR v3.1.0.

SCR resolves a parameter from the environment, the user config file, SCR_Config, and only then
its system config file (`<install>/etc/scr.conf`, a path compiled into libscr) and its compiled
default. A recommendation leaves out values equal to the compiled default, so a site's file
that sets `SCR_COPY_TYPE=SINGLE` and `SCR_FLUSH=2` ran instead of the XOR and the cadence of 10
scrtune had chosen, and nothing said so. The job runs in a mount namespace of its own
(`unshare`) in which a folder of the test's is mounted at `<install>/etc`: the shared build is
not touched. Ground truth: the checkpoints SCR flushed to the prefix, the cached checkpoints SCR
kept, and what SCR resolved."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from scrtune.scr_config.mapping import _without_defaults
from tests.conftest import part_missing
from tests.test_real_scr_flush_cadence import flushed_steps, run_app, serve_every_tenth

pytestmark = pytest.mark.real_scr
# the site's file: two values scrtune decides (as their defaults) and one it leaves to SCR
SITE_CONF = "SCR_COPY_TYPE=SINGLE\nSCR_FLUSH=2\nSCR_CACHE_SIZE=2\n"


def _with_system_file(real_scr: str, etc: Path) -> list[str]:
    """The command prefix that runs a job with `etc` as the install's etc/ (a private mount)."""
    target = Path(real_scr) / "etc"
    try:
        target.mkdir(exist_ok=True)  # a mount point: empty unless the install has its own
    except OSError as exc:
        part_missing(f"cannot make {target} to mount a system config file on: {exc}",
                     "SCRTUNE_REQUIRE_REAL_SCR")
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "-rm", "mount", "--bind", str(etc),
                            str(target)], capture_output=True, text=True) if unshare else None
    if probe is None or probe.returncode != 0:
        part_missing("no private mount namespace here (`unshare -rm`): "
                     f"{probe.stderr.strip() if probe else 'unshare is not installed'}",
                     "SCRTUNE_REQUIRE_REAL_SCR")
    return [unshare, "-rm", "sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"',
            "sh", str(etc), str(target)]


def test_a_sites_system_file_changes_only_what_scrtune_left_to_scr(real_scr, tmp_path) -> None:
    (tmp_path / "prefix").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "scr.conf").write_text(SITE_CONF)
    params = _without_defaults({"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "XOR",
                                "SCR_FLUSH": "10"})
    assert params == {"SCR_CACHE_BYPASS": "0"}  # both SCR's defaults: left out
    serve_every_tenth(tmp_path, params)
    ran = run_app(real_scr, tmp_path, 12, wrap=_with_system_file(real_scr, tmp_path / "etc"))
    assert ran["written"] == list(range(1, 13))
    # the site's SCR_FLUSH=2 would have flushed 2, 4, ..., 12; scrtune's 10 and Finalize's 12
    assert flushed_steps(tmp_path) == [10, 12]
    assert ran["resolved"]["SCR_COPY_TYPE"].upper() == "XOR"  # not the site's SINGLE
    assert ran["resolved"]["SCR_FLUSH"] == "10"
    # what scrtune did not decide is the site's: SCR_CACHE_SIZE=2 keeps two checkpoints cached
    cached = sorted(path.name for path in (tmp_path / "cache").glob("*/*/scr.dataset.*"))
    assert cached == ["scr.dataset.11", "scr.dataset.12"], cached
    installed = Path(real_scr) / "etc" / "scr.conf"  # the mount was the job's alone
    assert not installed.exists() or installed.read_text() != SITE_CONF
