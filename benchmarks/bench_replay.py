"""Replay speed and memory against `gzip -dc` on the same file, in the same run.

    python benchmarks/bench_replay.py --records 2000000 10000000 --repeat 3 [--pandas]
        [--analyzer-python /path/to/venv/bin/python]
    python benchmarks/bench_replay.py --records 147000000 --ranks 2 --repeat 1

Builds large traces from the real trace shipped in scrtune/data (its records repeated with
shifted timestamps, ids and steps; gzip level 6), then times each tool as a subprocess (median
of --repeat runs) and reads its peak RSS, beside `gzip -dc` and ISA-L's inflate (python-isal, the
floor) of the same files. Prints a Markdown table for benchmarks/RESULTS.md.

`--ranks N` splits the records into N files, one per rank of the run (each with its own pid,
built in parallel), and adds `mpirun -n N scrtune replay` (one rank per file) to the tools.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from concurrent.futures import ProcessPoolExecutor  # noqa: E402

from scrtune.engine.replay import EXAMPLE_TRACE  # noqa: E402
from tests.tracing.largetrace import build  # noqa: E402

WORK = os.path.join(HERE, "work")
# The floor: ISA-L's inflate of every file (what replay reads through), output discarded.
_ISAL = (
    "import sys\n"
    "from isal import igzip\n"
    "for path in sys.argv[1:]:\n"
    "    with igzip.open(path, 'rb') as f:\n"
    "        while f.read(4 << 20):\n"
    "            pass\n"
)
# Runs a command, then prints its wall time, the peak RSS of it and its children, and its exit.
_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "t = time.perf_counter() - t\n"
    "print(t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)\n"
    "sys.stderr.write(r.stderr.decode()[-2000:] if r.returncode else '')\n"
)
_PANDAS = "import pandas, sys; pandas.read_json(sys.argv[1], lines=True, compression='gzip')"


def measure(cmd: list[str], repeat: int) -> tuple[float, int]:
    """Median wall seconds and the largest peak RSS (KiB) over `repeat` runs."""
    times, peaks = [], []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True,
                             text=True, check=True)
        seconds, peak, code = out.stdout.split()
        if int(code) != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr}")
        times.append(float(seconds))
        peaks.append(int(peak))
    return statistics.median(times), max(peaks)


def traces(records: int, ranks: int, regions_once: bool = False,
           source: str = EXAMPLE_TRACE) -> list[str]:
    """The files of a run of `records` records over `ranks` processes, built when missing."""
    os.makedirs(WORK, exist_ok=True)
    kind = "fixed-ckpts" if regions_once else "bench"
    if source != EXAMPLE_TRACE:  # another shape: named by its source
        kind += "-" + os.path.basename(source).split(".")[0]
    if ranks == 1:
        paths = [os.path.join(WORK, f"{kind}-{records}-app.pfw.gz")]
    else:
        paths = [os.path.join(WORK, f"{kind}-{records}-rank{rank}-of-{ranks}-app.pfw.gz")
                 for rank in range(ranks)]
    missing = [(rank, p) for rank, p in enumerate(paths) if not os.path.exists(p)]
    if not missing:
        return paths
    with ProcessPoolExecutor(min(len(missing), os.cpu_count() or 1)) as pool:
        done = [pool.submit(_build_atomically, source, p, -(-records // ranks), regions_once,
                            rank) for rank, p in missing]
        for future in done:
            future.result()
    return paths


def _build_atomically(source: str, path: str, records: int, regions_once: bool,
                      pid_offset: int) -> None:
    """Built under a temporary name: an interrupted build leaves no half file to time."""
    partial = os.path.join(os.path.dirname(path), ".partial-" + os.path.basename(path))
    build(source, partial, records, regions_once=regions_once, pid_offset=pid_offset)
    os.replace(partial, path)


def analyzer_cmd(python: str, path: str) -> list[str]:
    folder = os.path.dirname(path) + f"/analyzer-{os.path.basename(path)}"
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, os.path.basename(path))
    if not os.path.exists(link):
        os.symlink(path, link)
    dfanalyzer = os.path.join(os.path.dirname(python), "dfanalyzer")
    user = f"USER={os.environ.get('USER') or 'bench'}"  # its hydra config reads $USER
    return ["env", user, dfanalyzer, "analyzer/preset=dlio", f"trace_path={folder}",
            "view_types=[time_range]", f"hydra.run.dir={folder}/out"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, nargs="+", default=[2_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pandas", action="store_true", help="also time pandas.read_json")
    parser.add_argument("--fixed-checkpoints", action="store_true",
                        help="checkpoint regions only in the first repetition: records grow, "
                             "checkpoints do not (memory follows checkpoints found)")
    parser.add_argument("--source", default=EXAMPLE_TRACE,
                        help="the real trace to repeat (default: the one shipped in scrtune; "
                        "e.g. tests/data/dlio_train_ckpt/*-app.pfw.gz for a DLIO checkpoint "
                        "run's shape)")
    parser.add_argument("--ranks", type=int, default=1,
                        help="split the records into this many files (one pid each) and time "
                        "mpirun -n RANKS too")
    parser.add_argument("--analyzer-python", help="python of a venv with dftracer-analyzer")
    parser.add_argument("--compare-max-records", type=int, default=2_000_000,
                        help="run pandas and the analyzer only up to this size (pandas needs "
                             "about 2.6 GB per million records)")
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print("| records | tool | seconds | records/s | x gzip -dc | x ISA-L | peak RSS MiB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for records in args.records:
        paths = traces(records, args.ranks, args.fixed_checkpoints, args.source)
        path = paths[0]
        files = " ".join(paths)
        gzip_s, gzip_rss = measure(["sh", "-c", f"gzip -dc {files} > /dev/null"], args.repeat)
        isal_s, isal_rss = measure([sys.executable, "-c", _ISAL, *paths], args.repeat)
        rows = [("gzip -dc", gzip_s, gzip_rss), ("ISA-L inflate (python-isal)", isal_s, isal_rss)]
        replay = [sys.executable, "-m", "scrtune", "replay", *paths, "--format", "json"]
        for workers in (1, os.cpu_count() or 1):
            rows.append((f"scrtune replay --workers {workers}",
                         *measure([*replay, "--workers", str(workers)], args.repeat)))
        if args.ranks > 1:
            mpirun = shutil.which("mpirun") or "mpirun"
            rows.append((f"mpirun -n {args.ranks} scrtune replay",
                         *measure([mpirun, "-n", str(args.ranks), *replay], args.repeat)))
        compare = records <= args.compare_max_records and args.ranks == 1
        if args.pandas and compare:
            rows.append(("pandas.read_json(lines=True)",
                         *measure([sys.executable, "-c", _PANDAS, path], 1)))
        if args.analyzer_python and compare:
            rows.append(("dfanalyzer 0.0.9 (time_range view)",
                         *measure(analyzer_cmd(args.analyzer_python, path), 1)))
        for tool, seconds, rss in rows:
            print(f"| {records:,} | {tool} | {seconds:.2f} | {records / seconds:,.0f} | "
                  f"{seconds / gzip_s:.2f} | {seconds / isal_s:.2f} | {rss / 1024:.0f} |")


if __name__ == "__main__":
    main()
