"""A pitfall suite built from SCR v3.1.0's source (issue 46), each case run through the real
library: lint must say "error" exactly when the library misreads, errs or aborts. The judge is
what the library printed and how the job ended, not lint.

Sources: scr_abtoull (src/scr_util.c: strtod, then one unit letter and an optional B, nothing
else), the XOR and RS set rules (redset), the checkpoint descriptor table (duplicate indexes)."""

from __future__ import annotations

import pytest

from scrtune.scr_config.lint import lint_environment, lint_text
from tests.conftest import require_real_scr
from tests.test_real_scr_configs import _launch, fake_host_shim  # noqa: F401 - the fixture

pytestmark = pytest.mark.real_scr
CACHED = {"SCR_CACHE_BYPASS": "0"}

# name: (environment, config file text or "", nodes, whether SCR misbehaves)
CASES = {
    "bytes-with-a-space": ({"SCR_FILE_BUF_SIZE": "64 MB"}, "", 1, True),
    "bytes-b-without-unit": ({"SCR_FILE_BUF_SIZE": "1048576B"}, "", 1, True),
    "bytes-exponent": ({"SCR_FILE_BUF_SIZE": "6.4e7"}, "", 1, False),
    "bytes-leading-point": ({"SCR_FILE_BUF_SIZE": ".5GB"}, "", 1, False),
    "bytes-plain": ({"SCR_FILE_BUF_SIZE": "64MB"}, "", 1, False),
    "xor-set-of-one": ({**CACHED, "SCR_COPY_TYPE": "XOR", "SCR_SET_SIZE": "1"}, "", 4, True),
    "xor-set-of-two": ({**CACHED, "SCR_COPY_TYPE": "XOR", "SCR_SET_SIZE": "2"}, "", 4, False),
    "duplicate-ckpt": ({**CACHED, "SCR_COPY_TYPE": "FILE"},
                       "CKPT=0 INTERVAL=1 TYPE=SINGLE\nCKPT=0 INTERVAL=1 TYPE=XOR\n", 4, True),
    "distinct-ckpt": ({**CACHED, "SCR_COPY_TYPE": "FILE"},
                      "CKPT=0 INTERVAL=1 TYPE=SINGLE\nCKPT=1 INTERVAL=2 TYPE=XOR\n", 4, False),
    "rs-on-2-nodes": ({**CACHED, "SCR_COPY_TYPE": "RS", "SCR_SET_FAILURES": "2"}, "", 2, True),
    "rs-on-4-nodes": ({**CACHED, "SCR_COPY_TYPE": "RS", "SCR_SET_FAILURES": "2"}, "", 4, False),
}


def _misbehaved(output: str, returncode: int) -> bool:
    return returncode != 0 or "ERROR" in output or "ABORT" in output


@pytest.mark.parametrize("name", sorted(CASES))
def test_lint_errs_exactly_where_the_real_scr_does(name, fake_host_shim,  # noqa: F811
                                                   tmp_path) -> None:
    real_scr = require_real_scr()
    environ, text, nodes, expected = CASES[name]
    env = dict(environ)
    if text:
        conf = tmp_path / "descriptors.conf"
        conf.write_text(text)
        env["SCR_CONF_FILE"] = str(conf)
    report = lint_environment(env, nodes=nodes)
    if text:
        assert lint_text(text, str(conf), nodes).errors == 0 or report.errors
    run = _launch(real_scr, fake_host_shim, tmp_path, env, None, nodes, ["SCR_CACHE_BYPASS"])
    observed = _misbehaved(run.stdout + run.stderr, run.returncode)
    assert observed is expected, (name, (run.stdout + run.stderr)[-3000:])
    assert (report.errors > 0) is observed, (name, [f.render() for f in report.findings])
