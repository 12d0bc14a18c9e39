"""Goodput against the wall clock's truth (issue 43): tests/tracing/truth_app.py, a job that
logs the time of its every phase itself, runs live under the real SCR v3.1.0 with a daemon,
killed (SIGKILL) at the phase boundaries that matter and relaunched until it has trained all
its steps. The truth is worked out from its own log with the primer's definitions; goodput
from what TunedSCR recorded in the daemon's store must be within 1 point of it, and every
bucket within 2% of the total, plus what the job's own log shows its crashes hid beyond the
one step that 2% allows for (see `hidden_s`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from tests.conftest import SCRTUNE, scr_environment
from tests.test_daemon import start_daemon, stop
from tests.test_tuned_scr import mpirun

pytestmark = [pytest.mark.real_scr, pytest.mark.alone]  # wall-clock truth (tests/alone.py)
APP = os.path.join(os.path.dirname(__file__), "tracing", "truth_app.py")
COMPUTE_S = 0.1
STEPS = 60  # a crash is placed within one step (0.1 s): 1.3% of a total of about 8 s


@dataclass
class TruthRun:
    start_s: float
    end_s: float = 0.0
    crashed: bool = False
    base: tuple[float, int] = (0.0, 0)  # (when, step) its progress starts from
    restore_started: bool = False
    restored: bool = False
    busy: list[tuple[float, float, str]] = field(default_factory=list)  # saves and restores
    step_ends: dict[int, float] = field(default_factory=dict)
    safe_at: dict[int, float] = field(default_factory=dict)  # step -> SCR completed its save
    saving_at: dict[int, float] = field(default_factory=dict)  # step -> its save began


def _runs(lines: list[dict], traced: bool = False) -> list[TruthRun]:
    """The runs that reached SCR_Init (TunedSCR's job_started); a launch that died before it
    is part of the restart around it, as in the records. `traced`: a run starts at its first
    traced region (a restore or a step), as a trace sees it."""
    runs: list[TruthRun] = []
    opened: dict[str, float] = {}
    run: TruthRun | None = None
    inited = False  # the launch has passed SCR_Init
    for line in lines:
        phase, wall, step = line["phase"], line["wall_s"], line["step"]
        if phase == "startup":  # a launch begins
            run, opened, inited = None, {}, False
            continue
        inited |= phase == "init"
        starts = phase == "init" if not traced else \
            inited and run is None and phase in ("restore_start", "step_start")
        if starts:
            run = TruthRun(start_s=wall, base=(wall, 0))
            runs.append(run)
        if run is None or phase == "init":
            continue
        if phase in ("restore_start", "save_start"):
            opened.setdefault(phase, wall)
            if phase == "save_start":
                run.saving_at[step] = wall
            run.restore_started |= phase == "restore_start"
        elif phase == "restore_end":
            run.busy.append((opened.pop("restore_start"), wall, "checkpoint_restore"))
            run.base, run.restored = (wall, step), True
        elif phase == "save_end":
            run.busy.append((opened.pop("save_start"), wall, "checkpoint_save"))
        elif phase == "scr_completed":
            run.safe_at[step] = wall
        elif phase == "step_end":
            run.step_ends[step] = wall
        if phase in ("crash", "end"):
            run.end_s, run.crashed = wall, phase == "crash"
            for name, began in opened.items():  # cut short by the crash
                run.busy.append((began, wall, "checkpoint_restore" if name == "restore_start"
                                 else "checkpoint_save"))
            opened = {}
    return runs


def truth(lines: list[dict], ideal_s: float, traced: bool = False) -> dict[str, float]:
    runs = _runs(lines, traced)
    total = runs[-1].end_s - runs[0].start_s
    buckets = dict.fromkeys(("checkpoint_save", "checkpoint_restore", "progress_lost",
                             "restart", "slowdown"), 0.0)
    net = 0
    for index, run in enumerate(runs):
        # a run that died inside its restore does not say what survived: the next one does
        later = [r for r in runs[index + 1:] if r.restored or not r.restore_started]
        cap = later[0].base[1] if later else max(run.step_ends, default=run.base[1])
        for began, ended, bucket in run.busy:
            buckets[bucket] += ended - began
        if index + 1 < len(runs):
            buckets["restart"] += runs[index + 1].start_s - run.end_s
        surviving = [s for s in run.step_ends if run.base[1] < s <= cap]
        if surviving:
            # a step's time runs until the job moves on from it: to the next step, or to its
            # save (what need_checkpoint waits for a straggler is the steps' time)
            last = max(surviving)
            until = run.saving_at.get(last, run.step_ends[last])
            inside = sum(min(e, until) - max(b, run.base[0]) for b, e, _ in run.busy
                         if e > run.base[0] and b < until)
            buckets["slowdown"] += until - run.base[0] - inside - len(surviving) * ideal_s
            net += len(surviving)
        if run.crashed:
            lost_from = run.safe_at.get(cap, run.base[0] if cap == run.base[1] else None)
            if lost_from is None:  # saved by an earlier run: lost from when this one began
                lost_from = run.base[0]
            restoring = sum(min(e, run.end_s) - max(b, lost_from) for b, e, bucket in run.busy
                            if bucket == "checkpoint_restore" and e > lost_from)
            lost = run.end_s - lost_from - restoring
            buckets["progress_lost"] += lost
            # what the lost time overlapped of saves is lost, not saving (the calculator's
            # priority: progress_lost before checkpoint_save)
            buckets["checkpoint_save"] -= sum(min(e, run.end_s) - max(b, lost_from)
                                              for b, e, bucket in run.busy
                                              if bucket == "checkpoint_save" and e > lost_from)
    effective = net * ideal_s
    buckets["other"] = total - effective - sum(buckets.values())
    return {"total_s": total, "effective_s": effective, "net_steps": net,
            "goodput_pct": 100 * effective / total, **buckets}


# the phases after which TunedSCR records (or a trace's region ends) or a launch begins: the
# last sign of life a crash can be placed after ("step", "save", "restore", "scr_completed" are
# crash points inside a phase; a step's heartbeat is recorded after its end)
SEEN = frozenset(("startup", "init", "step_end", "save_start", "save_end", "restore_start",
                  "restore_end"))


def hidden_s(lines: list[dict], step_s: float) -> float:
    """How far the records may place the job's crashes from where its own log has them,
    beyond the one step each that the 2% bound allows for (about 0.1 s). Nothing is recorded
    inside a step or a save: a crash in a step is placed at the run's last record, one in a
    save at half or all of the run's typical save (goodput/runs.py). On a busy machine those
    stretches grow: CI beside another test run once moved 0.22-0.25 s between buckets while
    the goodput agreed within 0.13 point; beside 8 busy loops and a disk writer, a run whose
    saves took 0.40 and 0.08 s placed a crash in its next save 0.33 s late. The allowance is
    what this job's log measured: the crash's distance from its last sign of life, or in a
    save the longest save of that launch."""
    hidden, seen_s, open_save_s, saves = 0.0, None, None, []
    for line in lines:
        phase, wall = line["phase"], line["wall_s"]
        if phase == "startup":
            saves = []
        if phase == "crash" and seen_s is not None:
            if open_save_s is not None:
                longest = max(saves + [wall - open_save_s])
                hidden += max(0.0, longest - step_s)
            else:
                hidden += max(0.0, wall - seen_s - step_s)
        if phase == "save_start":
            open_save_s = wall
        elif phase == "save_end" and open_save_s is not None:
            saves.append(wall - open_save_s)
        if phase in ("save_end", "crash", "startup"):
            open_save_s = None
        if phase in SEEN:
            seen_s = wall
    return hidden


def _launch(prefix, out, daemon_dir, control, crash: str,
            straggle: dict[int, float] | None = None) -> int:
    """One launch of 2 ranks, traced by DFTracer into OUT/trace (every event written at once:
    a SIGKILLed rank loses none)."""
    env = scr_environment(os.environ["SCRTUNE_SCR_PREFIX"], control, SCRTUNE_DIR=daemon_dir,
                          DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1",
                          DFTRACER_INIT="FUNCTION", DFTRACER_DATA_DIR=str(prefix),
                          DFTRACER_WRITE_BUFFER_SIZE="0", DFTRACER_TRACE_COMPRESSION="0")
    command = [mpirun(), "-n", "2", sys.executable, APP, "--out", str(out), "--steps",
               str(STEPS), "--compute-s", str(COMPUTE_S), "--every", "5", "--crash", crash,
               "--trace-dir", str(out / "trace"), "--straggle",
               ",".join(f"{step}:{wait_s}" for step, wait_s in (straggle or {}).items())]
    return subprocess.run(command, cwd=prefix, env=env, capture_output=True, text=True,
                          timeout=300).returncode


def _damage_newest(prefix) -> int:
    """Overwrite the newest checkpoint's files (SCR bypasses its cache: they are in the
    prefix), so that the next run finds it invalid and SCR falls back to the one before."""
    newest = max(int(p.name.split(".")[1]) for p in prefix.glob("ckpt.*"))
    for path in (prefix / f"ckpt.{newest}").iterdir():
        path.write_text("damaged\n")
    return newest


STRAGGLER = "a straggler before the last surviving save and before the job's last"
SCENARIOS = {  # the crash point of each launch (the last one runs to the end); "damage":
    # the newest checkpoint's files overwritten before the next launch
    "inside a step": ["step:23", "step:47", ""],
    "inside a save, before SCR completed it": ["save:20", "save:45", ""],
    "after SCR completed a save, before it was recorded": ["after_scr:20", "after_scr:40", ""],
    "inside a restore": ["step:23", "restore:20", ""],
    "during startup": ["step:18", "startup", ""],
    "SCR falls back to an older checkpoint": ["step:23", "damage", "step:37", "damage", ""],
    "five crashes of every kind in one job": ["step:13", "after_scr:25", "save:35", "startup",
                                              "step:52", ""],
    STRAGGLER: ["step:52", ""],
}
# rank 1 held back after these steps (step: seconds): rank 0 waits in need_checkpoint, between
# the step's end and its save. CI once saw such a wait after a crash's surviving step counted
# as slowdown by a trace (which marks progress at saves only) and as other by the store
STRAGGLERS = {STRAGGLER: {50: 0.4, 60: 0.4}}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_goodput_from_the_store_is_the_wall_clocks_truth(real_scr, tmp_path, scenario) -> None:
    crashes, straggle = SCENARIOS[scenario], STRAGGLERS.get(scenario, {})
    prefix, out, control, directory = (tmp_path / name for name in ("prefix", "out", "cntl", "d"))
    for folder in (prefix, out, control, out / "trace"):
        folder.mkdir()
    os.makedirs(directory, mode=0o700)
    daemon = start_daemon(str(directory))
    try:
        codes = [_launch(prefix, out, str(directory), control, crash, straggle)
                 if crash != "damage"
                 else -_damage_newest(prefix) for crash in crashes]
    finally:
        stop(daemon)
    launched = [code for crash, code in zip(crashes, codes) if crash != "damage"]
    assert launched[-1] == 0 and all(code != 0 for code in launched[:-1]), codes
    lines = [json.loads(line) for line in (out / "truth.jsonl").read_text().splitlines()]
    for step, wait_s in straggle.items():  # rank 0 did wait for the straggler
        ended, saving = ([line["wall_s"] for line in lines
                          if line["phase"] == phase and line["step"] == step]
                         for phase in ("step_end", "save_start"))
        assert saving and saving[-1] - ended[-1] >= 0.75 * wait_s, (step, ended, saving)
    expected, seen_by_trace = truth(lines, COMPUTE_S), truth(lines, COMPUTE_S, traced=True)
    # the store's runs start when SCR_Init returns (TunedSCR's job_started); a trace's at their
    # first region: what comes before is restart to it
    slack_s = hidden_s(lines, COMPUTE_S)
    _compare(["--db", str(directory / "state.sqlite")], expected, slack_s)
    _compare([str(out / "trace")], seen_by_trace, slack_s)


def _compare(source: list[str], expected: dict[str, float], slack_s: float) -> None:
    report = subprocess.run([*SCRTUNE, "goodput", *source, "--ideal-step-time",
                             str(COMPUTE_S), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    got = json.loads(report.stdout)
    measured = {"goodput_pct": got["goodput_pct"], "net_steps": got["net_steps"],
                **got["badput_s"]}
    # a string, so that a failure's message shows every bucket (pytest shortens a dict's)
    shown = json.dumps({k: (round(expected[k], 3), round(measured.get(k, 0.0), 3))
                        for k in expected if k not in ("total_s", "effective_s")}
                       | {"from": source[-1], "total_s": round(expected["total_s"], 3),
                          "hidden_s": round(slack_s, 3)})
    assert got["net_steps"] == expected["net_steps"] == STEPS, shown
    assert abs(got["goodput_pct"] - expected["goodput_pct"]) <= 1.0, shown
    for bucket in ("checkpoint_save", "checkpoint_restore", "progress_lost", "restart",
                   "slowdown", "other"):
        assert abs(got["badput_s"][bucket] - expected[bucket]) \
            <= 0.02 * expected["total_s"] + slack_s, f"{bucket}: {shown}"
