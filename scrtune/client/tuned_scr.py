"""`TunedSCR`: SCR's Python module `scr`, with scrtune's settings and runtime actions.

    import scr as scr_module
    from scrtune.client import TunedSCR
    scr = TunedSCR(scr_module, comm=MPI.COMM_WORLD, job="llama-7b")

Same function names as `scr`. SCR reads its parameters once, in SCR_Init, so:
- before `init()` the recommended SCR_Config strings (agreed over MPI, identical on every rank)
  are passed, then the application's own `config()` sets (later ones win in SCR_Config);
- around each output it applies what can change while the job runs: the calling thread's CPU
  affinity during `complete_output` (SCR's transfer threads inherit it), striping of the output
  directory where `lfs` exists, and when `need_checkpoint()` says yes;
- it records saves and restores for goodput on rank 0;
- the recommendation each checkpoint uses is asked on a background thread once the previous
  checkpoint's records are sent, so the training thread does not wait on the daemon.
When the daemon is away every call falls back to SCR's own behaviour (keep current settings).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping

import numpy as np

from scrtune.client.agreement import NodeAgreement
from scrtune.client.connection import DaemonClient
from scrtune.client.recommended import AskAhead, cadence_only_change, fit_to_nodes
from scrtune.client.resolved import FLUSH_PARAM, Resolved, asked_values, read_back
from scrtune.client.scr_job import own_job_id
from scrtune.client.vetted import Refusals, vetted
from scrtune.scr_config.catalogue import BY_NAME
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.decided import stated

log = logging.getLogger("scrtune.client")
PATHS_ENV = "SCRTUNE_PATHS"  # more directories a recommendation may name, colon-separated
# SCR's cadence knobs all default to 0 (never checkpoint): until the daemon has measured a
# checkpoint and recommends an interval, a run with none of them set checkpoints this often
DEFAULT_INTERVAL_S = 600.0
HEARTBEAT_S = 5.0  # see TunedSCR: how closely goodput places a crash between checkpoints
FLAG_CHECKPOINT, FLAG_OUTPUT = 1, 2


class TunedSCR:
    """SCR's Python module `scr`, wrapped: the same calls, with scrtune's settings applied
    before `init()` and its runtime actions around each output.

    `scr_module` is SCR's own module (or anything with its functions); `comm` the job's MPI
    communicator (None: one process); `client` the DaemonClient to ask (default: the node's
    daemon, found as the CLI finds it); `job` and `run` name the job in recorded goodput.
    `default_interval_s`: how often `need_checkpoint()` says yes while neither SCR's own cadence
    (SCR_CHECKPOINT_INTERVAL, _SECONDS or _OVERHEAD, as SCR resolved them) nor the daemon's
    interval is set (0: never; a warning says so).
    Every rank must make the same calls in the same order, as SCR requires. When the daemon does
    not answer, SCR runs on its own configuration and nothing waits or raises.

    Example::

        scr = TunedSCR(scr_module, comm=MPI.COMM_WORLD, job="llama-7b")
        scr.init()
        if scr.need_checkpoint():
            scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
            save(scr.route_file(path))
            scr.complete_output(True)
        scr.finalize()"""
    def __init__(self, scr_module, comm=None, client: DaemonClient | None = None,
                 job: str = "job", run: int | None = None,
                 default_interval_s: float = DEFAULT_INTERVAL_S,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        """`run`: this allocation's id in the goodput records (default: run_id()), so that
        two jobs under one name are told apart, and restarts within one allocation are not.
        `heartbeat_s`: at most this often `need_checkpoint()` records that the run is alive
        (with its step, once the steps it counts have matched a checkpoint's), so that goodput
        places a crash between checkpoints within it (0: never)."""
        self._scr = scr_module
        self._comm = comm
        self._client = client or DaemonClient()
        self._rank = comm.Get_rank() if comm is not None else 0
        self.job, self.run = job, run_id() if run is None else run
        self.applied: list[str] = []  # the SCR_Config strings this rank passed, in order
        self._user_sets: list[str] = []
        self._initialized = False
        self._agreement: NodeAgreement | None = None  # made in init()
        self._ahead = AskAhead(self._client)
        self._interval_s: float = 0
        self._default_interval_s = max(0.0, float(default_interval_s))
        self.resolved = Resolved()  # what SCR holds after SCR_Init (read back in init())
        self.label = ""  # the configuration id this run's outputs carry
        self._transfer_cores: tuple[int, ...] = ()
        self._stripe: tuple[int, int] | None = None  # (count, size in bytes), validated
        self._striped = False
        self._flush_every_applied = 0  # SCR_FLUSH as SCR runs it (read back after SCR_Init)
        self._flush_every = 0  # the cadence recommended now
        self._checkpoints = 0
        self._config_id = ""  # the daemon's id of the configuration this run applied
        self._steps = 0  # need_checkpoint() calls since the last checkpoint: steps protected
        self._total_steps = 0  # the global step: the restored one, then counted on
        self._restart_name: str | None = None  # what SCR_Start_restart loads
        self._saved_affinity: set[int] | None = None
        self._output: tuple[float, bool] | None = None
        self._restoring = False  # a restore recorded as started, not yet finished
        self._heartbeat_s = max(0.0, float(heartbeat_s))
        self._heartbeat_at = time.monotonic()
        self._count_confirmed: bool | None = None  # whether counted steps are the job's
        self._last_checkpoint_end = time.monotonic()
        self._due = False  # need_checkpoint() said yes since the last checkpoint
        self._compute_s = 0.0  # from the last checkpoint's end to this one's start
        self._init_scr: dict = {}  # the SCR parameters passed at SCR_Init
        self.refused = Refusals()  # replies not acted on: `refused.count`, each reason logged

    def __getattr__(self, name: str):
        return getattr(self._scr, name)  # FLAG_*, route_file, should_exit, current, ...

    # -- before SCR_Init ----------------------------------------------------------------------
    def config(self, text: str):
        """SCR_Config: before `init()`, a `KEY=VALUE` set is kept and passed after scrtune's
        recommended strings (so the application's own settings win); queries, and anything
        after `init()`, go straight to SCR (which aborts on a set after SCR_Init)."""
        if self._initialized or "=" not in text.split(" ")[0]:
            return self._scr.config(text)  # queries, or (after init) SCR's own abort
        self._user_sets.append(text)
        return None

    def init(self):
        """SCR_Init, after passing the agreed recommendation as SCR_Config strings: each node's
        first rank asks its daemon, world rank 0 merges the job-scope values and broadcasts
        one configuration, identical on every rank. It takes effect now and holds until
        SCR_Finalize: SCR reads its parameters only here."""
        self._agreement = NodeAgreement(self._comm)
        recommendation = fit_to_nodes(self._agreement.agree(self._ask),
                                      self._agreement.node_count, self._agreement.smallest_set)
        strings = self._strings(recommendation)
        job_id = own_job_id(os.environ, self._user_sets, os.getcwd())  # see scr_job.py
        strings += self._agreement.rank_zeros([job_id] if job_id else [])
        for text in strings + self._user_sets:
            self._scr.config(text)
            self.applied.append(text)
        result = self._scr.init()
        self._initialized = True
        self._after_init(started_s=time.time())  # the run starts when SCR_Init returns
        return result

    def _after_init(self, started_s: float) -> None:
        """Read back what SCR resolved: label this run's outputs with it, say what the
        environment or a config file shadowed, and make sure the run checkpoints at all."""
        self.resolved = read_back(self._scr, asked_values(self.applied))
        # the flushes SCR makes by itself: what _flush_flag must not repeat (a cadence equal to
        # SCR's default is left out of the strings; a config file may hold another)
        self._flush_every_applied = self.resolved.flush_every(self._flush_every_applied)
        self.label = self.resolved.label(self._config_id)
        speak = log.warning if self._rank == 0 else log.debug
        if self.resolved.shadowed:
            speak("scrtune: SCR runs other values than asked for (the environment and the "
                  "config file come before SCR_Config): %s; outputs are labelled %s",
                  self.resolved.describe(), self.label or "(none)")
        if not self._interval_s and not self.resolved.has_cadence:
            self._interval_s = self._default_interval_s
            if self._interval_s:
                speak("scrtune: SCR has no checkpoint cadence (SCR_CHECKPOINT_INTERVAL, "
                      "_SECONDS and _OVERHEAD are 0) and the daemon has measured none yet: "
                      "need_checkpoint() says yes every %g s until it has", self._interval_s)
            else:
                speak("scrtune: SCR has no checkpoint cadence and default_interval_s=0: "
                      "need_checkpoint() never says yes; this run writes no checkpoint "
                      "unless the application decides itself")
        self._last_checkpoint_end = time.monotonic()
        # a run counts its steps from 0 until a restore says which step it resumes from
        self._record("job_started", step=self._total_steps, detail=json.dumps({
            "config": self.label, "resolved": self.resolved.values,
            "shadowed": {k: list(v) for k, v in self.resolved.shadowed.items()},
            "interval_s": self._interval_s}, sort_keys=True), wall_s=started_s)

    def _ask(self) -> dict | None:
        reply = self._client.recommend(starting=True)
        answer = self._vet(reply.result if reply is not None and reply.ok else None)
        self._ahead.know(answer)  # the first checkpoint uses it: nothing recorded since
        return answer

    def _vet(self, answer: object) -> dict | None:
        """The reply's recommendation, checked on the rank that asked, before any rank sees
        it (see vetted.py)."""
        return vetted(answer, self._allowed, self.refused)

    def _strings(self, recommendation: dict | None) -> list[str]:
        if not recommendation:
            return []
        # vetted on the asking rank; with the defaults it decided, since SCR's system config
        # file comes after SCR_Config (decided.py)
        config = stated(ScrConfig.from_json(recommendation["scr"]))
        # until SCR_Init reads back what SCR holds: what was asked, or SCR's default
        self._flush_every_applied = int(config.get(FLUSH_PARAM) or BY_NAME[FLUSH_PARAM].default)
        # what SCR runs until SCR_Finalize: the label of every output of this run
        self._config_id = str(recommendation.get("config_id", ""))
        self._init_scr = dict(recommendation["scr"])
        self._actions(recommendation)
        return config.scr_config()

    def _allowed(self, path: str) -> bool:
        """Under a directory this job configured: SCR's defaults (/dev/shm, the working
        directory), the temp dir, its SCR_* paths (environment or config()), $SCRTUNE_PATHS."""
        bases = ["/dev/shm", os.getcwd(), tempfile.gettempdir(),
                 *os.environ.get(PATHS_ENV, "").split(":")]
        bases += [os.environ.get(name, "") for name in
                  ("SCR_PREFIX", "SCR_CACHE_BASE", "SCR_CNTL_BASE")]
        bases += [text.split("=", 1)[1] for text in self._user_sets if "=" in text]
        real = os.path.realpath(path)
        return any(base and os.path.isabs(base) and
                   os.path.commonpath([real, os.path.realpath(base)]) ==
                   os.path.realpath(base) for base in bases)

    def _actions(self, recommendation: dict) -> None:
        """The runtime actions of a recommendation (its SCR parameters wait for the next
        SCR_Init: the outputs of this run keep the label of the configuration SCR read)."""
        for action in recommendation["runtime_actions"]:  # vetted: typed, in range
            kind = action["kind"]
            if kind == "flush_every":
                self._flush_every = action["every"]
            elif kind == "checkpoint_every_s":
                self._interval_s = action["seconds"]
            elif kind == "transfer_thread_affinity":
                self._transfer_cores = tuple(action["cores"])
            elif kind == "stripe":  # a layout vetted() found not sane is (0, 0): never run
                self._stripe = (action["stripe_count"], action["stripe_size_bytes"]) \
                    if action["stripe_count"] else None
        if not self._initialized:
            return
        if recommendation.get("config_id") == self._config_id:
            self.label = self.resolved.label(self._config_id)
        elif cadence_only_change(self._init_scr, recommendation, self.resolved):
            # this run now checkpoints as that configuration says, and runs nothing else: its
            # outputs are that configuration's (SCR ORs its own interval: only a shorter one)
            self.label = str(recommendation["config_id"])

    # -- the output loop -------------------------------------------------------------------
    def need_checkpoint(self) -> bool:
        """SCR_Need_checkpoint, or yes when the recommended interval has passed since
        the last checkpoint; agreed across ranks. Each call counts as one step protected by
        the next checkpoint."""
        self._end_restore()
        self._steps += 1
        self._total_steps += 1
        if self._heartbeat_s and time.monotonic() - self._heartbeat_at >= self._heartbeat_s:
            self._heartbeat_at = time.monotonic()
            self._record("step_finished", step=self._total_steps if self._count_confirmed else -1)
        scr_says = bool(self._scr.need_checkpoint())
        due = bool(self._interval_s) and \
            time.monotonic() - self._last_checkpoint_end >= self._interval_s
        said = scr_says or self._agreed(due)
        self._due = self._due or said
        return said

    def start_output(self, name: str, flags: int):
        """SCR_Start_output, with the runtime actions of this output: the flush flag
        of the learned cadence added to `flags`, the output directory striped once (where
        `lfs` exists)."""
        self._end_restore()
        began_s = time.time()  # the save starts here: the agreement below waits for all ranks
        checkpoint = bool(flags & FLAG_CHECKPOINT)
        if checkpoint:
            flags |= self._flush_flag()
        if checkpoint and self._transfer_cores:
            self._pin(self._transfer_cores)
        if self._stripe and not self._striped:
            self._striped = True
            self._run_stripe()
        self._output = (time.monotonic(), checkpoint)
        self._compute_s = self._output[0] - self._last_checkpoint_end
        if checkpoint:  # with its step where its name and the steps counted agree: progress
            # made by now, whether or not the save's end gets recorded (a crash)
            named = _step_of(name)
            self._record("checkpoint_save_started", detail=name,
                         step=named if named == self._total_steps else -1, wall_s=began_s)
        return self._scr.start_output(name, flags)

    def complete_output(self, valid: bool, step: int | None = None):
        """SCR_Complete_output, with the calling thread pinned to idle cores while SCR
        starts its transfer threads (they inherit the affinity; restored afterwards); the
        save is recorded for goodput off the training thread, and the next checkpoint's
        recommendation asked for in the background. `step`: the application's own (global)
        step number of this checkpoint; by default the steps counted by need_checkpoint()
        since the restored step. Returns what SCR returns."""
        if step is not None:  # the job's own step: are the steps counted its steps?
            self._count_confirmed = self._count_confirmed is not False and \
                int(step) == self._total_steps
            self._total_steps = int(step)
        elif self._count_confirmed is None:
            self._count_confirmed = True  # the job numbers its checkpoints by our count
        try:
            return self._scr.complete_output(valid)  # transfer threads start here, pinned
        finally:
            self._unpin()
            started, checkpoint = self._output or (time.monotonic(), False)
            self._output = None
            if checkpoint:
                self._last_checkpoint_end = time.monotonic()
                self._record("checkpoint_save_finished", step=self._total_steps,
                             detail=json.dumps({
                    "save_s": round(self._last_checkpoint_end - started, 6),
                    "compute_s": round(self._compute_s, 6), "due": int(self._due),
                    "config": self.label, "steps": self._steps,
                    "flush_every": self._flush_every or self._flush_every_applied,
                    "interval_s": self._interval_s}))
                self._steps, self._due = 0, False
                if self._agreement is not None and self._agreement.asks:
                    self._ahead.start()

    def have_restart(self):
        """SCR_Have_restart. After a checkpoint the job refused, the restore goes on while SCR
        offers an older one; when it offers none, the restore ends, having restored nothing."""
        name = self._scr.have_restart()
        if not name:
            self._end_restore()
        return name

    def start_restart(self):
        """SCR_Start_restart; the start of the restore is recorded for goodput (once for a
        refused checkpoint and the older ones SCR then offers: one restore)."""
        if not self._restoring:
            self._restoring = True
            self._record("checkpoint_restore_started")
        self._restart_name = self._scr.start_restart()
        return self._restart_name

    def _end_restore(self) -> None:
        """A restore whose every checkpoint was refused ends at the job's next call."""
        if self._restoring:
            self._restoring = False
            self._record("checkpoint_restore_finished", step=-1)

    def complete_restart(self, valid: bool, step: int | None = None):
        """SCR_Complete_restart; the restore is recorded for goodput with the step it
        restored: `step` (the application's global step), else the number that ends the
        checkpoint's name (`ckpt.40` restored step 40), else unknown. Later checkpoints count
        their steps on from it, so a relaunch does not look like a restart from step 0."""
        result = self._scr.complete_restart(valid)
        restored = step if step is not None else _step_of(self._restart_name)
        if valid and restored is not None:
            self._total_steps = int(restored)
        if valid:  # a refused one: the restore goes on, SCR offers an older checkpoint
            self._restoring = False
            self._record("checkpoint_restore_finished",
                         step=int(restored) if restored is not None else -1)
        return result

    def finalize(self, step: int | None = None):
        """SCR_Finalize, after giving unsent records a bounded time to reach the daemon
        (5 s while it answers, one request's bound otherwise); what it has not acknowledged by
        then stays in this node's spool for the next client to send. `step`: the application's
        own (global) step at the end, recorded as trained; by default the steps counted since
        the restored step, once a checkpoint of this run showed they are the job's steps."""
        self._end_restore()
        if step is not None and int(step) > self._total_steps - self._steps:
            self._record("step_finished", step=int(step))  # steps trained since the last save
        elif step is None and self._steps and self._count_confirmed:
            self._record("step_finished", step=self._total_steps)
        self._record("job_terminated")
        self._client.close()
        if self._agreement is not None:
            self._agreement.close()
        return self._scr.finalize()

    # -- helpers -----------------------------------------------------------------------------
    def _flush_flag(self) -> int:
        """FLAG_OUTPUT when the cadence learned since SCR_Init says this checkpoint is flushed
        and SCR_FLUSH (fixed at SCR_Init) would not flush it. Agreed across ranks."""
        self._checkpoints += 1
        latest = self._agreement.agree(lambda: self._vet(self._ahead.take())) \
            if self._agreement is not None else None
        if latest:
            self._actions(latest)
        every = self._flush_every
        if not every or every == self._flush_every_applied or self._checkpoints % every:
            return 0
        return FLAG_OUTPUT

    def _agreed(self, decision: bool) -> bool:
        if self._comm is None or self._comm.Get_size() == 1:
            return decision
        flag = np.array([1 if decision else 0], dtype=np.int8)
        self._comm.Bcast(flag, root=0)  # rank 0 decides, as SCR_Need_checkpoint does
        return bool(flag[0])

    def _pin(self, cores: tuple[int, ...]) -> None:
        try:
            available = os.sched_getaffinity(0)
            wanted = set(cores) & available
            if wanted:
                self._saved_affinity = available
                os.sched_setaffinity(0, wanted)
        except (AttributeError, OSError) as exc:
            log.debug("affinity not changed: %s", exc)

    def _unpin(self) -> None:
        if self._saved_affinity is not None:
            try:
                os.sched_setaffinity(0, self._saved_affinity)
            except OSError as exc:
                log.debug("affinity not restored: %s", exc)
            self._saved_affinity = None

    def _run_stripe(self) -> None:
        """`lfs setstripe` of this job's own SCR prefix, built here from validated integers:
        a reply carries data, never a command to run."""
        lfs = shutil.which("lfs")
        if self._rank != 0 or lfs is None or self._stripe is None:
            return
        count, size = self._stripe
        prefix = self._scr.config("SCR_PREFIX") or os.environ.get("SCR_PREFIX") or os.getcwd()
        try:
            subprocess.run([lfs, "setstripe", "-c", str(count), "-S", str(size),
                            os.path.abspath(prefix)], timeout=10, check=False,
                           capture_output=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.debug("lfs setstripe failed: %s", exc)

    def _record(self, kind: str, detail: str = "", step: int = -1,
                wall_s: float | None = None) -> None:
        if self._rank == 0:  # off the training thread: it never waits on the daemon's fsync
            self._client.record_later(self.job, kind, time.time() if wall_s is None else wall_s,
                                      step=step, run=self.run, detail=detail)


def run_id(environ: Mapping[str, str] | None = None) -> int:
    """The scheduler's job id (Slurm's as it is; Flux's, PBS's or LSF's hashed), so every
    restart within one allocation shares it; without a scheduler, a random id per launch.
    Only rank 0 records, so the ranks need not agree on it."""
    environ = os.environ if environ is None else environ
    for name in ("SLURM_JOB_ID", "FLUX_JOB_ID", "PBS_JOBID", "LSB_JOBID"):
        value = environ.get(name, "")
        if value.isdigit() and len(value) < 18:
            return int(value)
        if value:
            return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=7).digest(), "big")
    return int.from_bytes(os.urandom(7), "big")


def _step_of(name: object) -> int | None:
    """The step number a checkpoint name ends with (`ckpt.40`, `step-000040`), or None."""
    match = re.search(r"(\d+)\D*$", name) if isinstance(name, str) else None
    return int(match.group(1)) if match else None
