# bench/history.awk: N job records (with their analysis records) of 20 users
# and 5 tools for the benches' databases, as hpc-store dump prints them.
# Variables: n (jobs), tool2 (the name of the third tool, default tool2),
# cpus and req_mb (each job's allocation, default 4 and 16384).
# Usage: awk -v n=1000000 [-v tool2=samtools] [-v cpus=8] [-v req_mb=65536] -f bench/history.awk
BEGIN {
  if (tool2 == "") tool2 = "tool2"
  if (cpus == "") cpus = 4
  if (req_mb == "") req_mb = 16384
  for (i = 0; i < n; i++) {
    u = "u" (i % 20); k = int(i / 20) % 5; t = (k == 2) ? tool2 : "tool" k;
    peak = 1000 + (i * 7919) % 9000; el = 600 + (i * 104729) % 3000;
    printf "{\"kind\":\"job\",\"cluster\":\"c\",\"job_id\":\"%d\",\"job_id_raw\":\"%d\",\"user\":\"%s\",\"state\":\"COMPLETED\",\"end\":\"2026-%02d-%02dT%02d:%02d:%02dZ\",\"elapsed_s\":%d,\"timelimit_s\":7200,\"alloc_cpus\":%d,\"req_mem_mb\":%d,\"max_rss_mb\":%d,\"total_cpu_s\":%d,\"is_final\":true}\n", i, i, u, 1 + i % 12, 1 + i % 28, i % 24, i % 60, i % 59, el, cpus, req_mb, peak, el * 3
    printf "{\"kind\":\"analysis\",\"job_id\":\"%d\",\"script\":\"a.sbatch\",\"script_sha256\":\"00\",\"request\":{},\"tool\":\"%s\",\"input_mb\":%d}\n", i, t, i % 5000
  }
}
