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
