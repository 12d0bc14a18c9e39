"""TunedSCR over the SCR double: identical configuration on every rank across two 'nodes' (two
daemons), job-scope merging, recorded goodput events, the rewritten SCR_CONF_FILE, fallback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import zmq

from scrtune.client import DaemonClient, TunedSCR
from scrtune.daemon.protocol import Reply
from scrtune.scr_config.lint import lint_file
from tests.conftest import SCRTUNE
from tests.scr_double import ScrAbort, ScrDouble
from tests.test_daemon import client_for, feed, start_daemon, stop

APP = os.path.join(os.path.dirname(__file__), "tracing", "tuned_app.py")
pytest.importorskip("mpi4py")


def mpirun() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return beside if os.path.exists(beside) else shutil.which("mpirun")


@pytest.mark.mpi
def test_four_ranks_two_nodes_apply_identical_configuration(tmp_path):
    dirs = {node: str(tmp_path / node) for node in ("a", "b")}
    profile_b = tmp_path / "b.toml"
    profile_b.write_text("cores_per_node = 2\nnode_mtbf_s = 3600.0\n")  # node b fails often
    conf_file = tmp_path / "scr.conf"
    procs = []
    for node, directory in dirs.items():
        os.makedirs(directory, mode=0o700)
        extra = ["--system", str(profile_b)] if node == "b" else []
        procs.append(start_daemon(directory, "--scr-conf-file", str(conf_file), *extra))
        feed(directory)
    try:
        expected = {node: int(client_for(d).recommend().result["scr"]["SCR_CHECKPOINT_SECONDS"])
                    for node, d in dirs.items()}
        out = tmp_path / "out"
        out.mkdir()
        command = [mpirun()]
        for node, directory in dirs.items():
            if len(command) > 1:
                command.append(":")
            command += ["-n", "2", "-env", "SCRTUNE_DIR", directory, "-env", "SCRTUNE_NODE",
                        node, sys.executable, APP, "--out", str(out)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        ranks = [json.loads((out / f"rank-{r}.json").read_text()) for r in range(4)]
        assert [r["node"] for r in ranks] == ["a", "a", "b", "b"]
        applied = [r["applied"] for r in ranks]
        assert all(a == applied[0] for a in applied)  # SCR would abort otherwise
        assert applied[0][-1] == "SCR_DEBUG=1"  # the application's own setting comes last
        seconds = [s for s in applied[0] if s.startswith("SCR_CHECKPOINT_SECONDS=")]
        assert seconds == [f"SCR_CHECKPOINT_SECONDS={min(expected.values())}"]
        events = client_for(dirs["a"]).status().result["events_stored"]
        assert events == 1 + 3 * 2 + 1  # started, 3 saves (start+finish), terminated: rank 0
        assert lint_file(str(conf_file)).errors == 0 and "SCR_CACHE_BYPASS" in \
            conf_file.read_text()
    finally:
        for proc in procs:
            stop(proc)


@pytest.mark.timeout(300)  # every request bounded: a hang fails here, not at CI's end
def test_without_daemon_scr_keeps_its_settings(tmp_path):
    scr = TunedSCR(ScrDouble(prefix=str(tmp_path)),
                   client=DaemonClient(f"ipc://{tmp_path}/none.sock", timeout_s=0.1, retries=0))
    scr.config("SCR_FLUSH=4")
    scr.init()
    assert scr.applied == [scr.applied[0], "SCR_FLUSH=4"]  # its job id (scr_job.py), its own
    assert scr.applied[0].startswith("SCR_JOB_ID=prefix-")
    client = scr._client  # noqa: SLF001 - what it asked is the measure
    asked = client.attempts
    for step in range(10):
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        assert scr.complete_output(True)
    # the daemon known away: no checkpoint sends a request it would wait on (issue 49: this
    # was a bound on each checkpoint's time, which a loaded machine can break)
    assert client.attempts == asked
    scr.finalize()


def test_the_double_enforces_scr_rules(tmp_path):
    scr = ScrDouble(prefix=str(tmp_path))
    scr.init()
    with pytest.raises(ScrAbort, match="after SCR_Init"):
        scr.config("SCR_FLUSH=3")
    with pytest.raises(ScrAbort, match="Have_restart"):
        scr.start_restart()
    scr.start_output("ckpt.1", scr.FLAG_CHECKPOINT)
    with pytest.raises(ScrAbort, match="needs IDLE"):
        scr.need_checkpoint()
    scr.complete_output(True)
    with pytest.raises(ScrAbort, match="FLAG_CHECKPOINT"):
        scr.start_output("x", 0)


def test_affinity_is_pinned_during_complete_output_and_restored(tmp_path):
    class Watching(ScrDouble):
        seen: set[int] = set()

        def complete_output(self, valid):
            Watching.seen = os.sched_getaffinity(0)
            return super().complete_output(valid)

    cores = sorted(os.sched_getaffinity(0))
    scr = TunedSCR(Watching(prefix=str(tmp_path)),
                   client=DaemonClient(f"ipc://{tmp_path}/none.sock", timeout_s=0.1, retries=0))
    scr.init()
    scr._transfer_cores = (cores[-1],)  # what a recommendation's runtime action would set
    before = os.sched_getaffinity(0)
    scr.start_output("ckpt.1", scr.FLAG_CHECKPOINT)
    scr.complete_output(True)
    assert Watching.seen == {cores[-1]}
    assert os.sched_getaffinity(0) == before


def test_live_traced_program_feeds_the_daemon_and_the_next_run_uses_it(tmp_path):
    """A real program, traced by the real tracer, forwarded live; the next run applies what
    the daemon learned from the first one."""
    pytest.importorskip("dftracer.python")
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    daemon = start_daemon(directory)
    traces = tmp_path / "traces"
    traces.mkdir()
    forward = subprocess.Popen([*SCRTUNE, "forward", str(traces),
                                "--dir", directory, "--interval-s", "0.1"],
                               stderr=subprocess.PIPE, text=True)
    env = dict(os.environ, SCRTUNE_DIR=directory, DFTRACER_ENABLE="1",
               DFTRACER_INC_METADATA="1", DFTRACER_INIT="FUNCTION",
               DFTRACER_TRACE_COMPRESSION="0", DFTRACER_WRITE_BUFFER_SIZE="4096")
    try:
        runs = []
        for run in (1, 2):
            out = tmp_path / f"run{run}"
            out.mkdir()
            subprocess.run([sys.executable, APP, "--out", str(out), "--steps", "4",
                            "--trace-log", str(traces / f"run{run}")],
                           env=env, check=True, timeout=120, capture_output=True)
            runs.append(json.loads((out / "rank-0.json").read_text())["applied"])
            client = client_for(directory)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                status = client.status().result
                if status["counters"]["records"] and any(
                        i["name"] == "interval" and i["confidence"] > 0
                        for i in status["latest"]["intents"]):
                    break
                time.sleep(0.1)
        assert status["counters"]["records"] > 50  # POSIX calls and regions, live
        first, second = runs
        assert "SCR_CACHE_BYPASS=1" in first  # the daemon had seen nothing yet
        assert not any(s.startswith("SCR_CHECKPOINT_SECONDS=") for s in first)
        # learned live: the cadence intent rests on the first run's checkpoints; but the app
        # checkpoints every step whatever need_checkpoint() says, so a SCR cadence would change
        # nothing: it is not served (issue 44), and status says why
        assert status["latest"]["scr"].get("SCR_CHECKPOINT_SECONDS")
        assert not any(s.startswith("SCR_CHECKPOINT_SECONDS=") for s in second)
        assert "own cadence" in status["why_served"]
    finally:
        forward.terminate()
        forward.wait(timeout=20)
        stop(daemon)


class WireDouble(DaemonClient):
    """The real client (its background thread, its ordering) with the wire replaced: each
    request is answered by `answer(message)` and logged with the thread that sent it."""

    def __init__(self, answer) -> None:
        super().__init__("ipc:///nonexistent", timeout_s=0.5, retries=0, spool_dir="")
        self.answer = answer
        self.calls: list[tuple[str, str]] = []

    def request(self, message):
        import threading

        kind = getattr(message, "kind", type(message).__name__.lower())
        self.calls.append((kind, threading.current_thread().name))
        return Reply(request_id=message.request_id, ok=True, result=self.answer(message))


def recommendation(every: int = 0) -> dict:
    scr = {"SCR_CACHE_BYPASS": "0", "SCR_FLUSH": "4", "descriptors": []}
    actions = [{"kind": "flush_every", "every": every}] if every else []
    return {"scr": scr, "runtime_actions": actions}


def test_flush_cadence_learned_after_init_adds_flag_output(tmp_path):
    """SCR_FLUSH is fixed at SCR_Init; a new cadence is applied by flagging checkpoints OUTPUT."""
    every = {"now": 4}
    daemon = WireDouble(lambda message: recommendation(every["now"]))
    double = ScrDouble(prefix=str(tmp_path))
    scr = TunedSCR(double, client=daemon)
    scr.init()
    assert "SCR_FLUSH=4" in scr.applied
    every["now"] = 2  # the daemon learned that flushes should be more frequent
    for step in range(1, 6):
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
    scr.finalize()
    # checkpoint 1 uses the answer given at SCR_Init; each later one the answer asked after
    # the previous checkpoint: every 2nd is then CHECKPOINT|OUTPUT
    assert [flags for _, flags in double.outputs] == [1, 3, 1, 3, 1]


def test_a_cadence_equal_to_scrs_default_flags_nothing(tmp_path):
    """A recommendation leaves SCR_FLUSH out when it is SCR's default (10): TunedSCR states it
    (a system config file would come after SCR_Config), SCR flushes every 10th checkpoint by
    itself, so TunedSCR flags none OUTPUT; the read-back says so."""
    served = {"scr": {"SCR_CACHE_BYPASS": "0", "descriptors": []},
              "runtime_actions": [{"kind": "flush_every", "every": 10}]}
    double = ScrDouble(prefix=str(tmp_path))
    scr = TunedSCR(double, client=WireDouble(lambda message: served))
    scr.init()
    assert [s for s in scr.applied if s.startswith("SCR_FLUSH=")] == ["SCR_FLUSH=10"]
    for step in range(1, 13):
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
    scr.finalize()
    assert [flags for _, flags in double.outputs] == [1] * 12
    assert scr.resolved.values.get("SCR_FLUSH") == "10" and scr.resolved.flush_every(0) == 10


def _three_checkpoints(scr: TunedSCR) -> None:
    """A run: init, three checkpoints, finalize."""
    scr.init()
    for step in range(1, 4):
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
    scr.finalize()


def test_next_recommendation_is_asked_off_the_training_thread_after_the_records(tmp_path):
    """SCR_Init asks on the training thread; the first checkpoint uses that answer; after each
    checkpoint the next question goes on the client's background thread, behind the
    checkpoint's records, so the daemon answers having seen them."""
    daemon = WireDouble(lambda message: recommendation())
    _three_checkpoints(TunedSCR(ScrDouble(prefix=str(tmp_path)), client=daemon))
    calls = daemon.calls
    asked = [thread for kind, thread in calls if kind == "recommend"]
    assert asked == ["MainThread"] + ["scrtune-client"] * 3
    background = [kind for kind, thread in calls if thread == "scrtune-client"]
    assert background == ["job_started"] + ["checkpoint_save_started",
                                            "checkpoint_save_finished", "recommend"] * 3 + \
        ["job_terminated"]


@pytest.mark.parametrize("environ", [
    # the private directory cannot be made, nor its fallback in the home directory
    {"XDG_RUNTIME_DIR": "/proc", "HOME": "/proc/no-such-place"},
    {"SCRTUNE_REQUESTS": "not-an-endpoint", "SCRTUNE_EVENTS": "not-an-endpoint"},
], ids=["no-directory", "malformed-endpoint"])
@pytest.mark.timeout(300)  # a hang fails here, not at CI's end
def test_an_unusable_daemon_address_never_reaches_the_training_job(tmp_path, monkeypatch,
                                                                   environ):
    """Both once raised into the application: from the client's constructor, and from the
    first request or emit."""
    import numpy as np

    from scrtune.client import Emitter

    for name in ("SCRTUNE_DIR", "SCRTUNE_REQUESTS", "SCRTUNE_EVENTS", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    scr = TunedSCR(ScrDouble(prefix=str(tmp_path)), client=DaemonClient(timeout_s=0.1))
    scr.config("SCR_FLUSH=2")
    scr.init()
    assert scr.applied[1:] == ["SCR_FLUSH=2"]  # SCR's own settings, kept (after its job id)
    emitter = Emitter()
    for step in range(3):
        scr.need_checkpoint()
        emitter.emit("train.step", "COMPUTE", time.time(), 0.01, step=np.int64(step))
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
    scr.finalize()
    emitter.close()
    assert emitter.sent == 0 and emitter.dropped == 1  # one batch, counted, not raised


@pytest.mark.parametrize("count, size, runs", [(4, 1 << 20, True), (0, 1 << 20, False),
                                                (4, 12345, False), (10 ** 9, 1 << 20, False)])
def test_stripe_runs_lfs_for_its_own_prefix_never_a_command_from_the_reply(
        tmp_path, monkeypatch, count, size, runs):
    """TunedSCR once ran whatever `command` the daemon sent when `lfs` was on PATH (a fake
    daemon made a rank run `sh -c id>file`), aimed at the file system's root."""
    bin_dir, prefix = tmp_path / "bin", tmp_path / "prefix"
    bin_dir.mkdir()
    prefix.mkdir()
    calls = tmp_path / "lfs-calls"
    lfs = bin_dir / "lfs"
    lfs.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    lfs.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SCR_PREFIX", str(prefix))
    planted = tmp_path / "owned"
    hostile = {"kind": "stripe", "command": f"sh -c 'id > {planted}'", "stripe_count": count,
               "stripe_size_bytes": size}
    scr = TunedSCR(ScrDouble(prefix=str(prefix)), client=WireDouble(
        lambda message: {**recommendation(), "runtime_actions": [hostile]}))
    scr.init()
    scr.start_output("ckpt.1", scr.FLAG_CHECKPOINT)
    scr.complete_output(True)
    scr.finalize()
    assert not planted.exists()
    if runs:
        assert calls.read_text().split() == ["setstripe", "-c", str(count), "-S", str(size),
                                             str(prefix)]
    else:
        assert not calls.exists()


def test_outputs_are_labelled_with_the_configuration_scr_read_at_init(tmp_path):
    """SCR reads its parameters once: a recommendation that arrives mid-run changes the
    runtime actions, never the label of the outputs SCR still makes with the old ones."""
    served = iter(range(100))

    def answer(message):
        return {**recommendation(every=2), "config_id": f"config-{next(served)}"}

    daemon = WireDouble(answer)
    details = []
    daemon.record_later = lambda job, kind, wall_s, step=-1, run=0, detail="": \
        details.append(detail) if kind == "checkpoint_save_finished" else None
    _three_checkpoints(TunedSCR(ScrDouble(prefix=str(tmp_path)), client=daemon))
    labels = [json.loads(detail)["config"] for detail in details]
    assert labels == ["config-0"] * 3  # the mid-run answers were config-1, config-2, ...
    assert all(json.loads(detail)["flush_every"] == 2 for detail in details)


@pytest.mark.parametrize("scr, applied, allowed", [
    ({"SCR_CACHE_BASE": "/etc/scrtune-planted"}, False, True),
    ({"SCR_PREFIX": "/root/elsewhere"}, False, False),  # no intent sets it (issue 45)
    ({"descriptors": [{"kind": "STORE", "value": "/var/planted", "keys": {"COUNT": "1"}}]},
     False, False),
    ({"SCR_CACHE_BASE": "/dev/shm"}, True, True),
])
def test_a_recommendation_naming_paths_the_job_did_not_configure_is_refused(
        tmp_path, monkeypatch, scr, applied, allowed):
    """Issue 12: replies carry data, and a daemon must not make SCR write where the job did
    not choose: a path outside the job's own SCR settings, /dev/shm, the working and temp
    directories and $SCRTUNE_PATHS refuses the whole recommendation; a parameter or descriptor
    no intent sets is refused wherever it points."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRTUNE_PATHS", raising=False)
    daemon = WireDouble(lambda message: {"scr": {"SCR_FLUSH": "4", **scr},
                                         "runtime_actions": []})
    tuned = TunedSCR(ScrDouble(prefix=str(tmp_path)), client=daemon)
    tuned.init()
    assert ("SCR_FLUSH=4" in tuned.applied) is applied
    assert tuned.refused.count == (0 if applied else 1)
    monkeypatch.setenv("SCRTUNE_PATHS", "/etc:/root:/var")  # allowed by the job
    again = TunedSCR(ScrDouble(prefix=str(tmp_path)), client=daemon)
    again.init()
    assert ("SCR_FLUSH=4" in again.applied) is allowed


def _relaunched(tmp_path, newest: str) -> tuple[TunedSCR, list[tuple[str, int]]]:
    """A run after SCR_Init with `newest` to restore, and the (kind, step) it records."""
    records: list[tuple[str, int]] = []
    daemon = WireDouble(lambda message: recommendation())
    daemon.record_later = lambda job, kind, wall_s, step=-1, run=0, detail="": \
        records.append((kind, step))
    double = ScrDouble(prefix=str(tmp_path))
    double.restart_from = newest
    scr = TunedSCR(double, client=daemon)
    scr.init()
    return scr, records


def test_a_relaunch_records_the_restored_step_and_counts_global_steps_from_it(tmp_path):
    """Issue 13: after a crash and a relaunch the records restarted at step 0 (goodput 24.6%
    with 105 net steps where the truth was 46.9% and 200)."""
    scr, records = _relaunched(tmp_path, "ckpt.20")
    name = scr.have_restart()
    scr.start_restart()
    scr.complete_restart(True)
    for _ in range(10):
        scr.need_checkpoint()
    scr.start_output(f"{name}.next", scr.FLAG_CHECKPOINT)
    scr.complete_output(True)
    scr.start_output("ckpt.at-45", scr.FLAG_CHECKPOINT)
    scr.complete_output(True, step=45)  # the application's own step number wins
    scr.finalize()
    assert ("checkpoint_restore_finished", 20) in records
    saves = [step for kind, step in records if kind == "checkpoint_save_finished"]
    assert saves == [30, 45]


def test_a_job_without_a_resource_manager_id_gets_one_per_prefix(tmp_path) -> None:
    """SCR's `defjobid` would be shared by every plain mpirun job on a node (see
    test_real_scr_ground for what the real SCR then restores)."""
    from scrtune.client.scr_job import own_job_id

    cwd = str(tmp_path)
    mine = own_job_id({}, [], cwd)
    assert mine is not None and mine.startswith("SCR_JOB_ID=prefix-")
    assert own_job_id({"SCR_PREFIX": cwd}, [], "/elsewhere") == mine  # the same prefix
    assert own_job_id({"SCR_PREFIX": "/other"}, [], cwd) != mine
    assert own_job_id({}, ["SCR_PREFIX=/other"], cwd) == own_job_id({"SCR_PREFIX": "/other"},
                                                                     [], cwd)
    # the environment comes before SCR_Config, as in SCR
    assert own_job_id({"SCR_PREFIX": cwd}, ["SCR_PREFIX=/other"], "/x") == mine
    conf = tmp_path / "user.conf"
    conf.write_text("# a comment\nSCR_PREFIX=/other  # trailing\nCKPT=0 TYPE=SINGLE\n")
    assert own_job_id({"SCR_CONF_FILE": str(conf)}, [], cwd) == \
        own_job_id({"SCR_PREFIX": "/other"}, [], cwd)
    # an id SCR has already: the resource manager's, or the user's own
    for environ in ({"SLURM_JOBID": "12"}, {"FLUX_JOB_ID": "f1"}, {"SCR_JOB_ID": "mine"}):
        assert own_job_id(environ, [], cwd) is None
    assert own_job_id({}, ["SCR_JOB_ID=mine"], cwd) is None
    conf.write_text("SCR_JOB_ID=mine\n")
    assert own_job_id({"SCR_CONF_FILE": str(conf)}, [], cwd) is None
    assert own_job_id({"SCR_CONF_FILE": str(tmp_path / "missing")}, [], cwd) == mine


def test_a_configuration_merged_across_nodes_carries_its_own_id() -> None:
    """One node served SCR_PREFIX_SIZE=2, another not yet: the job ran without it (keeping
    every checkpoint wins) but its outputs carried the first node's id, a configuration SCR
    never ran (seen on the Slurm example: launch 3 labelled 17378cde7f40)."""
    from scrtune.client.agreement import merge
    from scrtune.daemon.state import config_id

    retains = {"SCR_CACHE_BYPASS": "1", "SCR_PREFIX_SIZE": "2", "descriptors": []}
    keeps_all = {"SCR_CACHE_BYPASS": "1", "descriptors": []}
    answers = [{"scr": retains, "config_id": config_id(retains)},
               {"scr": keeps_all, "config_id": config_id(keeps_all)}]
    merged = merge(answers)
    assert merged["scr"] == keeps_all and merged["config_id"] == config_id(keeps_all)
    same = merge([answers[0], dict(answers[0])])
    assert same["config_id"] == config_id(retains)


def test_records_name_the_step_a_run_starts_from_and_the_step_each_save_starts_at(tmp_path):
    """Goodput reads a run without a restore from its job_started step (issue 43: the first
    run's start was guessed from the gaps between its saves), and a save's start as progress
    (a crash before its end was recorded lost it). A name that is not the step counted is
    not taken for one."""
    records = []
    daemon = WireDouble(lambda message: recommendation())
    daemon.record_later = lambda job, kind, wall_s, step=-1, run=0, detail="": \
        records.append((kind, step))
    scr = TunedSCR(ScrDouble(prefix=str(tmp_path)), client=daemon)
    scr.init()
    for name in ("ckpt.3", "ckpt.6", "weights-2026"):
        for _ in range(3):
            scr.need_checkpoint()
        scr.start_output(name, scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
    scr.finalize()
    assert records[0] == ("job_started", 0)
    assert [step for kind, step in records if kind == "checkpoint_save_started"] == [3, 6, -1]
    assert [step for kind, step in records if kind == "checkpoint_save_finished"] == [3, 6, 9]


@pytest.mark.parametrize("offered, restored", [(["ckpt.20", "ckpt.15"], 15),
                                               (["ckpt.20"], -1)])
def test_a_refused_checkpoint_and_the_older_ones_offered_are_one_restore(tmp_path, offered,
                                                                         restored):
    """SCR falls back to an older checkpoint when the job refuses the newest: the search in
    between (SCR_Have_restart) was in no bucket, the restore recorded as two (issue 43: 0.19 s
    of 'other' under load). One restore, from the first start to the valid one's end, or to
    the first step when every checkpoint was refused."""
    records = []
    daemon = WireDouble(lambda message: recommendation())
    daemon.record_later = lambda job, kind, wall_s, step=-1, run=0, detail="": \
        records.append((kind, step)) if "restore" in kind else None
    double = ScrDouble(prefix=str(tmp_path))
    scr = TunedSCR(double, client=daemon)
    scr.init()
    for name in offered:
        double.restart_from = name
        assert scr.have_restart() == name
        scr.start_restart()
        scr.complete_restart(name != "ckpt.20")  # the newest is damaged
    double.restart_from = None
    if restored < 0:
        assert scr.have_restart() is None
    scr.need_checkpoint()
    scr.finalize()
    assert records == [("checkpoint_restore_started", -1),
                       ("checkpoint_restore_finished", restored)]


def test_a_clean_end_records_the_steps_trained_after_the_last_checkpoint(tmp_path):
    """On the real stack a job trained 1,000 steps, its last checkpoint at 996: goodput from
    TunedSCR's records said 996 net steps (its end named no step)."""
    from scrtune.goodput.calculator import compute
    from scrtune.goodput.events import Event, kind_of

    records: list = []

    def answer(message):
        if getattr(message, "kind", "") and hasattr(message, "wall_s"):
            records.append(message)
            return {"event_id": len(records)}
        return recommendation()

    scr = TunedSCR(ScrDouble(prefix=str(tmp_path)), client=WireDouble(answer))
    scr.init()
    for step in range(1, 11):
        time.sleep(0.01)
        scr.need_checkpoint()
        if step == 6:
            scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
            scr.complete_output(True)
    scr.finalize()
    events = [Event(kind=kind_of(r.kind), wall_s=r.wall_s, step=r.step, job="j")
              for r in records]
    assert compute(events, ideal_step_s=0.01).net_steps == 10, [(r.kind, r.step)
                                                                 for r in records]


@pytest.mark.parametrize("final_step, recorded", [(60, [60]), (None, [])])
def test_a_run_that_ends_without_a_checkpoint_records_the_step_the_job_names(
        tmp_path, final_step, recorded):
    """The closed-loop benchmark's last launch restored step 8 and trained to 60 without a
    checkpoint: goodput said 8 net steps. The job names its final step; without it, steps
    counted but never matched with a checkpoint of this run are not claimed."""
    scr, records = _relaunched(tmp_path, "ckpt.8")
    scr.have_restart()
    scr.start_restart()
    scr.complete_restart(True, step=8)
    for _ in range(52):
        scr.need_checkpoint()
    scr.finalize(step=final_step)
    assert [step for kind, step in records if kind == "step_finished"] == recorded
    assert records[-1] == ("job_terminated", -1)


def test_finalize_with_the_daemon_away_waits_one_attempt_s_timeout(tmp_path):
    """The README promises that finalize() gives unsent records one request's bound when the
    daemon does not answer (0.5 s by default); it waited every retry's (1.0 s; 10 s here, 10
    tries at 1 s). The records stay in the spool for the next client. A daemon that is there
    but does not answer: a socket bound at its endpoint that never replies (with no socket
    at all, nothing is waited for)."""
    silent = zmq.Context.instance().socket(zmq.ROUTER)
    silent.setsockopt(zmq.LINGER, 0)
    silent.bind(f"ipc://{tmp_path}/nobody.sock")
    client = DaemonClient(f"ipc://{tmp_path}/nobody.sock", timeout_s=1, retries=9,
                          spool_dir=str(tmp_path / "spool"))
    scr = TunedSCR(ScrDouble(prefix=str(tmp_path)), client=client)
    try:
        scr.init()  # asks, and is not answered: the client knows the daemon is away
        scr.start_output("ckpt.1", scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
        started, asked = time.monotonic(), client.attempts
        scr.finalize()
        # one try's 1 s, not ten tries' 10 s: counted, not clocked, so a loaded machine cannot
        # fail it (a timed wait is never shorter than its timeout). The tries are the sender
        # thread's, sending the spooled records: one may have begun before `asked` was read and
        # one or two begin while finalize waits; waiting for all ten would count eight or more.
        waited_s = time.monotonic() - started
        assert client.attempts - asked < 5
        assert waited_s >= 0.9
    finally:
        silent.close()
    assert any((tmp_path / "spool").iterdir())  # what was not sent waits, not lost


def test_with_no_socket_at_all_the_client_waits_for_nothing(tmp_path):
    """No daemon's socket at the endpoint: every request returns at once, none is sent
    (issue 49: `status`, `query` and `relaunch` waited 2.2 s for a daemon that was not
    there)."""
    client = DaemonClient(f"ipc://{tmp_path}/nobody.sock", timeout_s=2, retries=9)
    assert client.status() is None and client.recommend() is None
    assert client.attempts == 0 and not client.answering
