#!/usr/bin/env bash
# tests/slurm/run.sh: the tools against a real SLURM with accounting.
#
# Brings up the single-node cluster of harness.sh, runs real batch jobs with
# the debug binaries and the bin-wrappers on PATH, and checks what lands in
# the spool and the database. Around that it checks that the harness leaves
# the machine's own SLURM alone: a slurmd of the machine's own makes `up`
# refuse (exit 77); with a decoy /etc/slurm/slurm.conf and acct_gather.conf
# planted (only where the machine has none; removed at the end, also on
# failure) and processes standing for the machine's own slurmctld, slurmdbd,
# munged and mariadbd, `up` still brings the test cluster up, and after
# `down` the files under /etc/slurm, /etc/munge and /etc/mysql and the running
# slurm/munge/mysql processes are as they were before `up`.
#
# Prints `ok - ...` / `not ok - ...` per check and a last line
# `N passed, M failed`; exits 1 when a check failed, 77 when the harness
# cannot run here (not root, no apt), and brings the cluster down at the end
# unless KEEP_SLURM=1.
#
# Environment: CARGO_TARGET_DIR (default ~/.cache/hpc-sizer/target; the debug
# binaries are built when missing, hpc-store without its Parquet feature),
# KEEP_SLURM=1, HPC_SLURM_JOB_TIMEOUT (seconds a job may take to reach a final
# accounting state, default 120), and the HPC_SLURM_* settings of harness.sh.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
job_timeout=${HPC_SLURM_JOB_TIMEOUT:-120}
# shellcheck source=tests/slurm/common.sh
. "$here/common.sh"
# shellcheck source=tests/slurm/guard.sh
. "$here/guard.sh"
# seconds_since <date +%s.%N>
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

cluster_is_down=0
# cluster_down: bring the cluster down (once) and compare the machine with
# the snapshot taken before `up`.
cluster_down() {
    [ "$cluster_is_down" = 1 ] && return 0
    cluster_is_down=1
    if [ "${KEEP_SLURM:-0}" = 1 ]; then
        echo "# KEEP_SLURM=1: the cluster stays up (bash $harness down); the machine is not compared"
        return 0
    fi
    local down_out rc t0
    t0=$(date +%s.%N)
    down_out=$(timeout 120 bash "$harness" down 2>&1)
    rc=$?
    show "" "$down_out"
    check "cluster down in $(seconds_since "$t0") s (harness.sh down exited $rc)" [ "$rc" -eq 0 ]
    [ -s "$work/machine-before" ] || return 0
    guard_snapshot "$work/machine-after"
    if cmp -s "$work/machine-before" "$work/machine-after"; then
        ok "after down: /etc/slurm, /etc/munge, /etc/mysql, /etc/hosts, /var/lib/mysql and the slurm/munge/mysql processes are as before up"
    else
        not_ok "after down: /etc/slurm, /etc/munge, /etc/mysql, /etc/hosts, /var/lib/mysql and the slurm/munge/mysql processes are as before up"
        show "  " "$(diff "$work/machine-before" "$work/machine-after")"
    fi
}

# finish: bring the cluster down (so that the count is the last line), report.
finish() {
    trap - EXIT
    cluster_down
    guard_cleanup
    guard_snapshot "$work/machine-end"
    if [ "${KEEP_SLURM:-0}" = 1 ]; then
        # The test cluster's daemons still run: compare the files only.
        sed -i '/^processes:/,$d' "$work/machine-start" "$work/machine-end" 2>/dev/null
    fi
    if [ -s "$work/machine-start" ] && ! cmp -s "$work/machine-start" "$work/machine-end"; then
        not_ok "decoys and stand-in daemons removed: the machine is as the test found it"
        show "  " "$(diff "$work/machine-start" "$work/machine-end")"
    elif [ -s "$work/machine-start" ]; then
        ok "decoys and stand-in daemons removed: the machine is as the test found it"
    fi
    if [ "$failed" -eq 0 ] && [ "${KEEP_SLURM:-0}" != 1 ]; then
        rm -rf "$work"
        echo "# $((SECONDS - t_begin)) s in all"
    else
        echo "# $((SECONDS - t_begin)) s in all; the files are in $work"
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ] || exit 1
    exit 0
}

work=$(mktemp -d /tmp/hpc-sizer-slurm.XXXXXX)
chmod 755 "$work"
# shellcheck disable=SC2317 # called by the EXIT trap
on_exit() {
    cluster_down
    guard_cleanup
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

# ---------------------------------------------------------------- packages
t0=$(date +%s.%N)
install_out=$(timeout 900 bash "$harness" install 2>&1)
rc=$?
if [ "$rc" -eq 77 ]; then
    trap - EXIT
    rm -rf "$work"
    printf '%s\n' "$install_out" | tail -n 1
    exit 77
fi
show "" "$install_out"
if [ "$rc" -ne 0 ]; then
    cluster_is_down=1
    not_ok "packages installed (harness.sh install exited $rc)"
    finish
fi
echo "# packages in place in $(seconds_since "$t0") s"
if [ -s "$HPC_SLURM_STATE/started" ]; then
    # Left up by KEEP_SLURM=1: every run starts from the machine without it.
    echo "# the test cluster is up from an earlier run; bringing it down first"
    show "" "$(timeout 120 bash "$harness" down 2>&1)"
fi
guard_snapshot "$work/machine-start"

# ---------------------------------------------------------------- a slurmd of the machine's own
# While one runs, `up` refuses (exit 77) before it starts or writes anything.
ls -l "$HPC_SLURM_STATE" >"$work/state-before" 2>&1
cat "$HPC_SLURM_STATE/started" >>"$work/state-before" 2>&1
if guard_start_fake slurmd; then
    fake_slurmd=$guard_last_fake
    refuse_out=$(timeout 120 bash "$harness" up 2>&1)
    rc=$?
    show "" "$refuse_out"
    check "with a slurmd of the machine's own running, up exits 77 (exit $rc)" [ "$rc" -eq 77 ]
    check "... and says why in its last line" grep -q "slurmd of this machine's own runs (pid $fake_slurmd)" <<<"$(printf '%s\n' "$refuse_out" | tail -n 1)"
    check "... and leaves that slurmd running" kill -0 "$fake_slurmd"
    ls -l "$HPC_SLURM_STATE" >"$work/state-after" 2>&1
    cat "$HPC_SLURM_STATE/started" >>"$work/state-after" 2>&1
    check "... and starts or writes nothing of its own" cmp -s "$work/state-before" "$work/state-after"
    guard_stop_fake "$fake_slurmd"
else
    not_ok "could not start a stand-in slurmd"
fi

# ---------------------------------------------------------------- the cluster
# The machine's own SLURM, as far as a test may play it: decoy config files
# where it has none, and processes named as its daemons.
check "decoy /etc/slurm/slurm.conf and acct_gather.conf (HDF5 options) planted where missing" guard_plant_decoys
echo "# decoys planted: ${guard_decoys[*]:-none, the machine has its own}"
check "stand-in slurmctld, slurmdbd, munged and mariadbd of the machine's own started" guard_start_fakes
guard_snapshot "$work/machine-before"
t0=$(date +%s.%N)
up_out=$(timeout 900 bash "$harness" up 2>&1)
rc=$?
if [ "$rc" -eq 77 ]; then
    cluster_is_down=1
    guard_cleanup
    trap - EXIT
    rm -rf "$work"
    printf '%s\n' "$up_out" | tail -n 1
    exit 77
fi
show "" "$up_out"
if [ "$rc" -ne 0 ]; then
    not_ok "cluster up (harness.sh up exited $rc)"
    finish
fi
ok "cluster up in $(seconds_since "$t0") s"
scontrol_config=$(timeout 10 scontrol show config 2>/dev/null)
conf_value() { awk -v k="$1" '$1 == k { print $3 }' <<<"$scontrol_config"; }
# shellcheck disable=SC2317 # called through check
reaches_test_cluster() {
    [ "$(conf_value ClusterName)" = "${HPC_SLURM_CLUSTER:-hpcsizer}" ] &&
        [ "$(conf_value SLURM_CONF)" = "$SLURM_CONF" ]
}
check "clients reach the test cluster: ClusterName $(conf_value ClusterName), SLURM_CONF $(conf_value SLURM_CONF)" \
    reaches_test_cluster
check "up reports the stand-in daemons as the machine's own, neither used nor stopped" \
    [ "$(grep -c "of this machine's own runs .*neither used nor stopped" <<<"$up_out")" -eq 4 ]
cgroup_mode=$(cat "$HPC_SLURM_STATE/cgroup_mode" 2>/dev/null || echo v1)

# ---------------------------------------------------------------- the tools
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
bin=$CARGO_TARGET_DIR/debug
tools=(hpc-ingest hpc-store hpc-probe hpc-merge hpc-flags)
for t in "${tools[@]}"; do
    if [ ! -x "$bin/$t" ]; then
        echo "# building the debug binaries in $CARGO_TARGET_DIR"
        (cd "$root" && cargo build -q --no-default-features -p hpc-ingest -p hpc-store -p hpc-probe -p hpc-merge -p hpc-flags) >&2
        break
    fi
done
for t in "${tools[@]}"; do
    [ -x "$bin/$t" ] || {
        not_ok "binary $bin/$t exists"
        finish
    }
done
export PATH="$bin:$root/bin-wrappers:$PATH"
export HPC_SIZER_SPOOL=$work/spool
export XDG_DATA_HOME=$work/data
export HPC_SIZER_DB=$work/hpc-sizer.db
DB=$HPC_SIZER_DB
host=$(hostname -s 2>/dev/null || hostname)

# json_has <file> <python expression over r>: some NDJSON record matches.
# shellcheck disable=SC2317 # called through check
json_has() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
path, cond = sys.argv[1], sys.argv[2]
try:
    lines = open(path).read().splitlines()
except OSError:
    sys.exit(1)
for line in lines:
    if line.strip():
        r = json.loads(line)
        if eval(cond, {}, {"r": r}):
            sys.exit(0)
sys.exit(1)
EOF
}

# final_state <jobid>: wait until sacct shows a final state; print it.
final_state() {
    local deadline=$((SECONDS + job_timeout)) st=""
    while [ "$SECONDS" -lt "$deadline" ]; do
        st=$(timeout 10 sacct -n -X -P -o State -j "$1" 2>/dev/null | head -n 1)
        case $st in
            '' | PENDING | RUNNING | REQUEUED | RESIZING | SUSPENDED | COMPLETING | CONFIGURING) ;;
            *)
                # The step lines (MaxRSS) come with the job's end; wait until
                # the batch step is final too.
                if timeout 10 sacct -n -P -o JobID,State -j "$1" 2>/dev/null |
                    grep -q "^$1\.batch|[A-Z]" &&
                    ! timeout 10 sacct -n -P -o State -j "$1" 2>/dev/null | grep -qx RUNNING; then
                    echo "$st"
                    return 0
                fi
                ;;
        esac
        sleep 1
    done
    echo "${st:-none}"
    return 1
}

submit() {
    local out id
    out=$(timeout 30 sbatch --parsable --export=ALL "$@" 2>&1) || {
        echo "# sbatch failed: $out" >&2
        return 1
    }
    id=${out%%;*}
    echo "$id"
}

# ---------------------------------------------------------------- (a) a monitored job
cat >"$work/job-a.sh" <<'EOF'
#!/bin/bash
#SBATCH --job-name=hpcs-mem300
#SBATCH --mem=1G
#SBATCH --ntasks=1
hpc-monitor start --interval 1
echo "first start exit $?"
hpc-monitor start --interval 1
echo "second start exit $?"
python3 -c '
import time
block = b"\1" * (300 << 20)   # 300 MiB, every page written
time.sleep(6)
print(len(block) >> 20, "MiB held")
'
hpc-monitor stop
EOF
# ---------------------------------------------------------------- (b) over its limit
cat >"$work/job-b.sh" <<'EOF'
#!/bin/bash
#SBATCH --job-name=hpcs-oom
#SBATCH --mem=200M
#SBATCH --ntasks=1
python3 -c '
import time
held = []
for _ in range(20):
    held.append(b"\1" * (20 << 20))   # 20 MiB at a time, 400 MiB in all
    time.sleep(0.1)
time.sleep(2)
'
EOF

cd "$work" || exit 1
job_a=$(submit -o "$work/a-%j.out" "$work/job-a.sh")
job_b=""
[ "$cgroup_mode" = v1 ] && job_b=$(submit -o "$work/b-%j.out" "$work/job-b.sh")
if [ -z "$job_a" ]; then
    not_ok "sbatch job (a)"
    finish
fi
echo "# submitted job (a) $job_a${job_b:+ and job (b) $job_b}"

state_a=$(final_state "$job_a")
check "job (a) $job_a ended COMPLETED in sacct (got $state_a)" [ "$state_a" = COMPLETED ]
sed 's/^/#   a: /' "$work/a-$job_a.out" 2>/dev/null

node_file=$HPC_SIZER_SPOOL/$job_a/$host.ndjson
check "node file $node_file has a meta record" json_has "$node_file" 'r.get("kind") == "meta"'
nsamples=$(grep -c '"kind":"sample"' "$node_file" 2>/dev/null)
check "node file has samples ($nsamples)" [ "${nsamples:-0}" -ge 3 ]
check "hpc-monitor started once in job (a) exits 0" grep -q "first start exit 0" "$work/a-$job_a.out"
check "a second hpc-monitor start in the same job is refused (exit 1)" grep -q "second start exit 1" "$work/a-$job_a.out"
check "... so the node file has one meta and only whole JSON lines" python3 -c '
import json, sys
lines = open(sys.argv[1]).read().split("\n")
records = [json.loads(l) for l in lines if l]
assert sum(r.get("kind") == "meta" for r in records) == 1
' "$node_file"

fin_out=$(timeout 120 hpc-finalize "$job_a" --db "$DB" 2>&1)
rc=$?
check "hpc-finalize $job_a --db exits 0 (exit $rc)" [ "$rc" -eq 0 ]
[ -n "$fin_out" ] && printf '%s\n' "$fin_out" | sed 's/^/#   finalize: /'

timeout 60 hpc-store --db "$DB" dump --kind job >"$work/jobs-a.ndjson" 2>"$work/dump.err"
rss=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if str(r.get("job_id_raw")) == sys.argv[2]:
        print(r.get("state"), r.get("max_rss_mb"))' "$work/jobs-a.ndjson" "$job_a" 2>/dev/null)
check "database has job $job_a from sacct, COMPLETED, max_rss_mb in 280..400 (got: ${rss:-none})" \
    json_has "$work/jobs-a.ndjson" "str(r.get('job_id_raw')) == '$job_a' and r.get('state') == 'COMPLETED' and 280 <= (r.get('max_rss_mb') or 0) <= 400"

timeout 60 hpc-store --db "$DB" dump --kind summary >"$work/summaries-a.ndjson" 2>>"$work/dump.err"
peak=$(python3 -c '
import json, sys
print(" ".join(str(json.loads(l).get("peak_rss_mb")) for l in open(sys.argv[1]) if l.strip()))' "$work/summaries-a.ndjson" 2>/dev/null)
check "database has a summary of job $job_a with peak_rss_mb in 280..400 (got: ${peak:-none})" \
    json_has "$work/summaries-a.ndjson" "str(r.get('job_id')) == '$job_a' and 280 <= (r.get('peak_rss_mb') or 0) <= 400"

series=$HPC_SIZER_SPOOL/archive/$job_a.series.ndjson.gz
series_n=$(gzip -dc "$series" 2>/dev/null | grep -c '"kind":"sample"')
check "archive series $series has samples ($series_n)" [ "${series_n:-0}" -ge 1 ]

# ---------------------------------------------------------------- (b)
if [ -n "$job_b" ]; then
    state_b=$(final_state "$job_b")
    check "job (b) $job_b over --mem=200M ended OUT_OF_MEMORY (got $state_b)" [ "$state_b" = OUT_OF_MEMORY ]
    timeout 30 sacct -P -o "$(hpc-ingest --sacct-format)" -j "$job_b" 2>/dev/null |
        hpc-ingest --ndjson 2>/dev/null | hpc-flags >"$work/flags-b.ndjson" 2>/dev/null
    check "sacct | hpc-ingest --ndjson | hpc-flags gives an oom_killed flag for job $job_b" \
        json_has "$work/flags-b.ndjson" "r.get('kind') == 'flag' and r.get('flag') == 'oom_killed' and str(r.get('job_id')) == '$job_b'"
else
    ok "job (b) skipped: no cgroup v1 memory controller here, so no OUT_OF_MEMORY state # SKIP"
fi

# ---------------------------------------------------------------- (c) harvest
jobs_count() {
    timeout 60 hpc-store --db "$DB" status 2>/dev/null | sed -n 's/^jobs: \([0-9][0-9]*\).*/\1/p'
}
harvest_out=$(timeout 120 hpc-harvest --db "$DB" 2>&1)
rc=$?
check "hpc-harvest --db exits 0 (exit $rc)" [ "$rc" -eq 0 ]
[ -n "$harvest_out" ] && printf '%s\n' "$harvest_out" | sed 's/^/#   harvest: /'
timeout 60 hpc-store --db "$DB" status >"$work/status.txt" 2>&1
sed 's/^/#   status: /' "$work/status.txt"
count1=$(jobs_count)
timeout 60 hpc-store --db "$DB" dump --kind job >"$work/jobs-c.ndjson" 2>>"$work/dump.err"
for id in "$job_a" $job_b; do
    check "after hpc-harvest the database has job $id" \
        json_has "$work/jobs-c.ndjson" "str(r.get('job_id_raw')) == '$id' and r.get('is_final') in (True, 1)"
done
check "hpc-store status counts the jobs (jobs: ${count1:-none})" [ "${count1:-0}" -ge 2 ]

# ---------------------------------------------------------------- (d) again
timeout 120 hpc-harvest --db "$DB" >/dev/null 2>&1
rc=$?
count2=$(jobs_count)
timeout 60 hpc-store --db "$DB" dump --kind job >"$work/jobs-d.ndjson" 2>>"$work/dump.err"
same=0
[ "$rc" -eq 0 ] && [ -n "$count2" ] && [ "$count1" = "$count2" ] && same=1
check "hpc-harvest again exits 0 (exit $rc) and keeps the job count ($count1 -> $count2)" [ "$same" = 1 ]
check "hpc-harvest again leaves the job records unchanged" cmp -s "$work/jobs-c.ndjson" "$work/jobs-d.ndjson"

# ------------------------------------------- (e) times and a failing sacct
# hpc-harvest runs sacct with SLURM_TIME_FORMAT=%s: the stored start is the
# very second sacct knows, whatever the zone.
epoch_a=$(SLURM_TIME_FORMAT=%s timeout 60 sacct -X -n -P -j "$job_a" -o Start 2>/dev/null | head -n 1)
stored_a=$(python3 -c '
import json, sys, datetime
for line in open(sys.argv[1]):
    r = json.loads(line)
    if str(r.get("job_id_raw")) == sys.argv[2] and r.get("start"):
        t = datetime.datetime.strptime(r["start"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        print(int(t.timestamp()))
' "$work/jobs-d.ndjson" "$job_a")
check "job $job_a start stored as sacct's own second ($stored_a = $epoch_a)" \
    test -n "$epoch_a" -a "$stored_a" = "$epoch_a"
mark_file=${XDG_DATA_HOME:-$HOME/.local/share}/hpc-sizer/harvest.watermark
mark_before=$(cat "$mark_file" 2>/dev/null)
timeout 120 hpc-harvest --db "$DB" --since not-a-date >"$work/harvest-bad.out" 2>&1
rc=$?
check "hpc-harvest with a --since the real sacct refuses exits 1 (exit $rc)" [ "$rc" -eq 1 ]
check "... and says sacct failed" grep -q "sacct failed" "$work/harvest-bad.out"
check "... and leaves the watermark alone" [ "$(cat "$mark_file" 2>/dev/null)" = "$mark_before" ]

finish
