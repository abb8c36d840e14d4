#!/usr/bin/env bash
# tests/slurm/probe_cost.sh: the probe's cost in a real job (issue 31), on
# the test cluster of harness.sh, under each accounting setting
# (jobacct_gather/linux, then jobacct_gather/cgroup). In one batch job with
# 1, 64 and 512 processes (sleeps the script starts), the probe runs twice
# for SAMPLES samples (default 200) at --interval 0.05 with --no-perf: once
# on the job (--job: its cgroup, where on this cluster's cgroup v1 only the
# memory controller holds the job) and once on the script's processes
# one by one (--pid, the per-process path), each under /usr/bin/time.
# Prints the CPU per sample of each beside the other, and checks that the
# job path at 512 processes costs at most 3x what it costs at 1 and at most
# 2 ms a sample (with the release build). bench/probe-bench.sh runs it as
# its real-job mode.
#
# Prints `ok - ...` / `not ok - ...` per check and `N passed, M failed`;
# exits 1 when a check failed, 77 when the harness cannot run here, and
# brings the cluster down at the end unless KEEP_SLURM=1.
#
# Environment: CARGO_TARGET_DIR (default ~/.cache/hpc-sizer/target), SAMPLES,
# KEEP_SLURM=1, and the HPC_SLURM_* settings of harness.sh.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/slurm/common.sh
. "$here/common.sh"

samples=${SAMPLES:-200}
work=$(mktemp -d /tmp/hpc-sizer-cost.XXXXXX)
chmod 755 "$work"
jobs=()
finish() {
    trap - EXIT
    [ ${#jobs[@]} -eq 0 ] || timeout 30 scancel "${jobs[@]}" >/dev/null 2>&1
    unset HPC_SLURM_JOBACCT
    cluster_down
    # The next scripts find the cluster as they expect it (linux).
    report_and_exit
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
(cd "$root" && cargo build -q --release -p hpc-probe) >&2
probe=$CARGO_TARGET_DIR/release/hpc-probe
[ -x /usr/bin/time ] || { apt-get install -y -qq time >/dev/null 2>&1 || :; }

cat >"$work/cost.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=probe-cost
#SBATCH --mem=2G --cpus-per-task=1 --time=00:10:00
# N sleeping processes, then the probe on the job and on the script's tree.
n=\$1 out=\$2
for _ in \$(seq "\$n"); do sleep 300 & done
sleep 1
run() { /usr/bin/time -f '%U %S' -o "\$out.\$1.time" "$probe" "\${@:2}" --interval 0.05 --max-interval 0.05 \
    --samples $samples --no-perf -o "\$out.\$1.ndjson"; }
run job --job "\$SLURM_JOB_ID"
run pid --pid \$\$
kill \$(jobs -p) 2>/dev/null
wait
EOF

# ms a sample of a run: its user + system CPU over the samples it wrote.
per_sample() {
    awk -v f="$1.time" -v n="$(grep -c '"kind":"sample"' "$1.ndjson" 2>/dev/null)" \
        'NR == 1 { if (n > 0) printf "%.3f", ($1 + $2) * 1000 / n; else print "nan" }' "$1.time"
}

for acct in linux cgroup; do
    export HPC_SLURM_JOBACCT=$acct
    cluster_up
    for n in 1 64 512; do
        out=$work/$acct-$n
        res=$(sbatch --parsable --wait -o "$out.log" "$work/cost.sbatch" "$n" "$out" 2>&1)
        check "jobacct_gather/$acct: the job with $n processes ran ($res)" [ -s "$out.job.time" ]
        job[n]=$(per_sample "$out.job")
        pid[n]=$(per_sample "$out.pid")
        src=$(grep -o '"cpu_user_s":"[^"]*"' "$out.job.ndjson" | head -n 1)
        echo "# jobacct_gather/$acct, $n processes: job path ${job[$n]} ms a sample ($src), per-process path ${pid[$n]} ms"
    done
    check "jobacct_gather/$acct: at 512 processes the job path costs at most 3x its cost at 1 (${job[512]} against ${job[1]} ms)" \
        awk -v a="${job[512]}" -v b="${job[1]}" 'BEGIN { exit !(a <= 3 * b) }'
    check "jobacct_gather/$acct: ... and at most 2 ms a sample (${job[512]} ms)" \
        awk -v a="${job[512]}" 'BEGIN { exit !(a <= 2) }'
    check "jobacct_gather/$acct: ... where the per-process path costs more (${pid[512]} ms)" \
        awk -v a="${job[512]}" -v b="${pid[512]}" 'BEGIN { exit !(a < b) }'
done
