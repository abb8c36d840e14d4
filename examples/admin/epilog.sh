#!/bin/sh
# Epilog (slurm.conf: Epilog=/etc/slurm/hpc-epilog.sh): runs as root on each
# node when the job ends. Stops the job's probes and, on the batch host,
# finalizes the job into its user's spool folder (incoming/), where the
# single loader (loader.sh) picks it up. Never fails the node.
spool_root=/var/spool/hpc-sizer
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_USER:-}" ] || exit 0
spool="$spool_root/$SLURM_JOB_USER"
[ -d "$spool/$SLURM_JOB_ID" ] || exit 0
HPC_SIZER_SPOOL=$spool hpc-monitor stop >/dev/null 2>&1
# The finalizer runs as the user, so that the files stay theirs (0600).
su -s /bin/sh "$SLURM_JOB_USER" -c "HPC_SIZER_SPOOL='$spool' hpc-finalize '$SLURM_JOB_ID'" >/dev/null 2>&1 || :
exit 0
