# shellcheck shell=bash
# tests/slurm/guard.sh: sourced by run.sh. What the machine's own SLURM looks
# like to the harness, and whether the harness left it alone.
#
#   guard_snapshot FILE   checksums and modes of the files under /etc/slurm,
#                         /etc/munge and /etc/mysql, /etc/hosts, the entries of
#                         /var/lib/mysql, and the running slurm/munge/mysql
#                         processes (pid and name)
#   guard_plant_decoys    a decoy /etc/slurm/slurm.conf (another cluster, the
#                         standard ports) and an acct_gather.conf with HDF5
#                         profile options, each only where no such file is
#                         (a file the machine has is never replaced)
#   guard_start_fakes     processes named slurmctld, slurmdbd, munged and
#                         mariadbd, standing for daemons of the machine's own
#   guard_start_fake NAME one such process (its pid in $guard_last_fake)
#   guard_cleanup         stop the fakes and remove the decoys (idempotent;
#                         run.sh calls it from its EXIT trap too)
#
# Needs $work (a private folder of run.sh).

guard_decoys=()
guard_made_etc_slurm=0
guard_fakes=()
guard_last_fake=""

guard_snapshot() {
    local d
    {
        for d in /etc/slurm /etc/munge /etc/mysql; do
            [ -e "$d" ] || continue
            find "$d" -printf '%p %y %m %u:%g\n' | sort
            find "$d" -type f -exec sha256sum {} + | sort -k 2
        done
        sha256sum /etc/hosts
        [ -d /var/lib/mysql ] && find /var/lib/mysql -maxdepth 1 -printf '%p %y\n' | sort
        echo "processes:"
        # Running ones only: a zombie is a process that already ended.
        ps -eo pid=,stat=,comm= |
            awk '$2 !~ /^[ZX]/ && $3 ~ /slurm|munge|mysql|maria/ { print $1, $3 }' | sort -n
    } >"$1" 2>&1
}

# guard_plant <file> <text>: write the decoy unless the file exists.
guard_plant() {
    [ -e "$1" ] && return 0
    printf '%s\n' "$2" >"$1" && guard_decoys+=("$1")
}

guard_plant_decoys() {
    if [ ! -d /etc/slurm ]; then
        mkdir /etc/slurm || return 1
        guard_made_etc_slurm=1
    fi
    guard_plant /etc/slurm/slurm.conf "# decoy planted by hpc-sizer tests/slurm/run.sh: must not be read
ClusterName=decoy
SlurmctldHost=decoy-controller-that-does-not-exist
AuthType=auth/munge
SlurmctldPort=6817
SlurmdPort=6818
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=decoy-controller-that-does-not-exist
AccountingStoragePort=6819
AcctGatherProfileType=acct_gather_profile/hdf5
NodeName=decoy-node CPUs=1
PartitionName=decoy Nodes=decoy-node Default=YES" &&
        guard_plant /etc/slurm/acct_gather.conf "# decoy planted by hpc-sizer tests/slurm/run.sh: must not be read
ProfileHDF5Dir=/nonexistent
ProfileHDF5Default=All"
}

guard_start_fake() {
    mkdir -p "${work:?}/fake"
    cp "$(command -v sleep)" "$work/fake/$1" || return 1
    "$work/fake/$1" 3600 </dev/null >/dev/null 2>&1 &
    guard_last_fake=$!
    guard_fakes+=("$guard_last_fake")
}

guard_start_fakes() {
    local d
    for d in slurmctld slurmdbd munged mariadbd; do
        guard_start_fake "$d" || return 1
    done
}

# guard_stop_fake <pid>: one of ours, by its pid.
guard_stop_fake() {
    kill "$1" 2>/dev/null && wait "$1" 2>/dev/null
    local keep=() p
    for p in "${guard_fakes[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    guard_fakes=("${keep[@]}")
}

guard_cleanup() {
    local p f
    for p in "${guard_fakes[@]}"; do
        guard_stop_fake "$p"
    done
    for f in "${guard_decoys[@]}"; do
        rm -f "$f"
    done
    guard_decoys=()
    if [ "$guard_made_etc_slurm" = 1 ]; then
        rmdir /etc/slurm 2>/dev/null
        guard_made_etc_slurm=0
    fi
}
