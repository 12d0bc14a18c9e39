"""How to get an optional dependency: named for the way this scrtune was really installed.

`pip install 'scrtune[plot]'` only works where scrtune is on an index; most users install a wheel
or a source tree, whose location pip records in the distribution's `direct_url.json`.
"""

from __future__ import annotations

from scrtune.errors import UsageError


def _installed_from() -> str | None:
    """The local wheel or directory scrtune was installed from, or None (index, unknown)."""
    # imported here, on the error path: importlib.metadata took 20 ms of every command's start
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        text = metadata.distribution("scrtune").read_text("direct_url.json")
        url = json.loads(text)["url"] if text else ""
    except (metadata.PackageNotFoundError, ValueError, KeyError, TypeError):
        return None
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def install_hint(module: str, extra: str) -> str:
    """`pip install MODULE`, or the extra from the wheel or source tree scrtune came from."""
    source = _installed_from()
    if source:
        return f"pip install {module}  (or: pip install '{source}[{extra}]')"
    return f"pip install {module}  (or reinstall scrtune with its [{extra}] extra)"


def missing(option: str, module: str, extra: str) -> UsageError:
    return UsageError(f"{option} needs {module}, which is not installed: "
                      f"{install_hint(module, extra)}")
