#!/bin/sh
# The single loader (cron on one host, e.g. */15): the accounting history of
# every user with sacct -a, then every user's spool folder, into one
# database on local disk (SQLite must not be written over NFS or Lustre
# from several hosts). One writer: a lock keeps a second run out.
set -eu
spool_root=/var/spool/hpc-sizer
export HPC_SIZER_DB=/var/lib/hpc-sizer/hpc-sizer.db
exec 9>/var/lib/hpc-sizer/loader.lock
flock -n 9 || exit 0
status=0
hpc-harvest || status=1
for d in "$spool_root"/*/incoming; do
    [ -d "$d" ] || continue
    hpc-store put --spool "$d" || status=1
done
exit "$status"
