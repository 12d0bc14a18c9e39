"""The feedback loop of the daemon's Service: what it serves (experiment.plan() and
calm.judge()), each experiment's verdict (tuner.py) followed and logged, and the failure rate
the job's own crashes teach. A mixin of Service, which holds the state it reads."""

from __future__ import annotations

import contextlib
import logging
import statistics

import msgspec

from scrtune.daemon.calm import Context, Judged, judge
from scrtune.daemon.experiment import (
    Option,
    Plan,
    evidence_of,
    plan,
    predicted_blocking_change,
    rejected_changes,
    with_scr,
)
from scrtune.daemon.halt import remaining_s, write_path_changes
from scrtune.daemon.state import Counters, RestartPolicy, config_id
from scrtune.errors import StoreError, StoreUnavailable
from scrtune.goodput.store import Store
from scrtune.goodput.tuner import (
    BASELINE_OUTPUTS,
    MAX_SAMPLES,
    Experiment,
    Output,
    experiments,
    measured_interval_s,
    mtbf_estimate,
)
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import nodes, ranks_per_node
from scrtune.scr_config.config import describe_changes
from scrtune.units import plural

log = logging.getLogger("scrtune.daemon")
VERDICTS_KEY = "verdicts"  # the experiments decided, msgpack: a sequential test decides once


def saved_verdicts(store: Store) -> list[Experiment]:
    """The experiments decided, in order, as the daemon logged them (the goodput report reads
    them too); raises msgspec.DecodeError or StoreError when they cannot be read."""
    saved = store.get(VERDICTS_KEY)
    return msgspec.msgpack.decode(saved, type=list[Experiment]) if saved else []


class FeedbackLoop:
    store: Store
    profile: SystemProfile
    restart: RestartPolicy | None
    counters: Counters
    prior_weight_s: float
    calm_reason: str
    _outputs: list[Output]
    _observed: WorkloadStats
    _served: dict[str, object] | None
    _served_at: int
    _served_informed: bool
    _last_plans: frozenset[str]  # the ids of the options computed the time before
    _decided: dict[str, Experiment]  # verdicts reached, by Experiment.key (kept in the store)
    _served_crashes: int  # the crash count when the served configuration began to be served
    _run_starting: bool  # a new run asked before SCR_Init and has not recorded its start yet

    def _load_verdicts(self) -> None:
        self._served_crashes = 0
        self._run_starting = False
        try:
            found = saved_verdicts(self.store)
        except (msgspec.DecodeError, StoreError) as exc:
            log.warning("the verdicts saved in %s cannot be read (%s): judged again",
                        self.store.path, exc)
            found = []
        self._decided = {e.key: e for e in found}

    def _serve(self, candidate: dict[str, object]) -> dict[str, object]:
        """What to serve: the first recommendation; then only what experiment.plan() keeps of
        a candidate (what can change SCR's behaviour for this job, not reverted before), when
        calm.judge() finds it an experiment worth running."""
        informed = bool(self.counters.records or self._outputs)
        if self._served is None:
            self._serving(candidate)
            self._served_informed = informed
            self.calm_reason = "first informed recommendation" if informed else "first"
            return candidate
        served_scr: dict = self._served["scr"]  # type: ignore[assignment]
        found = self.experiments(words=False)
        # what the served configuration does, once it ran: before that, what ran before it
        under = [o for o in self._outputs if o.config == self._served["config_id"]]
        seen = evidence_of(under or self._outputs, self._observed, self.profile,
                           *self._layout())
        planned = plan(served_scr, candidate["scr"], seen,  # type: ignore[arg-type]
                       rejected_changes(found, self._served_scr))
        if not self._served_informed and informed:  # nothing measured yet to weigh it with
            self._served_informed = True
            if not planned.changed(served_scr):
                self.calm_reason = "first informed recommendation: unchanged"
                return self._served
            return self._serve_option(candidate, Option("", planned.scr, planned.taken),
                                      Judged(True, "first informed recommendation"), planned)
        best: tuple[Option, Judged] | None = None
        reasons, computed = [], set()
        for option in planned.options:
            option_id = config_id(option.scr)
            computed.add(option_id)
            judged = judge(served_scr, option.scr, option_id,
                           self._context(found, served_scr, option.scr))
            reasons.append(f"{option.name}: {judged.reason}")
            if judged.change and (best is None or
                                  judged.predicted_change < best[1].predicted_change):
                best = option, judged
        self._last_plans = frozenset(computed)
        self.calm_reason = "; ".join(reasons) or "unchanged"
        if planned.left:
            self.calm_reason += f"; left out: {'; '.join(planned.left)}"
        if best is not None:
            self._serve_option(candidate, *best, planned)
        return self._served

    def _serve_option(self, candidate: dict, option: Option, judged: Judged,
                      planned: Plan) -> dict[str, object]:
        """Serve `option` of `candidate`, the experiment it is kept with its prediction."""
        option_id = config_id(option.scr)
        chosen = with_scr(candidate, option.scr, option_id)
        chosen["experiment"] = {"predicted_change": judged.predicted_change,
                                "changes": option.taken, "left": planned.left}
        self.calm_reason = (f"{option.name}: " if option.name else "") + judged.reason + \
            (f"; left out: {'; '.join(planned.left)}" if planned.left else "")
        with contextlib.suppress(StoreUnavailable):  # read back to judge it
            self.store.put(f"served:{option_id}", msgspec.json.encode(chosen))
        log.info("serving %s instead of %s (%s): %s", option_id, self._served["config_id"],
                 "; ".join(option.taken), self.calm_reason)
        self._serving(chosen)
        return chosen

    def _serving(self, recommendation: dict[str, object]) -> None:
        self._served, self._served_at = recommendation, len(self._outputs)
        self._served_crashes = int(self._failures()["crashes"])

    def _context(self, found: list[Experiment], served_scr: dict, planned_scr: dict) -> Context:
        served_id = str(self._served["config_id"]) if self._served else ""
        under = [o for o in self._outputs if o.config == served_id][-BASELINE_OUTPUTS:]
        measuring = found[-1] if found and found[-1].after == served_id and \
            found[-1].verdict == "measuring" else None
        periods = [o.compute_s + o.save_s for o in self._outputs[-32:] if o.compute_s > 0]
        period_s = statistics.median(periods) if periods else measured_interval_s(self._outputs)
        left = MAX_SAMPLES
        if self.restart is not None and self.restart.end_time_s and period_s > 0:
            left = int(max(remaining_s(self.restart.end_time_s), 0) / period_s)
        blocking = predicted_blocking_change(self._measured(self._observed), self._tuned_profile(),
                                             served_scr, planned_scr, *self._layout())
        return Context(outputs_since=len(self._outputs) - self._served_at,
                       baseline=under or self._outputs[-BASELINE_OUTPUTS:],
                       job_mtbf_s=self._job_mtbf_s(), outputs_left=left,
                       measuring=measuring.summary() if measuring else "",
                       previous_plans=self._last_plans, blocking_change=blocking,
                       crashes_since=int(self._failures()["crashes"]) - self._served_crashes)

    def _layout(self) -> tuple[int, int]:
        return nodes(self._observed, self.profile), ranks_per_node(self._observed, self.profile)

    def _served_scr(self, config: str) -> dict | None:
        saved = self.store.get(f"served:{config}")
        return msgspec.json.decode(saved).get("scr") if saved else None

    def experiments(self, words: bool = True) -> list[Experiment]:
        """Each change of the configuration SCR ran, judged (tuner.py), with the change in
        words when `words`."""
        found = experiments(self._outputs, self._predictions(), self._job_mtbf_s(),
                            self._decided)
        if not words:
            return found
        return [msgspec.structs.replace(e, changes=self._changes(e.before, e.after))
                for e in found]

    def _changes(self, before: str, after: str) -> list[str]:
        old, new = self._served_scr(before), self._served_scr(after)
        return describe_changes(old, new) if old is not None and new is not None else []

    def _predictions(self) -> dict[str, float]:
        """What each served configuration's experiment predicted for the measure."""
        predicted: dict[str, float] = {}
        for config in {o.config for o in self._outputs}:
            saved = self.store.get(f"served:{config}")
            change = msgspec.json.decode(saved).get("experiment", {}).get("predicted_change") \
                if saved else None
            if isinstance(change, (int, float)):
                predicted[config] = float(change)
        return predicted

    def _follow_verdicts(self) -> None:
        """Log each verdict once, in the words `status` shows; a change measured worse, or
        not shown better, is reverted: the configuration before it is served again, and the
        values it tried are never served again for this job (plan() reads them back)."""
        found = self.experiments()
        decided = [e for e in found if e.verdict != "measuring" and e.key not in self._decided]
        for experiment in decided:
            self._decided[experiment.key] = experiment
            log.info("experiment %s", experiment.summary())
        if decided:
            with contextlib.suppress(StoreUnavailable):  # else judged again after a restart
                self.store.put(VERDICTS_KEY, msgspec.msgpack.encode(list(self._decided.values())))
        last = found[-1] if found else None
        if last is None or last.verdict != "reverted" or self._served is None or \
                last.after != self._served["config_id"]:
            return
        saved = self.store.get(f"served:{last.before}")
        if saved:
            self._serving(msgspec.json.decode(saved))
            self.calm_reason = f"reverted to {last.before}: {last.summary()}"

    def _measured(self, stats: WorkloadStats) -> WorkloadStats:
        """The blocking checkpoint cost the client measured, when it reported any, rather than
        what the trace's checkpoint regions show: under the write path the job runs now."""
        saves = [o.save_s for o in self._on_running_path(self._outputs[-32:]) if o.save_s > 0]
        if not saves:
            return stats
        said = f"median of the {plural(len(saves), 'save')} the client timed"
        return msgspec.structs.replace(stats, ckpt_dur_s=statistics.median(saves),
                                       checkpoints=max(stats.checkpoints, len(saves)),
                                       ckpt_dur_said=said)

    def _on_running_path(self, outputs: list[Output]) -> list[Output]:
        """The latest outputs that ran the latest one's write path, since it last changed (a
        relaunch from bypass into the cache was served an interval for a cost half bypass's:
        its first 16 cached checkpoints' median was still bypass's); all of them when the
        latest configuration is not known here (a label the daemon never served)."""
        if not outputs or (running := self._served_scr(outputs[-1].config)) is None:
            return outputs
        same = {outputs[-1].config: True}
        for at in range(len(outputs) - 1, -1, -1):
            label = outputs[at].config
            if label not in same:
                scr = self._served_scr(label)
                same[label] = scr is not None and not write_path_changes(running, scr)
            if not same[label]:
                return outputs[at + 1:]
        return outputs

    def _failures(self) -> dict[str, float]:
        """The crashes the job showed over the time it was seen, and the prior they update."""
        counts = self.store.kind_counts()
        # a start followed by no end is a crash the job could not report, but for the run
        # still going (the latest event of a run's life is its start, and no run after it
        # has asked to start)
        logged = counts.get("job_crashed", 0)
        running = not self._run_starting and self.store.last_kind(
            ("job_started", "job_terminated", "job_crashed")) == "job_started"
        crashes = logged + max(0, counts.get("job_started", 0) - counts.get("job_terminated", 0)
                               - logged - int(running))
        return {"crashes": crashes, "observed_s": self.store.wall_span_s() if counts else 0.0,
                "prior_mtbf_s": self.profile.node_mtbf_s / max(self.profile.nodes, 1),
                "prior_weight_s": self.prior_weight_s}

    def _job_mtbf_s(self) -> float:
        """The job's MTBF: the profile's, updated by the job's own crashes (tuner.py)."""
        seen = self._failures()
        return mtbf_estimate(seen["prior_mtbf_s"], int(seen["crashes"]), seen["observed_s"],
                             self.prior_weight_s)

    def _tuned_profile(self) -> SystemProfile:
        """The profile with the learned failure rate: the interval, redundancy and flush
        decisions all plan with it."""
        return msgspec.structs.replace(
            self.profile, node_mtbf_s=self._job_mtbf_s() * max(self.profile.nodes, 1))

