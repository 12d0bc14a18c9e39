"""Checkpoint windows, and how a process's windows take a batch's new ones (placement).

A window is one process's save or restore. DFTracer writes a region when it ends, so a batch
brings regions nested in ones that come later and in earlier ones; placing them keeps the
windows sorted by start and not nested: an outer window absorbs the windows inside it,
except a driver (a region marked by its name only, as DLIO's `_checkpoint_write`) around
checkpoint-category windows, which is dropped so the checkpoints it wraps stay separate.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scrtune.engine.ioagg import IoAgg, fast_agg


class Window(msgspec.Struct, kw_only=True, array_like=True, omit_defaults=True):
    """A checkpoint save or restore of one process, with the I/O inside it."""

    kind: str
    name: str
    step: int
    epoch: int
    io: IoAgg
    by_name_only: bool = False  # marked by its name, not a checkpoint category


def new_window(mark: tuple[str, str, bool], step: int, epoch: int, start_us: int,
               end_us: int) -> Window:
    """The window of one save or restore region; `mark` is its (kind, name, by name only)."""
    kind, name, by_name_only = mark
    return Window(kind=kind, name=name, step=step, epoch=epoch, by_name_only=by_name_only,
                  io=IoAgg(start_us=start_us, end_us=end_us))


class FreshWindows:
    """A batch's save and restore regions of one process, as columns: most are nested in
    another (`checkpoint.save.model` in `checkpoint.save`) and are absorbed when placed, so
    only the ones kept become Window objects (Timeline._place)."""

    def __init__(self, marks: list[tuple[str, str, bool]], mark: np.ndarray,
                 start_us: np.ndarray, end_us: np.ndarray, step: np.ndarray,
                 epoch: np.ndarray) -> None:
        self.marks = marks  # (kind, name, by name only) of each region key
        self.mark = mark  # each window's index in marks
        self.start_us, self.end_us, self.step, self.epoch = start_us, end_us, step, epoch
        self.by_name_only = np.array([m[2] for m in marks], dtype=bool)[mark]
        self._listed: tuple[list[int], list[int], list[int]] | None = None

    def __len__(self) -> int:
        return len(self.mark)

    def window(self, index: int, step: int, epoch: int) -> Window:
        if self._listed is None:  # a numpy scalar per field and window cost more than this
            self._listed = (self.mark.tolist(), self.start_us.tolist(), self.end_us.tolist())
        mark, start_us, end_us = self._listed
        return new_window(self.marks[mark[index]], step, epoch, start_us[index], end_us[index])

    def windows(self) -> list[Window]:
        return [self.window(i, step, epoch) for i, (step, epoch) in
                enumerate(zip(self.step.tolist(), self.epoch.tolist()))]


def time_span_us(windows: list[Window] | FreshWindows) -> tuple[int, int]:
    """The first start and the last end of some windows (not none)."""
    if isinstance(windows, FreshWindows):
        return int(windows.start_us.min()), int(windows.end_us.max())
    return min(w.io.start_us for w in windows), max(w.io.end_us for w in windows)


def place(held: list[Window], new: list[Window] | FreshWindows
          ) -> tuple[list[Window], list[Window]]:
    """`held` (sorted by start, not nested) with `new` placed among them: the windows kept,
    sorted by start, and the new ones among them (which may claim pending calls). The C pass
    when it is built and every time fits in int64; place_py otherwise, the reference."""
    fast = fast_agg()
    if fast is None or isinstance(new, list) or not len(new):
        return place_py(held, new.windows() if isinstance(new, FreshWindows) else new)
    try:  # held windows' times and steps are Python ints: from another rank, any size
        columns = [
            np.concatenate([np.array(values, dtype=np.int64), fresh]) for values, fresh in (
                ([w.io.start_us for w in held], new.start_us),
                ([w.io.end_us for w in held], new.end_us),
                ([w.step for w in held], new.step), ([w.epoch for w in held], new.epoch))]
    except OverflowError:
        return place_py(held, new.windows())
    by_name = np.concatenate([np.array([w.by_name_only for w in held], dtype=bool),
                              new.by_name_only])
    kept, step, epoch, absorbed = fast.place(columns[0], columns[1], by_name, columns[2],
                                             columns[3], len(held))
    return _placed(held, new, np.frombuffer(kept, dtype=np.int64).tolist(),
                   np.frombuffer(step, dtype=np.int64).tolist(),
                   np.frombuffer(epoch, dtype=np.int64).tolist(),
                   np.frombuffer(absorbed, dtype=np.int64).tolist())


def _placed(held: list[Window], new: FreshWindows, kept: list[int], steps: list[int],
            epochs: list[int], absorbed: list[int]) -> tuple[list[Window], list[Window]]:
    """The C pass's answer as windows: new ones kept become objects; held ones absorbed by a
    kept one add their I/O to it, in the pass's order."""
    count = len(held)
    windows: list[Window | None] = [*held, *([None] * len(new))]
    placed: list[Window] = []
    for index, step, epoch in zip(kept, steps, epochs):
        window = windows[index]
        if window is None:
            window = windows[index] = new.window(index - count, step, epoch)
        else:
            window.step, window.epoch = step, epoch
        placed.append(window)
    for inner, outer in zip(absorbed[::2], absorbed[1::2]):
        windows[outer].io.absorb(windows[inner].io)  # type: ignore[union-attr]
    return placed, [windows[i] for i in kept if i >= count]  # type: ignore[misc]


def place_py(held: list[Window], new: list[Window]) -> tuple[list[Window], list[Window]]:
    """place's reference, for windows as objects."""
    merged = sorted(held + new, key=lambda w: (w.io.start_us, -w.io.end_us))
    kept: list[Window] = []
    fresh_ids = {id(w) for w in new}
    grown: list[Window] = []
    for window in merged:
        outer = kept[-1] if kept else None
        if outer is not None and window.io.end_us <= outer.io.end_us \
                and outer.by_name_only and not window.by_name_only:
            kept.pop()  # a driver around checkpoints: they are the checkpoints
            if grown and grown[-1] is outer:
                grown.pop()
            outer = kept[-1] if kept else None
        if outer is not None and window.io.end_us <= outer.io.end_us:
            outer.io.absorb(window.io)
            if outer.step < 0:
                outer.step = window.step
            if outer.epoch < 0:
                outer.epoch = window.epoch
            continue
        kept.append(window)
        if id(window) in fresh_ids:
            grown.append(window)
    return kept, grown
