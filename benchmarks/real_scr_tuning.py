"""Tuned vs SCR's defaults vs a grid, on the real SCR library.

    SCRTUNE_SCR_PREFIX=~/.cache/scrtune-real-scr/3.1.0 python benchmarks/real_scr_tuning.py

The job (benchmarks/scr_ckpt_app.py): 2 MPI ranks, each on its own "node" (an LD_PRELOAD
gethostname shim, so SCR forms real PARTNER/XOR sets) and bound to its own core, spinning
between checkpoints; every step a checkpoint of bimodal writes. Node-local storage is /dev/shm
(a cache directory per node), the "parallel file system" a directory on disk (--pfs).

1. `scrtune profile` measures the two directories;
2. the job runs once under SCR's defaults, traced by the real tracer;
3. `scrtune recommend --job-interval-s trace` turns that trace and the profile into (b), the
   tuned configuration, with its runtime action (the transfer threads' cores), for the job's
   own cadence (it checkpoints every step, not when SCR_Need_checkpoint says);
   (with --calibrate-with, from the profile `scrtune calibrate` fits to an earlier run's
   measurements: SCR's own flush, encode and write rates);
4. (a) defaults, (b) tuned and every grid configuration (c) run --reps times, interleaved
   (with --threads, the free asynchronous flush also with that many transfer threads per rank:
   AXL starts min(CPUs, 16, files) and reads no parameter, so benchmarks/nprocs.c shows it that
   many CPUs).
Reported per configuration, medians over the repetitions: blocking checkpoint time (sum over
the job's checkpoints, max over ranks), flush time (what SCR_DEBUG prints for its flushes) and
job wall time (SCR_Init to a durable end: SCR_Finalize, then sync); with --flush-ends, when
each flush really ended (SCR_DEBUG's asynchronous times are bounds). The page cache is dropped
before each run when this process may (root). Raw runs go to --json, for the study's
calibration (benchmarks/study_calibration.py), with the profile and trace used in a folder of the
same name, rewritten after every run; each run's `phases_s` splits every checkpoint into
SCR_Start_output, the application's writes and SCR_Complete_output (the slowest rank's each).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
APP = os.path.join(HERE, "scr_ckpt_app.py")
SHIM = os.path.join(ROOT, "tests", "tracing", "fakehost.c")
SLOW_SHIM = os.path.join(HERE, "slowpfs.c")
NPROCS_SHIM = os.path.join(HERE, "nprocs.c")
RANKS = 2
FLUSH_LINE = re.compile(r"scr_flush_(?:sync|async_complete): ([0-9.]+) secs")
# SCR_DEBUG's time of a checkpoint's redundancy encode (ER's dispatch and wait), rank 0's
ENCODE_LINE = re.compile(r"scr_reddesc_apply: ([0-9.]+) secs")
COPIES = ("SINGLE", "PARTNER", "XOR")
BUFFERS = ("4MB", "32MB", "64MB")  # below, at SCR default, at the largest write
FLUSHES = {  # label -> (environment, transfer threads on all cores)
    "sync/1": ({"SCR_FLUSH": "1"}, False),
    "sync/3": ({"SCR_FLUSH": "3"}, False),
    "async/1 bound": ({"SCR_FLUSH": "1", "SCR_FLUSH_TYPE": "PTHREAD", "SCR_FLUSH_ASYNC": "1",
                       "SCR_CACHE_SIZE": "2"}, False),
    "async/1 free": ({"SCR_FLUSH": "1", "SCR_FLUSH_TYPE": "PTHREAD", "SCR_FLUSH_ASYNC": "1",
                      "SCR_CACHE_SIZE": "2"}, True),
    "async/3 free": ({"SCR_FLUSH": "3", "SCR_FLUSH_TYPE": "PTHREAD", "SCR_FLUSH_ASYNC": "1",
                      "SCR_CACHE_SIZE": "2"}, True),
    # a flush of every 10th checkpoint, waited for by the checkpoint that evicts it two later
    "sync/10": ({"SCR_FLUSH": "10"}, False),
    "async/10 bound": ({"SCR_FLUSH": "10", "SCR_FLUSH_TYPE": "PTHREAD", "SCR_FLUSH_ASYNC": "1",
                        "SCR_CACHE_SIZE": "2"}, False),
}
DEFAULT_FLUSHES = ("sync/1", "sync/3", "async/1 bound", "async/1 free", "async/3 free")


@dataclass(frozen=True)
class GridConfig:
    env: dict[str, str] = field(default_factory=dict)
    free_threads: bool = False  # transfer threads may run on any core
    nprocs: int = 0  # the CPUs AXL sees (benchmarks/nprocs.c), so its thread count; 0: real

    def transfer_threads(self) -> int:
        """PTHREAD threads per rank AXL starts, before its cap by the file count; 0 for a
        synchronous flush, which has none."""
        if self.env.get("SCR_FLUSH_ASYNC") != "1":
            return 0
        return min(self.nprocs or len(os.sched_getaffinity(0)), 16)


def grid(buffers: tuple[str, ...] = BUFFERS, flushes: tuple[str, ...] = DEFAULT_FLUSHES,
         threads: tuple[int, ...] = ()) -> dict[str, GridConfig]:
    """Copy type x buffer x flush; with `threads`, also the free asynchronous flush of every
    copy type and buffer with that many CPUs for AXL (so that many transfer threads)."""
    configs = {"bypass": GridConfig({"SCR_CACHE_BYPASS": "1", "SCR_FLUSH": "1"})}
    for copy, buffer in itertools.product(COPIES, buffers):
        base = {"SCR_CACHE_BYPASS": "0", "SCR_COPY_TYPE": copy, "SCR_FILE_BUF_SIZE": buffer}
        for flush in flushes:
            env, free = FLUSHES[flush]
            configs[f"cache {copy} {buffer} {flush}"] = GridConfig({**base, **env}, free)
        env, free = FLUSHES["async/1 free"]
        for count in threads:
            threads_label = f"{count} thread{'s' * (count != 1)}"
            configs[f"cache {copy} {buffer} async/1 free {threads_label}"] = GridConfig(
                {**base, **env}, free, count)
    return configs


class FlushWatch:
    """When each checkpoint's flush really ended: a thread polls the prefix every 10 ms and
    notes when a `global_stepK` directory holds all its bytes. SCR_DEBUG's time of an
    asynchronous flush runs until SCR notices the end (a bound); AXL copies the source's mtime
    and renames its `._AXL` temporary files when SCR notices, so the files' times do not
    say."""

    POLL_S = 0.01

    def __init__(self, prefix: str, step_bytes: int) -> None:
        self.prefix, self.step_bytes, self.done_unix_s = prefix, step_bytes, {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.is_set():
            try:
                for entry in os.scandir(self.prefix):
                    if entry.name.startswith("global_step") \
                            and entry.name not in self.done_unix_s \
                            and self._bytes(entry.path) >= self.step_bytes:
                        self.done_unix_s[entry.name] = time.time()
            except OSError:  # a file renamed, or the prefix remade, between the calls
                pass
            time.sleep(self.POLL_S)

    @staticmethod
    def _bytes(folder: str) -> int:
        return sum(f.stat().st_size for f in os.scandir(folder))

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()

    def durations(self, ends_unix_s: list[float]) -> list[float | None]:
        """Each checkpoint's flush, seconds from the checkpoint's end (its
        SCR_Complete_output, which starts it, returning); None where none ended while the job
        ran (a flush SCR_Finalize finished comes after the job's last checkpoint too)."""
        done = [self.done_unix_s.get(f"global_step{step}")
                for step in range(1, len(ends_unix_s) + 1)]
        return [None if end is None else end - start for end, start in zip(done, ends_unix_s)]


class PageCacheTrim:
    """The kernel's clean page cache dropped every `every_s` while a job runs (root): the
    files a run wrote to the "parallel file system" do not stay in memory. On a guest whose
    host backs only a few GB of new pages at full speed (benchmarks/fresh_memory.py), a run
    that keeps them goes slow from its 3rd or 4th checkpoint for that alone."""

    def __init__(self, every_s: float) -> None:
        self.every_s, self.stop = every_s, threading.Event()
        self.thread = threading.Thread(target=self._trim, daemon=True)
        self.thread.start()

    def _trim(self) -> None:
        while not self.stop.wait(self.every_s):
            with open("/proc/sys/vm/drop_caches", "w") as handle:
                handle.write("1\n")  # clean page cache only: dirty pages and tmpfs stay

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()


def _app_option(app_args: list[str], name: str, default: int) -> int:
    return int(app_args[app_args.index(name) + 1]) if name in app_args else default


def step_bytes(app_args: list[str]) -> int:
    """One checkpoint of scr_ckpt_app.py, all ranks: its options or their defaults."""
    return RANKS * (_app_option(app_args, "--tensor-files", 3)
                    * _app_option(app_args, "--tensor-bytes", 128 << 20)
                    + _app_option(app_args, "--meta-writes", 256) * 1024)


def files_per_rank(app_args: list[str]) -> int:
    """The files a rank of scr_ckpt_app.py writes a checkpoint: its tensors and its metadata."""
    return _app_option(app_args, "--tensor-files", 3) + 1


def compiled(source: str, library: str) -> str:
    """`source` (a C shim of this folder) built into the shared library `library`."""
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"],
                   check=True)
    return library


def slow_pfs_env(pfs: str, call_us: int) -> dict[str, str]:
    """The environment under which slowpfs.c makes every write call under `pfs` cost
    `call_us` (it compares the real paths of the files written)."""
    return {"SCRTUNE_SLOW_PREFIX": os.path.realpath(pfs), "SCRTUNE_SLOW_CALL_US": str(call_us)}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = tempfile.mkdtemp(prefix="scrtune-bench-")  # the shim, each run's output
        self.scr = os.path.expanduser(os.environ["SCRTUNE_SCR_PREFIX"])
        self.shim = compiled(SHIM, os.path.join(self.work, "libfakehost.so"))
        nprocs = compiled(NPROCS_SHIM, os.path.join(self.work, "libnprocs.so"))
        self.preload, self.slow_env, self.slow_shim = f"{self.shim} {nprocs}", {}, ""
        if args.pfs_call_us:  # every write call to the "parallel file system" costs this
            self.slow_shim = compiled(SLOW_SHIM, os.path.join(self.work, "libslowpfs.so"))
            self.preload += f" {self.slow_shim}"
            self.slow_env = slow_pfs_env(args.pfs, args.pfs_call_us)
        self.mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"

    def run(self, config: GridConfig, trace: str = "") -> dict:
        """One job: fresh prefix and caches; its blocking, flush and wall times."""
        prefix = os.path.join(self.args.pfs, "prefix")
        caches = os.path.join("/dev/shm", f"scrtune-bench-{os.getpid()}")
        for folder in (prefix, caches):
            shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(prefix)
        _drop_caches()
        out = os.path.join(self.work, "run.json")
        command = [self.mpiexec]
        for rank in range(RANKS):
            cache = os.path.join(caches, f"node{rank}")
            os.makedirs(cache)
            command += ([":"] if rank else []) + [
                "-n", "1", "-env", "SCRTUNE_FAKE_HOST", f"node{rank}", "-env",
                "SCR_CACHE_BASE", cache, "-env", "LD_PRELOAD", self.preload, sys.executable, APP,
                "--out", out, "--bind", *self.args.app_args,
                *(["--transfer-cores", ",".join(map(str, sorted(os.sched_getaffinity(0))))]
                  if config.free_threads else []),
                *(["--trace", trace, "--traced-dir", prefix] if trace else [])]
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SCR_")}
        environ.update(USER=environ.get("USER", "scrtune"), SCRTUNE_SCR_PREFIX=self.scr,
                       SCR_CNTL_BASE=os.path.join(caches, "cntl"), SCR_DEBUG="1",
                       **self.slow_env, **config.env)
        if config.nprocs:
            environ["SCRTUNE_NPROCS"] = str(config.nprocs)
        if trace:
            environ.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1",
                           DFTRACER_INIT="FUNCTION")
        watch = FlushWatch(prefix, step_bytes(self.args.app_args)) \
            if getattr(self.args, "flush_ends", False) else None
        trim = PageCacheTrim(self.args.trim_cache_s) \
            if getattr(self.args, "trim_cache_s", 0) else None
        faults_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        cpu_before = cpu_ticks()
        try:
            done = subprocess.run(command, cwd=prefix, env=environ, capture_output=True,
                                  text=True, timeout=900)
        finally:
            for helper in (watch, trim):
                if helper:
                    helper.finish()
        shutil.rmtree(caches, ignore_errors=True)
        if done.returncode != 0:
            raise RuntimeError(f"job failed ({config}): {done.stderr[-2000:]}")
        with open(out) as handle:
            measured = json.load(handle)
        scr_log = done.stdout + done.stderr  # SCR_DEBUG's lines, on either stream
        flushes = [float(s) for s in FLUSH_LINE.findall(scr_log)]
        return {"blocking_s": sum(measured["blocking_s"]), "per_checkpoint_s":
                measured["blocking_s"], "flush_s": sum(flushes), "flushes": len(flushes),
                "wall_s": measured["wall_s"], "phases_s": measured["phases_s"],
                "encode_s": [float(v) for v in ENCODE_LINE.findall(scr_log)],
                # the job's processes' minor page faults (each waited for by its parent, so
                # counted): memory the job touched fresh, whatever the machine's speed
                "minor_faults": resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
                - faults_before,
                "checkpoint_end_unix_s": measured["checkpoint_end_unix_s"],
                # the host's share of this guest's CPU time while the job ran: a run it took
                # the machine from is marked in the data itself (0 where /proc/stat is absent)
                "steal_share": steal_share(cpu_before, cpu_ticks()),
                # per rank and checkpoint, SCR_Complete_output's CPU and run-queue seconds
                **({"complete_sched_s": measured["complete_sched_s"]}
                   if "complete_sched_s" in measured else {}),
                **({"flush_end_s": watch.durations(measured["checkpoint_end_unix_s"])}
                   if watch else {})}


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine's CPUs since boot, from /proc/stat; (0, 0) without."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:9]]
    except (OSError, ValueError):
        return (0, 0)
    return (fields[7], sum(fields)) if len(fields) == 8 else (0, 0)


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the CPU time between two cpu_ticks() that the host stole."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 4) if total > 0 else 0.0


def _drop_caches() -> None:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
    except OSError:
        pass  # not root: the runs start with what the cache holds


def measure_profile(bench: Bench, path: str, time_s: int = 20) -> str:
    """`scrtune profile` of /dev/shm and --pfs (through the slow shim, if any) into `path`,
    with one core per node: each fake node is one core of this machine, and has its share of
    the one kernel's dirty allowance."""
    slow = {"LD_PRELOAD": bench.slow_shim, **bench.slow_env} if bench.slow_shim else {}
    subprocess.run([sys.executable, "-m", "scrtune", "profile", "--local", "/dev/shm",
                    "--parallel", bench.args.pfs, "-o", path, "--force", "--time-s",
                    str(time_s)], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, **slow})
    with open(path) as handle:
        text = re.sub(r"(?m)^cores_per_node = \d+", "cores_per_node = 1", handle.read())
    text = re.sub(r"(?m)^dirty_allowance_bytes = ([0-9.e+]+).*$",
                  lambda found: f"dirty_allowance_bytes = {float(found[1]) / RANKS!r}  # "
                  f"the kernel's, shared by the {RANKS} nodes this machine poses as", text)
    with open(path, "w") as handle:
        handle.write(text)
    return path


def tuned(bench: Bench, work: str, profile_time_s: int = 20) -> tuple[GridConfig, dict]:
    """Profile, a traced run under the defaults, and what recommend makes of them."""
    profile = measure_profile(bench, os.path.join(work, "sys.toml"), profile_time_s)
    cli = [sys.executable, "-m", "scrtune"]
    trace = os.path.join(work, "trace")
    shutil.rmtree(trace, ignore_errors=True)
    os.makedirs(trace)
    bench.run(GridConfig(), trace=trace)
    if os.path.exists(os.path.join(trace, "dft.log")):  # the tracer's own log, empty
        os.unlink(os.path.join(trace, "dft.log"))
    if bench.args.calibrate_with:  # SCR's own rates, fitted to an earlier grid's runs
        calibrated = os.path.join(work, "sys-scr.toml")
        subprocess.run([*cli, "calibrate", trace, "--runs", bench.args.calibrate_with,
                        "--system", profile, "-o", calibrated, "--force"], check=True,
                       stdout=subprocess.DEVNULL)
        profile = calibrated
    return recommended(bench, cli, trace, profile)


def recommended(bench: Bench, cli: list[str], trace: str, profile: str,
                own_cadence: bool = True) -> tuple[GridConfig, dict]:
    """What `recommend` makes of the trace. The job checkpoints every step, whatever
    SCR_CHECKPOINT_SECONDS says: (b) is planned at that cadence (`own_cadence`; before
    2026-11-26, at Daly's interval: PARTNER, whose encode the job's cadence of a few seconds
    pays in every interval)."""
    asked = [*cli, "recommend", trace, "--system", profile, "--nodes", str(RANKS),
             *(["--job-interval-s", "trace"] if own_cadence else [])]
    recommendation = json.loads(subprocess.run([*asked, "--format", "json"], check=True,
                                               capture_output=True, text=True).stdout)
    env_text = subprocess.run([*asked, "--format", "env", "--conf-path",
                               os.path.join(bench.work, "tuned.conf")], check=True,
                              capture_output=True, text=True).stdout
    env = {}
    for line in env_text.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            env[name] = shlex.split(value)[0]
    pins = [a for a in recommendation["runtime_actions"]
            if a.get("kind") == "transfer_thread_affinity" and a.get("cores")]
    return GridConfig(env, bool(pins)), recommendation


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pfs", default=os.path.join(HERE, "work", "pfs"),
                        help="the 'parallel file system' directory (on disk)")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--json", default=os.path.join(HERE, "results", "real_scr_grid.json"))
    parser.add_argument("--only", help="regex: run only grid configurations it matches")
    parser.add_argument("--calibrate-with", metavar="RUNS.json",
                        help="an earlier run's --json: (b) is then recommended from the profile "
                        "`scrtune calibrate` fits to those runs (SCR's own rates)")
    parser.add_argument("--pfs-call-us", type=int, default=0,
                        help="make each write call to --pfs take this long (benchmarks/"
                        "slowpfs.c, for the application, SCR and `scrtune profile`): a file "
                        "system with a per-call round trip")
    parser.add_argument("--buffers", default=",".join(BUFFERS),
                        help="SCR_FILE_BUF_SIZE values of the grid, comma-separated")
    parser.add_argument("--flushes", default=",".join(DEFAULT_FLUSHES),
                        help=f"flush kinds of the grid, comma-separated, of: {', '.join(FLUSHES)}")
    parser.add_argument("--flush-ends", action="store_true",
                        help="note when each checkpoint's flush really ended (its bytes in the "
                        "prefix, polled every 10 ms): flush_end_s per run, seconds from the "
                        "checkpoint's end (negative: there before SCR_Complete_output returned, "
                        "as in bypass or a synchronous flush)")
    parser.add_argument("--dirty-mb", type=int, default=0,
                        help="bound the kernel's dirty page cache to this many MB while the "
                        "grid runs (root; vm.dirty_bytes, a quarter of it "
                        "vm.dirty_background_bytes; restored after): the 'parallel file "
                        "system' then takes a checkpoint at its disk's rate from the first "
                        "one, as a file system whose client cache a long job keeps full, "
                        "instead of absorbing the first few GB of every run in memory")
    parser.add_argument("--trim-cache-s", type=float, default=0,
                        help="drop the kernel's clean page cache this often while a job runs "
                        "(root; with --dirty-mb, so that written pages are soon clean): the "
                        "job's written files do not stay in memory (benchmarks/"
                        "fresh_memory.py: on a guest whose host backs a few GB of new pages "
                        "at full speed, the later checkpoints went slow for that alone)")
    parser.add_argument("--threads", default="",
                        help="CPU counts AXL is shown (benchmarks/nprocs.c), comma-separated: "
                        "each adds the free asynchronous flush with that many transfer threads")
    parser.add_argument("--order-seed", type=int, default=None,
                        help="seed of each pass's shuffled run order (default: the grid's start "
                        "time, so that a drift of the machine during a grid lands on different "
                        "configurations from one grid to the next; the seed and every pass's "
                        "order are kept in --json)")
    return parser


def main() -> None:
    parser = _parser()
    args, args.app_args = parser.parse_known_args()
    flushes = tuple(f for f in args.flushes.split(",") if f)
    if not set(flushes) <= set(FLUSHES):
        parser.error(f"--flushes: not a flush kind: {sorted(set(flushes) - set(FLUSHES))}")
    os.makedirs(args.pfs, exist_ok=True)
    work = os.path.abspath(os.path.splitext(args.json)[0])  # the profile and trace used
    os.makedirs(work, exist_ok=True)
    if args.dirty_mb and os.geteuid() != 0:
        parser.error("--dirty-mb: bounding the kernel's dirty page cache needs root")
    if args.trim_cache_s and (args.trim_cache_s < 0.05 or os.geteuid() != 0):
        parser.error("--trim-cache-s: at least 0.05 s, and dropping the page cache needs root")
    with dirty_pool(args.dirty_mb):
        _run_grid(args, work, flushes)


def _run_grid(args: argparse.Namespace, work: str, flushes: tuple[str, ...]) -> None:
    bench = Bench(args)
    tuned_config, recommendation = tuned(bench, work)
    configs = {"(a) SCR defaults": GridConfig(), "(b) scrtune recommend": tuned_config}
    configs.update({f"(c) {k}": v for k, v in grid(
        tuple(args.buffers.split(",")), flushes,
        tuple(int(n) for n in args.threads.split(",") if n)).items()
        if not args.only or re.search(args.only, k)})
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    if args.order_seed is None:
        args.order_seed = int(time.time())
    args.passes = pass_orders(list(configs), args.reps, args.order_seed)
    for rep, order in enumerate(args.passes):
        for name in order:
            runs[name].append(bench.run(configs[name]))
            print(f"rep {rep + 1}/{args.reps} {name}: {runs[name][-1]['wall_s']:.2f} s, "
                  f"steal {100 * runs[name][-1]['steal_share']:.1f}%", file=sys.stderr)
            # written after every run: an hour's grid cut short keeps what it measured
            _save(args, work, configs, recommendation, runs)
    print(report(configs, runs))
    shutil.rmtree(bench.work, ignore_errors=True)


def pass_orders(names: list[str], passes: int, seed: int) -> list[list[str]]:
    """Each pass's run order, shuffled afresh from one seed (until the fifty-fifth round of
    issue 48 every grid shuffled with the pass number alone, so every grid ran its
    configurations in the same order and a machine's drift within a grid fell on the same ones
    each time)."""
    shuffler = random.Random(seed)
    return [shuffler.sample(names, len(names)) for _ in range(passes)]


@contextlib.contextmanager
def dirty_pool(megabytes: int):
    """The kernel's dirty page cache bounded to `megabytes` (0: left as it is), restored after
    (issue 48: with 20% of 24 GiB, every run's first three checkpoints of 768 MB landed in
    memory and the last two at the disk's rate, in bypass and beside every flush)."""
    if not megabytes:
        yield
        return
    names = ("dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes")
    saved = {name: _read_vm(name) for name in names}
    try:
        _write_vm("dirty_bytes", megabytes << 20)
        _write_vm("dirty_background_bytes", (megabytes << 20) // 4)
        yield
    finally:  # a ratio or a byte count, whichever was set (writing one zeroes the other)
        for name in ("dirty_background", "dirty"):
            kind = "bytes" if saved[f"{name}_bytes"] else "ratio"
            _write_vm(f"{name}_{kind}", saved[f"{name}_{kind}"])


def _read_vm(name: str) -> int:
    with open(f"/proc/sys/vm/{name}") as handle:
        return int(handle.read())


def _write_vm(name: str, value: int) -> None:
    with open(f"/proc/sys/vm/{name}", "w") as handle:
        handle.write(f"{value}\n")


def _save(args: argparse.Namespace, work: str, configs: dict[str, GridConfig],
          recommendation: dict, runs: dict[str, list[dict]]) -> None:
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    measured = {name: times for name, times in runs.items() if times}
    partial = args.json + ".part"
    with open(partial, "w") as handle:
        json.dump({"machine": _machine(), "nodes": RANKS, "ranks_per_node": 1,
                   "pfs_call_us": args.pfs_call_us, "dirty_mb": args.dirty_mb,
                   "trim_cache_s": args.trim_cache_s,
                   "calibrated_with": args.calibrate_with, "app_args": args.app_args,
                   "pfs": args.pfs,
                   "profile": os.path.relpath(os.path.join(work, "sys.toml"), ROOT),
                   "trace": os.path.relpath(os.path.join(work, "trace"), ROOT),
                   "compute_s": _compute_s(args),
                   "configs": {k: {"env": v.env, "free_threads": v.free_threads,
                                   "transfer_threads": v.transfer_threads()}
                               for k, v in configs.items() if k in measured},
                   "recommendation": recommendation, "order_seed": args.order_seed,
                   "passes": args.passes, "runs": measured}, handle, indent=1)
    os.replace(partial, args.json)


def _compute_s(args: argparse.Namespace) -> float:
    given = args.app_args
    return float(given[given.index("--compute-s") + 1]) if "--compute-s" in given else 2.0


def _machine() -> str:
    return f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python " \
           f"{platform.python_version()}"


def report(configs: dict, runs: dict[str, list[dict]]) -> str:
    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    rows = sorted(configs, key=lambda n: median(n, "wall_s"))
    lines = ["| configuration | blocking s | flush s | job wall s |", "|---|---:|---:|---:|"]
    for name in rows:
        lines.append(f"| {name} | {median(name, 'blocking_s'):.2f} | "
                     f"{median(name, 'flush_s'):.2f} | {median(name, 'wall_s'):.2f} |")
    tuned_s, default_s = median("(b) scrtune recommend", "wall_s"), median("(a) SCR defaults",
                                                                           "wall_s")
    grid_best = next((n for n in rows if n.startswith("(c)")), None)  # --only may match none
    against = "" if grid_best is None else (
        f" against the grid's best ({grid_best}) {median(grid_best, 'wall_s'):.2f} s: "
        f"{100 * (tuned_s / median(grid_best, 'wall_s') - 1):+.1f}%;")
    lines += ["", f"(b) {tuned_s:.2f} s{against} against the defaults {default_s:.2f} s: "
              f"{100 * (tuned_s / default_s - 1):+.1f}%"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
