#!/usr/bin/env bash
# tests/slurm/pool.sh: `hpc-model pool` against the real SLURM of harness.sh.
#
# Brings the single-node test cluster up (its slurm.conf has GresTypes=gpu and
# AccountingStorageTRES=gres/gpu, so GPU limits can be set on a node without
# GPUs), makes two accounts whose QOS have GrpTRES limits (and a burst
# account), and checks that `hpc-model pool`, reading the real sacctmgr,
# scontrol and squeue, prints the slots the formulas give; that sleeping jobs
# submitted to the first account until it is full make `--next cpu` name the
# second, then none (exit 3) once the second is full too; and that cancelling
# them turns it back. The accounts, associations and QOS it made are removed
# and its jobs cancelled at the end, also on failure.
#
# Prints `ok - ...` / `not ok - ...` per check and a last line
# `N passed, M failed`; exits 1 when a check failed, 77 when the harness
# cannot run here (not root, no apt), and brings the cluster down at the end
# unless KEEP_SLURM=1.
#
# Environment: CARGO_TARGET_DIR (default ~/.cache/hpc-sizer/target; hpc-model
# is built there), KEEP_SLURM=1, and the HPC_SLURM_* settings of harness.sh.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/slurm/common.sh
. "$here/common.sh"

qa=hpcs-pool-qa
qb=hpcs-pool-qb
qx=hpcs-pool-qx
acct_a=hpcs-pool-one
acct_b=hpcs-pool-two
acct_x=hpcs-pool-three-b
cluster=${HPC_SLURM_CLUSTER:-hpcsizer}
work=$(mktemp -d /tmp/hpc-sizer-pool.XXXXXX)
jobs=()
made=0

# cleanup: our jobs, then the associations, accounts and QOS this made.
cleanup() {
    [ ${#jobs[@]} -gt 0 ] && timeout 30 scancel "${jobs[@]}" >/dev/null 2>&1
    jobs=()
    [ "$made" = 1 ] || return 0
    made=0
    timeout 30 sacctmgr -i delete user root account="$acct_a,$acct_b,$acct_x" >/dev/null 2>&1
    timeout 30 sacctmgr -i delete account "$acct_a,$acct_b,$acct_x" >/dev/null 2>&1
    timeout 30 sacctmgr -i delete qos "$qa,$qb,$qx" >/dev/null 2>&1
    local left
    left=$(timeout 30 sacctmgr -n -P show associations format=account 2>/dev/null | grep -c '^hpcs-pool-')
    check "the accounts and associations made are removed (${left:-?} left)" [ "${left:-1}" -eq 0 ]
    left=$(timeout 30 sacctmgr -n -P show qos format=name 2>/dev/null | grep -c '^hpcs-pool-')
    check "the QOS made are removed (${left:-?} left)" [ "${left:-1}" -eq 0 ]
}

finish() {
    trap - EXIT
    cleanup
    cluster_down
    report_and_exit
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

# ---------------------------------------------------------------- the cluster
cluster_up
check "slurm.conf has GresTypes=gpu and AccountingStorageTRES=gres/gpu" \
    grep -qx 'AccountingStorageTRES=gres/gpu' "$SLURM_CONF"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
(cd "$root" && cargo build -q -p hpc-model) >&2
bin=$CARGO_TARGET_DIR/debug/hpc-model
if [ ! -x "$bin" ]; then
    not_ok "binary $bin exists"
    exit 1
fi

# ---------------------------------------------------------------- the accounts
made=1
sacct_ok=1
for cmd in \
    "add qos $qa GrpTRES=cpu=4,mem=1000M,gres/gpu=1" \
    "add qos $qb GrpTRES=cpu=2,mem=1000M" \
    "add qos $qx GrpTRES=cpu=100,mem=100G" \
    "add account $acct_a Cluster=$cluster" \
    "add account $acct_b Cluster=$cluster" \
    "add account $acct_x Cluster=$cluster" \
    "add user root Account=$acct_a Cluster=$cluster QOS=$qa DefaultQOS=$qa" \
    "add user root Account=$acct_b Cluster=$cluster QOS=$qb DefaultQOS=$qb" \
    "add user root Account=$acct_x Cluster=$cluster QOS=$qx DefaultQOS=$qx"; do
    # shellcheck disable=SC2086 # the words of the command
    if ! out=$(timeout 30 sacctmgr -i $cmd 2>&1); then
        sacct_ok=0
        show "  " "sacctmgr $cmd: $out"
    fi
done
check "sacctmgr made the QOS (GrpTRES with gres/gpu), the accounts and the associations" [ "$sacct_ok" = 1 ]

gpu_job=cpus=1,mem=100M,gpus=1
cpu_job=cpus=1,mem=100M
pool() {
    "$bin" pool --user root --account "$acct_a" --account "$acct_b" --account "$acct_x" \
        --gpu-job "$gpu_job" --cpu-job "$cpu_job" "$@"
}

# hpcs-pool-one: capacity cpu 0.85 x 4 = 3.4, 1000M, 1 GPU: 1 GPU job
# (1 CPU, 100M), then min((3.4 - 1) / 1, 900 / 100) = 2 CPU jobs, bound by
# CPUs. hpcs-pool-two: no GPU limit, so 0 GPU jobs; floor(1.7) = 1 CPU job.
pool --format ndjson >"$work/pool.ndjson" 2>"$work/pool.err"
rc=$?
show "  " "$(cat "$work/pool.ndjson" "$work/pool.err")"
check "hpc-model pool reads the real sacctmgr, scontrol and squeue (exit $rc)" [ "$rc" -eq 0 ]
check "$acct_a: 1 GPU slot, 2 CPU slots, bound by cpu, limits from qos $qa" json_is "$work/pool.ndjson" \
    "r[0]['account'] == '$acct_a' and r[0]['qos'] == '$qa' and r[0]['partition'] == 'debug' and (r[0]['gpu_slots'], r[0]['cpu_slots'], r[0]['binding']) == (1, 2, 'cpu') and r[0]['limits'] == {'cpu': 4, 'mem_mb': 1000, 'gpus': 1} and r[0]['limit_from']['gpus'] == 'qos $qa GrpTRES'"
check "$acct_b: no GPU limit, so 0 GPU slots and 1 CPU slot" json_is "$work/pool.ndjson" \
    "r[1]['account'] == '$acct_b' and (r[1]['gpu_slots'], r[1]['cpu_slots']) == (0, 1)"
check "the burst account $acct_x is skipped; total 4 jobs, 4 free" json_is "$work/pool.ndjson" \
    "len(r) == 3 and r[2]['kind'] == 'pool_total' and r[2]['skipped'] == [{'account': '$acct_x', 'why': 'burst'}] and (r[2]['jobs'], r[2]['free_jobs']) == (4, 4)"

# next_cpu: $next, the account `--next cpu` names ("" when none), and its
# exit status $next_rc.
next_cpu() {
    pool --next cpu --format sbatch >"$work/next.out" 2>"$work/next.err"
    next_rc=$?
    next=$(sed -n 's/^--account=\([^ ]*\) .*/\1/p' "$work/next.out")
}
next_cpu
check "with nothing queued --next cpu names $acct_a (got ${next:-none}, exit $next_rc)" [ "$next" = "$acct_a" ]
out=$(pool --next cpu --format sbatch --time 1:00:00 2>&1)
check "--format sbatch gives its flags, the CPU job's time x 5 ($out)" \
    [ "$out" = "--account=$acct_a --partition=debug --qos=$qa --time=05:00:00" ]

# ---------------------------------------------------------------- filling the first account
submit() {
    local id
    id=$(cd "$work" && timeout 30 sbatch --parsable -A "$1" --qos="$2" -c 1 --mem=100M \
        -o /dev/null --wrap 'sleep 300' 2>>"$work/sbatch.err") || return 1
    jobs+=("${id%%;*}")
}
n=0
while [ "$n" -lt 6 ]; do
    submit "$acct_a" "$qa" || break
    n=$((n + 1))
    next_cpu
    [ "$next" = "$acct_a" ] || break
done
show "  " "$(cat "$work/sbatch.err" 2>/dev/null)"
check "after $n sleeping jobs in $acct_a (2 expected: the GPU slot stays reserved) --next cpu names $acct_b (got ${next:-none})" \
    test "$n" -eq 2 -a "$next" = "$acct_b"
pool --format ndjson >"$work/full.ndjson" 2>/dev/null
check "$acct_a shows the 2 jobs used and 0 CPU slots free" json_is "$work/full.ndjson" \
    "r[0]['used']['cpu'] == 2 and r[0]['used']['mem_mb'] == 200 and r[0]['free_cpu_slots'] == 0"

submit "$acct_b" "$qb"
next_cpu
check "with $acct_b full too (its one job, running or pending) --next cpu exits 3 (exit $next_rc) and names none" \
    test "$next_rc" -eq 3 -a -z "$next"
check "... and says which limits bind" grep -q "no account has a free cpu slot now: $acct_a: cpu (qos $qa GrpTRES" "$work/next.err"

# ---------------------------------------------------------------- cancelling
timeout 30 scancel "${jobs[@]}"
jobs=()
deadline=$((SECONDS + 60))
while :; do
    next_cpu
    [ "$next" = "$acct_a" ] || [ "$SECONDS" -ge "$deadline" ] && break
    sleep 1
done
check "after scancel --next cpu names $acct_a again (got ${next:-none})" [ "$next" = "$acct_a" ]

# ---------------------------------------------------------------- a failing sacctmgr
: >"$work/empty-slurm.conf"
out=$(SLURM_CONF=$work/empty-slurm.conf pool 2>&1 >"$work/fail.out")
rc=$?
show "  " "$out"
check "with sacctmgr failing (an empty slurm.conf) hpc-model pool exits 1 (exit $rc)" [ "$rc" -eq 1 ]
check "... names the command" grep -q 'sacctmgr show associations' <<<"$out"
check "... and prints no pool" [ ! -s "$work/fail.out" ]
