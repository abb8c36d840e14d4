#!/bin/sh
# merge-bench: times hpc-merge (release build) over NODES node files of
# SAMPLES samples each (default 64 x 86400, one day at 1 s), and again with
# half the samples over the same day, to show that peak memory follows the
# grid, not the number of samples; then times hpc-flags on the result.
# Generated data goes under $BENCH_DIR (default /tmp/hpc-merge-bench) and is
# removed at the end unless KEEP=1.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=${NODES:-64}
samples=${SAMPLES:-86400}
duration=${DURATION_S:-86400}
work=${BENCH_DIR:-/tmp/hpc-merge-bench}
cd "$root"
cargo build --release -q -p hpc-merge -p hpc-flags --bins --example gen_nodes
target=${CARGO_TARGET_DIR:-$root/target}/release
mkdir -p "$work"
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$work"' EXIT
fi

# peak_kb FILE: the "Maximum resident set size" that time -v wrote.
peak_kb() {
    sed -n 's/.*Maximum resident set size (kbytes): *//p' "$1"
}

# cpu_s FILE: user + system seconds that time -v wrote.
cpu_s() {
    u=$(sed -n 's/.*User time (seconds): *//p' "$1")
    s=$(sed -n 's/.*System time (seconds): *//p' "$1")
    echo "$u + $s" | bc -l
}

# now: the time in seconds, for wall-clock differences.
now() {
    date +%s.%N
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), CPUs: $(nproc)"
for n in $((samples / 2)) "$samples"; do
    dir=$work/nodes-$n
    if [ ! -d "$dir" ]; then
        "$target/examples/gen_nodes" "$dir" "$nodes" "$n" "$duration"
    fi
    total=$((nodes * n))
    bytes=$(du -sb "$dir" | cut -f1)
    t0=$(now)
    /usr/bin/time -v -o "$work/time-$n.txt" "$target/hpc-merge" "$dir" >"$work/merged-$n.ndjson"
    t1=$(now)
    secs=$(echo "$t1 - $t0" | bc -l)
    rate=$(echo "$total / $secs" | bc)
    mbps=$(echo "$bytes / 1048576 / $secs" | bc)
    out=$(grep -c '"kind":"sample"' "$work/merged-$n.ndjson")
    cpu=$(cpu_s "$work/time-$n.txt")
    per_cpu=$(echo "$total / $cpu" | bc)
    printf 'hpc-merge: %d nodes x %d samples = %d samples (%d MiB) in %.2f s: %d samples/s (%d MiB/s); %.2f CPU s, %d samples per CPU second; peak RSS %d KiB; %d output samples\n' \
        "$nodes" "$n" "$total" "$((bytes / 1048576))" "$secs" "$rate" "$mbps" "$cpu" "$per_cpu" "$(peak_kb "$work/time-$n.txt")" "$out"
done

merged=$work/merged-$samples.ndjson
t0=$(now)
/usr/bin/time -v -o "$work/time-flags.txt" "$target/hpc-flags" "$merged" >"$work/flagged.ndjson"
t1=$(now)
printf 'hpc-flags: %d lines in %.2f s (target < 1 s), peak RSS %d KiB, %d flags\n' \
    "$(wc -l <"$merged")" "$(echo "$t1 - $t0" | bc -l)" "$(peak_kb "$work/time-flags.txt")" \
    "$(grep -c '"kind":"flag"' "$work/flagged.ndjson" || true)"
