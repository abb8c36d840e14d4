# tests/checks.sh: the ok/not ok counting shared by tests/faults.sh and
# tests/slurm/run.sh (sourced, not run). Each check prints `ok - ...` or
# `not ok - ...`; the caller prints "$passed passed, $failed failed" last.
# shellcheck shell=bash

passed=0
failed=0
ok() {
    passed=$((passed + 1))
    echo "ok - $*"
}
not_ok() {
    failed=$((failed + 1))
    echo "not ok - $*"
}
# check <description> <command...>
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
