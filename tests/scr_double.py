"""A stand-in for SCR's Python module `scr` that enforces SCR's real rules (scr-facts.md §4.3, §7;
scr-observed.md): config sets only before init, identical config strings on every rank (SCR
compares and aborts), its state machine, and its flags. Aborts raise ScrAbort, as MPI_Abort
would end the job. Test-only: never shipped."""

from __future__ import annotations

import os
import time

import numpy as np

FLAG_NONE, FLAG_CHECKPOINT, FLAG_OUTPUT = 0, 1, 2


class ScrAbort(RuntimeError):
    """What SCR does with MPI_Abort: the whole job ends."""


class ScrDouble:
    FLAG_NONE, FLAG_CHECKPOINT, FLAG_OUTPUT = FLAG_NONE, FLAG_CHECKPOINT, FLAG_OUTPUT

    def __init__(self, comm=None, prefix: str = ".") -> None:
        self.comm = comm
        self.prefix = prefix
        self.state = "UNINIT"
        self.params: dict[str, str] = {}
        self.config_calls: list[str] = []
        self.outputs: list[tuple[str, int]] = []
        self.dataset = 0
        self.restart_from: str | None = None  # a checkpoint "loaded at init", for tests
        self._output_started = 0.0
        self._last_checkpoint_end = time.monotonic()

    def _abort(self, why: str) -> None:
        raise ScrAbort(why)

    def _same_on_all_ranks(self, text: str) -> None:
        if self.comm is None or self.comm.Get_size() == 1:
            return
        from mpi4py import MPI

        data = np.frombuffer(text.encode(), dtype=np.uint8)
        sizes = np.zeros(self.comm.Get_size(), dtype=np.int64)
        self.comm.Allgather(np.array([data.size], dtype=np.int64), sizes)
        everything = np.empty(int(sizes.sum()), dtype=np.uint8)
        self.comm.Allgatherv(data, (everything, sizes))
        offsets = np.r_[0, np.cumsum(sizes)]
        texts = {everything[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])}
        if len(texts) != 1:
            self._abort(f"SCR_Config strings differ between ranks: {sorted(texts)}")
        del MPI

    def config(self, text: str | None):
        if not text:
            return None
        self._same_on_all_ranks(text)  # collective, like SCR_Config
        self.config_calls.append(text)
        first = text.split(" ")[0]
        if " " in text and "=" not in first or "==" in first or first.startswith("="):
            self._abort(f"malformed SCR_Config string {text!r}")
        if "=" not in first:  # a query
            return self.params.get(first)
        if self.state != "UNINIT":
            self._abort(f"SCR_Config({text!r}) after SCR_Init")
        key, _, value = first.partition("=")
        if value:
            self.params[key] = text[len(key) + 1:]
        else:
            self.params.pop(key, None)
        return None

    def init(self) -> None:
        if self.state != "UNINIT":
            self._abort("SCR_Init called twice")
        self.state = "IDLE"

    def finalize(self) -> None:
        if self.state == "UNINIT":
            self._abort("SCR_Finalize before SCR_Init")
        self.state = "UNINIT"

    def need_checkpoint(self) -> bool:
        self._need("IDLE")
        seconds = int(self.params.get("SCR_CHECKPOINT_SECONDS", "0") or 0)
        return bool(seconds) and time.monotonic() - self._last_checkpoint_end >= seconds

    def start_output(self, name: str, flags: int) -> None:
        self._need("IDLE")
        if not flags & (FLAG_CHECKPOINT | FLAG_OUTPUT):
            self._abort("SCR_Start_output needs FLAG_CHECKPOINT and/or FLAG_OUTPUT")
        self.state = "CHECKPOINT" if flags & FLAG_CHECKPOINT else "OUTPUT"
        self.dataset += 1
        self.outputs.append((name, flags))

    def route_file(self, name: str) -> str:
        if self.state == "UNINIT":
            self._abort("SCR_Route_file before SCR_Init")
        return os.path.join(self.prefix, name)

    def complete_output(self, valid: bool) -> bool:
        if self.state not in ("CHECKPOINT", "OUTPUT"):
            self._abort(f"SCR_Complete_output in state {self.state}")
        if self.state == "CHECKPOINT":
            self._last_checkpoint_end = time.monotonic()
        self.state = "IDLE"
        return bool(valid)

    def have_restart(self) -> str | None:
        """Like the real module: the name of the checkpoint loaded at init, or None. The double
        keeps nothing between runs, so a checkpoint is loaded only when `restart_from` names
        one (test_scr_contract holds this to the real library)."""
        self._need("IDLE")
        self._restart_known = self.restart_from is not None
        return self.restart_from

    def start_restart(self) -> str:
        self._need("IDLE")
        if not getattr(self, "_restart_known", False):
            self._abort("SCR_Start_restart without a checkpoint from SCR_Have_restart")
        self.state = "RESTART"
        return self.restart_from

    def complete_restart(self, valid: bool) -> bool:
        self._need("RESTART")
        self.state = "IDLE"
        return bool(valid)

    def should_exit(self) -> bool:
        self._need("IDLE")
        return False

    def _need(self, state: str) -> None:
        if self.state != state:
            self._abort(f"called in state {self.state}, needs {state}")
