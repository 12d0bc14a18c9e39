from __future__ import annotations

import os
import sys

import pytest

DATA = os.path.join(os.path.dirname(__file__), "data")

# The installed console script, as a user runs it. `python -m scrtune` from the source tree would
# import the tree's `scrtune/` and hide what the installed wheel lacks.
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "scrtune")
SCRTUNE: tuple[str, ...] = \
    (_SCRIPT,) if os.path.exists(_SCRIPT) else (sys.executable, "-m", "scrtune")


def data(*parts: str) -> str:
    return os.path.join(DATA, *parts)


def only_file(folder: str) -> str:
    files = sorted(os.listdir(data(folder)))
    return data(folder, [f for f in files if ".pfw" in f][0])


@pytest.fixture
def run_cli():
    """Run the real `scrtune` command in a subprocess; returns CompletedProcess."""
    import subprocess

    def run(*args: str, env: dict | None = None, timeout: float = 120):
        return subprocess.run(
            [*SCRTUNE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )

    return run
