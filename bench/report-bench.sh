#!/usr/bin/env bash
# Benchmark of hpc-store's reports: SQLite against the Parquet dataset, and
# the size of the release binaries.
#
#   bash bench/report-bench.sh [JOBS]          (default 1000000 jobs)
#
# Environment:
#   RUNS   timed runs of each report, fastest kept (3; the first also warms
#          the page cache)
#   SEED   generator seed (42)
#
# Steps: build the release binaries (each tool on its own, as it would be
# installed, so no tool's size includes features another one turns on);
# generate JOBS jobs of sacct --parsable2 text (gen_sacct) and ingest them
# into a fresh SQLite file in a temporary directory; time `report --by user`
# over SQLite, `export --parquet`, and `report --by user --parquet`, checking
# that both reports print the same CSV; print the binary sizes and how many
# polars crates each small tool's dependency tree holds. The temporary
# directory is removed on exit.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

JOBS=${1:-1000000}
RUNS=${RUNS:-3}
SEED=${SEED:-42}
FIRST_ID=1000000
SMALL=(hpc-ingest hpc-probe hpc-merge hpc-flags)

: "${CARGO_TARGET_DIR:=$ROOT/target}"
export CARGO_TARGET_DIR
REL=$CARGO_TARGET_DIR/release
GEN=$REL/examples/gen_sacct
STORE=$REL/hpc-store

tmp=$(mktemp -d "${TMPDIR:-/tmp}/report-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
DB=$tmp/jobs.db
DS=$tmp/parquet

say() { printf '%s\n' "$*"; }
warn() { printf 'report-bench: %s\n' "$*" >&2; }

USE_GNU_TIME=0
if /usr/bin/time -f '%M' -o /dev/null true >/dev/null 2>&1; then USE_GNU_TIME=1; fi

# timed OUT CMD...: runs CMD with stdout to OUT and stderr to $tmp/err; sets
# T_SECS (wall seconds) and T_RSS_KB (peak RSS, 0 without GNU time); exits
# the script if CMD fails.
timed() {
    local out=$1 t0 t1 rc=0
    shift
    t0=$(date +%s%N)
    if ((USE_GNU_TIME)); then
        /usr/bin/time -f '%M' -o "$tmp/rss" "$@" >"$out" 2>"$tmp/err" || rc=$?
    else
        echo 0 >"$tmp/rss"
        "$@" >"$out" 2>"$tmp/err" || rc=$?
    fi
    t1=$(date +%s%N)
    if ((rc != 0)); then
        warn "$* exited $rc:"
        sed 's/^/    /' "$tmp/err" >&2
        exit 1
    fi
    T_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    T_RSS_KB=$(tail -n1 "$tmp/rss" | awk '{ print $1 + 0 }')
}

# best OUT CMD...: the fastest of RUNS runs; sets B_SECS and B_RSS_KB.
best() {
    local out=$1 r
    shift
    B_SECS=""
    B_RSS_KB=0
    for ((r = 0; r < RUNS; r++)); do
        timed "$out" "$@"
        if [[ -z $B_SECS ]] || awk -v a="$T_SECS" -v b="$B_SECS" 'BEGIN { exit !(a < b) }'; then
            B_SECS=$T_SECS
        fi
        if ((T_RSS_KB > B_RSS_KB)); then B_RSS_KB=$T_RSS_KB; fi
    done
}

verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v < t ? "MET" : "MISSED") }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
kb_mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# --- build ----------------------------------------------------------------------

say "== build (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --release -p hpc-ingest --example gen_sacct
for p in "${SMALL[@]}" hpc-store; do
    cargo build --release -p "$p"
done

# --- data -----------------------------------------------------------------------

say "== generate $JOBS jobs (seed $SEED) and ingest into $DB"
"$GEN" "$JOBS" "$FIRST_ID" "$SEED" >"$tmp/sacct.txt" 2>"$tmp/gen.err"
timed /dev/null "$REL/hpc-ingest" --db "$DB" "$tmp/sacct.txt"
say "  $(grep -m1 '^hpc-ingest:' "$tmp/err" || true) ($T_SECS s)"
rm -f "$tmp/sacct.txt"
NJOBS=$("$STORE" --db "$DB" status | sed -n 's/^jobs: \([0-9]*\).*/\1/p')
say "  database: $NJOBS jobs, $(du -m "$DB" | cut -f1) MB"

# --- reports --------------------------------------------------------------------

say "== report --by user over SQLite (best of $RUNS)"
best "$tmp/sqlite.csv" "$STORE" --db "$DB" report --by user --format csv
SQLITE_SECS=$B_SECS
say "  $SQLITE_SECS s, peak RSS $(kb_mb "$B_RSS_KB") MB, $(($(wc -l <"$tmp/sqlite.csv") - 1)) users"

say "== export --parquet"
timed /dev/null "$STORE" --db "$DB" export --parquet "$DS"
EXPORT_SECS=$T_SECS
EXPORT_RATE=$(awk -v n="$NJOBS" -v s="$EXPORT_SECS" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
NPART=$(find "$DS" -name '*.parquet' | wc -l)
say "  $NJOBS jobs in $EXPORT_SECS s = $EXPORT_RATE jobs/s, peak RSS $(kb_mb "$T_RSS_KB") MB, $NPART partitions, $(du -sm "$DS" | cut -f1) MB"
sed 's/^/  /' "$tmp/err"

say "== report --by user --parquet (best of $RUNS)"
best "$tmp/parquet.csv" "$STORE" --db "$DB" report --by user --format csv --parquet "$DS"
PARQUET_SECS=$B_SECS
say "  $PARQUET_SECS s, peak RSS $(kb_mb "$B_RSS_KB") MB"
if cmp -s "$tmp/sqlite.csv" "$tmp/parquet.csv"; then
    SAME=yes
else
    SAME=NO
    diff "$tmp/sqlite.csv" "$tmp/parquet.csv" | head -n 10 >&2 || true
fi
say "  same CSV as over SQLite: $SAME"

# --- sizes and dependency trees -------------------------------------------------

say "== release binaries"
for p in "${SMALL[@]}" hpc-store; do
    size=$(stat -c %s "$REL/$p")
    if [[ $p == hpc-store ]]; then
        say "  $(printf '%-11s %7s MB' "$p" "$(mb "$size")")  (polars inside)"
    else
        n=$(cargo tree -p "$p" -e normal,build --prefix none 2>/dev/null | grep -c '^polars' || true)
        say "  $(printf '%-11s %7s MB' "$p" "$(mb "$size")")  target < 5 MB: $(verdict "$size" 5242880); polars crates in cargo tree: $n (target 0)"
    fi
done

say "== targets"
say "  report --by user, SQLite:   $SQLITE_SECS s (target < 1 s): $(verdict "$SQLITE_SECS" 1)"
say "  export --parquet:           $EXPORT_SECS s, $EXPORT_RATE jobs/s"
say "  report --by user, Parquet:  $PARQUET_SECS s (target < 0.5 s): $(verdict "$PARQUET_SECS" 0.5)"
say "  same output: $SAME"
