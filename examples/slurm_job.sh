#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --time=30
# Train under SCR, tuned by scrtune: one daemon per node fed the job's DFTracer events, the job
# under `scr_run srun`, relaunched after a failure until it has trained all its steps.
#
#   sbatch examples/slurm_job.sh            # or: sbatch -N 4 --ntasks-per-node=1 ...
#
# Needs on every node: scrtune (pip install 'scrtune[mpi]'), SCR's bin/ on PATH and its Python
# module (<SCR install>/share/scr/python) on PYTHONPATH. Settings, from the environment:
#   CKPT_DIR      SCR_PREFIX, on the parallel file system (default ./ckpt-<job id>)
#   SYSTEM        a system profile for the daemon (scrtune profile -o sys.toml)
#   ALLOW_RESTART 1: the daemon may halt the job to relaunch it with a better configuration,
#                 when that gains more than RESTART_COST_S (default 300) over the time left
#   MAX_LAUNCHES  launches at most (default 5); TRAIN_ARGS  more arguments for train.py
# Goodput afterwards: scrtune goodput --log $CKPT_DIR/goodput.jsonl (the daemons' records)
set -u
here=${EXAMPLES_DIR:-$(dirname "$(readlink -f "$0")")}
[ -f "$here/train.py" ] || here=$SLURM_SUBMIT_DIR/examples  # sbatch runs a copy of this file
job=$SLURM_JOB_ID
export SCR_PREFIX=${CKPT_DIR:-$PWD/ckpt-$job}
export TRACE_DIR=$SCR_PREFIX/trace   # DFTracer writes TRACE_DIR/<node>/; each node forwards its own
log=$SCR_PREFIX/train-log.jsonl      # what the job did, rank 0, with wall-clock times
mkdir -p "$SCR_PREFIX" "$TRACE_DIR"
# DFTracer (Python API): file traces, small buffers so that `forward` sees them grow
export DFTRACER_ENABLE=1 DFTRACER_INC_METADATA=1 DFTRACER_INIT=FUNCTION \
       DFTRACER_DATA_DIR=$SCR_PREFIX:/dev/shm DFTRACER_WRITE_BUFFER_SIZE=4096 DFTRACER_TRACE_COMPRESSION=0
# One channel for SCR's settings: TunedSCR passes them to SCR_Config. An SCR_* variable in the
# environment (or an SCR_CONF_FILE) would win over them silently; TunedSCR reports any it sees.
unset SCR_CONF_FILE

# One daemon and one forwarder per node (a daemon started as a node's second task leaves the
# node to the first one), beside the application's steps (--overlap).
# Each daemon keeps what the job records on the shared file system too (its state lives in
# the node's temp dir, which goes with the job).
per_node=(-N "$SLURM_NNODES" --ntasks="$SLURM_NNODES" --ntasks-per-node=1 --overlap)
daemon_args=(--records-log "$SCR_PREFIX/goodput-%h.jsonl")
[ -n "${SYSTEM:-}" ] && daemon_args+=(--system "$SYSTEM")
[ "${ALLOW_RESTART:-0}" = 1 ] && daemon_args+=(--allow-restart --prefix "$SCR_PREFIX"
                                               --restart-cost-s "${RESTART_COST_S:-300}")
srun "${per_node[@]}" -J scrtune-daemon scrtune daemon "${daemon_args[@]}" &
daemons=$!
srun "${per_node[@]}" -J scrtune-forward bash -c 'exec scrtune forward "$TRACE_DIR/$(hostname)"' &
forwarders=$!
srun "${per_node[@]}" scrtune status --wait-s 60 --format json > /dev/null \
  || echo "slurm_job: a node's daemon did not answer; the job runs on SCR's own settings" >&2

launch=0
until grep -q '"event": "done"' "$log" 2>/dev/null || [ "$launch" -ge "${MAX_LAUNCHES:-5}" ]; do
  launch=$((launch + 1))
  echo "slurm_job: launch $launch"
  # SCR_RUNS=1: scr_run runs the job once and scavenges the node-local cache after it; this
  # loop relaunches (scr_run's own relaunches wait 60 s first).
  # --kill-on-bad-exit: when a node dies, its ranks peers must not wait for them in MPI
  SCR_RUNS=1 scr_run srun --mpi=pmi2 --kill-on-bad-exit=1 -o "$SCR_PREFIX/launch-$launch.%t.out" \
    python "$here/train.py" --log "$log" --job "example-$job" ${TRAIN_ARGS:-}
  grep -q '"event": "done"' "$log" 2>/dev/null && break
  # Halted by scrtune for a better configuration? Its daemon (rank 0's node, the first) then
  # clears the halt, which scr_run would otherwise obey; after a failure it says it did not.
  [ "${ALLOW_RESTART:-0}" = 1 ] &&
    srun -N 1 -n 1 --relative=0 --overlap -J scrtune-relaunch sh -c 'scrtune relaunch || :'
done

# Stop the forwarders (they send what the files hold first), then the daemons (state saved):
# SIGUSR1 to the step's tasks, which scrtune takes as SIGTERM. (A SIGTERM to srun itself makes
# Slurm SIGKILL them; `scancel --signal=TERM` fills the output with "STEP CANCELLED" errors.)
stop_step() {  # step name, srun's pid
  local step
  step=$(squeue -h -s -j "$job" -o '%i %j' | awk -v n="$1" '$2 == n {print $1}')
  [ -n "$step" ] && scancel --signal=USR1 "$step"
  wait "$2"
}
stop_step scrtune-forward "$forwarders"
stop_step scrtune-daemon "$daemons"
cat "$SCR_PREFIX"/goodput-*.jsonl > "$SCR_PREFIX/goodput.jsonl" 2>/dev/null  # rank 0's node's
scrtune goodput --log "$SCR_PREFIX/goodput.jsonl" --job "example-$job" \
  || echo "slurm_job: no goodput records" >&2
grep -q '"event": "done"' "$log" && echo "slurm_job: done after $launch launch(es)"
