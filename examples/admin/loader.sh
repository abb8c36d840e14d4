#!/bin/sh
# The single loader (cron on one host, e.g. */15): the accounting history of
# every user with sacct -a, then every user's spool folder (the node files
# of jobs whose Epilog never ran are finalized after a grace period), into
# one database on local disk (SQLite must not be written over NFS or Lustre
# from several hosts). One writer: a lock keeps a second run out.
# What it trusts (man hpc-store, put --spool): sacct, read first; from each
# user's folder only records of that user's own jobs as sacct knows them
# (another user's job, or one sacct does not know after a day, is rejected
# and reported), never a job record over sacct's; files and folders are
# reached as their owner, never through a link.
set -eu
spool_root=${HPC_SIZER_SPOOL_ROOT:-/var/spool/hpc-sizer}
export HPC_SIZER_DB="${HPC_SIZER_DB:-/var/lib/hpc-sizer/hpc-sizer.db}"
# The lock is root's alone (0600): a user who could open it could hold it
# and stop every load. A run still going after HPC_LOADER_WAIT seconds
# (default 600) is reported, not waited for in silence.
lock="$(dirname "$HPC_SIZER_DB")/loader.lock"
umask 077
exec 9>"$lock"
chmod 600 "$lock"
if ! flock -w "${HPC_LOADER_WAIT:-600}" 9; then
    echo "loader.sh: $lock has been held for over ${HPC_LOADER_WAIT:-600} s by another loader; this run loads nothing" >&2
    exit 1
fi
set --
for d in "$spool_root"/*/; do
    [ -d "$d" ] && set -- "$@" --spool "${d%/}"
done
exec hpc-harvest "$@"
