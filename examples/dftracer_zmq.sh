#!/bin/bash
# Run one application traced by DFTracer's ZeroMQ writer into this node's scrtune daemon, with
# `scrtune relay` bound at the writer's endpoint for the application's whole life: the writer
# hangs its application in exit while nothing is bound there (README: "Files and forward, or
# DFTracer's ZeroMQ writer"). The daemon is found as every client finds it ($SCRTUNE_DIR, else
# the job's default directory); it may be away, restarting or paused meanwhile.
#
# usage: dftracer_zmq.sh APP [ARGS...]
#   DFTRACER_PRELOAD    the writer's libdftracer_preload.so, for a program traced by
#                       LD_PRELOAD (unset for a Python program using the writer's module)
#   DFTRACER_DATA_DIR   what to trace (the checkpoint directory), as for any DFTracer run
# Exit: the application's.
set -u
endpoint="ipc://${TMPDIR:-/tmp}/scrtune-dft-$$.sock"
scrtune relay "$endpoint" &
relay=$!
for _ in $(seq 300); do  # bound before the application starts, or it is not run at all
  [ -S "${endpoint#ipc://}" ] && break
  kill -0 "$relay" 2> /dev/null || { echo "dftracer_zmq.sh: scrtune relay failed" >&2; exit 2; }
  sleep 0.1
done
[ -S "${endpoint#ipc://}" ] || { echo "dftracer_zmq.sh: relay not bound in 30 s" >&2; exit 2; }
env DFTRACER_ZMQ_ENDPOINT="$endpoint" \
    DFTRACER_WRITE_BUFFER_SIZE="${DFTRACER_WRITE_BUFFER_SIZE:-65536}" \
    DFTRACER_ENABLE=1 DFTRACER_INC_METADATA=1 \
    ${DFTRACER_PRELOAD:+DFTRACER_INIT=PRELOAD LD_PRELOAD="$DFTRACER_PRELOAD"} "$@"
status=$?
kill -TERM "$relay"  # it gives the daemon 2 s to take what it holds, then says what it relayed
wait "$relay"
exit $status
