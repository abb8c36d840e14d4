#!/usr/bin/env bash
# The probe's cgroup path under jobacct_gather/cgroup: the job of 200
# short-lived children and a steady 500 MB process (multinode.sh runs it
# under jobacct_gather/linux, against sacct) agrees with sacct's MaxRSS and
# with the per-process path's CPU time within 10 % here too. sacct's
# TotalCPU under this gatherer is not the measure: seen here, 24.7 s where
# both of the probe's paths read 20.7 s, its UserCPU the processes' user
# time (14.3 s) and its SystemCPU the cgroup's system time (10.4 s), which
# split the same total differently (cpuacct.stat counts by ticks). It is
# printed with the rest. One node, cgroup v1 (exit 77 where the harness cannot give
# it); the cluster goes down after, so the next script's `up` writes its
# own configuration. Prints ok/not ok per check; exits 1 when one failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export HPC_TEST_NODES=1 HPC_SLURM_JOBACCT=cgroup
# shellcheck source=tests/slurm/common.sh
. "$here/common.sh"

flow_start churn
cd "$work" || exit 1
check "slurm.conf has JobAcctGatherType=jobacct_gather/cgroup" \
    grep -qx 'JobAcctGatherType=jobacct_gather/cgroup' "$SLURM_CONF"
write_work_py
churn_sbatch cg-churn
out=$(hpc submit --no-recommend -o "$work/churn-%j.out" churn.sbatch 2>churn.err)
id=$(submitted_id "$out")
[ -z "$id" ] || jobs+=("$id")
check "hpc submit churn.sbatch submits (job ${id:-none})" [ -n "$id" ]
check "the churn job ended" wait_gone 150 "${id:-0}"
harvest_and_dump
show "  sacct (step, TotalCPU, UserCPU, SystemCPU): " "$(sacct -n -P -o JobID,TotalCPU,UserCPU,SystemCPU -j "${id:-0}")"
churn_checks "${id:-0}" processes
