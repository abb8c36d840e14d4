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
for t in hpc-model hpc-store hpc-ingest hpc-flags hpc-web; do
    [ -x "$bin/$t" ] || (cd "$root" && cargo build -q --no-default-features -p hpc-model -p hpc-store -p hpc-ingest -p hpc-flags -p hpc-web) >&2
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
# A script without #! was advised by recommend and refused by submit.
printf 'echo no shebang\n#SBATCH --mem=1G\n' >"$work/noshebang.sbatch"
check "recommend of a script without #! exits 1" status 1 "$hpc" recommend "$work/noshebang.sbatch"
check "... and says why, as submit does" grep -q "not a batch script" "$work/err"
for r in 0 100 100.5; do
    check "recommend --risk $r is a usage error (exit 2)" status 2 "$hpc" recommend --risk "$r" "$work/none.sbatch"
done
check "plot of a job without a series exits 1 and says why" status 1 "$hpc" plot 77
check "... (the message)" grep -q 'no series of job 77' "$work/err"
mkdir -p "$work/nomodel"
for t in sh bash env cat grep sed awk mktemp rm head dirname basename tr sort id; do ln -sf "$(command -v $t)" "$work/nomodel/$t"; done
printf '#!/bin/sh\n#SBATCH --mem=1G\ntrue\n' >"$work/small.sbatch"
check "submit without hpc-model on PATH exits 1" status 1 env PATH="$work/nomodel" "$hpc" submit "$work/small.sbatch"
check "... and names it" grep -q 'needs hpc-model, which is not on PATH' "$work/err"
mkdir -p "$HPC_SIZER_SPOOL/archive"
echo '{"kind":"sample","t":1,"rss_mb":1}' | gzip >"$HPC_SIZER_SPOOL/archive/78.series.ndjson.gz"
# An array task's visible id (20001_1) finds the series of its raw id
# (20002), through the user's job records: "no series" before.
echo '{"kind":"job","cluster":"c","job_id":"20001_1","job_id_raw":"20002","user":"tester","state":"COMPLETED","is_final":true,"end":"2026-01-01T00:00:00Z"}' |
    HPC_SIZER_DB=$work/array.db hpc-store put 2>/dev/null
echo '{"kind":"sample","t":1700000000,"job_id":"20002","rss_mb":512}' | gzip >"$HPC_SIZER_SPOOL/archive/20002.series.ndjson.gz"
if command -v hpc-plot >/dev/null; then
    check "plot of an array task by the id the user sees (20001_1)" \
        status 0 env HPC_SIZER_DB="$work/array.db" "$hpc" plot --txt 20001_1
fi
if ! command -v hpc-plot >/dev/null; then
    check "plot with a series but no hpc-plot exits 1 and names it" status 1 "$hpc" plot --txt 78
    check "... (the message)" grep -q 'needs hpc-plot' "$work/err"
fi
# An older hpc-model without the plan recommend prints, first on PATH.
mkdir -p "$work/skel"
printf '#!/bin/sh\necho "Usage: hpc-model recommend <script>"\n' >"$work/skel/hpc-model"
chmod +x "$work/skel/hpc-model"
check "recommend with a skeleton hpc-model recommend exits 1" \
    status 1 env PATH="$work/skel:$PATH" "$hpc" recommend "$work/small.sbatch"
check "... and says what it needs" grep -q "needs 'hpc-model plan' with" "$work/err"

# ---------------------------------------------------------------- submit with a fake sbatch
cat >"$fake/sbatch" <<'EOF'
#!/bin/sh
# fake sbatch: records its arguments and the script, prints a job id
n=$(cat "$FAKE_STATE/next" 2>/dev/null || echo 4242)
echo $((n + 1)) >"$FAKE_STATE/next"
printf '%s\n' "$@" >"$FAKE_STATE/sbatch.$n.args"
script=
for a; do
    case $a in */sbatch/*) cp "$a" "$FAKE_STATE/sbatch.$n.script"; script=${a##*/} ;; esac
done
# As sbatch: without --job-name, the job is named after its script's file.
name=$(printf '%s\n' "$@" | sed -n 's/^--job-name=//p')
name=${name:-$script}
begin=$(printf '%s\n' "$@" | sed -n 's/^--begin=//p')
echo "$n PENDING ${begin:-now} ${name:-job}" >>"$FAKE_STATE/queue"
echo "$n"
# As sbatch --wait: the id at once, then the job's own exit status.
exit "${FAKE_SBATCH_RC:-0}"
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

# reads COPY [OPTION...]: what sbatch finally reads, as sbatch reads it
# (written here, apart from hpc-model's parser): the #SBATCH lines from the
# top down to the first line that is neither blank nor a comment, split as
# a shell splits words, then the command line's options over them. Prints
# one JSON object of option -> value.
cat >"$work/reads.py" <<'PYEOF'
import json, shlex, sys
short = {"-c": "--cpus-per-task", "-N": "--nodes", "-n": "--ntasks", "-t": "--time",
         "-p": "--partition", "-A": "--account", "-J": "--job-name", "-a": "--array",
         "-G": "--gpus"}
flags = {"--exclusive", "hetjob"}
words = []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    if line.startswith("#SBATCH"):
        words += shlex.split(line[len("#SBATCH"):], comments=True)
    elif line.strip() == "" or line.lstrip().startswith("#"):
        continue
    else:
        break
words += sys.argv[2:]
got, i = {}, 0
while i < len(words):
    w = words[i]; i += 1
    if w in flags:
        got[w] = True
    elif w.startswith("--") and "=" in w:
        k, v = w.split("=", 1); got[k] = v
    elif w.startswith("--"):
        got[w] = words[i]; i += 1
    elif w[:2] in short:
        k = short[w[:2]]
        if len(w) > 2:
            got[k] = w[2:]
        else:
            got[k] = words[i]; i += 1
print(json.dumps(got))
PYEOF
# submitted N: what sbatch read for the job the fake sbatch gave id N.
submitted() {
    local n=$1 a opts=() o=()
    mapfile -t opts <"$FAKE_STATE/sbatch.$n.args"
    # The options are those before the copy.
    for a in "${opts[@]:1}"; do
        case $a in */sbatch/*) break ;; esac
        o+=("$a")
    done
    python3 "$work/reads.py" "$FAKE_STATE/sbatch.$n.script" "${o[@]}"
}
# json_has JSON PYTHON-EXPRESSION-ON-r
json_has() { python3 -c "import json,sys; r=json.loads(sys.argv[1]); assert $2, r" "$1"; }

cat >"$work/job.sbatch" <<'SBEOF'
#!/bin/bash
#SBATCH --mem=4G
#SBATCH -c 2 --time=10 --job-name=demo

#SBATCH --array=1-3%2
echo work
#SBATCH --mem=1G
SBEOF
sum_before=$(sha256sum <"$work/job.sbatch")
"$hpc" submit --dry-run --no-recommend "$work/job.sbatch" >"$work/dry.out" 2>"$work/dry.err"
rc=$?
check "submit --dry-run --no-recommend exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "... prints a wrapper that starts hpc-monitor" grep -q "^if .*'[^']*/hpc-monitor' start; then" "$work/dry.out"
check "... and runs hpc-finalize" grep -q "'.*/hpc-finalize' \"\$SLURM_JOB_ID\"" "$work/dry.out"
check "... whose directives, as sbatch reads them, are the script's" json_has \
    "$(python3 "$work/reads.py" "$work/dry.out")" \
    'r == {"--mem": "4G", "--cpus-per-task": "2", "--time": "10", "--job-name": "demo", "--array": "1-3%2"}'
check "... and which holds the script unchanged" python3 -c '
import sys
w = open(sys.argv[1]).read(); s = open(sys.argv[2]).read()
assert "\n" + s + "HPC_SUBMIT_SCRIPT_END\n" in w
' "$work/dry.out" "$work/job.sbatch"
check "... the wrapper is valid sh" sh -n "$work/dry.out"
check "... submits nothing" [ ! -e "$FAKE_STATE/next" ]
check "... and leaves the script unchanged" [ "$(sha256sum <"$work/job.sbatch")" = "$sum_before" ]

(cd "$work" && "$hpc" submit --no-recommend --partition=debug job.sbatch one two) >"$work/sub.out" 2>"$work/sub.err"
rc=$?
check "submit --no-recommend with a fake sbatch exits 0 (exit $rc)" [ "$rc" -eq 0 ]
check "... prints 'Submitted batch job 4242'" grep -qx 'Submitted batch job 4242' "$work/sub.out"
check "... runs sbatch --parsable OPTIONS COPY ARGUMENTS" python3 -c '
import sys
a = open(sys.argv[1]).read().splitlines()
assert a[0] == "--parsable" and a[1] == "--partition=debug" and a[3:] == ["one", "two"], a
assert a[2].endswith("/job.sbatch") and "hpc-submit." in a[2], a
' "$FAKE_STATE/sbatch.4242.args"
an=$HPC_SIZER_SPOOL/incoming/4242.analysis.ndjson
check "... spools one analysis record: the job id, the user, the array spec" python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 1 and r[0]["job_id"] == "4242" and r[0]["user"] == "tester", r
assert r[0]["request"]["array"] == "1-3%2" and r[0]["request"]["partition"] == "debug", r
' "$an"
check "... mode 0600 in a 0700 folder" [ "$(stat -c %a "$an") $(stat -c %a "$HPC_SIZER_SPOOL/incoming")" = "600 700" ]
# A database of its own: the report check below counts tester's jobs.
arrdb=$work/array.db
check "... and hpc-store put --spool loads it" hpc-store --db "$arrdb" put --spool "$HPC_SIZER_SPOOL/incoming"
echo '{"kind":"job","cluster":"c","job_id":"4242_2","job_id_raw":"4245","user":"tester","job_name":"demo","state":"COMPLETED","end":"2026-01-01T00:00:00Z","elapsed_s":60,"is_final":true}' |
    hpc-store --db "$arrdb" put 2>/dev/null
check "... dump --user returns it with a task of the array" \
    grep -q '"kind":"analysis".*"job_id":"4242"' <(hpc-store --db "$arrdb" dump --kind job,other --user tester)
check "... and --tool finds the task by the array's tool" \
    grep -q '"job_id":"4242_2"' <(hpc-store --db "$arrdb" dump --kind job --tool generic)

# Issue 29: sbatch's order. `hpc submit job.sbatch worker.sh` handed
# worker.sh to sbatch ahead of the wrapper, so worker.sh became the batch
# script.
printf '#!/bin/sh\necho worker\n' >"$work/worker.sh"
n=$(cat "$FAKE_STATE/next")
(cd "$work" && "$hpc" submit --no-recommend -p debug --mem 2G job.sbatch worker.sh -- x) >"$work/order.out" 2>"$work/order.err"
check "submit in sbatch's order: options, the script, its arguments" python3 -c '
import sys
a = open(sys.argv[1]).read().splitlines()
assert a[:4] == ["--parsable", "-p", "debug", "--mem"] and a[4] == "2G", a
assert a[5].endswith("/job.sbatch") and "hpc-submit." in a[5], a
assert a[6:] == ["worker.sh", "--", "x"], a
' "$FAKE_STATE/sbatch.$n.args"
"$hpc" submit --no-recommend -zz "$work/job.sbatch" >/dev/null 2>"$work/zz.err"
rc=$?
check "submit refuses what is neither an sbatch option nor a script (exit $rc)" [ "$rc" -eq 2 ]
check "... naming it" grep -q -- "-zz is neither" "$work/zz.err"
check "... and an option without its value and no script, exit 2" status 2 "$hpc" submit --no-recommend --partition
# A script whose name is near the 255-byte limit: the wrapper keeps that
# name, and its temporary name did not fit beside it.
long="$work/$(printf 'x%.0s' $(seq 243)).sbatch"
cp "$work/job.sbatch" "$long"
check "submit --dry-run takes a script with a 250-byte name" status 0 "$hpc" submit --dry-run --no-recommend "$long"
"$hpc" submit --dry-run --no-recommend -J 'a b' "$work/job.sbatch" "it's" >/dev/null 2>"$work/dryq.err"
check "the --dry-run line is quoted as a shell reads it" grep -qF "sbatch -J a\\ b (the script above) it\\'s" "$work/dryq.err"
# With no option at all it printed "sbatch '' (the script above)".
"$hpc" submit --dry-run --no-recommend "$work/job.sbatch" >/dev/null 2>"$work/dry0.err"
check "the --dry-run line of no options is the real command" grep -qF "would run: sbatch (the script above)" "$work/dry0.err"
# sbatch --wait exits as the job did: the job is submitted all the same
# (it said "sbatch failed", printed no id and spooled nothing).
waited=$(cat "$FAKE_STATE/next" 2>/dev/null || echo 4242)
FAKE_SBATCH_RC=3 "$hpc" submit --no-recommend --wait "$work/job.sbatch" >"$work/wait.out" 2>"$work/wait.err"
rc=$?
check "submit --wait of a job that fails exits as the job (exit $rc)" [ "$rc" -eq 3 ]
check "... prints its id" grep -qx "Submitted batch job $waited" "$work/wait.out"
check "... spools its analysis" test -s "$HPC_SIZER_SPOOL/incoming/$waited.analysis.ndjson"
check "... and says it is submitted" grep -q "after submitting job $waited" "$work/wait.err"

# The cases that changed what jobs asked for, through the real plan (a cold
# start: this user has no history of these tools).
sub() { # sub NAME SCRIPT-TEXT [SBATCH-OPTION...]: submits; sets $n to its id
    printf '%s' "$2" >"$work/$1.sbatch"
    local name=$1
    shift 2
    n=$(cat "$FAKE_STATE/next")
    "$hpc" submit "$@" "$work/$name.sbatch" >"$work/$name.out" 2>"$work/$name.err"
}
sub mpi $'#!/bin/bash\n#SBATCH -N 4 --ntasks-per-node=2 -c 8 --mem=100G\nsrun ./a.out\n'
check "a 4-node job gets --mem=100G per node and 8 CPUs per task, not the totals" json_has \
    "$(submitted "$n")" 'r["--mem"] == "100G" and r["--cpus-per-task"] == "8" and r["--nodes"] == "4"'
# sbatch names a job without --job-name after its script's file: the
# wrapper was job.sbatch for every job, so SLURM_JOB_NAME, squeue, sacct and
# %x all said job.sbatch, and the history of mpi.sbatch was never found.
check "a job without --job-name keeps its script's name" grep -qx "$n PENDING now mpi.sbatch" "$FAKE_STATE/queue"
sub indented $'#!/bin/bash\n  # set up first\n#SBATCH --partition=gpu --account=lab\n\n    # more\n#SBATCH --gres=gpu:1\nhostname\n'
check "directives after an indented comment reach sbatch" json_has "$(submitted "$n")" \
    'r["--partition"] == "gpu" and r["--account"] == "lab" and r["--gres"] == "gpu:1"'
sub quoted $'#!/bin/bash\n#SBATCH --job-name="x --mem=2G y" --comment "a -t" --mem=3G\ntrue\n'
check "names and quotes arrive unchanged" json_has "$(submitted "$n")" \
    'r["--job-name"] == "x --mem=2G y" and r["--comment"] == "a -t" and r["--mem"] == "3G"'
sub joined $'#!/bin/bash\n#SBATCH--mem=64G\n#SLURM -c 16\ntrue\n'
check "#SBATCH--mem and #SLURM are read by the plan as sbatch reads them" python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["request"]["mem_mb"] == 65536 and r["request"]["cpus"] == 16, r
' "$HPC_SIZER_SPOOL/incoming/$n.analysis.ndjson"
check "... and the copy keeps them for sbatch" grep -qx -e '#SBATCH--mem=64G' "$FAKE_STATE/sbatch.$n.script"
sub whole $'#!/bin/bash\n#SBATCH --mem=0 --exclusive\ntrue\n'
check "--mem=0 and --exclusive are kept and no --time is invented" json_has "$(submitted "$n")" \
    'r["--mem"] == "0" and r.get("--exclusive") and "--time" not in r'
check "... and the plan says so" grep -q -e '--mem=0 (each node' "$work/whole.err"
sub het $'#!/bin/bash\n#SBATCH -c 2 --mem=1G\n#SBATCH hetjob\n#SBATCH -c 8 --mem=8G\nsrun true\n'
check "a heterogeneous job is not merged into one: the plan says why" grep -q 'heterogeneous job' "$work/het.err"
check "... and passes no options of its own" python3 -c '
import sys
a = open(sys.argv[1]).read().splitlines()
assert len(a) == 2 and a[0] == "--parsable", a
' "$FAKE_STATE/sbatch.$n.args"
# The wrapper at run time, with a monitor and a finalizer that log.
mkdir -p "$work/fakemon"
# shellcheck disable=SC2016 # $1 is for the fake monitor
printf '#!/bin/sh\necho "monitor $1" >>"%s"\n' "$work/runlog" >"$work/fakemon/hpc-monitor"
# shellcheck disable=SC2016
printf '#!/bin/sh\necho "finalize $1" >>"%s"\n' "$work/runlog" >"$work/fakemon/hpc-finalize"
chmod +x "$work/fakemon"/*
PATH="$work/fakemon:$PATH" sub execs $'#!/bin/bash\n#SBATCH -c 1\necho start\nexec sh -c "exit 7"\n'
(cd "$work" && SLURM_JOB_ID=$n sh "$FAKE_STATE/sbatch.$n.script" >"$work/run.out" 2>&1)
rc=$?
check "a script ending in exec keeps its exit status ($rc)" [ "$rc" -eq 7 ]
check "... and is finalized" [ "$(cat "$work/runlog")" = "$(printf 'monitor start\nmonitor stop\nfinalize %s' "$n")" ]
PATH="$work/fakemon:$PATH" sub py $'#!/usr/bin/env python3\n#SBATCH --mem=1G\nimport sys\nprint("python ran", sys.argv[1:])\n'
(cd "$work" && SLURM_JOB_ID=$n sh "$FAKE_STATE/sbatch.$n.script" x >"$work/run.out" 2>&1)
check "a script of another interpreter runs with it, not as sh" grep -qx "python ran \['x'\]" "$work/run.out"
HPC_SIZER_SPOOL=/dev/null/spool sub spoolfail $'#!/bin/sh\ntrue\n'
rc=$?
check "a spool that cannot be written after sbatch accepted the job: exit 0 ($rc)" [ "$rc" -eq 0 ]
check "... the id printed" grep -qx "Submitted batch job $n" "$work/spoolfail.out"
check "... and a warning that says what to do" grep -q 'do not submit it again' "$work/spoolfail.err"
USER='a/b&c"d' sub user $'#!/bin/sh\ntrue\n'
check "a USER with / & and \" is written by the tool, as JSON" python3 -c '
import json, sys
assert json.loads(open(sys.argv[1]).readline())["user"] == "a/b&c\"d"
' "$HPC_SIZER_SPOOL/incoming/$n.analysis.ndjson"
start=$(date +%s%N)
sub big $'#!/bin/sh\n#SBATCH --array=1-1000000%10\ntrue\n'
took=$((($(date +%s%N) - start) / 1000000))
check "a 1,000,000-task array submits in under 2 s (${took} ms), one record" python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1 and int(sys.argv[2]) < 2000, (len(lines), sys.argv[2])
' "$HPC_SIZER_SPOOL/incoming/$n.analysis.ndjson" "$took"

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
' "$FAKE_STATE/sbatch.100.args" "/bin-wrappers/hpc-scheduler' run --every '15minutes'"
"$hpc" scheduler start >/dev/null 2>&1
check "a second start while the chain is queued submits nothing" [ "$(cat "$FAKE_STATE/next")" = 101 ]
sed -i 's/^100 PENDING/100 RUNNING/' "$FAKE_STATE/queue"
# One run: no sacct on this PATH, so the harvest fails; it resubmits first.
mkdir -p "$work/nosacct"
for t in sh bash env cat grep sed awk mktemp rm head date dirname basename tr sort mkdir mv printf flock id gzip; do
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
    test "$mine" -lt "$theirs" -a "$theirs" -le "$all"

# A script of no known tool is sized from its job name's jobs: the history
# was narrowed to --tool generic, which holds none of them ("no history").
python3 - >"$work/myjob.ndjson" <<'PYEOF'
import json
for i in range(30):
    print(json.dumps({"kind": "job", "cluster": "c", "job_id": str(9000 + i), "job_id_raw": str(9000 + i),
                      "user": "tester", "job_name": "myjob", "state": "COMPLETED", "is_final": True,
                      "submit": "2026-01-01T00:00:00Z", "start": "2026-01-01T00:00:00Z",
                      "end": "2026-01-01T01:00:00Z", "elapsed_s": 3600.0, "alloc_cpus": 1,
                      "req_mem_mb": 65536.0, "max_rss_mb": 4000.0 + i, "time_limit_s": 7200.0}))
PYEOF
hpc-store put "$work/myjob.ndjson" 2>/dev/null
printf '#!/bin/sh\n#SBATCH -J myjob --mem=64G\necho hi\n' >"$work/myjob.sbatch"
"$hpc" recommend "$work/myjob.sbatch" >"$work/myjob.out" 2>&1
check "recommend sizes a script of no known tool from its job name's 30 jobs" \
    sh -c "! grep -qi 'no history\|no earlier' '$work/myjob.out' && grep -q '30' '$work/myjob.out'"

# A script of a known tool is sized from its job name's jobs too: the
# history was narrowed to --tool, which holds only the jobs an analysis
# record ties to the tool, and 10 jobs named align2 at 98G (from sacct
# alone) were advised 45G from the tool's other jobs at 30G.
python3 - >"$work/align2.ndjson" <<'PYEOF2'
import json
for i in range(10):
    j = 9100 + i
    print(json.dumps({"kind": "job", "cluster": "c", "job_id": str(j), "job_id_raw": str(j),
                      "user": "tester", "job_name": "align2", "state": "COMPLETED", "is_final": True,
                      "submit": "2026-01-02T00:00:00Z", "start": "2026-01-02T00:00:00Z",
                      "end": "2026-01-02T01:00:00Z", "elapsed_s": 3600.0, "alloc_cpus": 8,
                      "req_mem_mb": 131072.0, "max_rss_mb": 100000.0 + i, "time_limit_s": 7200.0}))
for i in range(30):
    j = 9200 + i
    print(json.dumps({"kind": "job", "cluster": "c", "job_id": str(j), "job_id_raw": str(j),
                      "user": "tester", "job_name": "other", "state": "COMPLETED", "is_final": True,
                      "submit": "2026-01-01T00:00:00Z", "start": "2026-01-01T00:00:00Z",
                      "end": "2026-01-01T01:00:00Z", "elapsed_s": 3600.0, "alloc_cpus": 8,
                      "req_mem_mb": 65536.0, "max_rss_mb": 30000.0 + i, "time_limit_s": 7200.0}))
    print(json.dumps({"kind": "analysis", "job_id": str(j), "user": "tester", "tool": "star",
                      "script": "other.sbatch", "script_sha256": "00", "request": {}}))
PYEOF2
hpc-store put "$work/align2.ndjson" 2>/dev/null
printf '#!/bin/sh\n#SBATCH -J align2 --mem=64G\nSTAR --runThreadN 8 --genomeDir g\n' >"$work/align2.sbatch"
"$hpc" recommend --format ndjson "$work/align2.sbatch" >"$work/align2.out" 2>&1
check "recommend of a known tool's script counts its job name's jobs at 98G" python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{") and json.loads(l).get("kind") == "rec":
        m = json.loads(l)["mem_mb"]
        assert m >= 100009, m
        sys.exit(0)
sys.exit(1)
' "$work/align2.out"

# hpc interactive --tool names the tool as the table does: the one-line
# script 'star' matched none of STAR's own spellings (no history), and an
# unknown tool went through in silence (exit 0).
mkdir -p "$work/fakesrun"
printf '#!/bin/sh\necho "srun $*"\n' >"$work/fakesrun/srun"
chmod +x "$work/fakesrun/srun"
for t in star STAR; do
    PATH="$work/fakesrun:$PATH" SHELL=/bin/sh "$hpc" interactive --tool "$t" >"$work/inter-$t.out" 2>&1
    check "interactive --tool $t is sized from the 30 star jobs of the history" \
        grep -q "^srun .*--mem=3[0-9]*M" "$work/inter-$t.out"
done
check "interactive --tool nosuch is a usage error (exit 2)" \
    status 2 env PATH="$work/fakesrun:$PATH" "$hpc" interactive --tool nosuch

# ---------------------------------------------------------------- doctor's sources
mkdir -p "$work/root/proc/fs/lustre" "$work/root/sys/class/infiniband/mlx5_0" "$work/root/dev" \
    "$work/root/sys/class/powercap/intel-rapl:0" "$work/root/sys/devices/system/node/node0" \
    "$work/root/sys/devices/system/node/node1" "$work/root/proc/sys/kernel"
: >"$work/root/dev/nvidia0"
echo 1 >"$work/root/sys/class/powercap/intel-rapl:0/energy_uj"
echo 4 >"$work/root/proc/sys/kernel/perf_event_paranoid"
# The files the probe reads, not only their folders (hpc-probe --sources).
for n in 0 1; do
    printf 'numa_hit 100\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 0\nlocal_node 100\nother_node 0\n' \
        >"$work/root/sys/devices/system/node/node$n/numastat"
done
mkdir -p "$work/root/proc/fs/lustre/llite/scratch-ffff" "$work/root/sys/class/infiniband/mlx5_0/ports/1/counters"
printf 'snapshot_time 1.0 secs.usecs\nread_bytes 1 samples [bytes] 4096 4096 4096\n' \
    >"$work/root/proc/fs/lustre/llite/scratch-ffff/stats"
for c in port_rcv_data port_xmit_data; do echo 0 >"$work/root/sys/class/infiniband/mlx5_0/ports/1/counters/$c"; done
echo '{"index":0,"minor_number":0,"uuid":"GPU-0","name":"x"}' >"$work/gpu.fixture"
HPC_PROBE_GPU_FIXTURE=$work/gpu.fixture HPC_DOCTOR_ROOT=$work/root "$hpc" doctor >"$work/doc.out" 2>&1
rc=$?
check "doctor finds Lustre, InfiniBand, RAPL, 2 NUMA nodes and a GPU in a tree that has them" \
    [ "$(grep -c -e '^ok *lustre' -e '^ok *infiniband: mlx5_0' -e '^ok *rapl' -e '^ok *numa: 2 NUMA' -e '^ok *gpus: 1 GPU' "$work/doc.out")" -eq 5 ]
check "... and says perf counters are off and why" grep -q '^absent perf: .*perf_event_paranoid is 4' "$work/doc.out"
mkdir -p "$work/empty"
HPC_PROBE_GPU_FIXTURE=/dev/null HPC_DOCTOR_ROOT=$work/empty "$hpc" doctor >"$work/doc2.out" 2>&1
check "doctor in a tree without them says absent for each" \
    [ "$(grep -c -e '^absent lustre' -e '^absent infiniband' -e '^absent rapl' -e '^absent gpus' -e '^absent cgroup' -e '^absent perf' "$work/doc2.out")" -eq 6 ]
fails=$(grep -c '^fail' "$work/doc.out")
check "doctor exits 1 exactly when a line says fail ($fails fail lines, exit $rc)" \
    [ "$([ "$fails" -gt 0 ] && echo 1 || echo 0)" = "$rc" ]

# The doctor's web check against a real hpc-web on a socket.
hpc-store put </dev/null >/dev/null 2>&1
web_sock=$work/web.sock
hpc-web --socket "$web_sock" --db "$HPC_SIZER_DB" 2>/dev/null &
web_pid=$!
for _ in $(seq 100); do [ -S "$web_sock" ] && break; sleep 0.1; done
HPC_WEB_SOCKET=$web_sock HPC_DOCTOR_ROOT=$work/empty "$hpc" doctor >"$work/doc3.out" 2>&1 || true
check "doctor: hpc-web on HPC_WEB_SOCKET answers the user's page" grep -q '^ok *web: hpc-web at' "$work/doc3.out"
kill "$web_pid" 2>/dev/null; wait "$web_pid" 2>/dev/null || true
HPC_WEB_SOCKET=$web_sock HPC_DOCTOR_ROOT=$work/empty "$hpc" doctor >"$work/doc4.out" 2>&1 || true
check "doctor: HPC_WEB_SOCKET with no server there is a fail" grep -q '^fail *web: ' "$work/doc4.out"

# ---------------------------------------------------------------- the admin TaskProlog
# examples/admin/prolog.sh with a fake scontrol (the job's script as SLURM
# keeps it) and a fake hpc-monitor: the job's analysis comes from the same
# reading as submit (hpc-model plan) and is spooled under the job's id.
admin=$work/admin
mkdir -p "$admin/fake"
cat >"$admin/fake/scontrol" <<'EOF'
#!/bin/sh
# fake scontrol: write batch_script ID FILE
[ "$1 $2" = "write batch_script" ] && [ "$3" = 4242 ] || exit 1
printf '#!/bin/bash\n  # an indented comment\n#SBATCH --mem=8G -c 4\nSTAR --runThreadN 4 --genomeDir g\n' >"$4"
EOF
# shellcheck disable=SC2016 # the fake expands it when it runs
printf '#!/bin/sh\necho "$HPC_SIZER_SPOOL" >>"%s/monitor.calls"\n' "$admin" >"$admin/fake/hpc-monitor"
chmod +x "$admin/fake"/*
me_id=$(id -un)
out=$(PATH="$admin/fake:$PATH" HPC_SIZER_SPOOL_ROOT=$admin/spool SLURM_JOB_ID=4242 SLURM_STEP_ID=batch \
    sh "$root/examples/admin/prolog.sh")
rc=$?
check "the TaskProlog exits 0 and exports the user's spool ($rc: $out)" \
    test "$rc" -eq 0 -a "$out" = "export HPC_SIZER_SPOOL=$admin/spool/$me_id"
check "... starts the monitor there" grep -qx "$admin/spool/$me_id" "$admin/monitor.calls"
check "... and spools the job's analysis as plan read it (tool, 8G, 4 CPUs, job id)" python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["kind"] == "analysis" and r["job_id"] == "4242" and r["tool"] == "star", r
assert r["request"]["mem_mb"] == 8192 and r["request"]["cpus"] == 4, r
' "$admin/spool/$me_id/incoming/4242.analysis.ndjson"
PATH="$admin/fake:$PATH" HPC_SIZER_SPOOL_ROOT=$admin/spool SLURM_JOB_ID=99 SLURM_STEP_ID=batch \
    sh "$root/examples/admin/prolog.sh" >/dev/null 2>&1
rc=$?
check "a job whose script scontrol cannot give still starts (exit $rc), with no analysis" \
    test "$rc" -eq 0 -a ! -e "$admin/spool/$me_id/incoming/99.analysis.ndjson"

# In a 1777 spool root another user may have made the name first (a folder
# of theirs, or a link): the TaskProlog uses neither, says so in the job's
# output (a "print" line) and exits 0 without a probe.
for squat in folder link; do
    sroot=$admin/squat-$squat
    mkdir -p "$sroot" "$admin/elsewhere"
    if [ "$squat" = folder ]; then
        mkdir -m 777 "$sroot/$me_id" && chown nobody "$sroot/$me_id"
    else
        ln -s "$admin/elsewhere" "$sroot/$me_id"
    fi
    : >"$admin/monitor.calls"
    out=$(PATH="$admin/fake:$PATH" HPC_SIZER_SPOOL_ROOT=$sroot SLURM_JOB_ID=4242 SLURM_STEP_ID=batch \
        sh "$root/examples/admin/prolog.sh")
    rc=$?
    check "the TaskProlog with the user's spool name taken ($squat) exits 0 (exit $rc)" test "$rc" -eq 0
    check "... says so in the job's output and exports no spool ($out)" \
        test "$out" = "print hpc-sizer: $sroot/$me_id is not a folder of your own (another user made it, or it is a link): this job is not probed; ask your admin to remove it"
    check "... starts no monitor and writes nothing there" \
        test ! -s "$admin/monitor.calls" -a -z "$(ls -A "$admin/elsewhere")"
done

# ---------------------------------------------------------------- the admin loader
# examples/admin/loader.sh with a fake hpc-harvest: its lock is root's alone
# (0600, even when an older one was 0644), and a lock held past
# HPC_LOADER_WAIT is reported (exit 1), not waited out in silence (exit 0).
mkdir -p "$admin/lib"
printf '#!/bin/sh
echo "harvest $*" >>"%s/harvest.calls"
' "$admin" >"$admin/fake/hpc-harvest"
chmod +x "$admin/fake/hpc-harvest"
: >"$admin/lib/loader.lock"
chmod 644 "$admin/lib/loader.lock"
loader() {
    PATH="$admin/fake:$PATH" HPC_SIZER_DB=$admin/lib/h.db HPC_SIZER_SPOOL_ROOT=$admin/spool \
        HPC_LOADER_WAIT=1 sh "$root/examples/admin/loader.sh" 2>"$admin/loader.err"
}
loader
rc=$?
check "the loader runs hpc-harvest with each user's folder (exit $rc)" \
    grep -qx "harvest --spool $admin/spool/$me_id" "$admin/harvest.calls"
check "... and its lock is 0600" test "$(stat -c %a "$admin/lib/loader.lock")" = 600
flock "$admin/lib/loader.lock" sleep 5 &
holder=$!
sleep 0.5
: >"$admin/harvest.calls"
loader
rc=$?
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
check "a lock held past HPC_LOADER_WAIT: exit 1 (exit $rc), no harvest" test "$rc" -eq 1 -a ! -s "$admin/harvest.calls"
check "... and it says so" grep -q "loader.lock has been held for over 1 s by another loader" "$admin/loader.err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
