#!/bin/sh
# Benchmark of hpc-probe: CPU per sample and per watched process against a
# floor loop that only reads the same /proc files, peak RSS; the job-cgroup
# path (issue 22: 1, 64 and 512 processes moved into a job cgroup made for
# the run, as root, removed afterwards) beside the per-process path on the
# same processes; and a churn
# soak (processes starting and exiting hundreds of times a second), and
# the procfs crate against the probe's own /proc parsers
# (crates/hpc-probe/benches/procfs.rs), the cost of the GPU reads per
# sample (crates/hpc-probe/benches/gpu.rs), and as root the cost in a real
# job of the test cluster (tests/slurm/probe_cost.sh).
#
#   bash bench/probe-bench.sh [SAMPLES] [COUNTS...]
#
# HPC_PROBE_CHURN_SECS sets the soak length (default 30; 0 skips it).
set -eu

cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=target}"
export CARGO_TARGET_DIR

cargo build --release -p hpc-probe --bin hpc-probe --example probe_bench
"$CARGO_TARGET_DIR/release/examples/probe_bench" "$@"
cargo bench -p hpc-probe --bench procfs
cargo bench -p hpc-probe --bench gpu

# The real-job mode (issue 31): the cost in a job of the test cluster, with
# 1, 64 and 512 processes, under jobacct_gather/linux and /cgroup, beside the
# per-process path (root, apt; HPC_PROBE_REAL_JOB=0 skips it).
if [ "${HPC_PROBE_REAL_JOB:-1}" = 1 ] && [ "$(id -u)" = 0 ]; then
    echo "real job: the probe's CPU per sample in a job of the test cluster"
    bash tests/slurm/probe_cost.sh | grep -e '^# jobacct' -e 'ok - '
fi

secs="${HPC_PROBE_CHURN_SECS:-30}"
if [ "$secs" -gt 0 ]; then
    echo "churn soak: ${secs} s of short-lived processes under the probe"
    HPC_PROBE_CHURN_SECS="$secs" cargo test --release -p hpc-probe --test cli \
        churn_gives_samples_without_errors_or_gaps -- --nocapture
fi
