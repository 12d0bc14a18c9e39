"""What users install: the wheel holds every file of the package, and the tests run against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata

import pytest

import scrtune

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tracked_package_files() -> set[str]:
    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout (an unpacked sdist): no tracked-file list to compare")
    # tracked, and new files not ignored: what the next commit will hold
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                          "scrtune"], cwd=ROOT, capture_output=True, text=True, check=True)
    return {line for line in out.stdout.splitlines() if line}


def _wheel(tmp_path) -> str:
    given = os.environ.get("SCRTUNE_WHEEL")
    if given:
        return given
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), ROOT], check=True, capture_output=True, timeout=600)
    (wheel,) = [p for p in os.listdir(tmp_path) if p.endswith(".whl")]
    return str(tmp_path / wheel)


def test_wheel_holds_every_tracked_package_file(tmp_path) -> None:
    tracked = _tracked_package_files()
    with zipfile.ZipFile(_wheel(tmp_path)) as wheel:
        shipped = {name for name in wheel.namelist() if name.startswith("scrtune/")}
    compiled = {name for name in shipped if name.endswith(".so") or name.endswith(".pyd")}
    assert tracked - shipped == set(), "tracked files the wheel leaves out"
    assert shipped - compiled - tracked == set(), "files in the wheel that git does not track"


def test_every_package_directory_is_a_package() -> None:
    for folder, _dirs, files in os.walk(os.path.dirname(scrtune.__file__)):
        if "__pycache__" in folder:
            continue
        if any(f.endswith(".py") or ".pfw" in f or f.endswith(".toml") for f in files):
            assert "__init__.py" in files, f"{folder} is not a package: wheels leave it out"


def _inside_tree(path: str) -> bool:
    """The tree itself counts: building a wheel leaves scrtune.egg-info in it, found by its
    relative name when the tests run from the root."""
    return path == ROOT or path.startswith(ROOT + os.sep)


def test_tests_import_the_installed_package_unless_editable() -> None:
    """`python -m pytest` after a non-editable install would test the tree, not the wheel."""
    installed = [d for d in metadata.distributions(name="scrtune")
                 if not _inside_tree(os.path.abspath(str(d.locate_file(""))))]
    if not installed:
        pytest.skip("scrtune is not installed: the tests run on the source tree")
    direct_url = installed[0].read_text("direct_url.json")
    editable = bool(direct_url and json.loads(direct_url).get("dir_info", {}).get("editable"))
    inside_tree = _inside_tree(os.path.abspath(scrtune.__file__))
    if editable:
        assert inside_tree
    else:
        assert not inside_tree, f"tests imported {scrtune.__file__}, not the installed wheel"


def test_public_client_api_has_docstrings() -> None:
    """`help(TunedSCR)` once showed nothing: every public class, function and method says
    what it does."""
    import inspect

    import scrtune.client as client

    for name in client.__all__:
        obj = getattr(client, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for member, function in inspect.getmembers(obj, inspect.isfunction):
                if not member.startswith("_"):
                    assert inspect.getdoc(function), f"{name}.{member}"


def test_the_readme_training_loop_is_the_example_program() -> None:
    """The README's Python block is the loop of examples/train.py, which CI runs on Slurm
    (tests/test_slurm_examples.py): each of its lines stands there, in the same order."""
    import os
    import re

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md")) as handle:
        readme = handle.read()
    with open(os.path.join(root, "examples", "train.py")) as handle:
        program = [line.strip() for line in handle]
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert blocks, "the README shows no Python block"
    for block in blocks:
        position = 0
        for line in filter(None, (line.strip() for line in block.splitlines())):
            assert line in program[position:], f"README line not in examples/train.py: {line}"
            position = program.index(line, position) + 1
