#!/bin/sh
# TaskProlog (slurm.conf: TaskProlog=/etc/slurm/hpc-taskprolog.sh): runs as
# the job's user on each node before the job's first task. Starts the probe
# for the job once per node; its files go to a spool folder per user (0700).
# On the batch host it also reads the job's script as sbatch read it
# (hpc-model plan, the same reading as hpc submit) and spools its analysis
# record under the job's id, so the store knows the job's tool and inputs.
# Admin mode: no user needs to change a script. Lines printed as
# "export NAME=VALUE" enter the task's environment.
set -eu
spool_root=${HPC_SIZER_SPOOL_ROOT:-/var/spool/hpc-sizer}   # root-owned, mode 1777 (each user makes a private folder in it), local or shared
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
# The batch step's TaskProlog has no SLURM_STEP_ID (SLURM 22.05); step 0
# reaches the other nodes.
case ${SLURM_STEP_ID:-batch} in
    batch | 0) ;;
    *) exit 0 ;;
esac
spool="$spool_root/$(id -un)"
umask 077
mkdir -p "$spool" 2>/dev/null || :
# In a 1777 root another user may have made this name first (a folder of
# theirs, or a link): nothing of this job goes there. "print" lines reach
# the job's output.
if [ -L "$spool" ] || [ ! -d "$spool" ] || [ ! -O "$spool" ]; then
    echo "print hpc-sizer: $spool is not a folder of your own (another user made it, or it is a link): this job is not probed; ask your admin to remove it"
    exit 0
fi
chmod 700 "$spool"
echo "export HPC_SIZER_SPOOL=$spool"
# A session of its own: slurmstepd kills the TaskProlog's process group
# when it returns. A probe already running on this node (the batch step's,
# for step 0) makes this start a no-op.
HPC_SIZER_SPOOL=$spool SLURM_JOB_NUM_NODES=1 setsid -w hpc-monitor start >/dev/null 2>&1 || :
[ "${SLURM_STEP_ID:-batch}" = batch ] || exit 0
tmp=$(mktemp -d) || exit 0
if scontrol write batch_script "$SLURM_JOB_ID" "$tmp/script" >/dev/null 2>&1 &&
    hpc-model plan "$tmp/script" --no-recommend --analysis "$tmp/analysis" >/dev/null 2>&1; then
    hpc-model spool "$tmp/analysis" --job-id "$SLURM_JOB_ID" --spool "$spool" >/dev/null 2>&1 || :
fi
rm -rf "$tmp"
exit 0
