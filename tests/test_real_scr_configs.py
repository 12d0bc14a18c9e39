"""Every configuration scrtune emits, run through the real SCR v3.1.0 in each form it is emitted
in (environment, config file, SCR_Config strings): SCR holds each value as written, prints no
error, and every rank's last checkpoint reaches the prefix.

Workloads and system profiles are generated as in test_recommend_property. Ranks run on as many
"nodes" as the recommendation plans (up to 4): an LD_PRELOAD shim, built here, makes each report
its own host name (SCR forms redundancy sets by `gethostname`), each with its own cache.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from scrtune.intents.inputs import StorageTier, SystemProfile
from scrtune.intents.model import nodes as planned_nodes
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.mapping import recommend
from tests.conftest import require_real_scr, scr_environment
from tests.test_recommend_property import profiles, workloads
from tests.test_tuned_scr import mpirun

pytestmark = pytest.mark.real_scr
PROBE = os.path.join(os.path.dirname(__file__), "tracing", "scr_config_probe.py")
RANKS = 4
SHIM = os.path.join(os.path.dirname(__file__), "tracing", "fakehost.c")


@pytest.fixture(scope="module")
def fake_host_shim(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("shim")
    library = folder / "libfakehost.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(library), SHIM], check=True)
    return str(library)


def _forms(config: ScrConfig, folder) -> dict[str, tuple[dict[str, str], str | None]]:
    """Each emitted form as (environment, SCR_Config strings file or None)."""
    conf_path = folder / "scrtune.conf"
    exported: dict[str, str] = {}
    for line in config.env(str(conf_path)).splitlines():  # what `eval` of the env form sets
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            exported[name] = shlex.split(value)[0]
    if config.descriptors:
        conf_path.write_text("".join(f"{d.line()}\n" for d in config.descriptors))
    file_form = folder / "file.conf"
    file_form.write_text(config.conf())
    strings = folder / "strings"
    strings.write_text("\n".join(config.scr_config()) + "\n")
    return {"env": (exported, None), "conf": ({"SCR_CONF_FILE": str(file_form)}, None),
            "scr-config": ({}, str(strings))}


def _launch(real_scr: str, shim: str, folder, form_env: dict[str, str], strings: str | None,
            nodes: int, names: list[str]) -> subprocess.CompletedProcess:
    """The probe on RANKS ranks over `nodes` fake nodes, as it ended."""
    prefix, out = folder / "prefix", folder / "out"
    prefix.mkdir()
    out.mkdir()
    (folder / "names").write_text("\n".join(names) + "\n")
    command = [mpirun()]
    for rank in range(RANKS):
        node = rank * nodes // RANKS
        cache = folder / f"cache-node{node}"
        cache.mkdir(exist_ok=True)
        command += ([":"] if rank else []) + [
            "-n", "1", "-env", "SCRTUNE_FAKE_HOST", f"node{node}", "-env", "SCR_CACHE_BASE",
            str(cache), "-env", "LD_PRELOAD", shim, sys.executable, PROBE, "--out", str(out),
            "--names", str(folder / "names"), *(["--strings", strings] if strings else [])]
    env = scr_environment(real_scr, folder / "cntl", SCR_DEBUG="1", **form_env)
    return subprocess.run(command, cwd=prefix, env=env, capture_output=True, text=True,
                          timeout=120)


def _run(real_scr: str, shim: str, folder, form_env: dict[str, str], strings: str | None,
         nodes: int, names: list[str]) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The probe, which must succeed; with what every rank reported."""
    run = _launch(real_scr, shim, folder, form_env, strings, nodes, names)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    out = folder / "out"
    return run, [json.loads((out / f"rank-{r}.json").read_text()) for r in range(RANKS)]


# Profiles where caching wins (fast node-local storage, a slow parallel file system), so that
# copy types, CKPT= descriptors, flush cadences and PTHREAD flush are run, not only bypass.
caching_profiles = st.builds(
    SystemProfile,
    cores_per_node=st.sampled_from([2, 8, 48]),
    nodes=st.sampled_from([2, 4, 8, 64]),
    ranks_per_node=st.sampled_from([0, 1, 2]),
    node_local=st.builds(StorageTier, path=st.just("/l/ssd"),
                         write_bytes_per_s=st.floats(1e10, 1e11)),
    parallel=st.builds(StorageTier, path=st.just("/p/scratch"),
                       write_bytes_per_s=st.floats(1e6, 1e8),
                       scaling_per_doubling=st.floats(1.0, 1.2)),
    node_mtbf_s=st.sampled_from([3600.0, 86400.0, 1e7]),
    node_loss_share=st.floats(0, 1),
    network_bytes_per_s=st.floats(1e8, 1e11),
    flush_types=st.sampled_from([("SYNC", "PTHREAD"), ("SYNC",)]),
)


@settings(max_examples=12, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.generate],  # no shrinking: each example is 3 jobs
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stats=workloads, profile=st.one_of(caching_profiles, profiles))
def test_emitted_configurations_run_on_real_scr(stats, profile, tmp_path_factory,
                                                fake_host_shim) -> None:
    prefix = require_real_scr()  # the real_scr fixture cannot be requested inside @given
    result = recommend(stats, profile)
    # the profile's node-local path is another machine's: each fake node's cache is its own
    params = {k: v for k, v in result.config.params if k != "SCR_CACHE_BASE"}
    config = ScrConfig.build(params, result.config.descriptors, result.config.target_version)
    # the nodes the recommendation was planned for (the profile's, or the trace's hosts):
    # RS planned for many nodes aborts on 2, as its evidence says
    nodes = {1: 1, 2: 2, 3: 2}.get(min(planned_nodes(stats, profile), 4), 4)
    for form, (form_env, strings) in _forms(config, tmp_path_factory.mktemp("c")).items():
        folder = tmp_path_factory.mktemp(form)
        run, ranks = _run(prefix, fake_host_shim, folder, form_env, strings, nodes,
                          sorted(params))
        output = run.stdout + run.stderr
        assert "ERROR" not in output and "ABORT" not in output, (form, output[-3000:])
        for held in (r["held"] for r in ranks):
            assert held == params, (form, {k: (held.get(k), v) for k, v in params.items()
                                           if held.get(k) != v})
        for rank in range(RANKS):  # flushed by SCR_FLUSH or at SCR_Finalize
            text = (folder / "prefix" / "ckpt.3" / f"rank_{rank}.dat").read_bytes()
            assert text.startswith(f"rank {rank} step 3\n".encode()), (form, rank)


# Each scheme's rendering, built as the mapping builds it, on 4 nodes: the generated
# workloads above reach some of them only rarely.
EXPLICIT = {
    "xor": ({"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "XOR", "SCR_SET_SIZE": "4",
             "SCR_FLUSH": "2", "SCR_PREFIX_SIZE": "2"}, ()),
    "rs": ({"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "RS", "SCR_SET_SIZE": "4",
            "SCR_SET_FAILURES": "2", "SCR_FLUSH": "1"}, ()),
    "single+xor": ({"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "FILE", "SCR_SET_SIZE": "4",
                    "SCR_FLUSH": "2", "SCR_FLUSH_TYPE": "PTHREAD", "SCR_FLUSH_ASYNC": "1",
                    "SCR_CACHE_SIZE": "2"},
                   (("0", (("INTERVAL", "1"), ("TYPE", "SINGLE"))),
                    ("1", (("INTERVAL", "2"), ("TYPE", "XOR"))))),
}


@pytest.mark.parametrize("name", sorted(EXPLICIT))
def test_redundancy_renderings_run_on_real_scr(name, real_scr, fake_host_shim,
                                                tmp_path_factory) -> None:
    from scrtune.scr_config.config import Descriptor

    params, lines = EXPLICIT[name]
    config = ScrConfig.build(params, tuple(Descriptor("CKPT", v, k) for v, k in lines))
    for form, (form_env, strings) in _forms(config, tmp_path_factory.mktemp("c")).items():
        folder = tmp_path_factory.mktemp(form)
        run, ranks = _run(real_scr, fake_host_shim, folder, form_env, strings, 4,
                          sorted(params))
        output = run.stdout + run.stderr
        assert "ERROR" not in output and "ABORT" not in output, (name, form, output[-3000:])
        assert all(r["held"] == params for r in ranks), (name, form)
        for rank in range(RANKS):
            text = (folder / "prefix" / "ckpt.3" / f"rank_{rank}.dat").read_bytes()
            assert text.startswith(f"rank {rank} step 3\n".encode()), (name, form, rank)
        if lines:  # the descriptors were read: SCR printed both CKPT descriptors
            assert output.count("TYPE = SINGLE") and output.count("TYPE = XOR"), (name, form)


@pytest.mark.parametrize("name, params, nodes, says", [
    ("poststage", {"SCR_CACHE_BYPASS": "0", "SCR_FLUSH": "1", "SCR_FLUSH_TYPE": "PTHREAD",
                   "SCR_FLUSH_ASYNC": "1", "SCR_CACHE_SIZE": "2", "SCR_FLUSH_POSTSTAGE": "1"},
     1, "Segmentation fault"),
    ("rs-on-a-smaller-job", {"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "RS",
                             "SCR_SET_SIZE": "8", "SCR_SET_FAILURES": "2"},
     2, "Reed-Solomon"),
])
def test_what_lint_and_the_mapping_avoid_really_breaks_scr(name, params, nodes, says, real_scr,
                                                            fake_host_shim,
                                                            tmp_path_factory) -> None:
    """The judge of scrtune's rules is the library: POSTSTAGE segfaults at the first
    asynchronous flush; RS with 2 parity blocks aborts on a job of 2 nodes (its sets have 2
    ranks), which is why the redundancy intent says to recommend again for such jobs."""
    for _ in range(3):
        folder = tmp_path_factory.mktemp(name)
        run = _launch(real_scr, fake_host_shim, folder, params, None, nodes,
                      ["SCR_CACHE_BYPASS"])
        assert run.returncode != 0
        # all of it: which rank reports first varies. The failure is the library's every
        # time, but its message is not: once in a loaded CI run, mpiexec tore the job down
        # before any rank's abort message came through. Launch again for the message.
        if says in run.stdout + run.stderr:
            break
    assert says in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]
