#!/bin/sh
# TaskProlog (slurm.conf: TaskProlog=/etc/slurm/hpc-taskprolog.sh): runs as
# the job's user on each node before the job's first task. Starts the probe
# for the job once per node; its files go to a spool folder per user (0700).
# Admin mode: no user needs to change a script. Lines printed as
# "export NAME=VALUE" enter the task's environment.
set -eu
spool_root=/var/spool/hpc-sizer          # root-owned, 0755, on local or shared storage
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
[ "${SLURM_STEP_ID:-}" = batch ] || [ "${SLURM_STEP_ID:-}" = 0 ] || exit 0
spool="$spool_root/$(id -un)"
umask 077
mkdir -p "$spool" && chmod 700 "$spool"
echo "export HPC_SIZER_SPOOL=$spool"
HPC_SIZER_SPOOL=$spool SLURM_JOB_NUM_NODES=1 hpc-monitor start >/dev/null 2>&1 || :
