"""A simulated job for the feedback loop: runs that ask the daemon's Service at SCR_Init and
after each output, checkpoint at SCR's cadence (or their own), and report what a TunedSCR
reports. The checkpoint cost is a function of the SCR parameters the run was started with,
times seeded log-normal noise: the truth the loop's decisions are checked against."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from scrtune.daemon.protocol import Recommend, Record
from scrtune.daemon.service import Service


@dataclass
class SimJob:
    service: Service
    cost_s: Callable[[dict], float]  # mean blocking seconds of one checkpoint under these params
    noise: float = 0.2  # log-normal sigma of one checkpoint's cost
    own_cadence_s: float = 0.0  # > 0: the application checkpoints on its own, every this long
    default_interval_s: float = 60.0  # when SCR has no cadence
    seed: int = 1
    wall_s: float = 1.7e9
    run: int = 0
    served: list[dict] = field(default_factory=list)  # the configuration of each run

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def _record(self, kind: str, step: int = -1, detail: str = "") -> None:
        self.service.record(Record(job="sim", run=self.run, kind=kind, wall_s=self.wall_s,
                                   step=step, detail=detail))

    def launch(self, outputs: int, crash: bool = False) -> dict:
        """One run: SCR_Init with what is served now, `outputs` checkpoints, then an end
        (or a crash, recorded as none)."""
        self.run += 1
        served = self.service.recommend(Recommend(starting=True))  # as TunedSCR.init() asks
        self.served.append(served)
        scr = served["scr"]
        self._record("job_started", step=0)
        for _ in range(outputs):
            # where SCR has no cadence the client's timer (default_interval_s) asks
            timer_s = 0.0 if scr.get("SCR_CHECKPOINT_SECONDS") else self.default_interval_s
            cadence = float(scr.get("SCR_CHECKPOINT_SECONDS") or self.default_interval_s)
            compute_s = self.own_cadence_s or cadence
            save_s = self.cost_s(scr) * math.exp(self.rng.gauss(0, self.noise))
            self.wall_s += compute_s + save_s
            self._record("checkpoint_save_finished", detail=json.dumps({
                "config": served["config_id"], "save_s": save_s, "steps": 10,
                "compute_s": compute_s, "due": 0 if self.own_cadence_s else 1,
                "interval_s": timer_s}))
            self.service.recommend(Recommend())  # the client asks ahead after each output
        self.wall_s += 1.0
        if not crash:
            self._record("job_terminated")
        return served
