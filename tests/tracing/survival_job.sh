#!/bin/bash
# A redundancy survival case on the fake Slurm (tests/test_real_scr_survival.py): write COUNT
# checkpoints, end without SCR_Finalize, wait until the test has wiped a node's /dev/shm (SCR's
# cache and control directory there), then restore in a new step of the same allocation.
# usage: survival_job.sh DIR COUNT APP   (DIR holds `strings`; APP is survival_app.py, named
# here since sbatch runs a copy of this script from its spool; the working directory is the
# prefix)
set -eu
dir=$1 count=$2 app=$3
srun --mpi=pmi2 python "$app" write "$count" --out "$dir/out" --strings "$dir/strings"
touch "$dir/written"
while [ ! -e "$dir/lost" ]; do sleep 0.1; done
srun --mpi=pmi2 python "$app" restore --out "$dir/out" --strings "$dir/strings"
