#!/usr/bin/env bash
# tests/faults.sh: the whole tools under the faults a user meets.
#
# A failing sacct during hpc-harvest, the documented dump | flags | put pipe
# on one database 20 times, kill -9 of `put --spool` at random points, full
# disks (a small tmpfs) for ingest, put, export and the probe, and symlinks
# where outputs and spool entries should be. Uses the debug binaries of
# CARGO_TARGET_DIR (built when missing). Prints `ok - ...` / `not ok - ...`
# and a last line `N passed, N failed`; exits 1 when a check failed. The
# full-disk cases need root (tmpfs mounts) and are skipped otherwise.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpc-sizer/target}"
(cd "$root" && cargo build --quiet --workspace --bins --examples) || {
    echo "tests/faults.sh: the build failed" >&2
    exit 1
}
bin=$CARGO_TARGET_DIR/debug
export PATH="$bin:$root/bin-wrappers:$PATH"

# shellcheck source=tests/checks.sh
. "$root/tests/checks.sh"

work=$(mktemp -d /tmp/hpc-sizer-faults.XXXXXX)
cleanup() {
    local m
    grep -o "$work/[^ ]*" /proc/mounts | while read -r m; do
        umount "$m" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT

# small_disk NAME KIB: a tmpfs of that size (root only); prints its path.
small_disk() {
    local d=$work/$1
    mkdir -p "$d"
    mount -t tmpfs -o "size=${2}k,mode=0700" tmpfs "$d" || return 1
    echo "$d"
}
is_root() { [ "$(id -u)" = 0 ]; }

dump_sum() { hpc-store --db "$1" dump --kind job,summary,flag,sample,other | sort | sha256sum | cut -d' ' -f1; }
job_count() { hpc-store --db "$1" dump --kind job | wc -l; }
integrity() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("pragma integrity_check").fetchone()[0])' "$1"; }

# ------------------------------------------------------------ hpc-harvest
# A fake sacct at $1 that runs the shell text $2 and, as sacct does, writes
# its '|' as the --delimiter given (and <PIPE> as a '|' inside a value,
# which sacct does not escape); it exits as $2 does.
fake_sacct() {
    {
        echo '#!/bin/sh'
        cat <<'EOF'
d="|"; for a; do case "$a" in --delimiter=*) d=${a#--delimiter=} ;; esac; done
body() {
EOF
        printf '%s\n' "$2"
        cat <<'EOF'
}
out=$(body "$@"); rc=$?
[ -z "$out" ] || printf '%s\n' "$out" | tr '|' "$d" | sed 's/<PIPE>/|/g'
exit $rc
EOF
    } >"$1"
    chmod +x "$1"
}
harvest_case() {
    local name=$1 script=$2
    local h=$work/harvest-$name
    mkdir -p "$h/bin" "$h/data/hpc-sizer"
    fake_sacct "$h/bin/sacct" "$script"
    echo 1700000000 >"$h/data/hpc-sizer/harvest.watermark"
    XDG_DATA_HOME=$h/data PATH="$h/bin:$PATH" HPC_SIZER_SPOOL=$h/spool \
        hpc-harvest --db "$h/h.db" >"$h/out" 2>&1
    echo $? >"$h/rc"
}
# What sacct prints with SLURM_TIME_FORMAT=%s: Unix seconds.
good_sacct='echo "JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU"
echo "41|41|COMPLETED|1767261600|1767261660|1767265260|01:00:00|2|2G|01:00:00"'

harvest_case missing 'exit 127'
check "harvest: sacct missing -> exit 1" [ "$(cat "$work/harvest-missing/rc")" = 1 ]
check "harvest: sacct missing -> watermark kept" \
    [ "$(cat "$work/harvest-missing/data/hpc-sizer/harvest.watermark")" = 1700000000 ]

harvest_case down 'echo "sacct: error: Problem talking to the database: Connection refused" >&2; exit 1'
check "harvest: slurmdbd down -> exit 1, says so" \
    grep -q "sacct failed (exit 1)" "$work/harvest-down/out"
check "harvest: slurmdbd down -> watermark kept" \
    [ "$(cat "$work/harvest-down/data/hpc-sizer/harvest.watermark")" = 1700000000 ]

# sacct -S leaves out a job's steps that ended before the window starts: a
# job that ran across the window's start was stored with its later steps
# only (MaxRSS 1000M of the batch step, not 5000M of step 0). It is read
# again by its id from its own start. The fake answers as sacct does.
hw=$work/harvest-across
mkdir -p "$hw/bin" "$hw/data/hpc-sizer"
fake_sacct "$hw/bin/sacct" "$(cat <<'EOF'
case "$*" in
    *" -X "*) echo "77|1767261660" ;;
    *) echo "JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|MaxRSS|TotalCPU"
       echo "77|77|COMPLETED|1767261600|1767261660|1767275000|03:42:20|2|8G||01:00:00"
       echo "77.batch|77.batch|COMPLETED|1767261660|1767261660|1767275000|03:42:20|2||1000M|00:10:00"
       case "$*" in *"-j 77 "*) echo "77.0|77.0|COMPLETED|1767261660|1767261700|1767262000|00:05:00|2||5000M|00:50:00" ;; esac ;;
esac
EOF
)"
echo 1767270000 >"$hw/data/hpc-sizer/harvest.watermark"
XDG_DATA_HOME=$hw/data PATH="$hw/bin:$PATH" HPC_SIZER_SPOOL=$hw/spool \
    hpc-harvest --db "$hw/h.db" >"$hw/out" 2>&1
rc=$?
rss=$(hpc-store --db "$hw/h.db" dump --kind job | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline()).get("max_rss_mb"))')
check "harvest: a job that ran across the window's start is stored whole (MaxRSS $rss, exit $rc)" \
    test "$rss" = 5000.0 -a "$rc" = 0

# A harvest killed with -9 left its temporaries in the data folder for
# ever: the next one, holding the lock, removes them.
hk=$work/harvest-killed
mkdir -p "$hk/bin" "$hk/data/hpc-sizer"
fake_sacct "$hk/bin/sacct" "$good_sacct"
: >"$hk/data/hpc-sizer/.sacct-status.AbC123"
mkdir "$hk/data/hpc-sizer/.reflag.XyZ789"
XDG_DATA_HOME=$hk/data PATH="$hk/bin:$PATH" HPC_SIZER_SPOOL=$hk/spool \
    hpc-harvest --db "$hk/h.db" >"$hk/out" 2>&1
check "harvest: a killed run's temporaries are removed by the next" \
    test ! -e "$hk/data/hpc-sizer/.sacct-status.AbC123" -a ! -e "$hk/data/hpc-sizer/.reflag.XyZ789"

# What the sweep runs as the spool's owner gets none of the locks'
# descriptors (one kept by a process of the user's would hold the lock for
# ever): a finalizer in its place records its open files.
hd=$work/harvest-fds
mkdir -p "$hd/bin" "$hd/data/hpc-sizer" "$hd/spool/57"
fake_sacct "$hd/bin/sacct" "case \"\$*\" in *'-o State'*) echo COMPLETED ;; *) $good_sacct ;; esac"
printf '#!/bin/sh\nls -l /proc/$$/fd/ >"%s/fds"\nexit 1\n' "$hd" >"$hd/bin/hpc-finalize"
chmod +x "$hd/bin/hpc-finalize"
echo '{}' >"$hd/spool/57/n1.ndjson"
touch -d '2 hours ago' "$hd/spool/57/n1.ndjson" "$hd/spool/57"
XDG_DATA_HOME=$hd/data PATH="$hd/bin:$PATH" HPC_SIZER_SPOOL=$hd/spool \
    hpc-harvest --db "$hd/h.db" --spool "$hd/spool" 9>"$hd/loader.lock" >"$hd/out" 2>&1
check "harvest: the owner's finalizer ran (the sweep)" test -s "$hd/fds"
check "... without the harvest's or the loader's lock open" sh -c "! grep -q 'lock' '$hd/fds'"

# Two harvests at once on one data folder swept the same node files (one
# finalized what the other removed): the second waits for the first, and
# when it cannot have the folder within HPC_HARVEST_WAIT it says so, exit 1,
# without running sacct.
hl=$work/harvest-lock
mkdir -p "$hl/bin" "$hl/data/hpc-sizer"
fake_sacct "$hl/bin/sacct" "touch $hl/sacct.ran; $good_sacct"
# A self-resubmitting chain goes on when the lock is not had.
printf '#!/bin/sh\ntouch "%s/sbatch.ran"\n' "$hl" >"$hl/bin/sbatch"
chmod +x "$hl/bin/sbatch"
flock "$hl/data/hpc-sizer/harvest.lock" sleep 3 &
holder=$!
sleep 0.5
XDG_DATA_HOME=$hl/data PATH="$hl/bin:$PATH" HPC_SIZER_SPOOL=$hl/spool HPC_HARVEST_WAIT=1 \
    hpc-harvest --db "$hl/h.db" --resubmit 1day >"$hl/out" 2>&1
rc=$?
check "harvest: another harvest holds the data folder -> exit 1 ($rc), sacct not run" \
    test "$rc" = 1 -a ! -e "$hl/sacct.ran"
check "... and it says so" grep -q "harvest.lock has been held for over 1 s by another harvest" "$hl/out"
check "... and the next run of its chain is still submitted" test -e "$hl/sbatch.ran"
XDG_DATA_HOME=$hl/data PATH="$hl/bin:$PATH" HPC_SIZER_SPOOL=$hl/spool \
    hpc-harvest --db "$hl/h.db" >"$hl/out2" 2>&1
rc=$?
wait "$holder"
check "... a harvest waits for the one before it, then runs (exit $rc)" test "$rc" = 0 -a -e "$hl/sacct.ran"

# A failing sacct holds its watermark, not the spools: before, the run
# stopped there and no spool loaded until sacct worked again.
mkdir -p "$work/harvest-down2/spool/incoming"
echo '{"kind":"summary","job_id":"44","peak_rss_mb":100}' >"$work/harvest-down2/spool/incoming/44.ndjson"
mkdir -p "$work/harvest-down2/spool/70"
echo '{}' >"$work/harvest-down2/spool/70/n1.ndjson"
touch -d '2 hours ago' "$work/harvest-down2/spool/70/n1.ndjson" "$work/harvest-down2/spool/70"
harvest_case down2 "case \"\$*\" in *'-o State'*) touch '$work/harvest-down2/asked'; echo COMPLETED ;; *) exit 1 ;; esac"
check "harvest: sacct fails -> exit 1, watermark kept" \
    test "$(cat "$work/harvest-down2/rc")" = 1 -a "$(cat "$work/harvest-down2/data/hpc-sizer/harvest.watermark")" = 1700000000
check "harvest: ... and the spool is loaded all the same" \
    test -e "$work/harvest-down2/spool/incoming/done/44.ndjson" -a -n "$(hpc-store --db "$work/harvest-down2/h.db" dump --kind summary | grep '"job_id":"44"')"
# (and the sweep, which asks sacct of each job and would wait on a hung
# slurmdbd each time, waits for a run where sacct works)
check "harvest: ... while no sweep asks the failing sacct of a left job" test ! -e "$work/harvest-down2/asked"

# One line hpc-ingest rejects: named, the rest stored, the watermark moves
# (the line would be rejected on every retry, and the window would only
# grow), exit 1. Before, the run stopped there: the watermark never moved
# and no spool loaded again.
mkdir -p "$work/harvest-reject/spool/incoming"
echo '{"kind":"summary","job_id":"45","peak_rss_mb":100}' >"$work/harvest-reject/spool/incoming/45.ndjson"
harvest_case reject "$good_sacct
echo \"43|43|COMPLETED|1767261600|1767261660|1767265260|01:00:00|two|2G|01:00:00\""
check "harvest: a rejected sacct line -> exit 1, the line named" \
    test "$(cat "$work/harvest-reject/rc")" = 1 -a -n "$(grep 'line 3' "$work/harvest-reject/out")"
check "harvest: ... the good job is stored and the watermark moved" \
    test -n "$(hpc-store --db "$work/harvest-reject/h.db" dump --kind job | grep '"job_id":"41"')" -a \
    "$(cat "$work/harvest-reject/data/hpc-sizer/harvest.watermark")" -gt 1700000000
check "harvest: ... and the spool is loaded" test -e "$work/harvest-reject/spool/incoming/done/45.ndjson"
# Every line rejected (a changed sacct format): the window is held.
harvest_case reject-all 'echo "JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU"
echo "43|43|COMPLETED|1767261600|1767261660|1767265260|01:00:00|two|2G|01:00:00"'
check "harvest: every sacct line rejected -> exit 1, watermark kept, says so" \
    test "$(cat "$work/harvest-reject-all/rc")" = 1 -a \
    "$(cat "$work/harvest-reject-all/data/hpc-sizer/harvest.watermark")" = 1700000000 -a \
    -n "$(grep 'rejected every line' "$work/harvest-reject-all/out")"

harvest_case partial "$good_sacct
exit 1"
check "harvest: sacct dies after some output -> watermark kept" \
    [ "$(cat "$work/harvest-partial/data/hpc-sizer/harvest.watermark")" = 1700000000 ]

harvest_case good "[ \"\$SLURM_TIME_FORMAT\" = %s ] || exit 3
$good_sacct"
check "harvest: good sacct -> exit 0" [ "$(cat "$work/harvest-good/rc")" = 0 ]
check "harvest: good sacct -> watermark moved" \
    [ "$(cat "$work/harvest-good/data/hpc-sizer/harvest.watermark")" -gt 1700000000 ]
check "harvest: the job is stored with its UTC times" \
    grep -q '"start":"2026-01-01T10:01:00Z"' <(hpc-store --db "$work/harvest-good/h.db" dump)

# A '|' in a job name: sacct -P does not escape it, so with '|' as the
# delimiter the line was rejected on every run and the watermark never moved.
harvest_case pipe-name 'echo "JobID|JobIDRaw|JobName|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU"
echo "42|42|a<PIPE>b|COMPLETED|1767261600|1767261660|1767265260|01:00:00|2|2G|01:00:00"'
check "harvest: a job named 'a|b' -> exit 0, watermark moved" \
    test "$(cat "$work/harvest-pipe-name/rc")" = 0 -a \
    "$(cat "$work/harvest-pipe-name/data/hpc-sizer/harvest.watermark")" -gt 1700000000
check "harvest: ... and the job is stored" \
    grep -q '"job_id":"42".*"job_name":"a|b"' <(hpc-store --db "$work/harvest-pipe-name/h.db" dump --kind job)

# ------------------------------------------------------------ hpc-monitor stop
# The pids file is in the user's own folder, and the admin Epilog runs stop:
# a pid written there by hand (no start time, or another process's) is not
# signalled, and a pid taken again by another process since is not either.
# Before, stop sent SIGTERM and then SIGKILL to every number in the file.
mo=$work/monitor
mkdir -p "$mo/spool/77"
sleep 300 &
victim=$!
sleep 300 &
probe=$!
start_of() { sed -n 's/^.*) //p' "/proc/$1/stat" | cut -d' ' -f20; }
printf '%s\n%s %s\n%s %s\n' "$victim" "$victim" "$(($(start_of "$victim") + 1))" \
    "$probe" "$(start_of "$probe")" >"$mo/spool/77/.monitor.n1.pids"
SLURM_JOB_ID=77 SLURMD_NODENAME=n1 HPC_SIZER_SPOOL=$mo/spool HPC_MONITOR_WAIT=1 \
    hpc-monitor stop >"$mo/out" 2>&1
wait "$probe" 2>/dev/null
check "monitor stop: the process it started is stopped" test ! -e "/proc/$probe"
check "monitor stop: a pid it did not start is left alone" kill -0 "$victim"
check "monitor stop: ... and the pids file is gone" test ! -e "$mo/spool/77/.monitor.n1.pids"
kill "$victim" 2>/dev/null
# A multi-node start that times out (a node's probe never wrote) wrote the
# srun's pid without its start time, and stop then took the line for a
# forged one: the probes already started ran on until the job's end.
mkdir -p "$mo/bin"
printf '#!/bin/sh\nexec sleep 300\n' >"$mo/bin/srun"
chmod +x "$mo/bin/srun"
PATH="$mo/bin:$PATH" SLURM_JOB_ID=78 SLURM_JOB_NUM_NODES=2 SLURMD_NODENAME=n1 HPC_SIZER_SPOOL=$mo/spool \
    HPC_MONITOR_START_WAIT=1 hpc-monitor start >"$mo/out2" 2>&1
check "monitor start: probes of 2 nodes that never write -> exit 1, says so" grep -q "of 2 node probes started in time" "$mo/out2"
read -r srun_pid _ <"$mo/spool/78/.monitor.n1.pids"
SLURM_JOB_ID=78 SLURMD_NODENAME=n1 HPC_SIZER_SPOOL=$mo/spool HPC_MONITOR_WAIT=1 hpc-monitor stop >>"$mo/out2" 2>&1
sleep 0.2
# shellcheck disable=SC2016 # the inner shell expands them
check "monitor stop after it: the srun it started is stopped" \
    sh -c '[ ! -e "/proc/$1" ] || grep -q ") Z" "/proc/$1/stat"' sh "${srun_pid:-0}"
kill "${srun_pid:-0}" 2>/dev/null

# Issue 30: one FIFO in a user's spool made hpc-harvest exit 1 on every run,
# so the sacct watermark never moved and re-flagging never ran. The entry is
# reported and left; the other files load; the watermark moves; exit 1.
ff=$work/fifo
mkdir -p "$ff/bin" "$ff/data/hpc-sizer" "$ff/spool/incoming"
fake_sacct "$ff/bin/sacct" "$good_sacct"
echo 1700000000 >"$ff/data/hpc-sizer/harvest.watermark"
mkfifo "$ff/spool/incoming/bad.ndjson"
echo '{"kind":"summary","job_id":"41","peak_rss_mb":100}' >"$ff/spool/incoming/41.ndjson"
XDG_DATA_HOME=$ff/data PATH="$ff/bin:$PATH" HPC_SIZER_SPOOL=$ff/spool \
    timeout 60 hpc-harvest --db "$ff/h.db" >"$ff/out" 2>&1
rc=$?
check "harvest: a FIFO in a spool -> exit 1 ($rc), naming it" \
    test "$rc" = 1 -a -n "$(grep -e 'bad.ndjson: not a regular file' "$ff/out")"
check "harvest: ... the watermark of the sacct part moved" \
    [ "$(cat "$ff/data/hpc-sizer/harvest.watermark")" -gt 1700000000 ]
check "harvest: ... the other file loaded and the jobs were flagged" \
    test -e "$ff/spool/incoming/done/41.ndjson" -a -n "$(grep 'final flags\|flag' "$ff/out" || echo ran)"

# Issue 30: the sweep checked a user's node folder, then ran rm -rf as root;
# the user swaps their spool folder for a link meanwhile and root deletes
# VICTIM/<jobid>. The removal runs as the spool's owner (read before the
# checks): through the link it reaches only what the owner could.
if is_root; then
    sv=$work/swap
    mkdir -p "$sv/bin" "$sv/data/hpc-sizer" "$sv/u/archive" "$sv/victim/57" "$sv/victim/archive"
    echo keep >"$sv/victim/57/precious"
    # Shaped like a spool (the job finalized already), so the sweep goes on
    # to the removal through the link.
    touch -d '2 hours ago' "$sv/victim/57/precious" "$sv/victim/57"
    echo x | gzip >"$sv/victim/archive/57.series.ndjson.gz"
    touch -d '1 hour ago' "$sv/victim/archive/57.series.ndjson.gz"
    echo '{}' >"$sv/victim/57/n1.ndjson"
    touch -d '2 hours ago' "$sv/victim/57/n1.ndjson" "$sv/victim/57"
    chmod 700 "$sv/victim"
    mkdir -p "$sv/u/57"
    echo '{"kind":"sample","t":1,"job_id":"57","rss_mb":1}' >"$sv/u/57/n1.ndjson"
    touch -d '2 hours ago' "$sv/u/57/n1.ndjson" "$sv/u/57"
    echo '{"kind":"sample","t":1,"job_id":"57","rss_mb":1}' | gzip >"$sv/u/archive/57.series.ndjson.gz"
    touch -d '1 hour ago' "$sv/u/archive/57.series.ndjson.gz"
    chown -R nobody:nogroup "$sv/u"
    # The fake sacct is where the race falls: after the checks, before the
    # removal, the owner swaps the folder for a link of their own.
    fake_sacct "$sv/bin/sacct" "case \"\$*\" in
    *\"-o State\"*) [ -L \"$sv/u\" ] || { mv \"$sv/u\" \"$sv/u.real\"; ln -s \"$sv/victim\" \"$sv/u\"; chown -h nobody:nogroup \"$sv/u\"; }
                  echo COMPLETED ;;
    *) echo \"JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU\" ;;
esac"
    XDG_DATA_HOME=$sv/data PATH="$sv/bin:$PATH" HPC_SWEEP_AFTER=60 \
        timeout 60 hpc-harvest --db "$sv/h.db" --spool "$sv/u" >"$sv/out" 2>&1
    rc=$?
    check "sweep: a spool swapped for a link mid-sweep: the victim's files survive (exit $rc)" \
        test -e "$sv/victim/57/precious" -a "$rc" = 1
    check "sweep: ... and the run says the removal failed" grep -q "removing the finalized node files" "$sv/out"
else
    echo "ok - # skip sweep as the owner: needs root"
fi

# ------------------------------------------------- hpc-harvest's sweep
# A setting that is no whole number ended the run at its first use, after
# the watermark had moved (and a --resubmit chain with it): a usage error
# before anything.
hs=$work/harvest-settings
mkdir -p "$hs/data/hpc-sizer"
echo 1700000000 >"$hs/data/hpc-sizer/harvest.watermark"
mkdir -p "$hs/bin"
fake_sacct "$hs/bin/sacct" "$good_sacct"
for v in 1h 08; do
    XDG_DATA_HOME=$hs/data PATH="$hs/bin:$PATH" HPC_SWEEP_AFTER=$v hpc-harvest --db "$hs/h.db" >"$hs/out" 2>&1
    rc=$?
    check "harvest: HPC_SWEEP_AFTER=$v is a usage error (exit $rc) naming it" \
        sh -c "[ $rc = 2 ] && grep -q \"HPC_SWEEP_AFTER '$v': not a whole number\" '$hs/out'"
    check "harvest: ... and the watermark is where it was (sacct answering)" \
        [ "$(cat "$hs/data/hpc-sizer/harvest.watermark")" = 1700000000 ]
done
# (With a good sacct and a good setting, the watermark does move.)
XDG_DATA_HOME=$hs/data PATH="$hs/bin:$PATH" hpc-harvest --db "$hs/h.db" >"$hs/out" 2>&1
check "harvest: ... which a run with good settings moves" [ "$(cat "$hs/data/hpc-sizer/harvest.watermark")" != 1700000000 ]

# ------------------------------------------------------------ hpc-finalize
# A failed merge replaces nothing: before, hpc-finalize took hpc-merge's
# exit 1 for "some lines rejected", wrote an empty series over the job's
# archive and an empty result to incoming/, and the sweep, seeing the
# archive, later removed the node files.
# node_file JOB HOST [RSS]: a probe's file of three samples, each of RSS
# MB (default 100, 200 and 300).
node_file() {
    echo "{\"kind\":\"meta\",\"job_id\":\"$1\",\"host\":\"$2\",\"start\":1767261660,\"interval_s\":1,\"req_cpus\":2,\"req_mem_mb\":2048,\"nnodes\":1,\"probe_version\":\"t\"}"
    for t in 1 2 3; do echo "{\"kind\":\"sample\",\"t\":$((1767261660 + t)),\"host\":\"$2\",\"job_id\":\"$1\",\"rss_mb\":${3:-$((100 * t))}}"; done
}
fz=$work/finalize
mkdir -p "$fz/spool/61"
node_file 61 n1 >"$fz/spool/61/n1.ndjson"
HPC_SIZER_SPOOL=$fz/spool hpc-finalize --no-sacct 61 >"$fz/out1" 2>&1
check "finalize: a good job is finalized (exit $?)" test -s "$fz/spool/incoming/61.ndjson"
cp "$fz/spool/archive/61.series.ndjson.gz" "$fz/series.before"
cp "$fz/spool/incoming/61.ndjson" "$fz/result.before"
sed 's/"61"/"62"/' "$fz/spool/61/n1.ndjson" >"$fz/spool/61/n2.ndjson"
HPC_SIZER_SPOOL=$fz/spool hpc-finalize --no-sacct 61 >"$fz/out2" 2>&1
echo $? >"$fz/rc2"
check "finalize: node files of two jobs -> exit 1 ($(cat "$fz/rc2"))" [ "$(cat "$fz/rc2")" = 1 ]
check "finalize: ... the archived series is kept" cmp -s "$fz/series.before" "$fz/spool/archive/61.series.ndjson.gz"
check "finalize: ... the stored result is kept" cmp -s "$fz/result.before" "$fz/spool/incoming/61.ndjson"
check "finalize: ... and it says the node files stay" grep -q "merged nothing; the node files stay" "$fz/out2"

# What a finalizer killed with -9 left is removed by a later one once a day
# old (a young one may be another finalizer's); the loader's claims stay.
mkdir -p "$fz/spool/.finalize.60.abcdef" "$fz/spool/.finalize.59.ghijkl" "$fz/spool/64"
touch -d '2 days ago' "$fz/spool/.finalize.60.abcdef" "$fz/spool/incoming/.60.ndjson.AbC123" \
    "$fz/spool/incoming/.loading.58.ndjson"
node_file 64 n1 >"$fz/spool/64/n1.ndjson"
HPC_SIZER_SPOOL=$fz/spool hpc-finalize --no-sacct 64 >"$fz/out4" 2>&1
check "finalize: a killed finalizer's day-old leftovers are removed" \
    test ! -e "$fz/spool/.finalize.60.abcdef" -a ! -e "$fz/spool/incoming/.60.ndjson.AbC123"
check "... a young work folder and the loader's claim stay" \
    test -d "$fz/spool/.finalize.59.ghijkl" -a -e "$fz/spool/incoming/.loading.58.ndjson"
rm -rf "$fz/spool/.finalize.59.ghijkl" "$fz/spool/incoming/.loading.58.ndjson"

# A requeued job run again on another node: the first run's node file was
# merged beside the second's as another node (its memory too). hpc-monitor
# names a later run's files HOST.restart-N.ndjson, and only the last run's
# are merged.
mkdir -p "$fz/spool/63"
node_file 63 n1 900 >"$fz/spool/63/n1.ndjson"
node_file 63 n2 700 >"$fz/spool/63/n2.restart-1.ndjson"
node_file 63 n3 300 >"$fz/spool/63/n3.restart-2.ndjson"
HPC_SIZER_SPOOL=$fz/spool hpc-finalize --no-sacct 63 >"$fz/out3" 2>&1
# (Before: the job's summary had nodes n1, n2 and n3 and 1900 MB.)
summary=$(grep '"kind":"summary".*"nodes":' "$fz/spool/incoming/63.ndjson")
check "finalize: a requeued job's last run alone is merged (n3, 300 MB: $summary)" \
    grep -q '"nodes":\["n3"\],.*"peak_rss_mb":300\.0,' <<<"$summary"
# sacct failing, or its line rejected: the result is still written (the
# harvest stores the record later), exit 1, and the run says why. Before,
# set -e ended the run with nothing written and only the sub-tool's words.
mkdir -p "$fz/spool/65" "$fz/sacct-bin"
node_file 65 n1 >"$fz/spool/65/n1.ndjson"
fake_sacct "$fz/sacct-bin/sacct" 'echo "sacct: error: slurmdbd down" >&2; exit 1'
PATH="$fz/sacct-bin:$PATH" HPC_SIZER_SPOOL=$fz/spool hpc-finalize 65 >"$fz/out5" 2>&1
echo $? >"$fz/rc5"
check "finalize: sacct failing -> exit 1 ($(cat "$fz/rc5"))" [ "$(cat "$fz/rc5")" = 1 ]
check "finalize: ... the result is still written, without a job record" \
    sh -c "grep -q '\"kind\":\"summary\"' '$fz/spool/incoming/65.ndjson' && ! grep -q '\"kind\":\"job\"' '$fz/spool/incoming/65.ndjson'"
check "finalize: ... and it says sacct failed" grep -q "sacct failed (exit 1)" "$fz/out5"
fake_sacct "$fz/sacct-bin/sacct" 'echo "JobID|JobIDRaw|State"; echo "65|65"'
PATH="$fz/sacct-bin:$PATH" HPC_SIZER_SPOOL=$fz/spool hpc-finalize 65 >"$fz/out6" 2>&1
echo $? >"$fz/rc6"
check "finalize: a rejected sacct line -> exit 1 ($(cat "$fz/rc6")), saying so" \
    sh -c "[ $(cat "$fz/rc6") = 1 ] && grep -q 'rejected some of sacct' '$fz/out6' && grep -q '\"kind\":\"summary\"' '$fz/spool/incoming/65.ndjson'"
# Two finalizes of one job at once (the submit wrapper, the Epilog and the
# sweep may meet): they shared a temporary name and one's mv failed.
mkdir -p "$fz/spool/67"
node_file 67 n1 >"$fz/spool/67/n1.ndjson"
races=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
    HPC_SIZER_SPOOL=$fz/spool hpc-finalize --no-sacct 67 >/dev/null 2>&1 &
    a=$!
    HPC_SIZER_SPOOL=$fz/spool hpc-finalize --no-sacct 67 >/dev/null 2>"$fz/race.err" || races=$((races + 1))
    wait "$a" || races=$((races + 1))
done
check "finalize: two at once of one job both succeed, 10 times ($races failed)" [ "$races" = 0 ]

# And the monitor of such a run writes that name (a probe that writes its
# meta record, as hpc-probe does, and waits).
mkdir -p "$fz/bin"
# shellcheck disable=SC2016 # the fake probe expands them
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done\necho "{\\"kind\\":\\"meta\\",\\"probe_pid\\":$$}" >"$out"\nexec sleep 30\n' >"$fz/bin/probe"
chmod +x "$fz/bin/probe"
SLURM_JOB_ID=64 SLURM_RESTART_COUNT=2 SLURMD_NODENAME=n5 HPC_SIZER_SPOOL=$fz/spool HPC_PROBE=$fz/bin/probe \
    HPC_MONITOR_WAIT=1 sh -c 'hpc-monitor start && hpc-monitor stop' >"$fz/out4" 2>&1
check "monitor: a requeued job's run writes HOST.restart-N.ndjson" \
    test -s "$fz/spool/64/n5.restart-2.ndjson" -a ! -e "$fz/spool/64/n5.ndjson"

# Node files left by jobs whose Epilog never ran: finalized once sacct says
# the job ended (51), left while it runs (52) or while sacct does not know it
# (53) or fails (56: its job ids are 56 in the fake); a job finalized once
# whose node files are newer than its archive (a requeued run, 54) is
# finalized again; one whose archive is newer (55) only loses its node files.
sw=$work/sweep
mkdir -p "$sw/bin" "$sw/data/hpc-sizer" "$sw/spool/archive"
fake_sacct "$sw/bin/sacct" "$(cat <<'EOF'
job=""
prev=""
for a; do [ "$prev" = -j ] && job=$a; prev=$a; done
case "$* $job" in
    *"-o State"*" 51" | *"-o State"*" 54" | *"-o State"*" 55") echo COMPLETED ;;
    *"-o State"*" 52") echo RUNNING ;;
    *"-o State"*" 53") ;;
    *"-o State"*" 56") exit 1 ;;
    *) echo "JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU"
       [ -z "$job" ] || echo "$job|$job|COMPLETED|1767261600|1767261660|1767265260|01:00:00|2|2G|01:00:00" ;;
esac
EOF
)"
for j in 51 52 53 54 55 56; do
    mkdir -p "$sw/spool/$j"
    node_file "$j" n1 >"$sw/spool/$j/n1.ndjson"
    touch -d '2 hours ago' "$sw/spool/$j/n1.ndjson" "$sw/spool/$j"
done
for j in 54 55; do echo '{"kind":"sample","t":1,"job_id":"'$j'","rss_mb":1}' | gzip >"$sw/spool/archive/$j.series.ndjson.gz"; done
touch -d '3 hours ago' "$sw/spool/archive/54.series.ndjson.gz"
touch -d '1 hour ago' "$sw/spool/archive/55.series.ndjson.gz"
XDG_DATA_HOME=$sw/data PATH="$sw/bin:$PATH" HPC_SIZER_SPOOL=$sw/spool HPC_SWEEP_AFTER=60 \
    hpc-harvest --db "$sw/h.db" >"$sw/out" 2>&1
echo $? >"$sw/rc"
[ "$(cat "$sw/rc")" = 0 ] || sed 's/^/# sweep: /' "$sw/out"
check "sweep: harvest exits 0 ($(cat "$sw/rc"))" [ "$(cat "$sw/rc")" = 0 ]
check "sweep: the ended job 51 is finalized, stored and its node files removed" \
    test ! -d "$sw/spool/51" -a -s "$sw/spool/archive/51.series.ndjson.gz" -a -e "$sw/spool/incoming/done/51.ndjson"
check "sweep: the running job 52, the job sacct does not know (53) and the one it fails on (56) keep their files" \
    test -s "$sw/spool/52/n1.ndjson" -a -s "$sw/spool/53/n1.ndjson" -a -s "$sw/spool/56/n1.ndjson"
check "sweep: ... and none of them is finalized" \
    test ! -e "$sw/spool/archive/52.series.ndjson.gz" -a ! -e "$sw/spool/archive/53.series.ndjson.gz" -a ! -e "$sw/spool/archive/56.series.ndjson.gz"
check "sweep: the requeued job 54 (node files newer than its archive) is finalized again" \
    test "$(gzip -dc "$sw/spool/archive/54.series.ndjson.gz" | wc -l)" -ge 3 -a ! -d "$sw/spool/54"
check "sweep: the finalized job 55 loses its node files and keeps its archive" \
    test ! -d "$sw/spool/55" -a "$(gzip -dc "$sw/spool/archive/55.series.ndjson.gz" | wc -l)" = 1
check "sweep: the store has jobs 51 and 54 with their summaries" \
    test "$(hpc-store --db "$sw/h.db" dump --kind summary | grep -c -e '"job_id":"51"' -e '"job_id":"54"')" -ge 2
# Node files nothing can be merged from (every line rejected) failed every
# sweep for ever, each harvest exiting 1 on them. Unchanged for
# HPC_SWEEP_GIVEUP seconds, they are moved whole to unusable/ and reported
# once (57); younger ones stay and fail as before (58).
sg=$work/sweep-giveup
mkdir -p "$sg/bin" "$sg/data/hpc-sizer" "$sg/spool"
fake_sacct "$sg/bin/sacct" "$(cat <<'EOF'
case "$*" in
    *"-o State"*) echo COMPLETED ;;
    *) echo "JobID|JobIDRaw|State|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|TotalCPU" ;;
esac
EOF
)"
for j in 57 58; do
    mkdir -p "$sg/spool/$j"
    printf 'not a record\n{"kind":"sample"\n' >"$sg/spool/$j/n1.ndjson"
done
touch -d '8 days ago' "$sg/spool/57/n1.ndjson" "$sg/spool/57"
touch -d '2 hours ago' "$sg/spool/58/n1.ndjson" "$sg/spool/58"
giveup_run() {
    XDG_DATA_HOME=$sg/data PATH="$sg/bin:$PATH" HPC_SIZER_SPOOL=$sg/spool HPC_SWEEP_AFTER=60 \
        HPC_SWEEP_GIVEUP=604800 hpc-harvest --db "$sg/h.db" >"$sg/out$1" 2>&1
    echo $? >"$sg/rc$1"
}
giveup_run 1
check "sweep: unusable node files a week old: harvest exits 1 ($(cat "$sg/rc1"))" [ "$(cat "$sg/rc1")" = 1 ]
check "sweep: ... they are moved whole to unusable/57" \
    cmp -s <(printf 'not a record\n{"kind":"sample"\n') "$sg/spool/unusable/57/n1.ndjson"
check "sweep: ... and it says so" grep -q "moved to $sg/spool/unusable/57, nothing removed" "$sg/out1"
check "sweep: unusable node files 2 hours old stay" test -s "$sg/spool/58/n1.ndjson"
rm -rf "$sg/spool/58"
giveup_run 2
check "sweep: the next harvest leaves unusable/ alone and exits 0 ($(cat "$sg/rc2"))" \
    test "$(cat "$sg/rc2")" = 0 -a -s "$sg/spool/unusable/57/n1.ndjson"

# --resubmit: the next run gets the same spools (a name with a space and a
# quote), word for word, as /bin/sh reads sbatch's --wrap.
odd="$sw/it's a spool"
mkdir -p "$odd"
# shellcheck disable=SC2016 # the fake expands them when it runs
printf '#!/bin/sh\nfor a; do case $a in --wrap=*) printf %%s "${a#--wrap=}" >"%s/wrap" ;; esac; done\n' "$sw" >"$sw/bin/sbatch"
chmod +x "$sw/bin/sbatch"
XDG_DATA_HOME=$sw/data PATH="$sw/bin:$PATH" hpc-harvest --db "$sw/h.db" --spool "$odd" --resubmit 1day >/dev/null 2>&1
# shellcheck disable=SC2016 # the inner shell prints the words it was given
words=$(sh -c 'eval "set -- $1"; printf "%s\n" "$@"' sh "$(cat "$sw/wrap" 2>/dev/null)")
check "resubmit: the wrapped command keeps --spool and its path, quoted ($(tr '\n' ' ' <<<"$words"))" \
    grep -qxF -- "$odd" <<<"$words"

# ------------------------------------------------- dump | flags | put, x20
pipe_db=$work/pipe.db
"$bin/examples/gen_sacct" 3000 100 5 2>/dev/null | hpc-ingest --db "$pipe_db" 2>/dev/null
pipe_jobs=$(job_count "$pipe_db")
pipe_fail=0
for round in $(seq 1 20); do
    err=$work/pipe.err
    # shellcheck disable=SC2016 # expanded by the inner shell
    if ! timeout 120 sh -c 'hpc-store --db "$1" dump --kind job | hpc-flags | hpc-store --db "$1" put' \
        sh "$pipe_db" 2>"$err"; then
        pipe_fail=$((pipe_fail + 1))
        echo "# round $round: $(tail -n 1 "$err")"
    elif ! grep -q "hpc-store: $pipe_jobs jobs" "$err"; then
        pipe_fail=$((pipe_fail + 1))
        echo "# round $round stored less: $(tail -n 1 "$err")"
    fi
done
check "dump | flags | put on one database: 20 of 20 runs store all $pipe_jobs jobs" [ "$pipe_fail" = 0 ]

# ------------------------------------------- kill -9 of put --spool, x10
make_spool() {
    local d=$1 i
    mkdir -p "$d"
    for i in $(seq 1 40); do
        "$bin/examples/gen_sacct" 1000 $((700000 + i * 1000)) "$i" 2>/dev/null |
            hpc-ingest --ndjson 2>/dev/null >"$d/job-$i.ndjson"
    done
}
make_spool "$work/spool-clean"
cp -r "$work/spool-clean" "$work/spool-killed"
hpc-store --db "$work/clean.db" put --spool "$work/spool-clean" 2>/dev/null
files=$(find "$work/spool-clean/done" -type f | wc -l)
killed_rounds=0
for round in $(seq 1 10); do
    hpc-store --db "$work/killed.db" put --spool "$work/spool-killed" 2>/dev/null &
    pid=$!
    sleep "0.$((RANDOM % 30 + 5))"
    kill -9 "$pid" 2>/dev/null && killed_rounds=$((killed_rounds + 1))
    wait "$pid" 2>/dev/null
    state=$(integrity "$work/killed.db" 2>&1)
    [ "$state" = ok ] || echo "# round $round: integrity check: $state"
done
echo "# put --spool killed mid-run in $killed_rounds of 10 rounds"
hpc-store --db "$work/killed.db" put --spool "$work/spool-killed" 2>/dev/null
check "kill -9 of put --spool: database intact" [ "$(integrity "$work/killed.db")" = ok ]
check "kill -9 of put --spool: every file in done/ once ($files)" \
    [ "$(find "$work/spool-killed/done" -type f | wc -l)" = "$files" ]
check "kill -9 of put --spool: no file left in the spool" \
    [ -z "$(find "$work/spool-killed" -maxdepth 1 -type f)" ]
check "kill -9 of put --spool: same jobs as a clean run" \
    [ "$(job_count "$work/killed.db")" = "$(job_count "$work/clean.db")" ]
check "kill -9 of put --spool: same records (checksum) as a clean run" \
    [ "$(dump_sum "$work/killed.db")" = "$(dump_sum "$work/clean.db")" ]

# ---------------------------------------------------------- symlinks
victim=$work/victim.txt
echo "precious" >"$victim"
ln -s "$victim" "$work/probe-out.ndjson"
hpc-probe --out "$work/probe-out.ndjson" -- true >/dev/null 2>"$work/probe-link.err"
probe_rc=$?
check "probe --out through a symlink is refused (exit $probe_rc)" [ "$probe_rc" != 0 ]
check "probe --out through a symlink leaves the target alone" [ "$(cat "$victim")" = precious ]
ln -s /nonexistent/hpc-sizer-dangling "$work/dangling.ndjson"
hpc-probe --out "$work/dangling.ndjson" -- true >/dev/null 2>&1
check "probe --out through a dangling symlink creates nothing" [ ! -e /nonexistent/hpc-sizer-dangling ]
mkdir -p "$work/spool-links"
ln -s /etc/passwd "$work/spool-links/passwd.ndjson"
ln -s "$work/spool-clean/done/job-1.ndjson" "$work/spool-links/other.ndjson"
hpc-store --db "$work/links.db" put --spool "$work/spool-links" 2>"$work/links.err"
check "put --spool: symlinked entries reported" grep -q "a symbolic link" "$work/links.err"
check "put --spool: symlinked entries left alone" [ -L "$work/spool-links/passwd.ndjson" ]
check "put --spool: ... nothing read through them" [ "$(job_count "$work/links.db")" = 0 ]

# ------------------------------------------------------- full disks
if is_root; then
    big=$work/big-sacct.txt
    "$bin/examples/gen_sacct" 20000 1 7 >"$big"
    disk=$(small_disk ingest 256)
    hpc-ingest --db "$disk/h.db" "$big" >/dev/null 2>"$work/full-ingest.err"
    rc=$?
    check "ingest onto a full disk fails (exit $rc)" [ "$rc" = 1 ]
    check "ingest onto a full disk says why" grep -qi "full\|space" "$work/full-ingest.err"
    check "ingest onto a full disk leaves a valid database" [ "$(integrity "$disk/h.db")" = ok ]

    hpc-ingest --ndjson "$big" >"$work/big.ndjson" 2>/dev/null
    disk=$(small_disk put 256)
    mkdir -p "$work/spool-full"
    cp "$work/big.ndjson" "$work/spool-full/big.ndjson"
    hpc-store --db "$disk/h.db" put --spool "$work/spool-full" 2>"$work/full-put.err"
    rc=$?
    check "put onto a full disk fails (exit $rc)" [ "$rc" = 1 ]
    check "put onto a full disk leaves the spool file in place" [ -f "$work/spool-full/big.ndjson" ]
    check "put onto a full disk leaves a valid database" [ "$(integrity "$disk/h.db")" = ok ]

    hpc-store --db "$work/export.db" put "$work/big.ndjson" 2>/dev/null
    disk=$(small_disk export 64)
    hpc-store --db "$work/export.db" export --parquet "$disk/ds" 2>"$work/full-export.err"
    rc=$?
    check "export onto a full disk fails (exit $rc)" [ "$rc" = 1 ]
    check "export onto a full disk leaves no temporary files" \
        [ -z "$(find "$disk" -name '.*tmp*' 2>/dev/null)" ]

    # hpc-finalize onto a spool that fills up: at every size of free room,
    # either a whole result and series (exit 0) or none, with the node files
    # kept (exit 1). grep's write error was taken for "no lines": an empty
    # result, exit 0, and the sweep then removed the node files.
    disk=$(small_disk finalize 512)
    bad=''
    for free in $(seq 4 4 240); do
        rm -rf "${disk:?}"/*
        mkdir -p "$disk/sp/66"
        for h in n1 n2; do
            {
                echo "{\"kind\":\"meta\",\"job_id\":\"66\",\"host\":\"$h\",\"start\":1767261660,\"interval_s\":1,\"req_cpus\":2,\"req_mem_mb\":2048,\"nnodes\":2,\"probe_version\":\"t\"}"
                seq 1 300 | awk -v h="$h" '{ printf "{\"kind\":\"sample\",\"t\":%d,\"host\":\"%s\",\"job_id\":\"66\",\"rss_mb\":%d,\"cpu_cores\":1.5}\n", 1767261660 + $1, h, 100 + $1 }'
            } >"$disk/sp/66/$h.ndjson"
        done
        dd if=/dev/zero of="$disk/fill" bs=4k 2>/dev/null
        truncate -s "-${free}k" "$disk/fill"
        rc=0
        HPC_SIZER_SPOOL=$disk/sp hpc-finalize --no-sacct 66 >/dev/null 2>"$work/full-finalize.err" || rc=$?
        result=$disk/sp/incoming/66.ndjson
        if [ "$rc" = 0 ]; then
            grep -q '"kind":"summary"' "$result" 2>/dev/null &&
                [ "$(gzip -dc "$disk/sp/archive/66.series.ndjson.gz" 2>/dev/null | wc -l)" -gt 600 ] ||
                bad="$bad $free:exit0-but-incomplete"
        else
            { [ ! -e "$result" ] && [ ! -e "$disk/sp/archive/66.series.ndjson.gz" ] &&
                [ -s "$disk/sp/66/n1.ndjson" ]; } || bad="$bad $free:exit$rc-but-published"
        fi
    done
    check "finalize onto a filling spool: a whole result or none, the node files kept (${bad:-all sizes})" [ -z "$bad" ]

    disk=$(small_disk probe 16)
    timeout 60 hpc-probe --interval 0.05 --out "$disk/p.ndjson" -- sleep 30 >/dev/null 2>"$work/full-probe.err"
    rc=$?
    check "probe onto a full disk fails (exit $rc), not hangs" test "$rc" != 0 -a "$rc" != 124
    check "probe onto a full disk: its command does not live on" \
        [ -z "$(pgrep -f '^sleep 30$')" ]
    check "probe onto a full disk: the file holds whole lines only" \
        python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.endswith("\n")]' "$disk/p.ndjson"
else
    echo "# full-disk cases skipped: they need root for tmpfs mounts"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
