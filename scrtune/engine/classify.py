"""What counts as checkpoint I/O: regions by category and name, files by path.

Regions: DFTracer Python/C++ regions whose category is a checkpoint category (`checkpoint`,
`CHECKPOINT`, `ckpt`) or whose name mentions one (`PyTorchCheckpointing.save_checkpoint`).
Their kind comes from the words in the name: restore words win (`checkpoint.load`, `restart`),
then save words (`save`, DLIO's `capture`); a bare `checkpoint` is a save, also as a method
(DLIO's `PyTorchCheckpointing.checkpoint`); anything else (`checkpoint.init`, `get_tensor_core`,
`cleanup`) is auxiliary and opens no window. A region marked by its name only (not by its
category) that wraps checkpoint-category regions is a driver loop, not a checkpoint: see
`Timeline._place`.
Files: resolved paths matching any of the configurable patterns.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from scrtune.events.parse import DATA_READ_CALLS, DATA_WRITE_CALLS

IO_LAYER = 3  # DFTracer `type` of POSIX and STDIO calls
IO_CATEGORIES = frozenset({"POSIX", "STDIO"})
TRACER_CATEGORY = "dftracer"

DEFAULT_PATH_PATTERNS: tuple[str, ...] = (
    r"checkpoint",
    r"ckpt",
    r"global_step\d*",
    # a dataset's files in SCR's cache (<base>/<user>/scr.<jobid>/scr.dataset.<id>/); not the
    # same name under the prefix's .scr/, which holds SCR's own metadata (see SCR_METADATA)
    r"^(?!.*/\.scr/).*/scr\.dataset\.\d+/",
)
# SCR's own metadata (index, summaries, halt file under $SCR_PREFIX/.scr/): written at every
# flush, it is never a checkpoint's data, whatever the patterns say (read as checkpoints, a
# run without checkpoint regions showed 11-13 s "checkpoints" and a 16.6 h interval)
SCR_METADATA = re.compile(r"/\.scr(/|$)")
DEFAULT_REGION_CATEGORIES: tuple[str, ...] = ("checkpoint", "ckpt", "checkpointing")
_NAME_MARK = re.compile(r"checkpoint|ckpt|^capture$|^restart$", re.IGNORECASE)
_MARK_WORDS = re.compile(r"checkpointing|checkpoint|ckpt", re.IGNORECASE)
_RESTORE_WORDS = re.compile(r"load|restore|restart|resume|recover|read|fetch", re.IGNORECASE)
_SAVE_WORDS = re.compile(r"save|capture|write|dump|persist|store|commit|output", re.IGNORECASE)
# DLIO names its step's compute `TorchFramework.compute` (or TF...) in category dlio_benchmark
_COMPUTE_NAME = re.compile(r"^(ai\.compute|train\.step)|(^|\.)compute$", re.IGNORECASE)


class RegionKind(str, enum.Enum):
    SAVE = "save"
    RESTORE = "restore"
    AUX = "aux"  # a checkpoint region that neither saves nor restores


@dataclass(frozen=True)
class CheckpointPatterns:
    """How checkpoint I/O is recognised; every field can be set from the command line."""

    path_patterns: tuple[str, ...] = DEFAULT_PATH_PATTERNS
    region_categories: tuple[str, ...] = DEFAULT_REGION_CATEGORIES

    def path_matcher(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.path_patterns), re.IGNORECASE)


def is_io_call(layer: int, category: str) -> bool:
    return layer == IO_LAYER or category.upper() in IO_CATEGORIES


def checkpoint_region_kind(
    name: str, category: str, patterns: CheckpointPatterns
) -> RegionKind | None:
    """The kind of a checkpoint region, or None when the region is not about checkpoints."""
    marked = category.lower() in patterns.region_categories or bool(_NAME_MARK.search(name))
    if not marked:
        return None
    if _RESTORE_WORDS.search(name):
        return RegionKind.RESTORE
    if _SAVE_WORDS.search(name):
        return RegionKind.SAVE
    method = name.rsplit(".", 1)[-1]  # `PyTorchCheckpointing.checkpoint`: the method's name
    rest = _MARK_WORDS.sub("", method)
    if not re.search(r"[A-Za-z]", rest):
        return RegionKind.SAVE
    return RegionKind.AUX


def marked_by_category(category: str, patterns: CheckpointPatterns) -> bool:
    """A checkpoint library's own region (category `checkpoint`), rather than an application
    function whose name mentions checkpoints."""
    return category.lower() in patterns.region_categories


def is_compute_region(name: str, category: str) -> bool:
    return category.lower() == "compute" or bool(_COMPUTE_NAME.search(name))


def is_write(name: str) -> bool:
    return name in DATA_WRITE_CALLS


def is_read(name: str) -> bool:
    return name in DATA_READ_CALLS
