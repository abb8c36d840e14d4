#!/usr/bin/env bash
# hpc-plot's HTML report opened in a real headless Chromium (Debian's
# `chromium`, installed with apt-get when missing and run as root): the
# pages render to a screenshot with no console errors, and a job named
# <script>alert(1)</script> is text in the DOM, not an element.
# Exits non-zero on any failure; kills every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --quiet -p hpc-plot
plot="$CARGO_TARGET_DIR/debug/hpc-plot"

# shellcheck source=tests/chromium.sh
. tests/chromium.sh

# A stream as `hpc-store report --format ndjson` and `dump` print it, with
# a hostile job name and flag reason, and a sampled job.
{
  echo '{"kind":"report","by":"user","user":"ann","jobs":2,"cpu_h":12,"cpu_wasted_h":5,"cpu_eff":58,"mem_gbh":9,"mem_wasted_gbh":6,"mem_eff":33,"gpu_h":0}'
  echo '{"kind":"job","cluster":"c","job_id":"7","job_id_raw":"7","user":"ann","job_name":"<script>alert(1)</script>","state":"OUT_OF_MEMORY","is_final":true,"req_mem_mb":4096,"alloc_cpus":4,"cpu_hours_wasted":5,"mem_gb_hours_wasted":6,"mem_eff":33,"end":"2026-01-02T00:00:00Z"}'
  echo '{"kind":"flag","job_id":"7","flag":"oom_killed","category":"misuse","value":null,"threshold":null,"reason":"<img src=x onerror=alert(2)>"}'
  echo '{"kind":"rec","user":"ann","tool":"blast","risk":0.05,"mem_mb":2048,"cpus":2,"time_s":3600,"basis":{"mem_mb":{"tier":"history","method":"order statistic","n":12,"note":"p95 of 12 jobs"}}}'
  for i in $(seq 0 299); do
    printf '{"kind":"sample","t":%d,"job_id":"7","rss_mb":%d,"cpu_cores":2.5,"read_mbps":1,"write_mbps":0.5}\n' \
      $((1700000000 + i * 10)) $((1000 + i * 5))
  done
} >"$tmp/in.ndjson"
"$plot" html --out "$tmp/site" "$tmp/in.ndjson"

for p in index.html user-ann.html; do
  page "$p" "file://$tmp/site/$p"
done
grep -qF '&lt;script&gt;alert(1)&lt;/script&gt;' "$tmp/user-ann.html.dom" || not_ok "the job name is not text in the DOM"
grep -qF '<svg' "$tmp/user-ann.html.dom" || not_ok "no inline plot"
# The screenshot is not blank: a PNG of some size.
[ "$(stat -c %s "$tmp/user-ann.html.png")" -gt 20000 ] || not_ok "screenshot too small"

if [ "$fail" -ne 0 ]; then
  echo "plot_chromium: FAILED" >&2
  exit 1
fi
echo "plot_chromium: ok (screenshots and DOM of index.html and user-ann.html)"
