#!/usr/bin/env bash
# hpc-web's pages in a real headless Chromium (Debian's `chromium`,
# installed with apt-get when missing and run as root), through a small
# reverse proxy (tests/web_proxy.py) that signs the browser in as a user or
# as an admin, over a real SQLite history with a real hpc-model advising:
# screenshots of every page, DOM checks for the right rows, no console
# errors, no request to any other origin.
# Exits non-zero on any failure; kills every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --quiet -p hpc-web -p hpc-store -p hpc-model
bin="$CARGO_TARGET_DIR/debug"

# shellcheck source=tests/chromium.sh
. tests/chromium.sh

# A history: ana's 12 seurat jobs (examples/seurat-history.ndjson), her
# sampled job with a hostile name and flag, and bob's job.
db="$tmp/h.db"
{
  cat examples/seurat-history.ndjson
  echo '{"kind":"job","cluster":"c","job_id":"7","job_id_raw":"7","user":"ana","job_name":"<script>alert(1)</script>","partition":"batch","state":"OUT_OF_MEMORY","is_final":true,"req_mem_mb":4096,"max_rss_mb":4000,"alloc_cpus":4,"elapsed_s":3000,"cpu_hours_reserved":3.3,"cpu_hours_wasted":2,"mem_gb_hours_reserved":3.3,"mem_gb_hours_wasted":0.1,"mem_eff":97,"start":"2026-11-20T00:00:00Z","end":"2026-11-20T00:50:00Z"}'
  echo '{"kind":"flag","job_id":"7","flag":"oom_killed","category":"misuse","value":null,"threshold":null,"reason":"<img src=x onerror=alert(2)>"}'
  echo '{"kind":"job","cluster":"c","job_id":"9","job_id_raw":"9","user":"bob","job_name":"bobs-secret-run","partition":"gpu","state":"COMPLETED","is_final":true,"alloc_cpus":8,"elapsed_s":600,"cpu_hours_reserved":1.3,"cpu_hours_wasted":1,"start":"2026-11-21T00:00:00Z","end":"2026-11-21T00:10:00Z"}'
  for i in $(seq 0 299); do
    printf '{"kind":"sample","t":%d,"job_id":"7","host":"n1","rss_mb":%d,"cpu_cores":2.5,"read_mbps":1,"write_mbps":0.5,"threads":4}\n' \
      $((1763596800 + i * 10)) $((1000 + i * 10))
  done
} | "$bin/hpc-store" --db "$db" put

sock="$tmp/web.sock"
start "$bin/hpc-web" --socket "$sock" --db "$db" --admins root --model "$bin/hpc-model"
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "web_chromium: hpc-web did not start" >&2; exit 1; }

port_of() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ana_port=$(port_of)
root_port=$(port_of)
start python3 tests/web_proxy.py "$ana_port" "$sock" ana "$tmp/ana.log"
start python3 tests/web_proxy.py "$root_port" "$sock" root "$tmp/root.log"
for p in "$ana_port" "$root_port"; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$p/" && break
    sleep 0.1
  done
done

page ana-jobs "http://127.0.0.1:$ana_port/"
page ana-job "http://127.0.0.1:$ana_port/job/7"
page ana-tools "http://127.0.0.1:$ana_port/tools"
page ana-bob "http://127.0.0.1:$ana_port/job/9"
page root-report "http://127.0.0.1:$root_port/report?days=0"
page root-bob "http://127.0.0.1:$root_port/job/9"

grep -qF '&lt;script&gt;alert(1)&lt;/script&gt;' "$tmp/ana-jobs.dom" || not_ok "the job name is not text"
grep -qF 'seurat_test' "$tmp/ana-jobs.dom" || not_ok "ana's jobs are missing"
grep -q 'bobs-secret-run' "$tmp/ana-jobs.dom" && not_ok "ana sees bob's job"
grep -qF '&lt;img src=x onerror=alert(2)&gt;' "$tmp/ana-job.dom" || not_ok "the flag reason is not text"
grep -qF '<svg' "$tmp/ana-job.dom" || not_ok "no panels on the job page"
grep -qF 'memory:' "$tmp/ana-tools.dom" || not_ok "no advice on the tools page"
grep -q 'bobs-secret-run' "$tmp/ana-bob.dom" && not_ok "ana sees bob's job page"
grep -qF '404' "$tmp/ana-bob.dom" || not_ok "bob's job is not 404 for ana"
grep -qF 'By partition' "$tmp/root-report.dom" || not_ok "no report for the admin"
grep -qF 'bobs-secret-run' "$tmp/root-bob.dom" || not_ok "the admin does not see bob's job"
[ "$(stat -c %s "$tmp/ana-job.png")" -gt 20000 ] || not_ok "the job page's screenshot is too small"
# Every request the browser made came to the proxy's own pages.
if grep -vE '^/(job/[0-9]+|tools|report\?days=0)?$' "$tmp/ana.log" "$tmp/root.log" | grep -v favicon; then
  not_ok "requests beyond the pages asked for"
fi

if [ "$fail" -ne 0 ]; then
  echo "web_chromium: FAILED" >&2
  exit 1
fi
echo "web_chromium: ok (screenshots and DOM of 6 pages as a user and an admin)"
