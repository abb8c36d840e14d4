# tests/slurm/common.sh: what the real-SLURM scripts share (sourced, not
# run, after they set `here` and `root`): the harness and its slurm.conf,
# the ok/not ok counting of tests/checks.sh, `show`, `json_is`, `wait_gone`,
# `submitted_id`, and for the scripts that only need the cluster up and down
# (pool.sh, flow.sh, multinode.sh) `cluster_up`,
# `cluster_down` and `report_and_exit`. Those use the caller's `work`
# folder. run.sh, which also guards the machine's own SLURM, keeps its own
# cluster_down. flow.sh and multinode.sh start with `flow_start` and
# harvest with `harvest_and_dump`.
# shellcheck shell=bash
# shellcheck disable=SC2154 # here, root and work are the caller's

harness=$here/harness.sh
export HPC_SLURM_STATE=${HPC_SLURM_STATE:-/var/lib/hpc-sizer-slurm}
SLURM_CONF=$(bash "$harness" conf)
export SLURM_CONF
t_begin=$SECONDS
# shellcheck source=tests/checks.sh
. "$root/tests/checks.sh"

# show <prefix> <text>: the text as comment lines.
show() { [ -z "$2" ] || printf '%s\n' "$2" | sed "s/^/# $1/"; }

# json_is <file> <python expression over the records r>: true when the
# expression holds over the NDJSON records of the file.
json_is() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if eval(sys.argv[2], {}, {"r": r}) else 1)
EOF
}

# wait_gone SECONDS ID...: until the jobs (arrays with their tasks) have
# left the queue and sacct has none of their steps running; at most SECONDS.
wait_gone() {
    local limit=$1 deadline
    shift
    deadline=$((SECONDS + limit))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if [ -z "$(squeue -h -j "$(IFS=,; echo "$*")" -o %i 2>/dev/null)" ] &&
            ! sacct -n -P -o State -j "$(IFS=,; echo "$*")" 2>/dev/null | grep -qE 'RUNNING|PENDING|COMPLETING'; then
            return 0
        fi
        sleep 1
    done
    return 1
}
submitted_id() { sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' <<<"$1"; }

# cluster_up: brings the test cluster up. Exits 77 (its files removed) when
# the harness cannot run here, 1 when `up` fails.
cluster_up() {
    local out rc
    out=$(timeout 900 bash "$harness" up 2>&1)
    rc=$?
    if [ "$rc" -eq 77 ]; then
        trap - EXIT
        rm -rf "$work"
        printf '%s\n' "$out" | tail -n 1
        exit 77
    fi
    show "" "$out"
    if [ "$rc" -ne 0 ]; then
        not_ok "cluster up (harness.sh up exited $rc)"
        exit 1
    fi
    ok "cluster up"
}

# cluster_down: brings it down, unless KEEP_SLURM=1.
cluster_down() {
    if [ "${KEEP_SLURM:-0}" = 1 ]; then
        echo "# KEEP_SLURM=1: the cluster stays up (bash $harness down)"
        return 0
    fi
    local out rc
    out=$(timeout 120 bash "$harness" down 2>&1)
    rc=$?
    show "" "$out"
    check "cluster down (harness.sh down exited $rc)" [ "$rc" -eq 0 ]
}

# report_and_exit: keeps the files of a failed run, prints the time and the
# count last, and exits 1 when a check failed. (A bare `exit` in an EXIT
# trap keeps the status from before the trap, which would report a failed
# run as passed: hence the explicit codes.)
report_and_exit() {
    if [ "$failed" -eq 0 ]; then
        rm -rf "${work:-}"
    elif [ -n "${work:-}" ]; then
        echo "# the files are in $work"
    fi
    echo "# $((SECONDS - t_begin)) s in all"
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ] && exit 0
    exit 1
}

# flow_start NAME: what the scripts of the whole flow (flow.sh,
# multinode.sh) begin with. Makes `work` (/tmp/hpc-sizer-NAME.XXXXXX) and
# the `jobs` they submit, which the EXIT trap cancels (with any harvest
# chain) before the cluster goes down and the count is printed; builds the
# tools; brings the cluster up; puts the tools first on PATH and the spool
# and database under `work`.
flow_start() {
    work=$(mktemp -d "/tmp/hpc-sizer-$1.XXXXXX")
    chmod 755 "$work"
    jobs=()
    trap flow_finish EXIT
    trap 'exit 130' INT TERM HUP
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
    (cd "$root" && cargo build -q --no-default-features -p hpc-ingest -p hpc-store -p hpc-probe \
        -p hpc-merge -p hpc-flags -p hpc-model -p hpc-plot) >&2
    cluster_up
    export PATH="$CARGO_TARGET_DIR/debug:$root/bin-wrappers:$PATH"
    export HPC_SIZER_SPOOL=$work/spool XDG_DATA_HOME=$work/data HPC_SIZER_DB=$work/data/hpc.db
    mkdir -p "$XDG_DATA_HOME"
}

flow_finish() {
    trap - EXIT
    [ ${#jobs[@]} -eq 0 ] || timeout 30 scancel "${jobs[@]}" >/dev/null 2>&1
    timeout 30 scancel -n hpc-scheduler >/dev/null 2>&1
    cluster_down
    report_and_exit
}

# harvest_and_dump: runs `hpc harvest` (checked to exit 0), then dumps the
# database's jobs, summaries and flags into jobs.ndjson, summaries.ndjson
# and flags.ndjson of the current folder.
harvest_and_dump() {
    local out rc
    out=$(hpc harvest 2>&1)
    rc=$?
    show "  harvest: " "$out"
    check "hpc harvest exits 0 (exit $rc)" [ "$rc" -eq 0 ]
    hpc-store dump --kind job >jobs.ndjson
    hpc-store dump --kind summary >summaries.ndjson
    hpc-store dump --kind flag >flags.ndjson
}

# write_work_py: work.py in the current folder. `python3 work.py MB PROCS
# DUTY SECONDS` holds MB, with PROCS processes that keep a core busy DUTY of
# the time (0 to 1), for SECONDS.
write_work_py() {
    cat >work.py <<'EOF'
import sys, time, multiprocessing as mp
mb, procs, duty, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def burn():
    end = time.time() + secs
    while time.time() < end:
        t = time.time()
        while time.time() - t < 0.05 * duty:
            pass
        time.sleep(0.05 * (1 - duty))
ps = [mp.Process(target=burn) for _ in range(procs)]
for p in ps:
    p.start()
held = b"\1" * (mb << 20)
time.sleep(secs)
for p in ps:
    p.join()
EOF
}

# churn_sbatch NAME: churn.sbatch in the current folder, job NAME: the
# probe's cgroup path against 200 short-lived children and a steady 500 MB
# process (work.py). The monitor's probe reads the job's cgroup; a second
# probe in the script watches the script's processes one by one (--pid, the
# per-process path) into $work/churn-per-process.ndjson.
churn_sbatch() {
    cat >churn.sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=$1
#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=2 --mem=1G --time=00:05:00
hpc-probe --pid \$\$ --interval 0.5 --no-perf --out $work/churn-per-process.ndjson &
pp=\$!
python3 $work/work.py 500 0 0 14 &
steady=\$!
sleep 1
for i in \$(seq 200); do python3 -c 'sum(range(200000))'; done
wait \$steady
sleep 1
kill \$pp
wait \$pp
EOF
}

# within10 WHAT A B: in churn.txt, the line WHAT's fields A and B are both
# positive and within 10 % of field A.
# shellcheck disable=SC2016 # awk's fields
within10() { awk -v w="$1" -v a="$2" -v b="$3" '$1 == w { exit !($a > 0 && $b > 0 && ($a - $b) <= 0.1 * $a && ($b - $a) <= 0.1 * $a) }' churn.txt; }

# churn_checks ID [CPU-AGAINST]: after harvest_and_dump, job ID's peak by
# the cgroup path is within 10 % of sacct's MaxRSS and of the per-process
# path's, and its CPU seconds within 10 % of sacct's TotalCPU (CPU-AGAINST
# `sacct`, the default) or of the per-process path's (`processes`).
churn_checks() {
    hpc-merge churn-per-process.ndjson >churn-pp.ndjson 2>churn-pp.err
    python3 - jobs.ndjson summaries.ndjson churn-pp.ndjson "$1" >churn.txt <<'EOF'
import json, sys
job = [j for j in map(json.loads, open(sys.argv[1])) if j["job_id"] == sys.argv[4]][0]
cg = [s for s in map(json.loads, open(sys.argv[2])) if s["job_id"] == sys.argv[4] and not s.get("host")][0]
pp = [s for s in map(json.loads, open(sys.argv[3])) if s.get("kind") == "summary" and not s.get("host")][0]
print("peak_mb", job.get("max_rss_mb"), cg.get("peak_rss_mb"), pp.get("peak_rss_mb"))
print("cpu_s", job.get("total_cpu_s"), cg.get("cpu_s"), pp.get("cpu_s"))
EOF
    show "  churn (sacct, cgroup path, per-process path): " "$(cat churn.txt)"
    check "churn job: the cgroup path's peak is within 10 % of sacct's MaxRSS" within10 peak_mb 2 3
    check "... and of the per-process path's" within10 peak_mb 3 4
    if [ "${2:-sacct}" = sacct ]; then
        check "... its CPU seconds within 10 % of sacct's TotalCPU (200 short-lived children included)" within10 cpu_s 2 3
    else
        check "... its CPU seconds within 10 % of the per-process path's (200 short-lived children included)" within10 cpu_s 4 3
    fi
}
