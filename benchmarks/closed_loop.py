"""The closed loop on the real stack (issue 44): does scrtune's feedback make a failing job run
better than SCR's defaults, and as well as the best fixed configuration?

    SCRTUNE_SCR_PREFIX=~/.cache/scrtune-real-scr/3.1.0-... \\
        python benchmarks/closed_loop.py --out /tmp/closed-loop

On the fake Slurm of ../shared/slurm (started, with --nodes idle nodes), with the real SCR
v3.1.0 and the real DFTracer (file traces, forwarded): examples/train.py on every node, one rank
per node, checkpointing when need_checkpoint() says so (each checkpoint a --ckpt-mib model file
and a --meta-kib state file per rank: bimodal writes), relaunched by `scr_run srun` after each
failure until it has trained --steps steps (benchmarks/closed_loop_job.sh). A failure is a node
dying: its rank SIGKILLed and its /dev/shm (SCR's cache) wiped, at a seeded schedule: launch k
fails --mtbf-s-distributed seconds (exponential, seeded) after its SCR_Init, on a seeded node;
every arm gets the same schedule. Arms:
- `loop`: one scrtune daemon and forwarder per node, from SCR's defaults and the job's own
  cadence (--default-interval-s), the daemon's profile saying a node fails once a day;
- `defaults`: SCR's defaults and the job's own cadence, no daemon;
- a grid of fixed configurations (SCR_CONF_FILE): checkpoint intervals x copy types.
Ground truth is the job's own log (benchmarks' train.py events with wall-clock times): per
launch the configuration SCR ran (read back after SCR_Init), blocking per checkpoint, steps
kept (what the next launch restored) and lost, goodput = steps kept x step time / wall time.
scrtune's own goodput (from its records) is printed beside the truth for the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from tests.test_slurm_examples import _node_dies as node_dies  # noqa: E402 (the tests' failure)


def schedule(seed: int, mtbf_s: float, launches: int, nodes: int) -> list[tuple[float, str]]:
    """(seconds after SCR_Init, node) of the failure of each launch."""
    rng = random.Random(seed)
    return [(min(max(rng.expovariate(1 / mtbf_s), 3.0), 4 * mtbf_s),
             f"n{rng.randrange(nodes) + 1}") for _ in range(launches)]


def events_of(path: str) -> list[dict]:
    """The job's log; a line cut short (a kill, a full disk) is no event."""
    events = []
    try:
        with open(path) as handle:
            for line in handle:
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line) if line.endswith("\n") else None
                    if isinstance(event, dict) and "event" in event:
                        events.append(event)
    except FileNotFoundError:
        pass
    return events


def run_arm(name: str, args, env: dict, failures: list[tuple[float, str]]) -> str:
    """Submit one arm, inject its failures, wait for it (cancelled after --timeout-s: its log
    then has no "done"); its directory."""
    arm_dir = os.path.join(args.out, name)
    os.makedirs(arm_dir, exist_ok=True)
    for stale in ("train-log.jsonl",):
        if os.path.exists(os.path.join(arm_dir, stale)):
            os.unlink(os.path.join(arm_dir, stale))
    job = subprocess.run(
        ["sbatch", "--parsable", "-N", str(args.nodes), "--ntasks-per-node=1",
         "--chdir", arm_dir, "-o", os.path.join(arm_dir, "job.out"),
         os.path.join(REPO, "benchmarks", "closed_loop_job.sh")],
        env={**env, "ARM_DIR": arm_dir}, capture_output=True, text=True, timeout=60,
        check=True).stdout.strip().split(";")[0]
    log, injected = os.path.join(arm_dir, "train-log.jsonl"), 0
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        starts = [e for e in events_of(log) if e["event"] == "started"]
        if starts and injected < len(starts) and injected < len(failures):
            after_s, node = failures[len(starts) - 1]
            if injected == len(starts) - 1 and time.time() >= starts[-1]["wall_s"] + after_s:
                done = any(e["event"] == "done" for e in events_of(log))
                if not done:
                    node_dies(node)
                injected += 1
        if not subprocess.run(["squeue", "-h", "-j", job], capture_output=True,
                              text=True).stdout.strip():
            return arm_dir
        time.sleep(0.05)
    subprocess.run(["scancel", job], check=False)
    print(f"{name}: job {job} still running after {args.timeout_s} s: cancelled", flush=True)
    return arm_dir


def drop_checkpoints(arm_dir: str) -> None:
    """An arm's checkpoints, once measured: SCR's defaults keep every one (1,000 steps of
    4 x 32 MiB every 2 s filled a 100 GB disk over three arms)."""
    for entry in os.listdir(arm_dir):
        if entry.startswith("ckpt") or entry == ".scr":
            shutil.rmtree(os.path.join(arm_dir, entry), ignore_errors=True)


def launches(events: list[dict], compute_s: float) -> list[dict]:
    """Per launch, from the job's log: what SCR ran, blocking, steps kept and lost, goodput."""
    marks = [i for i, e in enumerate(events) if e["event"] == "launch"]
    end_wall = next((e["wall_s"] for e in events if e["event"] == "end"), events[-1]["wall_s"])
    rows: list[dict] = []
    for n, begin in enumerate(marks):
        stop = marks[n + 1] if n + 1 < len(marks) else len(events)
        part = events[begin:stop]
        started = next((e for e in part if e["event"] == "started"), None)
        restored = next((e["step"] for e in part if e["event"] == "restored"), 0)
        steps = [e["step"] for e in part if e["event"] == "step"]
        saves = [e for e in part if e["event"] == "checkpoint"]
        done = next((e for e in part if e["event"] == "done"), None)
        rows.append({"launch": n + 1, "wall_s": (events[stop]["wall_s"] if stop < len(events)
                                                 else end_wall) - events[begin]["wall_s"],
                     "config": describe(started), "restored": restored,
                     "reached": max(steps, default=restored), "checkpoints": len(saves),
                     "last_checkpoint": saves[-1]["step"] if saves else None,
                     "blocking_s": statistics.fmean([s["save_s"] for s in saves])
                     if saves and "save_s" in saves[0] else math.nan,
                     "done": done is not None})
    for row, following in zip(rows, rows[1:] + [None]):
        kept_to = row["reached"] if row["done"] else \
            (following["restored"] if following else row["restored"])
        row["kept"] = max(kept_to - row["restored"], 0)
        row["lost"] = row["reached"] - row["restored"] - row["kept"]
        row["checkpoint_lost"] = bool(following and row["last_checkpoint"] and
                                      following["restored"] < row["last_checkpoint"])
        row["goodput"] = row["kept"] * compute_s / row["wall_s"] if row["wall_s"] > 0 else 0
    return rows


def describe(started: dict | None) -> str:
    """The configuration SCR ran, as read back after SCR_Init (the parameters that differ)."""
    if started is None:
        return "(no SCR_Init)"
    values = started.get("resolved", {})
    shown = {k: v for k, v in values.items() if v not in ("", None) and k in
             ("SCR_CHECKPOINT_SECONDS", "SCR_COPY_TYPE", "SCR_FLUSH", "SCR_CACHE_BYPASS",
              "SCR_SET_SIZE", "SCR_CACHE_SIZE")}
    return " ".join(f"{k.removeprefix('SCR_')}={v}" for k, v in sorted(shown.items())) or \
        "SCR defaults"


def summary(name: str, rows: list[dict], compute_s: float, steps: int) -> dict:
    wall = sum(r["wall_s"] for r in rows)
    return {"arm": name, "launches": len(rows), "wall_s": wall,
            "goodput": steps * compute_s / wall if wall and rows and rows[-1]["done"] else 0.0,
            "last3_goodput": statistics.fmean([r["goodput"] for r in rows[-3:]]) if rows else 0,
            "lost_steps": sum(r["lost"] for r in rows),
            "checkpoints_lost": sum(r["checkpoint_lost"] for r in rows),
            "blocking_s": statistics.fmean([r["blocking_s"] for r in rows
                                            if not math.isnan(r["blocking_s"])] or [math.nan]),
            "done": bool(rows and rows[-1]["done"])}


def environment(args) -> dict:
    scr = args.scr_prefix
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCR_", "SCRTUNE_DIR", "DFTRACER_", "SLURM_"))}
    bindir = os.path.dirname(sys.executable)
    profile = os.path.join(args.out, "system.toml")
    with open(profile, "w") as handle:  # what the user knows: a node fails about once a day
        handle.write(f'node_mtbf_s = {args.prior_mtbf_s}\ncores_per_node = 2\n'
                     'flush_types = ["SYNC"]\n')
    env.update(PATH=f"{bindir}:{scr}/bin:{env.get('PATH', '/usr/bin:/bin')}",
               PYTHONPATH=os.path.join(scr, "share", "scr", "python"),
               USER=os.environ.get("USER") or "root", EXAMPLES_DIR=os.path.join(REPO, "examples"),
               MAX_LAUNCHES=str(args.max_launches), DAEMON_ARGS=f"--system {profile}",
               TRAIN_ARGS=f"--steps {args.steps} --compute-s {args.compute_s} "
                          f"--ckpt-mib {args.ckpt_mib} --meta-kib {args.meta_kib} "
                          "--default-interval-s "
                          f"{args.default_interval_s}")
    return env


def grid(args) -> dict[str, str]:
    """name -> SCR config file text: SCR's defaults (it bypasses its cache) at each interval,
    and its node-local cache (XOR, flushed every 10th) at one."""
    configs = {f"bypass-{seconds:g}s": f"SCR_CHECKPOINT_SECONDS={seconds:g}\n"
               for seconds in args.intervals}
    configs[f"cache-xor-{args.cache_interval_s:g}s"] = \
        f"SCR_CHECKPOINT_SECONDS={args.cache_interval_s:g}\nSCR_CACHE_BYPASS=0\n"
    return configs


def compare(results: list[dict]) -> list[dict]:
    """Each arm on the launches every arm had, but its last (launch k fails at the same time
    after SCR_Init in every arm; the last ends when the steps run out): mean goodput of
    launches 4 to that, where the loop has had three launches to learn."""
    common = min(r["launches"] for r in results) - 1
    rows = []
    for result in results:
        chosen = [row for row in result["rows"] if 4 <= row["launch"] <= common]
        kept = sum(row["kept"] for row in chosen)
        wall = sum(row["wall_s"] for row in chosen)
        rows.append({"arm": result["arm"], "launches": f"4-{common}",
                     "goodput_later": kept * result["compute_s"] / wall if wall else 0.0,
                     "goodput_total": result["goodput"], "wall_s": result["wall_s"],
                     "lost_steps": result["lost_steps"],
                     "checkpoints_lost": result["checkpoints_lost"],
                     "blocking_s": result["blocking_s"]})
    return rows


def markdown(saved: dict) -> str:
    """RESULTS.md's tables from a results.json: the arms compared, then the loop per launch."""
    lines = ["| arm | launches | goodput, all | goodput, launches " +
             saved["compared"][0]["launches"] + " | steps lost | checkpoints lost | "
             "blocking per checkpoint s |", "|---|---:|---:|---:|---:|---:|---:|"]
    launches = {arm["arm"]: arm["launches"] for arm in saved["arms"]}
    for row in saved["compared"]:
        lines.append(f"| {row['arm']} | {launches[row['arm']]} | {row['goodput_total']:.3f} | "
                     f"{row['goodput_later']:.3f} | {row['lost_steps']} | "
                     f"{row['checkpoints_lost']} | {row['blocking_s']:.3f} |")
    loop = next((arm for arm in saved["arms"] if arm["arm"] == "loop"), None)
    if loop is None:
        return "\n".join(lines) + "\n"
    lines += ["", "| launch | SCR ran (read back after SCR_Init) | wall s | checkpoints | "
              "blocking s | steps kept | steps lost | goodput |", "|---:|---|---:|---:|---:|---:|"
              "---:|---:|"]
    for row in loop["rows"]:
        blocking = "" if math.isnan(row["blocking_s"]) else f"{row['blocking_s']:.2f}"
        lines.append(f"| {row['launch']} | {row['config']} | {row['wall_s']:.1f} | "
                     f"{row['checkpoints']} | {blocking} | {row['kept']} | {row['lost']} | "
                     f"{row['goodput']:.2f} |")
    ours = loop.get("scrtune_goodput", {})
    lines += ["", f"scrtune's own goodput of the loop's job (`scrtune goodput --log`, from "
              f"TunedSCR's records): {ours.get('goodput_pct', math.nan):.1f}% over "
              f"{ours.get('total_s', math.nan):.0f} s, {ours.get('net_steps')} net steps, "
              f"{ours.get('runs')} runs; the job's own log: {100 * loop['goodput']:.1f}% over "
              f"{loop['wall_s']:.0f} s."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="where the arms run and results.json goes")
    parser.add_argument("--table", metavar="RESULTS_JSON",
                        help="print RESULTS.md's tables from a results.json, run nothing")
    parser.add_argument("--scr-prefix", default=os.environ.get("SCRTUNE_SCR_PREFIX", ""))
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--compute-s", type=float, default=0.25)
    parser.add_argument("--ckpt-mib", type=float, default=32)
    parser.add_argument("--meta-kib", type=float, default=64,
                        help="a second, small file per rank per checkpoint: bimodal writes")
    parser.add_argument("--mtbf-s", type=float, default=20.0, help="injected, per launch")
    parser.add_argument("--prior-mtbf-s", type=float, default=86400.0,
                        help="the node MTBF the loop's system profile states")
    parser.add_argument("--default-interval-s", type=float, default=10.0)
    parser.add_argument("--intervals", type=float, nargs="*", default=[2.0, 3.0, 4.0, 6.0])
    parser.add_argument("--cache-interval-s", type=float, default=4.0)
    parser.add_argument("--max-launches", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--arms", nargs="*", help="only these arms (default: all)")
    parser.add_argument("--timeout-s", type=float, default=1200)
    parser.add_argument("--resume", action="store_true",
                        help="keep the arms --out/results.json has, run the others")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep each arm's checkpoints (default: removed once measured)")
    args = parser.parse_args()
    if args.table:
        with open(args.table) as handle:
            sys.stdout.write(markdown(json.load(handle)))
        return
    if not args.out:
        parser.error("--out is required")
    if not args.scr_prefix:
        raise SystemExit("closed_loop: set SCRTUNE_SCR_PREFIX or --scr-prefix")
    os.makedirs(args.out, exist_ok=True)
    env = environment(args)
    failures = schedule(args.seed, args.mtbf_s, args.max_launches, args.nodes)
    arms = {"loop": None, "defaults": None, **grid(args)}
    results = []
    saved_path = os.path.join(args.out, "results.json")
    if args.resume and os.path.exists(saved_path):
        with open(saved_path) as handle:
            results = json.load(handle)["arms"]
    done_before = {result["arm"] for result in results}
    for name, conf in arms.items():
        if args.arms and name not in args.arms or name in done_before:
            continue
        arm_env = dict(env, LOOP="1" if name == "loop" else "0")
        if conf is not None:
            path = os.path.join(args.out, f"{name}.conf")
            with open(path, "w") as handle:
                handle.write(conf)
            arm_env["FIXED_CONF"] = path
        started = time.monotonic()
        arm_dir = run_arm(name, args, arm_env, failures)
        if not args.keep_checkpoints:
            drop_checkpoints(arm_dir)
        rows = launches(events_of(os.path.join(arm_dir, "train-log.jsonl")), args.compute_s)
        result = summary(name, rows, args.compute_s, args.steps)
        result["rows"], result["compute_s"] = rows, args.compute_s
        if name == "loop":  # written by the job script at its end (not when cancelled)
            with contextlib.suppress(OSError, json.JSONDecodeError), \
                    open(os.path.join(arm_dir, "goodput.json")) as handle:
                result["scrtune_goodput"] = json.load(handle)
        results.append(result)
        print(f"{name}: {result['launches']} launches, goodput {result['goodput']:.3f}, "
              f"last 3 {result['last3_goodput']:.3f}, lost {result['lost_steps']} steps, "
              f"{result['checkpoints_lost']} checkpoints lost, blocking "
              f"{result['blocking_s']:.3f} s ({time.monotonic() - started:.0f} s)", flush=True)
        compared = compare(results)
        with open(saved_path, "w") as handle:
            json.dump({"args": vars(args), "failures": failures, "arms": results,
                       "compared": compared}, handle, indent=1)
    compared = compare(results) if results else []
    for row in compared:
        print(f"{row['arm']:>16}: goodput {row['goodput_total']:.3f} in all, "
              f"{row['goodput_later']:.3f} over launches {row['launches']}; "
              f"{row['lost_steps']} steps lost, {row['checkpoints_lost']} checkpoints lost")


if __name__ == "__main__":
    main()
