#!/usr/bin/env bash
# hpc-plot's rendering times (release build): a six-panel PNG of 86,400
# samples (a day at 1 s; target < 300 ms) and of 1,000,000 samples (target
# < 1 s), each read from an NDJSON file, and the HTML report of 100,000 jobs
# (target < 5 s). Prints one line per case with the wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --quiet -p hpc-plot
plot="$CARGO_TARGET_DIR/release/hpc-plot"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Samples of one job with every panel's source, a spike and a step down.
samples() {
  python3 - "$1" <<'PY'
import sys, math
n = int(sys.argv[1])
out = sys.stdout
out.write('{"kind":"job","cluster":"c","job_id":"1","job_id_raw":"1","user":"ann","state":"COMPLETED","is_final":true,"req_mem_mb":65536,"alloc_cpus":16}\n')
for i in range(n):
    cpu = 12.0 + math.sin(i / 500.0) if i < n * 0.7 else 0.5
    rss = 20000.0 + 10000.0 * i / n + (30000.0 if i == n // 3 else 0.0)
    out.write('{"kind":"sample","t":%d,"job_id":"1","rss_mb":%.1f,"cpu_cores":%.3f,"read_mbps":%.2f,"write_mbps":%.2f,"threads":%d,"lustre_read_mbps":%.2f,"lustre_write_mbps":1.5,"numa_miss_rate":%.3f}\n'
              % (1700000000 + i, rss, cpu, (i % 97) / 3.0, (i % 31) / 7.0, 16 + i % 3, (i % 53) * 1.1, 0.05 + (i % 11) / 100.0))
out.write('{"kind":"flag","job_id":"1","flag":"catastrophe","category":"hardware","value":0.04,"threshold":0.2,"reason":"CPU fell"}\n')
PY
}

# 100,000 jobs of 500 users, a flag on every tenth, report rows by user.
jobs() {
  python3 - <<'PY'
import sys
out = sys.stdout
users = ["user%03d" % u for u in range(500)]
for u in users:
    out.write('{"kind":"report","by":"user","user":"%s","jobs":200,"cpu_h":%d,"cpu_wasted_h":%d,"cpu_eff":55.0,"mem_gbh":80,"mem_wasted_gbh":40,"mem_eff":50.0,"gpu_h":0}\n' % (u, 100 + len(u), 40))
for i in range(100000):
    u = users[i % 500]
    out.write('{"kind":"job","cluster":"c","job_id":"%d","job_id_raw":"%d","user":"%s","account":"acc%d","partition":"cpu","job_name":"run_<%d>","state":"COMPLETED","exit_code":"0:0","submit":"2026-01-01T00:00:00Z","start":"2026-01-01T00:01:00Z","end":"2026-01-01T02:01:00Z","elapsed_s":7200,"alloc_cpus":8,"nnodes":1,"req_mem_mb":16384,"max_rss_mb":%d,"total_cpu_s":%d,"cpu_eff":%.1f,"mem_eff":%.1f,"cpu_hours_reserved":16,"cpu_hours_wasted":%.2f,"mem_gb_hours_reserved":32,"mem_gb_hours_wasted":%.2f,"gpu_hours_reserved":0,"is_final":true}\n'
              % (i, i, u, i % 7, i, 1000 + i % 15000, 20000 + i % 30000, 30 + i % 60, 10 + i % 80, (i % 100) / 10.0, (i % 70) / 5.0))
    if i % 10 == 0:
        out.write('{"kind":"flag","job_id":"%d","flag":"mem_overrequest","category":"misuse","value":0.1,"threshold":0.25,"reason":"peak is 10%% of the request"}\n' % i)
PY
}

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

samples 86400 >"$tmp/day.ndjson"
samples 1000000 >"$tmp/million.ndjson"
jobs >"$tmp/jobs.ndjson"

render() {
  local start
  start=$(date +%s%N)
  "$plot" job -o "$tmp/$1.png" "$tmp/$1.ndjson"
  echo "six-panel PNG of $2 samples: $(ms "$start") ms (target < $3 ms; $(stat -c %s "$tmp/$1.png") bytes)"
}
render day 86400 300
render million 1000000 1000
start=$(date +%s%N)
"$plot" html --out "$tmp/site" "$tmp/jobs.ndjson"
echo "HTML report of 100000 jobs (500 user pages): $(ms "$start") ms (target < 5000 ms; $(du -sh "$tmp/site" | cut -f1))"
