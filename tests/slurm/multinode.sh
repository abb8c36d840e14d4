#!/usr/bin/env bash
# tests/slurm/multinode.sh: multi-node jobs and the admin mode on a real
# SLURM cluster of several nodes on this machine (harness.sh with
# HPC_TEST_NODES, default 3: one slurmd per node, each with its own name,
# port, spool and cgroups) (issue 21).
#
# 1. Through `hpc submit`: a 3-node job whose nodes use different memory and
#    CPU (one node idle): a probe on every node (one file per node), merged
#    by hpc-finalize; after `hpc harvest` the database has the per-node
#    summaries, node_imbalance and the idle node on the right job, and each
#    node's peak agrees with sacct's MaxRSS of the step that ran there within
#    15 % (+ 8 MB for the batch step's own shells and srun clients on the
#    first node); `hpc plot` draws a line per node. A 3-node job killed for
#    memory on one node: oom_killed names that node. A job requeued while
#    it runs and run again on another node: the second run's node file is
#    HOST.restart-1.ndjson, and its result is the second run's alone.
# 2. The admin mode: the snippets of examples/admin/ set in slurm.conf
#    (TaskProlog, Epilog); plain `sbatch` jobs of a user who does nothing
#    are probed on every node and finalized by the Epilog (one that
#    completes, one cancelled with scancel, one past its time limit), and
#    `hpc harvest` stores them; the node files of a job whose Epilog never
#    ran (a node that rebooted) are finalized by `hpc harvest` once the
#    grace period (HPC_SWEEP_AFTER, 0 here) is over.
#
# Prints `ok - ...` / `not ok - ...` per check and `N passed, M failed`;
# exits 1 when a check failed, 77 when the harness cannot run here, and
# brings the cluster down at the end unless KEEP_SLURM=1.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export HPC_TEST_NODES=${HPC_TEST_NODES:-3}
# shellcheck source=tests/slurm/common.sh
. "$here/common.sh"

if [ "$HPC_TEST_NODES" -lt 3 ]; then
    not_ok "HPC_TEST_NODES=$HPC_TEST_NODES: the multi-node tests need 3 nodes or more"
    report_and_exit
fi
flow_start multinode
mapfile -t nodes < <(sinfo -h -N -o %N | sort -u)
check "the cluster has $HPC_TEST_NODES nodes, each its own slurmd (${nodes[*]})" \
    [ "${#nodes[@]}" -eq "$HPC_TEST_NODES" ]

# ---------------------------------------------------------------- 1. hpc submit, 3 nodes
cd "$work" || exit 1
write_work_py
cat >spread.sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=mn-spread
#SBATCH --nodes=3 --ntasks-per-node=1 --cpus-per-task=2 --mem=700M --time=00:05:00
mapfile -t n < <(scontrol show hostnames "\$SLURM_JOB_NODELIST")
srun -N1 -n1 -c2 --mem=600M -w "\${n[0]}" python3 $work/work.py 500 2 1.0 8 &
srun -N1 -n1 -c1 --mem=300M -w "\${n[1]}" python3 $work/work.py 150 1 0.25 8 &
srun -N1 -n1 -c1 --mem=100M -w "\${n[2]}" sleep 8 &
wait
EOF
# The batch step (on the first node) runs out at once, asking for 300 MB in
# one piece: the kill comes within a tenth of a second, most often between
# two of the probes' 1-second samples, so its sampled RSS peak is most often
# below the 40 MB the other nodes hold. The kernel's high-water mark
# (hwm_mb) always has the spike, and oom_killed names the node by it.
cat >oom.sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=mn-oom
#SBATCH --nodes=3 --ntasks-per-node=1 --mem=200M --time=00:05:00
mapfile -t n < <(scontrol show hostnames "\$SLURM_JOB_NODELIST")
srun -N1 -n1 --mem=100M -w "\${n[1]}" python3 $work/work.py 40 0 0 10 &
srun -N1 -n1 --mem=100M -w "\${n[2]}" python3 $work/work.py 40 0 0 10 &
sleep 2
python3 -c 'held = b"\1" * (300 << 20)'
wait
EOF
churn_sbatch mn-churn
declare -A id
for j in spread oom churn; do
    out=$(hpc submit --no-recommend -o "$work/$j-%j.out" "$j.sbatch" 2>"$j.err")
    id[$j]=$(submitted_id "$out")
    [ -n "${id[$j]}" ] && jobs+=("${id[$j]}")
    check "hpc submit $j.sbatch submits (job ${id[$j]:-none})" [ -n "${id[$j]}" ]
done
check "the 3-node jobs ended" wait_gone 150 "${id[@]}"
for j in spread oom; do show "  $j: " "$(cat "$work/$j-"*.out 2>/dev/null | tail -n 5)"; done

mapfile -t files < <(cd "$HPC_SIZER_SPOOL/${id[spread]}" 2>/dev/null && ls -- *.ndjson)
check "a probe ran on every node of the spread job: one file per node (${files[*]})" \
    [ "$(printf '%s\n' "${files[@]}" | sed 's/\.ndjson$//' | sort | paste -sd ' ')" = "$(printf '%s\n' "${nodes[@]}" | sort | paste -sd ' ')" ]
harvest_and_dump
check "the database has the spread job's 3 per-node summaries and its job-wide one" json_is summaries.ndjson \
    "sorted(x.get('host') or '' for x in r if x['job_id'] == '${id[spread]}') == sorted([''] + '${nodes[*]}'.split())"
mapfile -t n < <(sacct -n -X -P -o NodeList -j "${id[spread]}" | head -n 1 | xargs -r scontrol show hostnames)
check "... the job-wide summary names the idle node (${n[2]:-?}), and only it" json_is summaries.ndjson \
    "[x.get('idle_nodes') for x in r if x['job_id'] == '${id[spread]}' and not x.get('host')] == [['${n[2]:-}']]"
check "... node_imbalance is raised on the spread job" json_is flags.ndjson \
    "any(x['job_id'] == '${id[spread]}' and x['flag'] == 'node_imbalance' for x in r)"
check "... and not on the other job" json_is flags.ndjson \
    "not any(x['job_id'] == '${id[oom]}' and x['flag'] == 'node_imbalance' for x in r)"
# Each step ran on one node: its MaxRSS is that node's, beside the probe's
# peak of the node.
sacct -n -P -o JobID,NodeList,MaxRSS -j "${id[spread]}" --noconvert >steps.txt
python3 - steps.txt summaries.ndjson "${id[spread]}" >peaks.txt <<'EOF'
import json, sys
steps = {}
for line in open(sys.argv[1]):
    jid, node, rss = line.rstrip("\n").split("|")
    # The steps of one node (the probes' own srun step spans all three).
    if jid.split(".")[-1].isdigit() and rss and not any(c in node for c in ",["):
        steps[node] = int(rss.rstrip("K")) / 1024 if rss.endswith("K") else int(rss) / 2**20
by_node = {}
for l in open(sys.argv[2]):
    s = json.loads(l)
    if s["job_id"] == sys.argv[3] and not s.get("host"):
        by_node = s.get("peak_rss_mb_by_node", {})
for node, rss in sorted(steps.items()):
    print(node, round(rss, 1), by_node.get(node))
EOF
show "  node sacct_max_rss_mb probe_peak_mb: " "$(cat peaks.txt)"
# shellcheck disable=SC2016 # awk's fields
check "each node's peak is within 15 % (+ 8 MB) of sacct's MaxRSS of the step that ran there" awk '
    { n++; d = 0.15 * $2 + 8; if ($3 != "None" && $2 - $3 < d && $3 - $2 < d) good++ }
    END { exit !(n == 3 && good == 3) }' peaks.txt
mapfile -t m < <(sacct -n -X -P -o NodeList -j "${id[oom]}" | head -n 1 | xargs -r scontrol show hostnames)
check "the oom job is OUT_OF_MEMORY" json_is jobs.ndjson \
    "any(x['job_id'] == '${id[oom]}' and x['state'].startswith('OUT_OF_MEMORY') for x in r)"
reason=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    f = json.loads(l)
    if f["job_id"] == sys.argv[2] and f["flag"] == "oom_killed":
        print(f["reason"])
' flags.ndjson "${id[oom]}")
show "  oom_killed: " "$reason"
check "oom_killed names the node that ran out (${m[0]:-?})" grep -q "on node ${m[0]:-?} (" <<<"$reason"
churn_checks "${id[churn]}"
hpc plot -o spread.svg "${id[spread]}" >plot.out 2>&1
check "hpc plot draws the spread job with a line per node (thin: nodes, bold: job)" \
    grep -q "thin: nodes, bold: job" spread.svg
zcat "$HPC_SIZER_SPOOL/archive/${id[spread]}.series.ndjson.gz" >series.ndjson
check "... from the archived series, which keeps each node's samples" json_is series.ndjson \
    "sorted({x.get('host') for x in r if x.get('host')}) == sorted('${nodes[*]}'.split())"

# Issue 29: the spread job again, asking 4G a node, now with advice from its
# own history (the same job name): memory per node, from the probe's busiest
# node (the step holding 500 MB), not the job's MaxRSS over the nodes. What
# scontrol says the job was given is the plan's --mem, and it covers that
# node's peak.
sed 's/--mem=700M/--mem=4G/' spread.sbatch >spread-big.sbatch
out=$(hpc submit -o "$work/again-%j.out" spread-big.sbatch 2>again.err)
again=$(submitted_id "$out")
show "  again: " "$(cat again.err)"
scontrol show job "${again:-0}" >again.scontrol 2>&1
[ -z "$again" ] || scancel "$again"
mem=$(sed -n 's/^+ --mem=//p' again.err)
check "the 3-node job with advice: the plan gives --mem=${mem:-none} a node" test -n "$mem"
check "... and scontrol shows the job given MinMemoryNode=${mem:-none}" grep -qF "MinMemoryNode=$mem " again.scontrol
busiest=$(python3 - summaries.ndjson "${id[spread]}" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    s = json.loads(l)
    if s["job_id"] == sys.argv[2] and s.get("host") is None:
        print(max(s.get("peak_rss_mb_by_node", {}).values() or [0]))
EOF
)
check "... which covers the busiest node's peak (${busiest:-?} MiB)" python3 -c '
import sys
v, unit = float(sys.argv[1][:-1]), sys.argv[1][-1]
mib = v * {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}[unit]
assert mib >= float(sys.argv[2]) > 400, (mib, sys.argv[2])
' "${mem:-0M}" "${busiest:-0}"

# ---------------------------------------------------------------- 1b. a requeued job
# A job requeued while it runs and run again on another node: its first
# run's node file stayed beside the second's, and hpc-finalize merged them as
# two nodes (the first run's memory too). The second run writes
# HOST.restart-1.ndjson (SLURM_RESTART_COUNT, as slurmd sets it), and its
# result is the second run's alone.
cat >requeue.sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=mn-requeue
#SBATCH --nodes=1 --ntasks=1 --mem=700M --time=00:05:00 --requeue
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
    python3 $work/work.py 400 0 0 120
else
    python3 $work/work.py 100 0 0 6
fi
EOF
out=$(hpc submit --no-recommend -o "$work/requeue-%j.out" requeue.sbatch 2>requeue.err)
rq=$(submitted_id "$out")
[ -n "$rq" ] && jobs+=("$rq")
check "hpc submit requeue.sbatch submits (job ${rq:-none})" [ -n "$rq" ]
first=""
for _ in $(seq 60); do
    first=$(squeue -h -j "${rq:-0}" -t R -o %N 2>/dev/null)
    [ -n "$first" ] && [ -n "$(find "$HPC_SIZER_SPOOL/$rq" -name "$first.ndjson" -size +2k 2>/dev/null)" ] && break
    sleep 1
done
check "the requeue job runs on ${first:-no node}, its probe writing" test -n "$first"
sleep 3
scontrol requeue "${rq:-0}"
# Pending again: it may not go back to the node of its first run.
for _ in $(seq 30); do
    scontrol update JobId="${rq:-0}" ExcNodeList="$first" >/dev/null 2>&1 && break
    sleep 1
done
show "  requeue: " "$(scontrol show job "${rq:-0}" | grep -E 'JobState|Restarts|BeginTime|ExcNodeList')"
check "the requeued job ran again and ended" wait_gone 240 "${rq:-0}"
mapfile -t rfiles < <(cd "$HPC_SIZER_SPOOL/$rq" 2>/dev/null && ls -- *.ndjson)
second=$(sacct -n -X -P -o NodeList -j "${rq:-0}" | head -n 1)
check "its spool has the first run's $first.ndjson and the second's $second.restart-1.ndjson (${rfiles[*]})" \
    test -s "$HPC_SIZER_SPOOL/$rq/$first.ndjson" -a -s "$HPC_SIZER_SPOOL/$rq/$second.restart-1.ndjson" -a "$first" != "$second"
check "its finalized result is the second run's alone: one node ($second), under 250 MiB" \
    json_is "$HPC_SIZER_SPOOL/incoming/$rq.ndjson" \
    "any(x['kind'] == 'summary' and x.get('host') == '$second' and x['peak_rss_mb'] < 250 for x in r) and not any(x['kind'] == 'summary' and x.get('host') == '$first' for x in r)"

# ---------------------------------------------------------------- 2. the admin mode
admin=$work/admin
mkdir -p "$admin/spool"
chmod 1777 "$admin/spool"
# The snippets as an admin installs them: the tools on their PATH (here the
# test's), the spool root here instead of /var/spool/hpc-sizer. A job with
# a no-epilog.ID file here behaves as if its nodes rebooted.
for hook in prolog epilog; do
    cat >"$admin/$hook" <<EOF
#!/bin/sh
export PATH='$PATH' HPC_SIZER_SPOOL_ROOT='$admin/spool'
[ ! -e "$admin/no-epilog.\${SLURM_JOB_ID:-}" ] || [ $hook = prolog ] || exit 0
exec sh '$root/examples/admin/$hook.sh'
EOF
    chmod 755 "$admin/$hook"
done
export HPC_SLURM_TASKPROLOG=$admin/prolog HPC_SLURM_EPILOG=$admin/epilog
out=$(timeout 300 bash "$harness" up 2>&1)
rc=$?
show "" "$out"
check "the cluster restarts with TaskProlog and Epilog set (exit $rc)" [ "$rc" -eq 0 ]
check "... slurm.conf has them" grep -qx "Epilog=$admin/epilog" "$SLURM_CONF"

plain() {
    cat <<EOF
#!/bin/bash
#SBATCH --job-name=$1
#SBATCH --nodes=3 --ntasks-per-node=1 --mem=300M --time=$2
srun python3 $work/work.py 60 0 0 $3
EOF
}
plain adm-timeout 00:01:00 300 >adm-timeout.sbatch
plain adm-done 00:05:00 4 >adm-done.sbatch
plain adm-cancel 00:05:00 120 >adm-cancel.sbatch
plain adm-reboot 00:05:00 3 >adm-reboot.sbatch
declare -A aid
for j in adm-timeout adm-done adm-cancel adm-reboot; do
    out=$(sbatch --hold "$j.sbatch" -o "$work/$j-%j.out" 2>&1)
    aid[$j]=$(submitted_id "$out")
    [ -n "${aid[$j]}" ] && jobs+=("${aid[$j]}")
    check "plain sbatch $j.sbatch submits (job ${aid[$j]:-none}: $out)" [ -n "${aid[$j]}" ]
done
: >"$admin/no-epilog.${aid[adm-reboot]}"
scontrol release "$(IFS=,; echo "${aid[*]}")"
uspool=$admin/spool/$(id -un)
# Cancel once its probes run on every node.
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(find "$uspool/${aid[adm-cancel]}" -name '*.ndjson' 2>/dev/null | wc -l)" -ge 3 ] && break
    sleep 1
done
check "the cancelled job's probes ran on its 3 nodes before scancel" \
    [ "$(find "$uspool/${aid[adm-cancel]}" -name '*.ndjson' 2>/dev/null | wc -l)" -eq 3 ]
scancel "${aid[adm-cancel]}"
check "the admin-mode jobs ended" wait_gone 200 "${aid[@]}"
sleep 2
for j in adm-done adm-cancel adm-timeout; do
    f=$uspool/incoming/${aid[$j]}.ndjson
    check "$j (${aid[$j]}) was finalized by the Epilog: its result in the user's spool, 3 nodes merged" \
        json_is "$f" "any(x['kind'] == 'summary' and not x.get('host') and len(x.get('nodes', [])) == 3 for x in r)"
done
check "adm-reboot, whose Epilog never ran, is not finalized yet and its node files stay" \
    test ! -e "$uspool/incoming/${aid[adm-reboot]}.ndjson" -a -d "$uspool/${aid[adm-reboot]}"
check "the TaskProlog spooled adm-done's analysis (hpc-model plan of its script)" \
    json_is "$uspool/incoming/${aid[adm-done]}.analysis.ndjson" "r[0]['kind'] == 'analysis' and r[0]['job_id'] == '${aid[adm-done]}'"
out=$(HPC_SWEEP_AFTER=0 hpc harvest --spool "$uspool" 2>&1)
rc=$?
show "  harvest: " "$out"
check "hpc harvest --spool of the admin spool exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "... and says it finalized the rebooted job's node files" grep -q "job ${aid[adm-reboot]} ended .* finalized from its node files" <<<"$out"
check "... whose folder is gone" test ! -d "$uspool/${aid[adm-reboot]}"
hpc-store dump --kind job >adm-jobs.ndjson
hpc-store dump --kind summary >adm-summaries.ndjson
for j in adm-done adm-cancel adm-timeout adm-reboot; do
    check "$j is stored with its 3-node summary" json_is adm-summaries.ndjson \
        "any(x['job_id'] == '${aid[$j]}' and not x.get('host') and len(x.get('nodes', [])) == 3 for x in r)"
done
check "states in the database: COMPLETED, CANCELLED, TIMEOUT" json_is adm-jobs.ndjson \
    "sorted(x['state'].split()[0] for x in r if x['job_id'] in ('${aid[adm-done]}', '${aid[adm-cancel]}', '${aid[adm-timeout]}')) == ['CANCELLED', 'COMPLETED', 'TIMEOUT']"
