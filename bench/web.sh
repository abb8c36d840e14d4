#!/usr/bin/env bash
# hpc-web over a history of JOBS jobs (default 1,000,000, from gen_sacct
# through hpc-ingest): requests per second and p50/p99 latency of the main
# pages with 64 concurrent clients on loopback (wrk, installed with apt when
# missing and run as root), the server's peak memory, and beside it
# hpc-plot html writing the same user's page from the same history.
# Goal: p99 under 50 ms for a user's page, memory under 200 MB.
# Usage: bash bench/web.sh [JOBS]   (DURATION seconds per page, default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${1:-1000000}
DURATION=${DURATION:-10}
: "${CARGO_TARGET_DIR:=$ROOT/target}"
export CARGO_TARGET_DIR
REL=$CARGO_TARGET_DIR/release

if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then echo "web.sh: wrk is missing and this is not root" >&2; exit 1; fi
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

cargo build --release --quiet --no-default-features -p hpc-ingest -p hpc-store -p hpc-web -p hpc-plot -p hpc-model
cargo build --release --quiet -p hpc-ingest --example gen_sacct

tmp=$(mktemp -d "${TMPDIR:-/tmp}/web-bench.XXXXXX")
web_pid=
cleanup() { [ -z "$web_pid" ] || kill "$web_pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
db=$tmp/jobs.db

t0=$(date +%s)
"$REL/examples/gen_sacct" "$JOBS" 1000000 42 | "$REL/hpc-ingest" --db "$db" >/dev/null 2>"$tmp/ingest.err"
echo "history: $JOBS jobs ingested in $(( $(date +%s) - t0 )) s ($(du -m "$db" | cut -f1) MiB)"

# The user with the most jobs, and their latest job.
user=$("$REL/hpc-store" --db "$db" report --by user --format csv | awk -F, 'NR > 1 && $2 > max { max = $2; u = $1 } END { print u }')
job=$("$REL/hpc-store" --db "$db" dump --kind job --user "$user" --limit 1 | sed -n 's/.*"job_id":"\([^"]*\)".*/\1/p' | head -n 1)
njobs=$("$REL/hpc-store" --db "$db" report --by user --format csv | awk -F, -v u="$user" '$1 == u { print $2 }')
echo "user: $user ($njobs jobs), job $job"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$REL/hpc-web" --listen "127.0.0.1:$port" --trust-proxy 127.0.0.1 --admins benchadmin \
  --db "$db" --model "$REL/hpc-model" 2>"$tmp/web.err" &
web_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done

# wrk_page NAME WHO PATH: one row of the table.
wrk_page() {
  local name=$1 who=$2 path=$3 out
  # One request first (the advice cache, SQLite's page cache).
  curl -s -o /dev/null -H "X-Forwarded-User: $who" "http://127.0.0.1:$port$path"
  out=$(wrk -t 2 -c 64 -d "${DURATION}s" --latency -H "X-Forwarded-User: $who" "http://127.0.0.1:$port$path")
  local rps p50 p99 non2xx
  rps=$(echo "$out" | awk '/^Requests\/sec/ { print $2 }')
  p50=$(echo "$out" | awk '$1 == "50%" { print $2 }')
  p99=$(echo "$out" | awk '$1 == "99%" { print $2 }')
  non2xx=$(echo "$out" | awk '/Non-2xx/ { print $NF }')
  printf '%-28s %10s %10s %10s %s\n' "$name" "$rps" "$p50" "$p99" "${non2xx:+(non-2xx: $non2xx)}"
}

printf '\n%-28s %10s %10s %10s\n' "page (64 clients)" "req/s" "p50" "p99"
wrk_page "/ (my jobs, 50)" "$user" /
wrk_page "/api/jobs" "$user" /api/jobs
wrk_page "/job/ID" "$user" "/job/$job"
wrk_page "/tools (advice cached)" "$user" /tools
wrk_page "/report?days=30 (admin)" benchadmin '/report?days=30'
wrk_page "/metrics (admin, cached)" benchadmin /metrics
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$web_pid/status")
echo "hpc-web peak memory: $((hwm / 1024)) MiB"

# The same user's page from hpc-plot html (the static report): all of the
# user's jobs and flags, dumped and written.
t0=$(date +%s%N)
"$REL/hpc-store" --db "$db" dump --kind job,flag --user "$user" | "$REL/hpc-plot" html --out "$tmp/site" 2>/dev/null
echo "hpc-plot html, the same user's page ($njobs jobs): $(( ($(date +%s%N) - t0) / 1000000 )) ms"

# One job of the user sampled a million times (eleven days at 1 s): its
# page reads about 20,000 samples, thinned evenly over the run (before: it
# read all of them, 220 MB a request).
awk -v job="$job" 'BEGIN { for (i = 0; i < 1000000; i++)
  printf "{\"kind\":\"sample\",\"job_id\":\"%s\",\"host\":\"n1\",\"t\":%d,\"rss_mb\":%d}\n", job, 1762000000 + i, 100 + i % 50 }' |
  "$REL/hpc-store" --db "$db" put 2>/dev/null
kill "$web_pid"; wait "$web_pid" 2>/dev/null || true
"$REL/hpc-web" --listen "127.0.0.1:$port" --trust-proxy 127.0.0.1 --admins benchadmin \
  --db "$db" --model "$REL/hpc-model" 2>>"$tmp/web.err" &
web_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
for path in "/api/job/$job" "/job/$job"; do
  curl -s -o /dev/null -w "$path, a million samples: %{time_total} s\n" -H "X-Forwarded-User: $user" "http://127.0.0.1:$port$path"
done
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$web_pid/status")
echo "hpc-web peak memory after them: $((hwm / 1024)) MiB"
