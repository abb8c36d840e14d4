#!/usr/bin/env bash
# Benchmark of hpc-ingest against two Python peers on generated sacct text.
#
#   bash bench/ingest-bench.sh [JOBS]          (default 1000000 jobs)
#
# Environment:
#   PEER_JOBS   jobs for the peers and the same-input comparison (100000)
#   RUNS        timed runs of each hpc-ingest case, fastest kept (1)
#   SEED        generator seed (42)
#   SKIP_PEERS  1 to skip slurm-usage and slurm2sql
#   HPC_BENCH_VENV  venv for the peers ($HOME/.cache/hpc-bench-venv)
#
# Steps: build release binaries; generate JOBS, JOBS/2 and PEER_JOBS jobs of
# sacct --parsable2 text (gen_sacct, same seed, so each smaller file is the
# start of the larger one) into a temporary directory; time hpc-ingest
# --ndjson to /dev/null and --db into a fresh SQLite file, pinned to CPU 0,
# with peak RSS from GNU time; time slurm-usage's parser
# (bench/peers/slurm_usage_parse.py) and the slurm2sql command line (with a
# fake sacct first on PATH) on PEER_JOBS jobs; print a table and the ratios
# of hpc-ingest's rates to the faster peer's.  Generated data stays in the
# temporary directory, which is removed on exit.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

JOBS=${1:-1000000}
PEER_JOBS=${PEER_JOBS:-100000}
RUNS=${RUNS:-1}
SEED=${SEED:-42}
FIRST_ID=1000000
SKIP_PEERS=${SKIP_PEERS:-0}
VENV=${HPC_BENCH_VENV:-$HOME/.cache/hpc-bench-venv}
HALF_JOBS=$((JOBS / 2))

: "${CARGO_TARGET_DIR:=$ROOT/target}"
export CARGO_TARGET_DIR
GEN=$CARGO_TARGET_DIR/release/examples/gen_sacct
ING=$CARGO_TARGET_DIR/release/hpc-ingest

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ingest-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say() { printf '%s\n' "$*"; }
warn() { printf 'ingest-bench: %s\n' "$*" >&2; }

# --- tools -------------------------------------------------------------------

# GNU time gives the peak RSS (%M, KiB) of the command and its waited children.
gnu_time() { /usr/bin/time -f '%M' -o /dev/null true >/dev/null 2>&1; }
if ! gnu_time; then
    warn "GNU time missing; trying apt-get install -y time"
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then sudo_cmd=(sudo -n); fi
    "${sudo_cmd[@]}" apt-get install -y time >/dev/null 2>&1 ||
        { "${sudo_cmd[@]}" apt-get update >/dev/null 2>&1 &&
            "${sudo_cmd[@]}" apt-get install -y time >/dev/null 2>&1; } ||
        warn "could not install GNU time; reading peak RSS with python3's getrusage instead"
fi
USE_GNU_TIME=0
if gnu_time; then USE_GNU_TIME=1; fi

PIN=()
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
    PIN=(taskset -c 0)
fi

# timed OUT CMD...: runs CMD with stdout to OUT and stderr to $tmp/err; sets
# T_SECS (wall seconds), T_CPU (user + system seconds, which other load on
# the machine disturbs less than wall time), T_RSS_KB (peak RSS) and T_RC.
timed() {
    local out=$1 t0 t1
    shift
    T_RC=0
    t0=$(date +%s%N)
    if ((USE_GNU_TIME)); then
        /usr/bin/time -f '%M %U %S' -o "$tmp/rss" "$@" >"$out" 2>"$tmp/err" || T_RC=$?
    else
        python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%d %.2f %.2f\n" % (r.ru_maxrss, r.ru_utime, r.ru_stime))
sys.exit(rc)' "$tmp/rss" "$@" >"$out" 2>"$tmp/err" || T_RC=$?
    fi
    t1=$(date +%s%N)
    T_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    local usage
    usage=$(tail -n1 "$tmp/rss" 2>/dev/null || true)
    T_RSS_KB=$(awk '{ print $1 + 0 }' <<<"$usage")
    T_CPU=$(awk '{ printf "%.2f", $2 + $3 }' <<<"$usage")
}

rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print 0 }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
human() { awk -v r="$1" 'BEGIN { if (r >= 1e6) printf "%.2fM", r / 1e6; else if (r >= 1e3) printf "%.1fk", r / 1e3; else printf "%.0f", r }'; }

# Result rows for the final table: tool|jobs|seconds|cpu_seconds|rss_kb|note
ROWS=()
add_row() { ROWS+=("$1|$2|$3|$4|$5|${6:-}"); }

# --- build and generate --------------------------------------------------------

say "== build (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --release -p hpc-ingest --example gen_sacct
cargo build --release -p hpc-ingest

declare -A FILE LINES
gen() { # gen JOBS: generates $tmp/sacct-JOBS.txt once
    local n=$1 f="$tmp/sacct-$1.txt"
    if [[ -z ${FILE[$n]:-} ]]; then
        "$GEN" "$n" "$FIRST_ID" "$SEED" >"$f" 2>"$tmp/gen.err"
        FILE[$n]=$f
        LINES[$n]=$(wc -l <"$f")
        say "generated $n jobs, ${LINES[$n]} lines ($(du -m "$f" | cut -f1) MB): $(cat "$tmp/gen.err")"
    fi
}
say "== generate (seed $SEED, first id $FIRST_ID) into $tmp"
gen "$JOBS"
gen "$HALF_JOBS"
gen "$PEER_JOBS"

# --- hpc-ingest ---------------------------------------------------------------

# ingest MODE JOBS [PIN...]: best of RUNS; sets I_SECS I_CPU I_RSS I_JOBS I_LINES
ingest() {
    local mode=$1 n=$2 r best="" cpu="" rss=0 summary
    shift 2
    for ((r = 0; r < RUNS; r++)); do
        if [[ $mode == ndjson ]]; then
            timed /dev/null "$@" "$ING" --ndjson "${FILE[$n]}"
        else
            rm -f "$tmp/ingest.db" "$tmp/ingest.db-wal" "$tmp/ingest.db-shm" "$tmp/ingest.db-journal"
            timed /dev/null "$@" "$ING" --db "$tmp/ingest.db" "${FILE[$n]}"
        fi
        summary=$(grep -m1 '^hpc-ingest: [0-9]* jobs' "$tmp/err" || true)
        if ((T_RC != 0)) || [[ -z $summary ]]; then
            warn "hpc-ingest --$mode on $n jobs exited $T_RC:"
            sed 's/^/    /' "$tmp/err" >&2
        fi
        if [[ -z $best ]] || awk -v a="$T_SECS" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$T_SECS; fi
        if [[ -z $cpu ]] || awk -v a="$T_CPU" -v b="$cpu" 'BEGIN { exit !(a < b) }'; then cpu=$T_CPU; fi
        if ((T_RSS_KB > rss)); then rss=$T_RSS_KB; fi
    done
    I_SECS=$best
    I_CPU=$cpu
    I_RSS=$rss
    I_JOBS=$(sed -n 's/^hpc-ingest: \([0-9]*\) jobs.*/\1/p' <<<"$summary")
    I_LINES=$(sed -n 's/.* from \([0-9]*\) lines.*/\1/p' <<<"$summary")
    : "${I_JOBS:=0}" "${I_LINES:=${LINES[$n]}}"
    say "  $summary"
}

declare -A RATE CPU_RATE RSS_NDJSON RSS_DB
PIN_TEXT=${PIN[*]:-no taskset}
say "== hpc-ingest --ndjson > /dev/null ($PIN_TEXT, best of $RUNS)"
for n in "$JOBS" "$HALF_JOBS" "$PEER_JOBS"; do
    ingest ndjson "$n" "${PIN[@]}"
    lps=$(rate "$I_LINES" "$I_SECS")
    jps=$(rate "$I_JOBS" "$I_SECS")
    RATE[ndjson-$n]=$jps
    CPU_RATE[ndjson-$n]=$(rate "$I_JOBS" "$I_CPU")
    RSS_NDJSON[$n]=$I_RSS
    say "  $n jobs: $I_LINES lines in $I_SECS s = $(human "$lps") lines/s, $(human "$jps") jobs/s ($I_CPU CPU s: $(human "$(rate "$I_LINES" "$I_CPU")") lines/CPU-s), peak RSS $(mb "$I_RSS") MB"
    add_row "hpc-ingest --ndjson" "$I_JOBS" "$I_SECS" "$I_CPU" "$I_RSS"
    if [[ $n == "$JOBS" ]]; then
        NDJSON_LPS=$lps
        NDJSON_CPU=$I_CPU
    fi
done

# --db parses on the main thread and writes SQLite on a second one, so it
# runs unpinned (both threads may use a core each); the first case is run
# again pinned to one core as well.
say "== hpc-ingest --db (fresh SQLite file in $tmp, best of $RUNS)"
for n in "$JOBS" "$HALF_JOBS" "$PEER_JOBS" pinned; do
    label="hpc-ingest --db"
    if [[ $n == pinned ]]; then
        ((${#PIN[@]})) || continue
        n=$JOBS
        label="hpc-ingest --db (1 core)"
        ingest db "$n" "${PIN[@]}"
    else
        ingest db "$n"
    fi
    jps=$(rate "$I_JOBS" "$I_SECS")
    say "  $n jobs${label#hpc-ingest --db}: $I_LINES lines in $I_SECS s = $(human "$(rate "$I_LINES" "$I_SECS")") lines/s, $(human "$jps") jobs/s ($I_CPU CPU s: $(human "$(rate "$I_JOBS" "$I_CPU")") jobs/CPU-s), peak RSS $(mb "$I_RSS") MB, db $(du -m "$tmp/ingest.db" | cut -f1) MB"
    add_row "$label" "$I_JOBS" "$I_SECS" "$I_CPU" "$I_RSS"
    if [[ $label == "hpc-ingest --db" ]]; then
        RATE[db-$n]=$jps
        CPU_RATE[db-$n]=$(rate "$I_JOBS" "$I_CPU")
        RSS_DB[$n]=$I_RSS
        [[ $n == "$JOBS" ]] && DB_CPU=$I_CPU
    else
        DB_PINNED_JPS=$jps
    fi
done

verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v >= t ? "MET" : "MISSED") }'; }
say "== targets"
say "  --ndjson lines/s at $JOBS jobs ($PIN_TEXT): $(human "$NDJSON_LPS") (target >= 1M): $(verdict "$NDJSON_LPS" 1000000); per CPU-second: $(human "$(rate "${LINES[$JOBS]}" "$NDJSON_CPU")")"
say "  --db jobs/s at $JOBS jobs: $(human "${RATE[db-$JOBS]}") (target >= 200k): $(verdict "${RATE[db-$JOBS]}" 200000); per CPU-second: $(human "$(rate "$JOBS" "$DB_CPU")")${DB_PINNED_JPS:+; pinned to one core: $(human "$DB_PINNED_JPS")}"
say "  peak RSS --ndjson: $(mb "${RSS_NDJSON[$HALF_JOBS]}") MB at $HALF_JOBS jobs, $(mb "${RSS_NDJSON[$JOBS]}") MB at $JOBS jobs"
say "  peak RSS --db:     $(mb "${RSS_DB[$HALF_JOBS]}") MB at $HALF_JOBS jobs, $(mb "${RSS_DB[$JOBS]}") MB at $JOBS jobs"

# --- peers --------------------------------------------------------------------

PEER_BEST=0
PEER_BEST_NAME="none"
PEER_BEST_CPU=0
peer_result() { # peer_result NAME JOBS SECS CPU_SECS RSS_KB NOTE
    local jps
    jps=$(rate "$2" "$3")
    add_row "$1" "$2" "$3" "$4" "$5" "$6"
    say "  $1: $2 jobs in $3 s = $(human "$jps") jobs/s ($4 CPU s), peak RSS $(mb "$5") MB${6:+ ($6)}"
    if ((jps > PEER_BEST)); then
        PEER_BEST=$jps
        PEER_BEST_NAME=$1
    fi
    jps=$(rate "$2" "$4")
    if ((jps > PEER_BEST_CPU)); then PEER_BEST_CPU=$jps; fi
    return 0
}

# pip_ensure MODULE PACKAGE: installs PACKAGE into the venv unless MODULE imports.
pip_ensure() {
    "$VENV/bin/python" -c "import $1" 2>/dev/null && return 0
    say "  pip install $2 into $VENV"
    if ! "$VENV/bin/python" -m pip install -q "$2" >"$tmp/pip.log" 2>&1; then
        warn "pip could not install $2:"
        tail -n 5 "$tmp/pip.log" | sed 's/^/    /' >&2
        return 1
    fi
    "$VENV/bin/python" -c "import $1"
}

if [[ $SKIP_PEERS != 1 ]]; then
    say "== peers on $PEER_JOBS jobs (${LINES[$PEER_JOBS]} lines, same generated text), $PIN_TEXT"
    venv_ok=1
    if [[ ! -x $VENV/bin/python ]]; then
        python3 -m venv "$VENV" >"$tmp/venv.log" 2>&1 ||
            { warn "could not create $VENV: $(tail -n1 "$tmp/venv.log")"; venv_ok=0; }
    fi
    PY=$VENV/bin/python
    REMAP=$ROOT/bench/peers/sacct_remap.py

    # (a) slurm-usage: its own parser, RawJobRecord.from_sacct_line and
    # _process_raw_records_into_jobs, timed inside the helper.
    if ((venv_ok)) && pip_ensure slurm_usage slurm-usage; then
        "$PY" "$REMAP" slurm-usage "${FILE[$PEER_JOBS]}" "$tmp/slurm-usage.txt"
        timed "$tmp/su.out" "${PIN[@]}" "$PY" "$ROOT/bench/peers/slurm_usage_parse.py" "$tmp/slurm-usage.txt"
        line=$(grep -m1 '^slurm-usage:' "$tmp/su.out" || true)
        if ((T_RC != 0)) || [[ -z $line ]]; then
            warn "slurm-usage parse failed (exit $T_RC):"
            tail -n 5 "$tmp/err" | sed 's/^/    /' >&2
        else
            say "  $line"
            get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
            peer_result "slurm-usage (parse only)" "$(get jobs)" "$(get seconds)" "$(get cpu_seconds)" "$(get maxrss_kb)" "in-process timing; RSS includes its imports"
        fi
    fi

    # (b) slurm2sql: the whole command line run (sacct read, parse, SQLite
    # inserts, indexes), with a fake sacct first on PATH.
    if ((venv_ok)) && pip_ensure slurm2sql slurm2sql; then
        mkdir -p "$tmp/fakebin"
        cat >"$tmp/fakebin/sacct" <<'FAKE'
#!/usr/bin/env bash
# Fake sacct for slurm2sql: prints $FAKE_SACCT_FILE (made by sacct_remap.py)
# when the -o column list it is asked for matches that file's header line.
set -euo pipefail
if [[ ${1:-} == --version ]]; then echo "slurm 23.11.4"; exit 0; fi
cols=""
while (($#)); do
    case $1 in
    -o) cols=$2; shift 2 ;;
    *) shift ;;
    esac
done
want=$(head -n1 "$FAKE_SACCT_FILE")
if [[ ${cols//,/;|;} != "$want" ]]; then
    echo "fake sacct: -o '$cols' does not match the prepared header" >&2
    exit 1
fi
exec cat "$FAKE_SACCT_FILE"
FAKE
        chmod +x "$tmp/fakebin/sacct"
        s2s_run() { # s2s_run TEXT: sets T_* and S2S_JOBS
            rm -f "$tmp/s2s.db"
            FAKE_SACCT_FILE=$1 PATH="$tmp/fakebin:$PATH" \
                timed "$tmp/s2s.out" "${PIN[@]}" "$VENV/bin/slurm2sql" "$tmp/s2s.db"
            S2S_JOBS=0
            if ((T_RC == 0)); then
                S2S_JOBS=$("$PY" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("select count(*) from slurm where JobStep is null").fetchone()[0])' "$tmp/s2s.db")
            fi
        }
        "$PY" "$REMAP" slurm2sql "${FILE[$PEER_JOBS]}" "$tmp/s2s-orig.txt"
        s2s_run "$tmp/s2s-orig.txt"
        if ((T_RC == 0)); then
            peer_result "slurm2sql (whole run)" "$S2S_JOBS" "$T_SECS" "$T_CPU" "$T_RSS_KB" "original text, Mc/Gn kept"
        else
            crash=$(grep -v '^ ' "$tmp/err" | grep -v '^Traceback\|^Command exited' | tail -n1)
            say "  slurm2sql CRASHED on the original text after $T_SECS s (exit $T_RC): $crash"
            say "  rerunning slurm2sql on a variant with ReqMem Mc/Gn replaced by plain M/G"
            "$PY" "$REMAP" slurm2sql "${FILE[$PEER_JOBS]}" "$tmp/s2s-plain.txt" --plain-mem
            s2s_run "$tmp/s2s-plain.txt"
            if ((T_RC == 0)); then
                peer_result "slurm2sql (whole run)" "$S2S_JOBS" "$T_SECS" "$T_CPU" "$T_RSS_KB" "plain-M/G variant; crashes on Mc/Gn"
            else
                warn "slurm2sql failed on the plain-memory variant too (exit $T_RC):"
                tail -n 5 "$tmp/err" | sed 's/^/    /' >&2
            fi
        fi
    fi
fi

# --- table --------------------------------------------------------------------

say ""
say "== results (--ndjson and peers: $PIN_TEXT; --db: unpinned, 2 threads, except \"1 core\"; peers: Python $("$VENV/bin/python" -V 2>&1 | cut -d' ' -f2 || echo '?'))"
printf '%-26s %9s %9s %11s %7s %12s  %s\n' tool jobs seconds jobs/s "CPU s" "peak RSS MB" note
for row in "${ROWS[@]}"; do
    IFS='|' read -r tool n secs cpu rss note <<<"$row"
    printf '%-26s %9s %9s %11s %7s %12s  %s\n' "$tool" "$n" "$secs" "$(rate "$n" "$secs")" "$cpu" "$(mb "$rss")" "$note"
done
say ""
if ((PEER_BEST > 0)); then
    ratio() { awk -v a="$1" -v b="$PEER_BEST" 'BEGIN { printf "%.0fx", a / b }'; }
    say "faster peer: $PEER_BEST_NAME, $(human "$PEER_BEST") jobs/s on $PEER_JOBS jobs"
    for mode in ndjson db; do
        same=${RATE[$mode-$PEER_JOBS]}
        big=${RATE[$mode-$JOBS]}
        say "ratio hpc-ingest --$mode / faster peer: $(ratio "$same") on the same $PEER_JOBS jobs, $(ratio "$big") using the $JOBS-job rate (target >= 40x): $(verdict "$(awk -v a="$same" -v b="$PEER_BEST" 'BEGIN { print a / b }')" 40)"
    done
    # Jobs per CPU-second: steadier than wall time on a loaded machine.
    for mode in ndjson db; do
        ((PEER_BEST_CPU > 0)) || break
        say "ratio per CPU-second, hpc-ingest --$mode / best peer ($(human "$PEER_BEST_CPU") jobs/CPU-s): $(awk -v a="${CPU_RATE[$mode-$PEER_JOBS]}" -v b="$PEER_BEST_CPU" 'BEGIN { printf "%.0fx", a / b }') on the same $PEER_JOBS jobs, $(awk -v a="${CPU_RATE[$mode-$JOBS]}" -v b="$PEER_BEST_CPU" 'BEGIN { printf "%.0fx", a / b }') using the $JOBS-job rate"
    done
else
    say "no peer result: ratios not computed"
fi
