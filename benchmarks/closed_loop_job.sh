#!/bin/bash
# One arm of benchmarks/closed_loop.py: examples/train.py under `scr_run srun`, relaunched after
# each failure until it has trained all its steps. LOOP=1: one scrtune daemon and forwarder per
# node, as in examples/slurm_job.sh; else SCR runs FIXED_CONF (SCR_CONF_FILE; empty: SCR's
# defaults) and the job's own cadence. The driver injects the failures and reads ARM_DIR.
set -u
here=$EXAMPLES_DIR
job=$SLURM_JOB_ID
export SCR_PREFIX=$ARM_DIR
export TRACE_DIR=$SCR_PREFIX/trace
log=$SCR_PREFIX/train-log.jsonl
mkdir -p "$SCR_PREFIX" "$TRACE_DIR"
export DFTRACER_ENABLE=1 DFTRACER_INC_METADATA=1 DFTRACER_INIT=FUNCTION \
       DFTRACER_DATA_DIR=$SCR_PREFIX:/dev/shm DFTRACER_WRITE_BUFFER_SIZE=4096 DFTRACER_TRACE_COMPRESSION=0
unset SCR_CONF_FILE
per_node=(-N "$SLURM_NNODES" --ntasks="$SLURM_NNODES" --ntasks-per-node=1 --overlap)
if [ "$LOOP" = 1 ]; then
  daemon_args=(--records-log "$SCR_PREFIX/goodput-%h.jsonl" ${DAEMON_ARGS:-})
  srun "${per_node[@]}" -J scrtune-daemon scrtune daemon "${daemon_args[@]}" &
  daemons=$!
  srun "${per_node[@]}" -J scrtune-forward bash -c 'exec scrtune forward "$TRACE_DIR/$(hostname)"' &
  forwarders=$!
  srun "${per_node[@]}" scrtune status --wait-s 60 --format json > /dev/null
else
  export SCRTUNE_DIR=$SCR_PREFIX/no-daemon  # never made: the client does not wait for one
  [ -n "${FIXED_CONF:-}" ] && export SCR_CONF_FILE=$FIXED_CONF
fi

launch=0
until grep -q '"event": "done"' "$log" 2>/dev/null || [ "$launch" -ge "$MAX_LAUNCHES" ]; do
  launch=$((launch + 1))
  printf '{"event": "launch", "launch": %d, "wall_s": %s}\n' "$launch" "$(date +%s.%N)" >> "$log"
  SCR_RUNS=1 scr_run srun --mpi=pmi2 --kill-on-bad-exit=1 -o "$SCR_PREFIX/launch-$launch.%t.out" \
    python "$here/train.py" --log "$log" --job "bench-$job" $TRAIN_ARGS
done
printf '{"event": "end", "wall_s": %s}\n' "$(date +%s.%N)" >> "$log"

if [ "$LOOP" = 1 ]; then
  srun -N 1 -n 1 --relative=0 --overlap scrtune status --format json > "$SCR_PREFIX/status.json"
  srun -N 1 -n 1 --relative=0 --overlap scrtune status > "$SCR_PREFIX/status.txt"
  stop_step() {
    local step
    step=$(squeue -h -s -j "$job" -o '%i %j' | awk -v n="$1" '$2 == n {print $1}')
    [ -n "$step" ] && scancel --signal=USR1 "$step"
    wait "$2"
  }
  stop_step scrtune-forward "$forwarders"
  stop_step scrtune-daemon "$daemons"
  cat "$SCR_PREFIX"/goodput-*.jsonl > "$SCR_PREFIX/goodput.jsonl" 2>/dev/null
  scrtune goodput --log "$SCR_PREFIX/goodput.jsonl" --job "bench-$job" --format json \
    > "$SCR_PREFIX/goodput.json"
fi
echo "closed_loop_job: $launch launch(es)"
