"""`scrtune lint`: one test per pitfall of scr-observed.md and scr-facts.md, each with the line."""

from __future__ import annotations

import gzip
import json

import pytest

from scrtune.scr_config.lint import lint_environment, lint_text

BYPASS_OFF = "SCR_CACHE_BYPASS=0\n"


def codes(text: str) -> set[tuple[str, int, str]]:
    return {(f.code, f.line, f.severity) for f in lint_text(text, "t.conf").findings}


@pytest.mark.parametrize(
    "text, code, line, severity",
    [
        ("SCR_BOGUS_PARAM=42\n", "unknown-name", 1, "warning"),
        ("SCR_FLUSHH=1\n", "near-miss", 1, "error"),
        ("SCR_FLUSH_THREADS=4\n", "not-scr", 1, "error"),
        (BYPASS_OFF + "SCR_FLUSH=abc\n", "non-numeric", 2, "error"),
        ("SCR_HALT_SECONDS=1h\n", "truncated-number", 1, "error"),
        (BYPASS_OFF + "SCR_CACHE_SIZE=99999999999999999999\n", "out-of-range", 2, "error"),
        ("SCR_CACHE_BYPASS=4294967296\n", "out-of-range", 1, "error"),  # atoi: 0, bypass off
        ("SCR_CACHE_BYPASS=true\n", "word-boolean", 1, "error"),
        ("SCR_FETCH=no\n", "word-boolean", 1, "error"),
        (BYPASS_OFF + 'SCR_FLUSH="3"\n', "quoted", 2, "error"),
        ("SCR_JOB_NAME=myjob\r\nSCR_DEBUG=1\n", "crlf", 1, "error"),
        ("export SCR_FLUSH=3\n", "export", 1, "error"),
        ("SCR_DEBUG\nSCR_CACHE_SIZE=2\n", "no-equals", 1, "error"),
        ("SCR_DEBUG\nSCR_CACHE_SIZE=2\n", "swallowed-line", 2, "error"),
        (" = 3\n", "missing-key", 1, "error"),
        ("SCR_PREFIX=${HOME}/run\n", "brace-var", 1, "error"),
        (BYPASS_OFF + "SCR_FLUSH_TYPE=pthread\n", "wrong-case", 2, "error"),
        (BYPASS_OFF + "SCR_FLUSH_TYPE=FAST\n", "unknown-value", 2, "error"),
        ("SCR_COPY_TYPE=BUDDY\n", "copy-type-file-mode", 1, "error"),
        ("SCR_COPY_TYPE=FILE\n", "copy-type-file-mode", 1, "error"),
        (BYPASS_OFF + "SCR_COPY_TYPE=RS\nSCR_SET_SIZE=4\nSCR_SET_FAILURES=5\n",
         "set-failures-range", 4, "error"),
        (BYPASS_OFF + "SCR_COPY_TYPE=RS\nSCR_SET_FAILURES=0\n", "set-failures-range", 3, "error"),
        (BYPASS_OFF + "SCR_COPY_TYPE=RS\nSCR_SET_FAILURES=1\n", "rs-becomes-xor", 3, "warning"),
        ("SCR_COPY_TYPE=FILE\nCKPT=0 INTERVAL=1 TYPE=XOR SET_SIZE=16\n", "ckpt-set-size", 2,
         "warning"),
        ("SCR_FLUSH_WIDTH=64\n", "ignored-v3", 1, "warning"),
        ("SCR_FETCH_WIDTH=64\n", "ignored-v3", 1, "warning"),
        ("SCR_FLUSH_ASYNC_BW=100MB\n", "ignored-v3", 1, "warning"),
        ("SCR_CRC_ON_FLUSH=0\n", "ignored-v3", 1, "warning"),
        ("SCR_COPY_TYPE=SINGLE\n", "needs-cache", 1, "warning"),
        ("SCR_CACHE_BYPASS=1\nSCR_FLUSH=2\n", "needs-cache", 2, "warning"),
        ("SCR_COPY_TYPE=FILE\nCKPT=0 INTERVAL=2 TYPE=XOR\n", "no-interval-1", 2, "error"),
        ("SCR_COPY_TYPE=FILE\nCKPT=0 INTERVAL=1 TYPE=XOR STORE=/l/ssd\n", "store-missing", 2,
         "error"),
        ("SCR_COPY_TYPE=SINGLE\nCKPT=0 INTERVAL=1 TYPE=XOR\n", "ckpt-ignored", 2, "warning"),
        ("SCR_GROUP=RACK\n", "unknown-group", 1, "error"),
        ("SCR_FLUSH=3\nSCR_FLUSH=4\n", "repeated-key", 2, "warning"),
        (BYPASS_OFF + "SCR_FLUSH_ASYNC=1\nSCR_FLUSH_TYPE=SYNC\nSCR_CACHE_SIZE=2\n",
         "async-sync", 2, "warning"),
        (BYPASS_OFF + "SCR_FLUSH_ASYNC=1\nSCR_FLUSH_TYPE=PTHREAD\n", "async-cache-size", 2,
         "warning"),
        (BYPASS_OFF + "SCR_MPI_BUF_SIZE=4GB\n", "too-large", 2, "error"),
        ("SCR_FILE_BUF_SIZE=lots\n", "not-a-byte-count", 1, "error"),
        ("SCR_RUNS=3\n", "scripts-env-only", 1, "warning"),
        ("STORE=/l/ssd COUNT=two\n", "non-numeric", 1, "error"),
        ("STORE=/l/ssd FLUSH=pthread\n", "wrong-case", 1, "error"),
        ("CACHE=/l/ssd SIZE=2\n", "ignored-v3", 1, "warning"),
        ("SCR_FETCH=2\n", "flag-not-0-1", 1, "warning"),
        ("SCR_DEBUG=1 EXTRA=2\n", "stray-children", 1, "warning"),
        ("STORE=/l/ssd SIZE=4\n", "unknown-key", 1, "warning"),
    ],
)
def test_each_pitfall_is_found_with_its_line(text, code, line, severity):
    assert (code, line, severity) in codes(text)


def test_descriptor_store_defined_by_a_store_line_is_fine():
    text = ("SCR_CACHE_BYPASS=0\nSCR_COPY_TYPE=FILE\nSTORE=/l/ssd COUNT=2\n"
            "CKPT=0 INTERVAL=1 TYPE=SINGLE STORE=/l/ssd\n")
    assert lint_text(text).findings == ()


def test_group_defined_by_groups_lines_is_fine():
    text = "GROUPS=node1 RACK=1\nGROUPS=node2 RACK=2\nSCR_GROUP=RACK\n"
    assert "unknown-group" not in {f.code for f in lint_text(text).findings}


def test_comment_rules_follow_scr():
    report = lint_text("# SCR_FLUSH=abc\nSCR_DEBUG=1 # a comment\n")
    assert report.findings == ()  # `#` at a token start is a comment


def test_environment_lower_case_and_values():
    report = lint_environment({"scr_flush": "7", "SCR_FLUSH": "x", "HOME": "/root",
                               "SCR_PREFIX": "${HOME}/p"})
    found = {(f.code, f.name) for f in report.findings}
    assert ("lower-case-name", "scr_flush") in found
    assert ("non-numeric", "SCR_FLUSH") in found
    assert not any(f.code == "brace-var" for f in report.findings)  # env expands ${VAR}
    assert all(f.line == 0 and f.source == "environment" for f in report.findings)


def test_clean_and_exit_codes():
    assert lint_text("SCR_CACHE_BYPASS=0\nSCR_FLUSH=4\n").exit_code == 0
    assert lint_text("SCR_FLUSH_WIDTH=4\n").exit_code == 1
    assert lint_text("SCR_FLUSH=abc\n").exit_code == 3


def test_cli_exit_codes_and_json(run_cli, tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text("SCR_CACHE_BYPASS=0\nSCR_FLUSH_TYPE=pthread\n")
    result = run_cli("lint", str(bad), "--format", "json")
    assert result.returncode == 3
    out = json.loads(result.stdout)
    assert out["errors"] == 1 and out["findings"][0]["line"] == 2
    good = tmp_path / "good.conf"
    good.write_text("SCR_CACHE_BYPASS=0\nSCR_FLUSH=4\n")
    assert run_cli("lint", str(good)).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "SCR_FLUSH_WIDTH": "8"}
    import os
    import sys
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    assert run_cli("lint", "--env", env=env).returncode == 1
    missing = run_cli("lint", str(tmp_path / "none.conf"))
    assert missing.returncode == 2 and "none.conf" in missing.stderr


def test_huge_values_and_lines_are_findings_of_one_short_line(run_cli, tmp_path):
    """100,000 digits once raised ValueError (Python's int() digit limit), and a long line was
    quoted whole."""
    conf = tmp_path / "huge.conf"
    conf.write_text("SCR_CACHE_BYPASS=0\nSCR_FLUSH=" + "1" * 100_000 + "\n" + "X" * 5000 + "\n")
    result = run_cli("lint", str(conf))
    assert result.returncode == 3 and "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert any("out-of-range" in line for line in lines)
    assert any("no-equals" in line for line in lines)
    assert max(len(line) for line in lines) < 400


@pytest.mark.parametrize("content, word", [  # mtime=0: every xdist worker collects one test
    (gzip.compress(b"SCR_CACHE_BYPASS=0\n", mtime=0), "gzip"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8, "binary"),
], ids=["gzip", "binary"])
def test_compressed_and_binary_files_are_refused_in_one_line(run_cli, tmp_path, content, word):
    path = tmp_path / "scr.conf"
    path.write_bytes(content)
    result = run_cli("lint", str(path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and word in result.stderr and str(path) in result.stderr


@pytest.mark.parametrize("text, code", [
    ("SCR_CACHE_BYPASS=0\nSCR_FLUSH_ASYNC=1\nSCR_FLUSH_TYPE=PTHREAD\nSCR_CACHE_SIZE=2\n"
     "SCR_FLUSH_POSTSTAGE=1\n", "poststage-crash"),
    ("SCR_CACHE_BYPASS=0\nSCR_COPY_TYPE=RS\nSCR_SET_SIZE=4\nSCR_SET_FAILURES=4\n",
     "rs-set-failures"),
    ("SCR_CACHE_BYPASS=0\nSCR_COPY_TYPE=XOR\nSCR_SET_SIZE=4\nSCR_SET_FAILURES=5\n",
     "set-failures-range"),
])
def test_configurations_that_break_real_scr_are_errors(text, code):
    """Each of these aborted or crashed the real SCR v3.1.0 (scr-observed.md, second round)."""
    report = lint_text(text)
    assert code in {f.code for f in report.findings if f.severity == "error"}, report.findings


def test_env_form_of_descriptor_configurations_lints_as_scr_reads_it(tmp_path):
    """`recommend --format env` puts CKPT= lines in the file SCR_CONF_FILE names; lint --env
    once reported SCR_COPY_TYPE=FILE without descriptors, which SCR reads fine."""
    conf = tmp_path / "scrtune.conf"
    conf.write_text("CKPT=0 INTERVAL=1 TYPE=SINGLE\nCKPT=1 INTERVAL=4 TYPE=XOR\n")
    env = {"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": "FILE", "SCR_CONF_FILE": str(conf)}
    assert lint_environment(env).errors == 0
    missing = lint_environment({**env, "SCR_CONF_FILE": str(tmp_path / "none.conf")})
    assert "copy-type-file-mode" in {f.code for f in missing.findings}
    assert "conf-file-unreadable" in {f.code for f in missing.findings}


def test_env_naming_a_compressed_conf_file_is_an_error(tmp_path):
    conf = tmp_path / "scr.conf.gz"
    conf.write_bytes(gzip.compress(b"SCR_FLUSH=1\n"))
    report = lint_environment({"SCR_CONF_FILE": str(conf)})
    assert [f.code for f in report.findings if f.severity == "error"] == ["conf-file-not-text"]


def test_a_descriptor_in_the_environment_is_an_error() -> None:
    """Issue 46: `STORE=/dev/shm COUNT=1` as an environment variable: SCR takes the whole
    value as the store's name, without its keys (COUNT silently lost)."""
    from scrtune.scr_config.lint import lint_environment

    report = lint_environment({"STORE": "/dev/shm COUNT=1", "SCR_CACHE_BYPASS": "0"})
    assert [f.code for f in report.findings if f.severity == "error"] == \
        ["descriptor-in-environment"]


def test_lint_nodes_checks_reed_solomon_against_the_job_s_node_count(tmp_path, run_cli) -> None:
    conf = tmp_path / "rs.conf"
    conf.write_text("SCR_CACHE_BYPASS=0\nSCR_COPY_TYPE=RS\nSCR_SET_FAILURES=2\n")
    unknown, two, four = (run_cli("lint", str(conf), *extra) for extra in
                          ((), ("--nodes", "2"), ("--nodes", "4")))
    assert unknown.returncode == 0 and four.returncode == 0, (unknown.stdout, four.stdout)
    assert two.returncode == 3 and "rs-too-few-nodes" in two.stdout, two.stdout
    bad = run_cli("lint", str(conf), "--nodes", "-1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
