# hpc-lib.sh: what the hpc front door and hpc-scheduler share, sourced (not
# run) from the folder they sit in, after they set `prog`: die, usage_error,
# need, need_sub and beside.
# shellcheck shell=bash
# shellcheck disable=SC2154 # prog is the caller's

die() {
    echo "$prog: $*" >&2
    exit 1
}

usage_error() {
    echo "$prog: $*" >&2
    echo "$prog: try 'hpc --help'" >&2
    exit 2
}

# need TOOL WHAT: TOOL is on PATH.
need() {
    command -v "$1" >/dev/null 2>&1 ||
        die "$2 needs $1, which is not on PATH (install hpc-sizer's $1)"
}

# need_sub TOOL SUBCOMMAND FLAG WHAT: TOOL has SUBCOMMAND, and its help
# names FLAG (a skeleton or an older version does not).
need_sub() {
    need "$1" "$4"
    if ! "$1" "$2" --help 2>/dev/null | grep -q -e "$3"; then
        die "$4 needs '$1 $2' with $3, which this $1 does not have (install a newer hpc-sizer)"
    fi
}

# beside PROGRAM: PROGRAM from the calling script's folder, else from PATH.
beside() {
    local here
    case $0 in
        */*) here=$(cd "$(dirname "$0")" && pwd) ;;
        *) here=$(dirname "$(command -v "$0")") ;;
    esac
    if [ -x "$here/$1" ]; then printf '%s/%s\n' "$here" "$1"; else command -v "$1"; fi
}
