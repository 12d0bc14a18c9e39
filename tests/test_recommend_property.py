"""Property: whatever the workload and system, every emitted configuration lints with no error,
in every form (config file, environment, SCR_Config strings)."""

from __future__ import annotations

import os
import re
import shlex
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from scrtune.intents.inputs import SizeShare, StorageTier, SystemProfile, WorkloadStats
from scrtune.scr_config.catalogue import BY_NAME
from scrtune.scr_config.decided import decided_names, stated
from scrtune.scr_config.lint import lint_environment, lint_text
from scrtune.scr_config.mapping import recommend
from scrtune.scr_config.values import as_read

tiers = st.builds(StorageTier, path=st.sampled_from(["/l/ssd", "/dev/shm", "/p/lustre2/run"]),
                  write_bytes_per_s=st.floats(1e6, 1e11),
                  scaling_per_doubling=st.floats(1.0, 2.0))
profiles = st.builds(
    SystemProfile,
    cores_per_node=st.integers(1, 256),
    memory_per_node_bytes=st.integers(0, 2 << 40),
    nodes=st.integers(1, 10_000),
    ranks_per_node=st.integers(0, 256),
    node_local=st.none() | tiers,
    parallel=st.none() | tiers,
    ost_count=st.integers(0, 2000),
    node_mtbf_s=st.floats(60, 1e9),
    node_loss_share=st.floats(0, 1),
    scr_version=st.sampled_from(["3.1.0", "2.0.0"]),
    network_bytes_per_s=st.floats(1e6, 1e11),
    flush_types=st.sampled_from([("SYNC", "PTHREAD"), ("SYNC", "PTHREAD", "BBAPI"), ("SYNC",),
                                 ("SYNC", "BBAPI")]),
)
workloads = st.builds(
    WorkloadStats,
    ranks=st.integers(1, 4096),
    hosts=st.integers(1, 512),
    cores_used=st.lists(st.integers(0, 255), max_size=16, unique=True).map(tuple),
    checkpoints=st.integers(0, 100),
    ckpt_bytes=st.floats(0, 1e13),
    ckpt_files=st.floats(0, 1e5),
    ckpt_dur_s=st.floats(0, 3600),
    largest_file_bytes=st.integers(0, 10**11),
    restore_dur_s=st.floats(0, 600),
    interval_s=st.floats(0, 1e5),
    write_modes=st.lists(st.builds(SizeShare, size_bytes=st.integers(1, 4 * 10**9),
                                   bytes_share=st.floats(0, 1)), max_size=6).map(tuple),
    has_sizes=st.booleans(),
)


def _environment(env_text: str) -> tuple[dict[str, str], str]:
    """What `eval` of the env form would export, and the descriptor file it would write."""
    exported: dict[str, str] = {}
    descriptor_file = ""
    heredoc = re.search(r"<<'SCRTUNE_EOF'\n(.*?)\nSCRTUNE_EOF", env_text, re.S)
    if heredoc:
        descriptor_file = heredoc.group(1) + "\n"
    for line in env_text.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            exported[name] = shlex.split(value)[0]
    return exported, descriptor_file


@settings(max_examples=400, deadline=None)
@given(workloads, profiles)
def test_every_recommendation_lints_clean(stats, profile):
    result = recommend(stats, profile)
    config = result.config
    assert lint_text(config.conf(), "conf").errors == 0
    with tempfile.TemporaryDirectory() as folder:  # the env form's file, written as eval would
        conf_path = os.path.join(folder, "x.conf")
        exported, descriptors = _environment(config.env(conf_path))
        if descriptors:
            with open(conf_path, "w") as handle:
                handle.write(descriptors)
        assert lint_environment(exported).errors == 0
    if descriptors:
        combined = "".join(f"{k}={v}\n" for k, v in exported.items() if k != "SCR_CONF_FILE")
        assert lint_text(combined + descriptors, "env+file").errors == 0
    for line in config.scr_config():
        assert " " not in line or line.startswith(("CKPT=", "STORE=", "GROUPS="))
    assert result.target_version == profile.scr_version  # the profile decides the target
    params = dict(config.params)
    assert "SCR_FLUSH_POSTSTAGE" not in params  # segfaults SCR v3.1.0 at the first async flush
    if "PTHREAD" not in profile.flush_types:  # every async flush would fail, silently
        assert params.get("SCR_FLUSH_TYPE") != "PTHREAD" and params.get("SCR_FLUSH_ASYNC") != "1"
    if params.get("SCR_COPY_TYPE") == "RS":  # redset aborts when k reaches the set size
        failures = int(params.get("SCR_SET_FAILURES", BY_NAME["SCR_SET_FAILURES"].default))
        assert 1 <= failures < int(params.get("SCR_SET_SIZE", "8"))


@settings(max_examples=300, deadline=None)
@given(workloads, profiles)
def test_what_a_client_passes_states_every_decided_value_and_changes_none(stats, profile):
    """What TunedSCR passes through SCR_Config (decided.py): a value for every parameter the
    recommendation decided, defaults included, so that no system config file replaces one;
    nothing else added, no value changed, and it lints clean."""
    config = recommend(stats, profile).config
    passed = stated(config)
    held, served = dict(passed.params), dict(config.params)
    assert set(decided_names(config)) <= set(held)
    assert {k: held[k] for k in served} == served  # nothing served is changed
    added = {k: v for k, v in held.items() if k not in served}
    assert set(added) <= set(decided_names(config))  # nothing undecided is added
    for name, value in added.items():  # and what is added is SCR's default, as SCR reads it
        param = BY_NAME[name]
        assert as_read(param.kind, value) == as_read(param.kind, param.default), (name, value)
    assert passed.descriptors == config.descriptors
    assert lint_text(passed.conf(), "stated").errors == 0
    if held["SCR_CACHE_BYPASS"] == "0":
        assert {"SCR_COPY_TYPE", "SCR_FLUSH", "SCR_FLUSH_TYPE"} <= set(held)
