#!/bin/sh
# Converts a Standard Workload Format log (Parallel Workloads Archive) to the
# CSV that `hpc-model backtest --csv` maps: job, submit, user, exe, runtime_s,
# used_kb and req_kb for the whole job (SWF fields 7 and 10 are KB per
# processor, times field 5, the allocated processors). Unknown values (-1)
# become empty cells. Usage: bench/swf2csv.sh LOG.swf > LOG.csv
set -eu
awk 'BEGIN { print "job,submit,user,exe,runtime_s,used_kb,req_kb" }
     /^;/ || NF < 18 { next }
     {
       procs = ($5 > 0) ? $5 : (($8 > 0) ? $8 : 1)
       used = ($7 > 0) ? $7 * procs : ""
       req = ($10 > 0) ? $10 * procs : ""
       rt = ($4 >= 0) ? $4 : ""
       print $1 "," $2 "," $12 "," $14 "," rt "," used "," req
     }' "$@"
