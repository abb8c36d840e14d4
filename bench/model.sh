#!/bin/sh
# hpc-model benches: the backtest's table per trace (MGnify, SAP builds,
# synthetic memory and time: policy, risk, under-share, MAQ, wastage,
# memtime) and its speed (jobs replayed per second; the 10,000-job synthetic
# replay, target < 2 s); the latency
# of `hpc-store dump` filtered to one user and tool piped into `hpc-model
# recommend`, with N jobs (default 1,000,000, each with its analysis record)
# in the database (target < 200 ms end to end); and, for contrast, recommend
# reading all N unfiltered on stdin.
# Usage: bench/model.sh [N]   (TRACES=/path/to/traces, default tests/data/traces)
# Also: WfCommons bwa and montage, the montage floor and step, synthetic
# traces of one shape of group (seed 1 in full; seeds 1-8 at 3000 and 5000
# jobs as the equal footing's three differences and the under-share observed
# at a stated 2, 5 and 10 %; one loose group alone beside the best one value
# for it in hindsight), and each real trace's three costliest groups
# alone (bench/one_tool.py); with SIZEY_DATA set, the Sizey paper's nf-core
# traces.
set -eu
cd "$(dirname "$0")/.."
N=${1:-1000000}
TRACES=${TRACES:-tests/data/traces}
TGT=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p hpc-model --example gen_trace
cargo build --release -q -p hpc-model
cargo build --release -q -p hpc-store --no-default-features
BIN="$TGT/release/hpc-model"
STORE="$TGT/release/hpc-store"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{ printf "%.3f", $2 - $1 }'; }

# Each table ends with the equal footing: ours against each baseline at its
# under-share, over the curve of risks 1-20 %.
CURVE=1,2,3,5,10,15,20
table() { echo "== $1"; shift; "$BIN" backtest --risks "$CURVE" "$@" 2>&1; echo; }
table "MGnify (memory)" --csv "$TRACES/mgnify_metaspades_3.15.3_jobs.csv" \
    --mgnify "$TRACES/mgnify_memory_heuristics.tsv"
table "MGnify (time, groups: lineage)" --csv "$TRACES/mgnify_metaspades_3.15.3_jobs.csv" \
    --group lineage --used wall_clock_seconds --order primary_accession --resource time
table "SAP builds (memory, no runtime: each build weighs 1)" --csv "$TRACES/sap_build_memory.csv" \
    --group group --used peak_mb --request request_mb --order order
for wf in makeflow_bwa pegasus_montage; do
    table "WfCommons $wf (memory, groups: process)" --csv "$TRACES/wfcommons_$wf.csv" \
        --group process --used used_mb --runtime runtime_s --order order
    table "WfCommons $wf (memory, groups: process, with input sizes)" --csv "$TRACES/wfcommons_$wf.csv" \
        --group process --used used_mb --runtime runtime_s --order order --input input_mb
done
for floor in 128:64 32:32 4:4; do
    table "WfCommons pegasus_montage, memory floor ${floor%:*} MiB and ${floor#*:} MiB steps (default 16 and 16)" \
        --csv "$TRACES/wfcommons_pegasus_montage.csv" --group process --used used_mb \
        --runtime runtime_s --order order --mem-floor "${floor%:*}" --mem-step "${floor#*:}"
done
for shape in ceiling tight drift single; do
    "$TGT/release/examples/gen_trace" 1 5000 "$shape" >"$TMP/$shape.csv"
    table "synthetic, one shape of group: $shape (seed 1, 5000 jobs)" --csv "$TMP/$shape.csv" \
        --group group --order id --used used_mb --request request_mb --runtime runtime_s --input input_mb
done
# Seeds 1-3 are the ones the sizer was tuned on; 4-8 were not.
echo "== synthetic shapes, seeds 1-8: ours minus each baseline's MAQ at its under-share (median p95x1.2 max),"
echo "   then the under-share observed at a stated 2, 5 and 10 %"
for jobs in 3000 5000; do
    for shape in ceiling tight drift single; do
        line='' calib=''
        for seed in 1 2 3 4 5 6 7 8; do
            "$TGT/release/examples/gen_trace" "$seed" "$jobs" "$shape" >"$TMP/seed.csv"
            "$BIN" backtest --risks "$CURVE" --csv "$TMP/seed.csv" --group group --order id \
                --used used_mb --request request_mb --runtime runtime_s --input input_mb >"$TMP/seed.out" 2>&1
            line="$line $(awk '/^equal footing/ { on = 1; next } on && NF { printf "%s%+.3f", sep, $7 - $4; sep = "/" }' "$TMP/seed.out")"
            calib="$calib $(awk '/^calibration/ { on = 1; next } on && !NF { exit }
                on && ($2 == "2.0%" || $2 == "5.0%" || $2 == "10.0%") { sub("%", "", $4); printf "%s%s", sep, $4; sep = "/" }' "$TMP/seed.out")"
        done
        printf '%-8s %5d jobs:%s\n' "$shape" "$jobs" "$line"
        printf '%-8s %5s at 2/5/10 %%:%s\n' '' '' "$calib"
    done
done
# One loose group alone is stationary: the best one value for all its jobs,
# known in hindsight, is the most any sizing of it at a share can be
# expected to reach, and p95 x 1.2 comes close to it.
echo "== one loose group alone (single), seeds 1-8: p95x1.2's MAQ at its misses, the best one value"
echo "   at as many misses in hindsight (bench/oracle.py --alone), that best value at the misses of our"
echo "   two curve points around them interpolated (what the equal footing would credit a curve of"
echo "   hindsight-best points with), ours at its under-share"
for jobs in 3000 5000; do
    line=''
    for seed in 1 2 3 4 5 6 7 8; do
        "$TGT/release/examples/gen_trace" "$seed" "$jobs" single >"$TMP/seed.csv"
        "$BIN" backtest --risks "$CURVE" --csv "$TMP/seed.csv" --group group --order id \
            --used used_mb --request request_mb --runtime runtime_s --input input_mb >"$TMP/seed.out" 2>&1
        k=$(awk '$1 == "p95x1.2" && $2 == "-" { gsub("_", "", $3); printf "%.0f", $6 * ($3 - $4) / 100 }' "$TMP/seed.out")
        # Our curve's points around k misses (the nearest at or below, at or above).
        around=$(awk -v k="$k" '$1 == "ours" && $2 !~ /%/ { gsub("_", "", $3); m = sprintf("%.0f", $6 * ($3 - $4) / 100) + 0
            if (m <= k && (lo == "" || m > lo)) lo = m; if (m >= k && (hi == "" || m < hi)) hi = m }
            END { print (lo == "" ? hi : lo), (hi == "" ? lo : hi) }' "$TMP/seed.out")
        # shellcheck disable=SC2086 # two numbers
        best=$(python3 bench/oracle.py --alone "$TMP/seed.csv" "$k" $around | awk '{ print $2 "/" $3 }')
        line="$line $(awk -v best="$best" '/^equal footing/ { on = 1; next } on && $1 == "p95x1.2" { printf "%s/%s/%s", $4, best, $7 }' "$TMP/seed.out")"
    done
    printf 'single   %5d jobs:%s\n' "$jobs" "$line"
done
echo
echo "== one tool's history: each real trace's three costliest groups replayed alone"
python3 bench/one_tool.py "$BIN" "$TRACES"
echo
# The Sizey paper's six nf-core workflow traces (github.com/dos-group/sizey,
# data/trace_*.csv), when SIZEY_DATA names that folder: not bundled, as that
# repository gives no licence. Failed tasks ('-' peaks) are refused by line.
for f in ${SIZEY_DATA:+"$SIZEY_DATA"/trace_*.csv}; do
    table "nf-core $(basename "$f" .csv) (memory, groups: process)" --csv "$f" \
        --group process --used peak_rss --request memory --mem-unit b --runtime realtime \
        --runtime-unit ms --order submit --input rchar
done
"$TGT/release/examples/gen_trace" 7 10000 >"$TMP/synth.csv"
syn="--csv $TMP/synth.csv --group group --order id"
# shellcheck disable=SC2086
table "synthetic, seed 7 (memory, input size)" $syn --used used_mb --request request_mb \
    --runtime runtime_s --input input_mb
# shellcheck disable=SC2086
table "synthetic, seed 7, memory floor 128 MiB and 64 MiB steps (the old defaults)" $syn --used used_mb \
    --request request_mb --runtime runtime_s --input input_mb --mem-floor 128 --mem-step 64
# shellcheck disable=SC2086
table "synthetic, seed 7 (time)" $syn --resource time --used runtime_s --request limit_s
"$TGT/release/examples/gen_trace" 7 10000 nextflow >"$TMP/trace.txt"
table "synthetic, seed 7, as a Nextflow trace (memory)" --nextflow "$TMP/trace.txt"
table "synthetic, seed 7, as a Nextflow trace (time)" --nextflow "$TMP/trace.txt" --resource time
t0=$(now)
for _ in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    "$BIN" backtest $syn --used used_mb --request request_mb --runtime runtime_s \
        --input input_mb --format ndjson >/dev/null 2>&1
done
t1=$(now)
echo "backtest of 10000 synthetic jobs (5 risks + 4 baselines): $(secs "$t0" "$t1" | awk '{ printf "%.3f s a run, %.0f jobs/s", $1 / 5, 50000 / $1 }') (target < 2 s)"

# N jobs of 20 users and 5 tools, each with its analysis record.
awk -v n="$N" -f bench/history.awk > "$TMP/history.ndjson"
printf '%s\n' '{"kind":"analysis","user":"u3","script":"a.sbatch","script_sha256":"00","request":{"mem_mb":65536,"cpus":8,"time_s":7200},"tool":"tool2","input_mb":100}' > "$TMP/a.ndjson"
"$STORE" --db "$TMP/h.db" put "$TMP/history.ndjson" 2>/dev/null
best=
for _ in 1 2 3 4 5; do
    t0=$(now)
    "$STORE" --db "$TMP/h.db" dump --kind job,summary,analysis --user u3 --tool tool2 --limit 200 |
        "$BIN" recommend "$TMP/a.ndjson" --history - --format text >"$TMP/rec-db.txt"
    t1=$(now)
    t=$(secs "$t0" "$t1")
    best=$(echo "${best:-$t} $t" | awk '{ print ($2 < $1) ? $2 : $1 }')
done
echo "dump --user --tool --limit 200 | recommend, $N jobs in the database: $best s (best of 5; target 0.200)"
cat "$TMP/rec-db.txt"
size=$(wc -c < "$TMP/history.ndjson")
t0=$(now)
"$BIN" recommend "$TMP/a.ndjson" --history /dev/stdin < "$TMP/history.ndjson" >"$TMP/rec.txt"
t1=$(now)
echo "recommend with $N job records (+ $N analysis records, $size bytes) on stdin: $(secs "$t0" "$t1") s"
head -n 2000 "$TMP/history.ndjson" > "$TMP/small.ndjson"
t0=$(now)
"$BIN" recommend "$TMP/a.ndjson" --history /dev/stdin < "$TMP/small.ndjson" >/dev/null
t1=$(now)
echo "recommend with 1000 job records (what a dump filtered to one user and tool would give): $(secs "$t0" "$t1") s"
cat "$TMP/rec.txt"
