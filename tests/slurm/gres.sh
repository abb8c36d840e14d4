#!/usr/bin/env bash
# hpc submit with --gres of two kinds on the real test cluster, its nodes
# given gpu:2,lscratch:100 (counts, HPC_SLURM_GRES): what SLURM finally
# gives the job, as `scontrol show job` says it. Without advice both kinds
# stay as asked; with a history in which the job used 1 of its 2 GPUs the
# plan lowers the GPUs and keeps the scratch space. Brings the cluster up
# with the GRES and down again (the next script's `up` writes its own
# configuration). Prints ok/not ok per check; exits 1 when one failed, 77
# when the cluster cannot run here.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/slurm/common.sh
. "$here/common.sh"

export HPC_SLURM_GRES=gpu:2,lscratch:100
flow_start gres
cd "$work" || exit 1

check "slurm.conf gives the nodes gpu:2,lscratch:100 and the GRES types" \
    bash -c "grep -q 'Gres=gpu:2,lscratch:100' '$SLURM_CONF' && grep -qx 'GresTypes=gpu,lscratch' '$SLURM_CONF'"

# The history of gres-plan: 6 jobs of this user that held 2 GPUs and ran a
# process on one (hpc-merge's per-GPU summary), each with its analysis.
me=${USER:-$(id -un)}
for i in 1 2 3 4 5 6; do
    printf '{"kind":"job","cluster":"hpcsizer","job_id":"900%d","job_id_raw":"900%d","user":"%s","job_name":"gres-plan","state":"COMPLETED","is_final":true,"submit":"2026-11-0%dT00:00:00Z","start":"2026-11-0%dT00:00:00Z","end":"2026-11-0%dT00:10:00Z","elapsed_s":600,"timelimit_s":3600,"alloc_cpus":1,"alloc_gpus":2,"nnodes":1,"ntasks":1,"req_mem_mb":1000,"max_rss_mb":100,"total_cpu_s":500}\n' "$i" "$i" "$me" "$i" "$i" "$i"
    printf '{"kind":"summary","job_id":"900%d","gpus":[{"index":0,"max_procs":1,"peak_util":60},{"index":1,"max_procs":0,"peak_util":0}]}\n' "$i"
    printf '{"kind":"analysis","job_id":"900%d","user":"%s","script":"plan.sbatch","script_sha256":"x","request":{"gpus":2,"job_name":"gres-plan"},"tool":"generic","tools":[]}\n' "$i" "$me"
done | hpc-store put >/dev/null 2>&1
check "the history is stored" [ "$(hpc-store dump --kind job --user "$me" | grep -c gres-plan)" -eq 6 ]

for j in keep plan; do
    cat >"$j.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=gres-$j
#SBATCH --gres=gpu:2,lscratch:10
#SBATCH --time=10:00
echo "gres job ran"
EOF
done
declare -A id
out=$(hpc submit --no-recommend -o "$work/keep-%j.out" keep.sbatch 2>keep.err)
id[keep]=$(submitted_id "$out")
out=$(hpc submit -o "$work/plan-%j.out" plan.sbatch 2>plan.err)
id[plan]=$(submitted_id "$out")
show "  plan: " "$(cat plan.err)"
for j in keep plan; do
    [ -z "${id[$j]}" ] || jobs+=("${id[$j]}")
    check "hpc submit $j.sbatch submits (job ${id[$j]:-none})" [ -n "${id[$j]}" ]
    scontrol show job "${id[$j]:-0}" >"$j.scontrol" 2>&1
    show "  $j: " "$(grep -o 'TresPerNode=[^ ]*' "$j.scontrol")"
done
check "scontrol: without advice the job has gpu:2 and lscratch:10" \
    grep -q 'TresPerNode=gres:gpu:2,gres:lscratch:10' keep.scontrol
check "scontrol: with advice the job has gpu:1 and still lscratch:10" \
    grep -q 'TresPerNode=gres:gpu:1,gres:lscratch:10' plan.scontrol

wait_gone 120 "${jobs[@]}"
for j in keep plan; do
    check "the $j job ran and COMPLETED" bash -c "
        grep -qx 'gres job ran' '$work/$j-${id[$j]:-0}.out' &&
        sacct -n -X -P -o State -j '${id[$j]:-0}' | grep -qx COMPLETED"
done
