#!/bin/sh
# Epilog (slurm.conf: Epilog=/etc/slurm/hpc-epilog.sh): runs as root on each
# node when the job ends, however it ends (completed, failed, cancelled,
# out of time). Stops this node's probe (hpc-monitor stop: the node's own
# pids file); the last node to stop finalizes the job, as its user, into the
# user's spool folder (incoming/), where the single loader (loader.sh) picks
# it up. A node whose Epilog never ran (it rebooted) leaves its files to
# hpc-harvest, which finalizes them after a grace period. The spool root
# must be shared by the nodes (each node's Epilog sees the others' pids
# files); on a spool local to each node, each node would finalize its own
# file as the whole job. Never fails the node. The tools must be on the
# PATH this script gets (/usr/local/bin).
spool_root=${HPC_SIZER_SPOOL_ROOT:-/var/spool/hpc-sizer}
PATH=${PATH:-/usr/local/bin:/usr/bin:/bin}
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_USER:-}" ] && [ -n "${SLURM_JOB_UID:-}" ] || exit 0
SLURM_JOB_GID=${SLURM_JOB_GID:-$(id -g "$SLURM_JOB_USER")}
spool="$spool_root/$SLURM_JOB_USER"
dir="$spool/$SLURM_JOB_ID"
[ -d "$dir" ] || exit 0
# As the user too: the pids file is in the user's folder, and root would
# signal whatever pid the user wrote there.
HPC_SIZER_SPOOL=$spool setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" --clear-groups \
    hpc-monitor stop >/dev/null 2>&1
# A probe of another node still runs: that node's Epilog finalizes.
for p in "$dir"/.monitor.*.pids; do
    [ -e "$p" ] && exit 0
done
# The finalizer runs as the user, so that the files stay theirs (0600).
HPC_SIZER_SPOOL=$spool setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" --clear-groups \
    hpc-finalize "$SLURM_JOB_ID" >/dev/null 2>&1 || :
exit 0
