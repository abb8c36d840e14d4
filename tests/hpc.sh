#!/usr/bin/env bash
# tests/hpc.sh: bin-wrappers/hpc without SLURM: --help against man/hpc.1,
# usage errors, missing tools, `submit` (the copy, the diff, the sbatch
# command line and the spooled analysis) with a fake sbatch on PATH, and the
# scheduler chain with fake sbatch, squeue and scancel that keep a queue in
# a file. The other tools are the real debug binaries.
#
# Prints `ok - ...` / `not ok - ...` per check and `N passed, M failed`;
# exits 1 when a check failed. Environment: CARGO_TARGET_DIR (default
# ~/.cache/hpc-sizer/target; hpc-model is built there when missing).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/checks.sh
. "$root/tests/checks.sh"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
bin=$CARGO_TARGET_DIR/debug
for t in hpc-model hpc-store hpc-ingest hpc-flags; do
    [ -x "$bin/$t" ] || (cd "$root" && cargo build -q --no-default-features -p hpc-model -p hpc-store -p hpc-ingest -p hpc-flags) >&2
done
work=$(mktemp -d /tmp/hpc-test.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$work"' EXIT
fake=$work/fake
mkdir -p "$fake"
export PATH="$fake:$bin:$root/bin-wrappers:$PATH"
export XDG_DATA_HOME=$work/data HPC_SIZER_DB=$work/data/hpc.db HPC_SIZER_SPOOL=$work/spool USER=tester
hpc=$root/bin-wrappers/hpc

# ---------------------------------------------------------------- --help and the man page
man_text=$(mandoc -T ascii -O width=1000 "$root/man/hpc.1" | sed 's/.\x08//g' | tr -s ' ')
help_text=$("$hpc" --help)
check "hpc --help exits 0 and prints the usage" grep -q '^usage: hpc COMMAND' <<<"$help_text"
missing=""
while IFS= read -r line; do
    grep -qF -- "$(tr -s ' ' <<<"$line")" <<<"$man_text" || missing="$missing | $line"
done < <(grep '^hpc ' <<<"$help_text")
check "every synopsis line of hpc --help is in man/hpc.1${missing:+ (missing:$missing)}" [ -z "$missing" ]
missing=""
for word in $(grep -o -- '--[a-z-]*' <<<"$help_text" | sort -u) \
    $(awk 'NF > 1 && /^[a-z]+  / { print $1 }' <<<"$help_text"); do
    grep -qF -- "$word" <<<"$man_text" || missing="$missing $word"
done
check "every command and option of hpc --help is in man/hpc.1${missing:+ (missing:$missing)}" [ -z "$missing" ]

# ---------------------------------------------------------------- usage errors and missing tools
# status <expected> <command...>: the exit status is as expected.
status() {
    local want=$1
    shift
    "$@" >"$work/out" 2>"$work/err"
    [ $? -eq "$want" ]
}
check "hpc with no command exits 2" status 2 "$hpc"
check "an unknown command exits 2" status 2 "$hpc" bogus
check "submit without a script exits 2" status 2 "$hpc" submit
check "submit --risk abc exits 2" status 2 "$hpc" submit --risk abc x.sbatch
check "recommend --format xml exits 2" status 2 "$hpc" recommend --format xml x.sbatch
check "plot without a job id exits 2" status 2 "$hpc" plot
check "plot ../x (not a job id) exits 2" status 2 "$hpc" plot ../x
check "history without --tool exits 2" status 2 "$hpc" history
check "scheduler bogus exits 2" status 2 "$hpc" scheduler bogus
check "scheduler start --every 'now;rm' exits 2" status 2 "$hpc" scheduler start --every 'now;rm'
check "submit of a missing script exits 1" status 1 "$hpc" submit --no-recommend "$work/none.sbatch"
check "plot of a job without a series exits 1 and says why" status 1 "$hpc" plot 77
check "... (the message)" grep -q 'no series of job 77' "$work/err"
mkdir -p "$work/nomodel"
for t in sh cat grep sed awk mktemp rm head dirname basename tr sort; do ln -sf "$(command -v $t)" "$work/nomodel/$t"; done
printf '#!/bin/sh\n#SBATCH --mem=1G\ntrue\n' >"$work/small.sbatch"
check "submit without hpc-model on PATH exits 1" status 1 env PATH="$work/nomodel" "$hpc" submit "$work/small.sbatch"
check "... and names it" grep -q 'needs hpc-model, which is not on PATH' "$work/err"
mkdir -p "$HPC_SIZER_SPOOL/archive"
echo '{"kind":"sample","t":1,"rss_mb":1}' | gzip >"$HPC_SIZER_SPOOL/archive/78.series.ndjson.gz"
if ! command -v hpc-plot >/dev/null; then
    check "plot with a series but no hpc-plot exits 1 and names it" status 1 "$hpc" plot --txt 78
    check "... (the message)" grep -q 'needs hpc-plot' "$work/err"
fi
if hpc-model recommend --help 2>/dev/null | grep -q -e --history; then
    ok "hpc-model recommend has --history # SKIP the missing-subcommand check"
else
    check "recommend with a skeleton hpc-model recommend exits 1" status 1 "$hpc" recommend "$work/small.sbatch"
    check "... and says what it needs" grep -q "needs 'hpc-model recommend' with --history" "$work/err"
fi

# ---------------------------------------------------------------- submit with a fake sbatch
cat >"$fake/sbatch" <<'EOF'
#!/bin/sh
# fake sbatch: records its arguments and the script, prints a job id
n=$(cat "$FAKE_STATE/next" 2>/dev/null || echo 4242)
echo $((n + 1)) >"$FAKE_STATE/next"
printf '%s\n' "$@" >"$FAKE_STATE/sbatch.$n.args"
for a; do
    case $a in */job.sbatch) cp "$a" "$FAKE_STATE/sbatch.$n.script" ;; esac
done
name=$(printf '%s\n' "$@" | sed -n 's/^--job-name=//p')
begin=$(printf '%s\n' "$@" | sed -n 's/^--begin=//p')
echo "$n PENDING ${begin:-now} ${name:-job}" >>"$FAKE_STATE/queue"
echo "$n"
EOF
cat >"$fake/squeue" <<'EOF'
#!/bin/sh
# fake squeue: the queue file, filtered by -n NAME and -t STATES; prints "id state begin"
name="" states=PENDING,RUNNING
while [ $# -gt 0 ]; do
    case $1 in -n) name=$2; shift ;; -t) states=$2; shift ;; esac
    shift
done
[ -f "$FAKE_STATE/queue" ] || exit 0
awk -v name="$name" -v states=",$states," 'index(states, "," $2 ",") && (name == "" || $4 == name) { print $1, $2, $3 }' "$FAKE_STATE/queue"
EOF
cat >"$fake/scancel" <<'EOF'
#!/bin/sh
# fake scancel: removes the ids from the queue file
for id; do
    awk -v id="$id" '$1 != id' "$FAKE_STATE/queue" >"$FAKE_STATE/queue.new" && mv "$FAKE_STATE/queue.new" "$FAKE_STATE/queue"
done
EOF
chmod +x "$fake"/*
export FAKE_STATE=$work/state
mkdir -p "$FAKE_STATE"

cat >"$work/job.sbatch" <<'EOF'
#!/bin/bash
#SBATCH --mem=4G
#SBATCH -c 2 --time=10 --job-name=demo

#SBATCH --array=1-3%2
echo work
#SBATCH --mem=1G
EOF
sum_before=$(sha256sum <"$work/job.sbatch")
"$hpc" submit --dry-run --no-recommend "$work/job.sbatch" >"$work/dry.out" 2>"$work/dry.err"
rc=$?
check "submit --dry-run --no-recommend exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "... prints the copy with hpc-monitor start injected" grep -q "^if '.*/hpc-monitor' start; then" "$work/dry.out"
check "... and hpc-finalize in the EXIT trap" grep -q "'.*/hpc-finalize' \"\$SLURM_JOB_ID\"" "$work/dry.out"
check "... before the first command, after every directive" python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
mon = next(i for i, l in enumerate(lines) if "hpc-monitor" in l)
work = lines.index("echo work")
last_dir = max(i for i, l in enumerate(lines[:work]) if l.startswith("#SBATCH"))
assert last_dir < mon < work, (last_dir, mon, work)
assert lines[0] == "#!/bin/bash" and "#SBATCH --mem=4G" in lines
' "$work/dry.out"
check "... the copy is valid sh" bash -n "$work/dry.out"
check "... submits nothing" [ ! -e "$FAKE_STATE/next" ]
check "... and leaves the script unchanged" [ "$(sha256sum <"$work/job.sbatch")" = "$sum_before" ]

(cd "$work" && "$hpc" submit --no-recommend job.sbatch --partition=debug -- one two) >"$work/sub.out" 2>"$work/sub.err"
rc=$?
check "submit --no-recommend with a fake sbatch exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "... prints 'Submitted batch job 4242'" grep -qx 'Submitted batch job 4242' "$work/sub.out"
check "... runs sbatch --parsable OPTIONS COPY ARGUMENTS" python3 -c '
import sys
a = open(sys.argv[1]).read().splitlines()
assert a[0] == "--parsable" and a[1] == "--partition=debug" and a[3:] == ["one", "two"], a
assert a[2].endswith("/job.sbatch") and "hpc-submit." in a[2], a
' "$FAKE_STATE/sbatch.4242.args"
check "... with the monitor in the script it submitted" grep -q 'hpc-monitor' "$FAKE_STATE/sbatch.4242.script"
an=$HPC_SIZER_SPOOL/incoming/4242.analysis.ndjson
check "... spools the analysis with the job id, the user and one per array task" python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert [x["job_id"] for x in r] == ["4242", "4242_1", "4242_2", "4242_3"], r
assert all(x["kind"] == "analysis" and x["user"] == "tester" and x["tool"] == "generic" for x in r)
' "$an"
check "... mode 0600 in a 0700 folder" [ "$(stat -c %a "$an") $(stat -c %a "$HPC_SIZER_SPOOL/incoming")" = "600 700" ]
check "... and hpc-store put --spool loads it" hpc-store put --spool "$HPC_SIZER_SPOOL/incoming"
check "... (the record is in the database)" grep -q '"job_id":"4242_2"' <(hpc-store dump --kind other)

# The rewrite, with the recommendation of the real hpc-model (a cold start:
# no history) when this hpc-model has recommend.
if hpc-model recommend --help 2>/dev/null | grep -q -e --history; then
    "$hpc" submit --dry-run "$work/job.sbatch" --mem=2G >"$work/rec.out" 2>"$work/rec.err"
    rc=$?
    check "submit --dry-run with the recommendation exits 0 (exit $rc)" [ "$rc" -eq 0 ]
    check "... replaces -c and --time in their line, keeping --job-name" python3 -c '
import sys
l = open(sys.argv[1]).read().splitlines()
assert "## hpc submit replaced: #SBATCH -c 2 --time=10 --job-name=demo" in l, l
assert "#SBATCH --job-name=demo" in l and any(x.startswith("#SBATCH --time=") for x in l), l
assert "#SBATCH --mem=4G" in l and not any(x.startswith("#SBATCH --mem=") and x != "#SBATCH --mem=4G" for x in l[:8]), l
assert l[-1] == "#SBATCH --mem=1G", l
' "$work/rec.out"
    check "... the diff shows the old and new lines with a reason" grep -q '^- #SBATCH -c 2 --time=10 --job-name=demo' "$work/rec.err"
    check "... (a reason under a + line)" grep -A1 '^+ #SBATCH --time=' "$work/rec.err" | grep -q 'why: '
    check "... and says the command line's --mem wins" grep -q 'command line sets mem' "$work/rec.err"
else
    ok "hpc-model recommend not in this tree # SKIP the rewrite with a recommendation (runs after the merge)"
fi

# ---------------------------------------------------------------- the scheduler chain
: >"$FAKE_STATE/queue"
echo 100 >"$FAKE_STATE/next"
out=$("$hpc" scheduler start --every 15minutes 2>&1)
rc=$?
check "scheduler start exits 0 (exit $rc: $out)" [ "$rc" -eq 0 ]
check "... submits one run at once: 1 CPU, 512M, 5 minutes, named hpc-scheduler" python3 -c '
import sys
a = open(sys.argv[1]).read().splitlines()
for want in ("--job-name=hpc-scheduler", "--cpus-per-task=1", "--mem=512M", "--time=00:05:00", "--begin=now"):
    assert want in a, (want, a)
w = [x for x in a if x.startswith("--wrap=")][0]
assert sys.argv[2] in w, w
' "$FAKE_STATE/sbatch.100.args" "/bin-wrappers/hpc' scheduler run --every '15minutes'"
"$hpc" scheduler start >/dev/null 2>&1
check "a second start while the chain is queued submits nothing" [ "$(cat "$FAKE_STATE/next")" = 101 ]
sed -i 's/^100 PENDING/100 RUNNING/' "$FAKE_STATE/queue"
# One run: no sacct on this PATH, so the harvest fails; it resubmits first.
mkdir -p "$work/nosacct"
for t in sh cat grep sed awk mktemp rm head date dirname basename tr sort mkdir mv printf flock id gzip; do
    p=$(command -v $t) && ln -sf "$p" "$work/nosacct/$t"
done
PATH="$fake:$bin:$root/bin-wrappers:$work/nosacct" SLURM_JOB_ID=100 "$hpc" scheduler run --every 15minutes >/dev/null 2>&1
rc=$?
log=$XDG_DATA_HOME/hpc-sizer/scheduler/runs.log
check "a run whose harvest fails exits non-zero (exit $rc)" [ "$rc" -ne 0 ]
check "... and still queued the next run, 15 minutes on" grep -qx -- '--begin=now+15minutes' "$FAKE_STATE/sbatch.101.args"
check "... and logged it with the harvest's status" grep -q 'run 100: next job 101; harvest exit [1-9]' "$log"
SLURM_JOB_ID=100 "$hpc" scheduler run --every 15minutes >/dev/null 2>&1
check "a run that finds a run pending submits none (one chain)" [ "$(cat "$FAKE_STATE/next")" = 102 ]
out=$("$hpc" scheduler status)
rc=$?
check "status exits 0 and shows the next run and the last outcome (exit $rc)" \
    grep -q 'next run: job 101, pending, begins now+15minutes' <<<"$out"
check "... (the last run)" grep -q '^last run: .*run 100: next job 101 (queued already)' <<<"$out"
out=$("$hpc" scheduler stop)
check "stop cancels the pending run ($out)" [ "$(awk '$2 == "PENDING"' "$FAKE_STATE/queue")" = "" ]
SLURM_JOB_ID=100 "$hpc" scheduler run --every 15minutes >/dev/null 2>&1
check "a run after stop does not resubmit" [ "$(cat "$FAKE_STATE/next")" = 102 ]
check "... and says so in the log" grep -q 'run 100: the chain is stopped; not resubmitted' "$log"
: >"$FAKE_STATE/queue"
check "status with nothing queued exits 3" status 3 "$hpc" scheduler status
"$hpc" scheduler start >/dev/null 2>&1
check "start after stop starts a new chain" [ "$(cat "$FAKE_STATE/next")" = 103 ]

# ---------------------------------------------------------------- report is the user's
hpc-ingest --ndjson <"$root/examples/sacct-sample.txt" 2>/dev/null | hpc-store put 2>/dev/null
someone=$(hpc-store dump --kind job | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["user"])')
all=$("$hpc" report --all --format csv | wc -l)
theirs=$(USER=$someone "$hpc" report --format csv | wc -l)
mine=$("$hpc" report --format csv | wc -l)
check "report covers the user's jobs ($mine lines for tester, $theirs for $someone, $all with --all)" \
    [ "$mine" -lt "$theirs" ] && [ "$theirs" -le "$all" ]

# ---------------------------------------------------------------- doctor's sources
mkdir -p "$work/root/proc/fs/lustre" "$work/root/sys/class/infiniband/mlx5_0" "$work/root/dev" \
    "$work/root/sys/class/powercap/intel-rapl:0" "$work/root/sys/devices/system/node/node0" \
    "$work/root/sys/devices/system/node/node1" "$work/root/proc/sys/kernel"
: >"$work/root/dev/nvidia0"
echo 1 >"$work/root/sys/class/powercap/intel-rapl:0/energy_uj"
echo 4 >"$work/root/proc/sys/kernel/perf_event_paranoid"
HPC_DOCTOR_ROOT=$work/root "$hpc" doctor >"$work/doc.out" 2>&1
rc=$?
check "doctor finds Lustre, InfiniBand, RAPL, 2 NUMA nodes and a GPU in a tree that has them" \
    [ "$(grep -c -e '^ok *lustre' -e '^ok *infiniband: mlx5_0' -e '^ok *rapl' -e '^ok *numa: 2 NUMA' -e '^ok *gpus: 1 GPU' "$work/doc.out")" -eq 5 ]
check "... and says perf counters are off and why" grep -q '^absent perf: .*perf_event_paranoid is 4' "$work/doc.out"
mkdir -p "$work/empty"
HPC_DOCTOR_ROOT=$work/empty "$hpc" doctor >"$work/doc2.out" 2>&1
check "doctor in a tree without them says absent for each" \
    [ "$(grep -c -e '^absent lustre' -e '^absent infiniband' -e '^absent rapl' -e '^absent gpus' -e '^absent cgroup' -e '^absent perf' "$work/doc2.out")" -eq 6 ]
fails=$(grep -c '^fail' "$work/doc.out")
check "doctor exits 1 exactly when a line says fail ($fails fail lines, exit $rc)" \
    [ "$([ "$fails" -gt 0 ] && echo 1 || echo 0)" = "$rc" ]

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
