"""`scrtune recommend` as a user runs it: formats, and that its output passes `scrtune lint`."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import data


def test_json_has_intents_scr_and_runtime_actions(run_cli):
    # cached: at 256 nodes the node-local writes and PARTNER's encode waste less than the
    # parallel file system's share (at 64, bypass: the study ranks it first too)
    result = run_cli("recommend", "--example", "--nodes", "256", "--format", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {"intents", "scr", "runtime_actions"} <= set(out)
    for intent in out["intents"]:
        assert {"name", "value", "scope", "confidence", "evidence"} <= set(intent)
    assert out["scr"]["SCR_CACHE_BYPASS"] == "0" and isinstance(out["scr"]["descriptors"], list)
    assert out["target_version"] == "3.1.0" and "next SCR_Init" in out["takes_effect"]


def test_conf_output_passes_lint(run_cli, tmp_path):
    conf = run_cli("recommend", data("dlio_train_ckpt"), "--system",
                   "scrtune/data/corona-study.toml", "--nodes", "256", "--format", "conf")
    assert conf.returncode == 0, conf.stderr
    path = tmp_path / "scr.conf"
    path.write_text(conf.stdout)
    lint = run_cli("lint", str(path))
    assert lint.returncode == 0, lint.stdout


def test_env_output_is_safe_to_eval(run_cli, tmp_path):
    env = run_cli("recommend", "--example", "--nodes", "256", "--format", "env",
                  "--conf-path", str(tmp_path / "x.conf"))
    assert env.returncode == 0
    shell = subprocess.run(["bash", "-c", env.stdout + "\nenv | grep ^SCR_ | sort"],
                           capture_output=True, text=True, check=True)
    assert "SCR_CACHE_BYPASS=0" in shell.stdout


def test_scr_config_strings_and_table(run_cli):
    strings = run_cli("recommend", "--example", "--format", "scr-config")
    assert strings.returncode == 0 and "SCR_CACHE_BYPASS=1" in strings.stdout.splitlines()
    table = run_cli("recommend", "--example")
    assert "taking effect at the next SCR_Init" in table.stdout
    assert "caching blocks less from" in table.stdout


def test_bad_profile_is_one_line(run_cli, tmp_path):
    bad = tmp_path / "sys.toml"
    bad.write_text("cores_per_node = 'many'\n")
    result = run_cli("recommend", "--example", "--system", str(bad))
    assert result.returncode == 2 and "cores_per_node" in result.stderr
    assert "Traceback" not in result.stderr
    unknown = tmp_path / "typo.toml"
    unknown.write_text("core_per_node = 4\n")
    assert run_cli("recommend", "--example", "--system", str(unknown)).returncode == 2
    binary = tmp_path / "image.toml"
    binary.write_bytes(b"\x9b\xff\x00 not text")
    result = run_cli("recommend", "--example", "--system", str(binary))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "not UTF-8" in result.stderr


def test_srun_form_carries_descriptor_lines_through_a_config_file(tmp_path, monkeypatch,
                                                                   capsys):
    """`srun $(scrtune recommend --format srun)` once exited 2 on CKPT= lines, so srun ran
    without any setting. The descriptors go to --conf-path, which SCR_CONF_FILE names."""
    import argparse

    from scrtune.cli import recommend_cmd
    from scrtune.intents.inputs import StorageTier, SystemProfile, WorkloadStats
    from scrtune.scr_config.lint import lint_text
    from scrtune.scr_config.mapping import recommend

    load = WorkloadStats(ranks=16, hosts=16, checkpoints=3, ckpt_bytes=16e10, ckpt_dur_s=5.0)
    profile = SystemProfile(  # the SINGLE+XOR region of the redundancy intent
        nodes=16, node_mtbf_s=6 * 3600.0, node_loss_share=0.2, network_bytes_per_s=1e9,
        node_local=StorageTier(path="/l", write_bytes_per_s=5e9),
        parallel=StorageTier(path="/p", write_bytes_per_s=1e9, scaling_per_doubling=1.0))
    result = recommend(load, profile)
    assert result.config.descriptors
    monkeypatch.setattr(recommend_cmd, "recommend_traces", lambda *a: result)
    conf = tmp_path / "ckpt.conf"
    args = argparse.Namespace(traces=["t"], example=False, system=None, nodes=None,
                              format="srun", conf_path=str(conf), workers=0,
                              ckpt_pattern=None, horizon_s=600.0, job_interval_s=None)
    assert recommend_cmd.run(args) == 0
    exported = capsys.readouterr().out.strip()
    assert exported.startswith("--export=ALL,") and f"SCR_CONF_FILE={conf}" in exported
    pairs = dict(p.split("=", 1) for p in exported.removeprefix("--export=ALL,").split(","))
    assert pairs["SCR_COPY_TYPE"] == "FILE" and pairs["SCR_CONF_FILE"] == str(conf)
    written = conf.read_text()
    assert [line.split()[0] for line in written.splitlines()] == ["CKPT=0", "CKPT=1"]
    text = "\n".join(f"{k}={v}" for k, v in pairs.items() if k != "SCR_CONF_FILE")
    assert not lint_text(text + "\n" + written, "srun form").errors
