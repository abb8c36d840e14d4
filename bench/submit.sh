#!/bin/sh
# hpc submit's planning cost against the size of the user's history (issue
# 29, item 13): what `hpc submit` runs before sbatch, as bin-wrappers/hpc
# runs it: `hpc-model analyze` for the script's tool, the dump of the user's
# latest 2000 jobs of that tool (hpc-store dump --user --tool --limit) and
# `hpc-model plan` over it, with 1,000 and N (default 1,000,000)
# jobs of 20 users and 5 tools in the database. Prints the best of 5 runs
# of each, and the plan's peak memory (goal: under 0.2 s at 1M).
# Usage: bench/submit.sh [N]
set -eu
cd "$(dirname "$0")/.."
N=${1:-1000000}
TGT=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p hpc-model
cargo build --release -q -p hpc-store --no-default-features
MODEL="$TGT/release/hpc-model"
STORE="$TGT/release/hpc-store"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
printf '#!/bin/bash\n#SBATCH --mem=64G -c 8 --time=2:00:00\nsamtools sort in.bam\n' >"$TMP/job.sbatch"
for n in 1000 "$N"; do
    awk -v n="$n" -v tool2=samtools -v cpus=8 -v req_mb=65536 -f bench/history.awk >"$TMP/history.ndjson"
    rm -f "$TMP/h.db"
    "$STORE" --db "$TMP/h.db" put "$TMP/history.ndjson" 2>/dev/null
    best=
    for _ in 1 2 3 4 5; do
        t0=$(now)
        tool=$("$MODEL" analyze "$TMP/job.sbatch" | sed -n 's/.*"tool":"\([^"\\]*\)".*/\1/p')
        "$STORE" --db "$TMP/h.db" dump --kind job,summary,other --user u3 --tool "$tool" --limit 2000 >"$TMP/hist"
        USER=u3 "$MODEL" plan "$TMP/job.sbatch" --history "$TMP/hist" --options "$TMP/opts" 2>/dev/null >"$TMP/plan.txt"
        t1=$(now)
        t=$(echo "$t0 $t1" | awk '{ printf "%.3f", $2 - $1 }')
        best=$(echo "${best:-$t} $t" | awk '{ print ($2 < $1) ? $2 : $1 }')
    done
    mem=$( { USER=u3 /usr/bin/time -f %M "$MODEL" plan "$TMP/job.sbatch" --history "$TMP/hist" >/dev/null; } 2>&1 | tail -n 1)
    echo "$n jobs in the database: analyze + dump of the tool's latest 2000 + plan $best s (best of 5; goal 0.2 s), plan peak RSS ${mem} KiB; options: $(tr '\n' ' ' <"$TMP/opts")"
done
