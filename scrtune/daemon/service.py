"""What the daemon does with bytes: a table of request handlers, and event intake feeding the
same engine as `scrtune replay`. No sockets here (see loop.py), so it is tested directly too."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable

import msgspec

from scrtune import __version__
from scrtune.daemon import protocol
from scrtune.daemon.experiment import predicted_blocking_change
from scrtune.daemon.exports import Exports, job_reports
from scrtune.daemon.feedback import FeedbackLoop
from scrtune.daemon.halt import (
    HALTED_FOR_KEY,
    HaltDecision,
    RunCadence,
    cadence_needs_relaunch,
    clear_halt,
    combined,
    decide,
    decide_change,
    relaunch_would_not_change,
    remaining_s,
    request_halt,
    write_path_changes,
)
from scrtune.daemon.intake import Parsed, parse_messages
from scrtune.daemon.offsets import SourceOffsets
from scrtune.daemon.protocol import (
    ErrorCode,
    Hello,
    Offsets,
    ProtocolError,
    Recommend,
    Record,
    Relaunch,
    Status,
)
from scrtune.daemon.rarelog import RareLog
from scrtune.daemon.records_log import RecordsLog
from scrtune.daemon.state import Counters, RestartPolicy, config_id, output_of, replace_file
from scrtune.engine.classify import CheckpointPatterns
from scrtune.engine.stats import Stats
from scrtune.engine.summary import finish
from scrtune.errors import StoreError, StoreUnavailable
from scrtune.events.model import EventBatch
from scrtune.goodput.calculator import Report
from scrtune.goodput.events import Kind, kind_of
from scrtune.goodput.store import Store, StoredEvent
from scrtune.goodput.tuner import (
    PRIOR_WEIGHT_S,
    Output,
    measured_interval_s,
)
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.decided import stated
from scrtune.scr_config.mapping import recommend

log = logging.getLogger("scrtune.daemon")
# What one node's daemon keeps per process and per client: a node runs a few hundred ranks;
# anything past these bounds is counted, not kept (see Stats.max_processes).
MAX_PROCESSES = 4096
MAX_CLIENTS = 256
MAX_EXPERIMENTS = 20  # the latest, in a status reply
STATUS_REFRESH_S = 5.0  # a polled status recomputes the recommendation at most this often
MAX_OUTPUTS = 10_000  # the latest checkpoints, for the cadence and keep/revert experiments


class Service(FeedbackLoop):
    def __init__(self, store: Store, profile: SystemProfile, conf_file: str = "",
                 restart: RestartPolicy | None = None,
                 prior_weight_s: float = PRIOR_WEIGHT_S,
                 patterns: CheckpointPatterns | None = None) -> None:
        self.store = store
        self.profile = profile
        self.prior_weight_s = prior_weight_s  # what the profile's MTBF weighs (tuner.py)
        self.conf_file = conf_file  # rewritten after each checkpoint, for the next SCR_Init
        self._conf_problem = ""  # the last failure to rewrite it, logged once
        self.restart = restart  # None: never halt the job
        self.halt: HaltDecision | None = None
        self.exports: Exports | None = None  # TensorBoard / Prometheus, when asked for
        self.records_log: RecordsLog | None = None  # --records-log
        self._served_interval_s = 0.0  # SCR_CHECKPOINT_SECONDS served at the job's SCR_Init
        self._run_cadence = RunCadence()  # SCR's own, in the latest run (its start record)
        self._outputs: list[Output] = []
        self._read_back_outputs()
        self.started_s = time.time()
        self.counters = Counters()
        self._rare = RareLog(log)
        self.clients: dict[str, float] = {}  # name -> last seen; the MAX_CLIENTS latest
        self.clients_seen = 0
        self.stats, self.offsets = self._restore()
        if patterns is not None:  # --ckpt-pattern: the job's checkpoint files, as for replay
            self.stats.patterns = patterns
        self._recommendation: dict[str, object] | None = None  # the latest computed
        self._served: dict[str, object] | None = None  # what `recommend` serves (calm.py)
        self._served_at = 0  # outputs recorded when it began to be served
        self._served_informed = False  # computed from trace records or outputs
        self._last_plans: frozenset[str] = frozenset()  # options computed the time before
        self._load_verdicts()  # the experiments decided before a restart
        self.calm_reason = ""
        self._computed_s = 0.0  # monotonic time of the last recommendation
        self._dirty = True  # events arrived since then
        self._unsaved_intake = True  # the statistics or offsets moved since the last snapshot
        self._snapshot_buffer = bytearray()  # reused: a snapshot may be tens of MB
        self._observed = WorkloadStats()  # what the trace showed, as of the recommendation
        self._reports_at = -1  # events_recorded when the exported goodput was computed
        self._reports: dict[str, Report] = {}
        self._handlers: dict[type, Callable[..., object]] = {
            Hello: self.hello, Status: self.status, Recommend: self.recommend,
            Record: self.record, Relaunch: self.relaunch, Offsets: self.offsets_of,
        }

    def _read_back_outputs(self) -> None:
        """The outputs measured so far are the recorded saves themselves, read back (not kept
        twice), and SCR's cadence is the latest run's start record's, in the same pass."""
        for event in self.store.events():
            kind = kind_of(event.kind)
            if kind is Kind.SAVE_FINISHED:
                output = output_of(event.wall_s, event.detail)
                if output is not None:
                    self._outputs.append(output)
            elif kind is Kind.JOB_STARTED:
                self._run_cadence = self._run_cadence.after(event.wall_s, event.detail)
        del self._outputs[:-MAX_OUTPUTS]

    def _restore(self) -> tuple[Stats, SourceOffsets]:
        """The saved statistics and how far into each forwarded file they reach. Statistics
        this version cannot read (an older scrtune's, a damaged file) are set aside with a
        warning, and their offsets with them: forwarders then resend from the start."""
        try:
            saved = self.store.get("stats")
            if saved is None:
                return Stats(max_processes=MAX_PROCESSES), SourceOffsets()
            counters = self.store.get("counters")
            saved_offsets = self.store.get("offsets")
            if counters:
                self.counters = msgspec.msgpack.decode(counters, type=Counters)
            stats = Stats.from_bytes(saved)
            offsets = msgspec.msgpack.decode(saved_offsets, type=dict[str, int]) \
                if saved_offsets else {}
        except (msgspec.DecodeError, ValueError, TypeError, IndexError, StoreError) as exc:
            log.warning("the saved state in %s cannot be read (%s): starting afresh",
                        self.store.path, exc)
            return Stats(max_processes=MAX_PROCESSES), SourceOffsets()
        log.info("continuing from the saved state in %s", self.store.path)
        stats.max_processes = MAX_PROCESSES
        return stats, SourceOffsets(offsets)

    # -- requests -------------------------------------------------------------------------
    def handle(self, data: bytes) -> bytes:
        """One request's bytes to one reply's bytes. Never raises."""
        self.counters.requests += 1
        request_id = 0
        try:
            request = protocol.decode_request(data)
            request_id = request.request_id
            result = self._handlers[type(request)](request)
            return protocol.ok(request_id, result)
        except ProtocolError as exc:
            self.counters.request_errors += 1
            return protocol.error(exc.request_id, exc.code, str(exc))
        except Exception as exc:  # a bug must not take the node's daemon down
            self._rare.exception("request failed")
            self.counters.request_errors += 1
            # the request's own id: the client must see the daemon answered, and what failed
            return protocol.error(request_id, ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")

    def _seen(self, client: str) -> None:
        if self.clients.pop(client, None) is None:
            self.clients_seen += 1
        self.clients[client] = time.time()  # the latest last: the first is the stalest
        while len(self.clients) > MAX_CLIENTS:
            del self.clients[next(iter(self.clients))]

    def hello(self, request: Hello) -> dict[str, object]:
        self._seen(request.client or "anonymous")
        return {"daemon": f"scrtune {__version__}", "protocol": protocol.PROTOCOL_VERSION,
                "pid": os.getpid()}

    def status(self, request: Status) -> dict[str, object]:
        # status may be polled: it recomputes what events moved at most every few seconds
        if self._recommendation is None or \
                self._dirty and time.monotonic() - self._computed_s >= STATUS_REFRESH_S:
            self._current()
        latest = self._recommendation
        return {"daemon": f"scrtune {__version__}", "pid": os.getpid(),
                "uptime_s": round(time.time() - self.started_s, 3),
                "counters": msgspec.to_builtins(self.counters),
                "events_stored": self.store.event_count(),
                "clients": sorted(self.clients),  # the latest MAX_CLIENTS
                "clients_seen": self.clients_seen,
                "recommendation": self._served or latest,  # what a job is given
                "latest": latest,  # what the events so far say (served when calm.py agrees)
                "latest_computed": (latest or {}).get("config_id"),
                "why_served": self.calm_reason,
                "recommendation_age_s": round(time.monotonic() - self._computed_s, 3),
                "halt": msgspec.to_builtins(self.halt) if self.halt else None,
                "experiments": [{**msgspec.to_builtins(e), "summary": e.summary()}
                                for e in self.experiments()[-MAX_EXPERIMENTS:]],
                "job_mtbf_s": self._job_mtbf_s(), "failures": self._failures()}

    def recommend(self, request: Recommend) -> dict[str, object]:
        if request.starting and not self._run_starting:
            # until its job_started arrives, the run before it is over: a crash if it never
            # ended, which the recommendation must plan with
            self._run_starting, self._dirty = True, True
        self._follow_verdicts()
        current = self._serve(self._current())
        if request.starting:
            log.info("a run starts with %s (job MTBF %.4g s): %s", current.get("config_id"),
                     self._job_mtbf_s(), self.calm_reason)
        served = current["scr"].get("SCR_CHECKPOINT_SECONDS")  # type: ignore[union-attr]
        self._served_interval_s = float(served) if served else 0.0
        # uninformed: computed before any trace record or checkpoint reached this daemon
        return {**current, "informed": self._served_informed}

    def record(self, request: Record) -> dict[str, object]:
        kind = kind_of(request.kind)
        if kind is None:  # kept, it would only be a bad line in every report
            raise ProtocolError(ErrorCode.BAD_ARGUMENT, f"unknown event kind {request.kind!r}",
                                request.request_id)
        event = StoredEvent(job=request.job, run=request.run, kind=request.kind,
                            wall_s=request.wall_s, step=request.step, detail=request.detail,
                            record_id=request.record_id)
        try:
            event_id, new = self.store.record(event, time.time())  # durable before we answer
        except StoreUnavailable as exc:  # the client keeps it and sends it again
            raise ProtocolError(ErrorCode.STORE_UNAVAILABLE, str(exc),
                                request.request_id) from None
        if not new:  # sent again after a late reply, or from a spool: counted once
            return {"event_id": event_id, "duplicate": True}
        self.counters.events_recorded += 1
        if self.records_log is not None:
            self.records_log.append(event)
        self._seen(f"job {request.job}")  # TunedSCR records; it never says hello
        if kind is Kind.JOB_STARTED:
            self._run_starting = False
            self._run_cadence = self._run_cadence.after(request.wall_s, request.detail)
        self._dirty = True  # a start, a crash or an output: the plan's inputs moved
        if kind is Kind.SAVE_FINISHED:
            output = output_of(request.wall_s, request.detail)
            if output is not None:
                self._outputs.append(output)
                del self._outputs[:-MAX_OUTPUTS]
                self._follow_verdicts()
            if self.conf_file:
                self._write_conf_file()
            if self.restart is not None and not (self.halt and self.halt.requested):
                self._consider_halt()
        return {"event_id": event_id}

    def offsets_of(self, request: Offsets) -> dict[str, object]:
        return {"offsets": self.offsets.of(request.sources)}

    def relaunch(self, request: Relaunch) -> dict[str, object]:
        """Whether the run that ended was halted by this daemon to relaunch it; if so the halt
        is cleared, so that scr_run launches the next run, and a new halt may be decided."""
        if self.restart is None or self.halt is None or not self.halt.requested:
            return {"relaunch": False, "reason": "scrtune did not halt this job" +
                    ("" if self.restart else " (the daemon runs without --allow-restart)")}
        problem = clear_halt(self.restart.prefix)
        if problem:
            return {"relaunch": False, "reason": f"cannot clear the halt: {problem}"}
        log.info("halt cleared in %s for the relaunch", self.restart.prefix)
        reason, self.halt = self.halt.reason, None
        return {"relaunch": True, "reason": reason}

    def _consider_halt(self) -> None:
        assert self.restart is not None
        served = self._served or self._current()
        running_id = self._outputs[-1].config if self._outputs else ""
        running = self._served_scr(running_id) if running_id else None
        scr_cadence = self._run_cadence.scr
        unchanged = relaunch_would_not_change(self.store, served, running_id, running,
                                              scr_cadence)
        if unchanged:  # a relaunch would run what runs now: halting again and again, forever
            self.halt = HaltDecision(requested=False, reason=unchanged)
            return
        observed = self._measured(self._observed)  # the checkpoint cost the client measured
        # what the job does, measured, before what it was told or what the trace showed
        current = measured_interval_s(self._outputs, since_s=self._run_cadence.started_s) \
            or self._served_interval_s or observed.interval_s
        left_s, mtbf_s = remaining_s(self.restart.end_time_s), self._job_mtbf_s()
        served_scr: dict = served["scr"]  # type: ignore[assignment]
        cost_s, restart_cost_s = observed.ckpt_dur_s, self.restart.restart_cost_s
        parts = []
        path = write_path_changes(running, served_scr) if running is not None else []
        cadence = cadence_needs_relaunch(running, served_scr, scr_cadence)
        if running is not None and (path or not cadence):
            blocking = predicted_blocking_change(observed, self._tuned_profile(), running,
                                                 served_scr, *self._layout())
            parts.append(decide_change(blocking, cost_s / (current + cost_s) if cost_s else 0.0,
                                       left_s, restart_cost_s, path))
        if cadence:  # the cadence the relaunch brings: the served one's, not a newer one's
            intents = {i["name"]: i for i in served["intents"]}  # type: ignore
            interval = float(served_scr.get("SCR_CHECKPOINT_SECONDS") or 0) or \
                intents["interval"]["value"].get("daly_s") or 0.0
            parts.append(decide(current, interval, cost_s, mtbf_s, left_s, restart_cost_s))
        self.halt = combined(parts, left_s, restart_cost_s)
        if self.halt.requested:
            log.info("requesting a halt: %s", self.halt.reason)
            if not request_halt(self.restart.prefix):
                self.halt = msgspec.structs.replace(self.halt, requested=False,
                                                    reason="scr_halt failed or missing")
            else:
                with contextlib.suppress(StoreUnavailable):
                    self.store.put(HALTED_FOR_KEY, str(served["config_id"]).encode())

    def _write_conf_file(self) -> None:
        """SCR reads its config file in SCR_Init only: this is for the next run (scr_run's
        next step, or a restart); a reader never sees half a file."""
        scr = (self._served or self._current())["scr"]
        text = stated(ScrConfig.from_json(scr)).conf()  # type: ignore[arg-type]
        try:
            replace_file(self.conf_file, text)
        except OSError as exc:  # the record itself is kept; say so, do not fail the request
            problem = f"could not rewrite {self.conf_file}: {exc.strerror or exc}"
            if problem != self._conf_problem:  # once, not at every checkpoint
                log.warning("%s", problem)
            self._conf_problem = problem
            return
        self._conf_problem = ""

    def _current(self) -> dict[str, object]:
        """The recommendation, recomputed when events arrived since. It summarises the whole
        state, so only `recommend` (asked at SCR_Init and once per output) recomputes it;
        `status`, which may be polled, shows the last one and its age."""
        if self._recommendation is None or self._dirty:
            self._dirty = False
            self._computed_s = time.monotonic()
            # finish() settles what it summarises: work on a copy, keep feeding the original.
            summary = finish(self.stats.copy())
            self._observed = WorkloadStats.from_summary(summary)
            result = recommend(self._measured(self._observed), self._tuned_profile())
            recommendation = result.as_json()
            recommendation["config_id"] = config_id(recommendation["scr"])
            try:  # read back to judge experiments; serving it does not depend on it
                self.store.put(f"served:{recommendation['config_id']}",
                               msgspec.json.encode(recommendation))
            except StoreUnavailable as exc:
                log.warning("%s", exc)
            self._recommendation = recommendation
        return self._recommendation

    # -- events ---------------------------------------------------------------------------
    def intake(self, data: bytes) -> None:
        """One message from the PULL socket (see intake.parse_messages)."""
        self.intake_many([data])

    def intake_many(self, messages: list[bytes]) -> None:
        self.take(parse_messages(messages))

    def take(self, parsed: Parsed, positions: list[tuple[str, int]] | tuple = ()) -> None:
        """Messages parsed (on the loop's parse thread, or just now) into the statistics;
        `positions`: the (file, end offset) of the forwarded Lines among them."""
        started = time.perf_counter()
        self._unsaved_intake = True
        self.counters.batches_received += parsed.messages
        self.counters.batches_invalid += parsed.invalid_messages
        for batch in parsed.batches:
            try:
                self._take_batch(batch)
            except Exception:  # an engine bug must not take the node's daemon down
                self._rare.exception("could not aggregate a batch of %d records",
                                     batch.records)
                self.counters.batches_invalid += 1
        self.counters.intake_s += parsed.parse_s + time.perf_counter() - started
        for source, end in positions:
            self.offsets.taken_through(source, end)

    def _take_batch(self, batch: EventBatch) -> None:
        self.counters.records += batch.records
        self.counters.invalid_lines += batch.invalid_lines
        if batch.records:
            self.stats.add(batch)
            self._dirty = True

    def snapshot(self) -> None:
        """Save the state. The statistics and offsets only when intake moved them: encoding
        them grows with the state (0.1 s for 18,000 windows), and an idle daemon keeps its
        node's cores for the job."""
        if problem := self.store.still_there():
            log.warning("%s", problem)
        parts = {"counters": msgspec.msgpack.encode(self.counters)}
        if self._unsaved_intake:
            self.stats.encode_into(self._snapshot_buffer)
            parts.update(stats=self._snapshot_buffer,
                         offsets=msgspec.msgpack.encode(self.offsets.taken))
        # one transaction (the offsets say what the stats hold), not waiting for the disk
        self.store.put_many(parts, synced=False)
        self._unsaved_intake = False
        if self.exports is not None:
            if self._reports_at != self.counters.events_recorded:  # goodput reads every event
                self._reports = job_reports(self.store)
                self._reports_at = self.counters.events_recorded
            self.exports.update(self._reports, msgspec.to_builtins(self.counters))
