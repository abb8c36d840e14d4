#!/usr/bin/env bash
# tests/slurm/harness.sh: a throw-away SLURM cluster of one or more nodes on
# this one machine, with accounting (slurmdbd + MariaDB), for the real-SLURM
# tests, kept apart from any SLURM, munge or MariaDB of the machine's own.
# Each node is its own slurmd (`slurmd -N NODE`) with its own name, port,
# spool, pid file and log; with cgroup v1 each node's jobs get real cgroups
# of their own (/sys/fs/cgroup/CONTROLLER/slurm_NODE/uid_U/job_J/...).
#
#   bash tests/slurm/harness.sh install   install the Debian packages missing
#   bash tests/slurm/harness.sh up        install, write the config, start the
#                                          daemons, wait until the node is idle
#   bash tests/slurm/harness.sh down [--purge]
#                                          stop the daemons `up` started; with
#                                          --purge also remove the state folder,
#                                          the node's cgroups and the packages
#                                          that `up` made or installed
#   bash tests/slurm/harness.sh status    what runs, and which of it is ours
#   bash tests/slurm/harness.sh conf      print the test cluster's SLURM_CONF
#
# Everything of the test cluster lives under its state folder: the config
# (slurm.conf, cgroup.conf, slurmdbd.conf, an own acct_gather.conf, my.cnf),
# the munge key, seed, socket and log, a MariaDB data directory with its own
# socket and a port on 127.0.0.1, the slurmctld state, the slurmd spool, the
# logs and pid files. The daemons and every client command get SLURM_CONF
# pointing there, and reach munged through AuthInfo=socket=. Nothing under
# /etc/slurm, /etc/munge, /etc/mysql or /var/lib/mysql is read or written, and
# no daemon of the machine's own is used or stopped: `up` looks at its own pid
# files only and records each PID it started in $HPC_SLURM_STATE/started;
# `down` stops exactly those, by PID, after checking that the PID still runs
# the same program. A slurmctld or slurmdbd of the machine's own may run (the
# test cluster has ports of its own); a slurmd of its own makes `up` refuse,
# since both would manage the node's cgroups.
#
# Debian (apt) and root only: otherwise, or when a port is taken, it exits 77
# with one line saying why, which callers read as "skipped". No systemd is
# needed: every daemon is started directly. Every wait has a time-out.
#
# Settings (environment):
#   HPC_SLURM_STATE    state folder (default /var/lib/hpc-sizer-slurm)
#   HPC_SLURM_PORT     first of the TCP ports on 127.0.0.1: slurmctld, the first
#                      node's slurmd, slurmdbd, MariaDB, then one per further
#                      node (default 16817, so 16817..16820 and 16821.. for
#                      nodes 2..)
#   HPC_TEST_NODES     the number of nodes, 1 to 9 (default 3): the first is
#                      named after the host, the others HOST-2, HOST-3, ...
#   HPC_SLURM_TASKPROLOG, HPC_SLURM_PROLOG, HPC_SLURM_EPILOG
#                      programs set as TaskProlog, Prolog and Epilog in
#                      slurm.conf (default none): the admin mode's snippets
#   HPC_SLURM_CLUSTER  ClusterName (default hpcsizer)
#   HPC_SLURM_ACCOUNT  account of the submitting users (default hpcsizer)
#   HPC_SLURM_USERS    more unix users to add to the accounting (default none)
#   HPC_SLURM_APT_TIMEOUT  seconds allowed for apt-get update + install (600)
#   HPC_SLURM_JOBACCT  the accounting gatherer: linux (default, the
#                      jobacct_gather/linux of many sites) or cgroup
#                      (jobacct_gather/cgroup, cgroup v1 mode only)
#   HPC_SLURM_GRES     generic resources of every node, as a NodeName's
#                      Gres= (e.g. gpu:2,lscratch:100; default none: the
#                      GPUs only as a GRES type, for the accounting's limits).
#                      Counts only, no device files: jobs get them as SLURM
#                      counts them, nothing more
set -uo pipefail

prog=harness.sh
state_dir=${HPC_SLURM_STATE:-/var/lib/hpc-sizer-slurm}
started=$state_dir/started
cluster=${HPC_SLURM_CLUSTER:-hpcsizer}
account=${HPC_SLURM_ACCOUNT:-hpcsizer}
extra_users=${HPC_SLURM_USERS:-}
apt_timeout=${HPC_SLURM_APT_TIMEOUT:-600}
port_base=${HPC_SLURM_PORT:-16817}
nodes=${HPC_TEST_NODES:-3}
if ! [[ $nodes =~ ^[1-9]$ ]]; then
    echo "$prog: error: HPC_TEST_NODES must be a number in 1..9" >&2
    exit 2
fi
# The ports run from HPC_SLURM_PORT to HPC_SLURM_PORT + 2 + nodes.
port_max=$((65533 - nodes < 65530 ? 65533 - nodes : 65530))
if ! [[ $port_base =~ ^[0-9]{4,5}$ ]] || [ "$port_base" -lt 1024 ] || [ "$port_base" -gt "$port_max" ]; then
    echo "$prog: error: HPC_SLURM_PORT must be a number in 1024..$port_max (with $nodes nodes)" >&2
    exit 2
fi
ctld_port=$port_base
slurmd_port=$((port_base + 1))
dbd_port=$((port_base + 2))
db_port=$((port_base + 3))
db_name=slurm_acct_db
db_user=slurm
db_pass=hpcsizer-test

conf_dir=$state_dir/etc
munge_dir=$state_dir/munge
munge_run=$state_dir/munge-run
munge_socket=$munge_run/munge.socket
munge_pid=$munge_run/munged.pid
db_dir=$state_dir/mysql
db_run=$state_dir/mysql-run
db_socket=$db_run/mysqld.sock
db_pid=$db_run/mysqld.pid
db_cnf=$conf_dir/my.cnf
slurm_run=$state_dir/slurm-run
log_dir=$state_dir/log
ctld_state=$state_dir/ctld
slurmd_spool=$state_dir/slurmd
export SLURM_CONF=$conf_dir/slurm.conf

packages=(munge slurm-wlm slurmctld slurmd slurmdbd slurm-client
    slurm-wlm-basic-plugins slurm-wlm-mysql-plugin
    mariadb-server mariadb-client)
package_paths=(/etc/slurm /etc/munge /etc/mysql /var/lib/mysql /var/log/mysql /run/mysqld
    /var/lib/munge /var/log/munge /run/munge /var/lib/slurm /var/log/slurm /run/slurm)

t_begin=$(date +%s.%N)
say() { printf '%s: %s\n' "$prog" "$*"; }
fail() {
    printf '%s: error: %s\n' "$prog" "$*" >&2
    exit 1
}
skip() {
    printf '%s: skipped: %s\n' "$prog" "$*"
    exit 77
}
elapsed() { awk -v a="$t_begin" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# retry <seconds> <command...>: run the command every 0.2 s until it succeeds
# (a program gets 10 s a try; a shell function keeps its own time-outs).
retry() {
    local deadline=$((SECONDS + $1)) run=(timeout 10)
    shift
    declare -F "$1" >/dev/null && run=()
    while :; do
        if "${run[@]}" "$@" >/dev/null 2>&1; then
            return 0
        fi
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# pid_runs <pid> <comm>: the pid is alive (not a zombie that nobody reaps,
# since PID 1 may not be an init) and runs the program named comm.
pid_runs() {
    local st
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] || return 1
    st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# pidfile_runs <comm> <pidfile>: print the pid in one of our pid files when
# it runs that program. Never looks for the program elsewhere: a daemon of
# the same name that this harness did not start is not ours to use.
pidfile_runs() {
    local pid
    [ -s "$2" ] || return 1
    pid=$(head -n 1 "$2" 2>/dev/null | tr -dc '0-9')
    pid_runs "$pid" "$1" || return 1
    echo "$pid"
}

# recorded <name>: the pid this harness recorded for that daemon (a
# slurmd's name is slurmd:NODE).
recorded() { awk -v n="$1" '$1 == n { print $2 }' "$started" 2>/dev/null; }

# remember <name> <pid>: note that this script started that daemon.
remember() {
    local tmp=$started.tmp
    { grep -v "^$1 " "$started" 2>/dev/null || true; echo "$1 $2"; } >"$tmp"
    mv -f "$tmp" "$started"
}

# ours <name>: the daemon this script recorded for that name still runs.
ours() {
    local pid
    pid=$(recorded "$1")
    [ -n "$pid" ] && pid_runs "$pid" "${1%%:*}"
}

# foreign_pids <comm>: running processes of that name that are not ours.
foreign_pids() {
    local pid mine
    mine=" $(awk -v n="$1" '$1 == n || index($1, n ":") == 1 { printf "%s ", $2 }' "$started" 2>/dev/null)"
    for pid in $(pgrep -x "$1" 2>/dev/null); do
        [[ $mine == *" $pid "* ]] && continue
        pid_runs "$pid" "$1" && printf '%s ' "$pid"
    done
}

# node_names: the test cluster's nodes, one a line.
node_names() {
    local host i
    host=$(short_host)
    echo "$host"
    for ((i = 2; i <= nodes; i++)); do echo "$host-$i"; done
}

# node_port <i>: the slurmd port of node i (1-based).
node_port() {
    if [ "$1" -eq 1 ]; then echo "$slurmd_port"; else echo $((port_base + 2 + $1)); fi
}

# stop_pid <comm> <pid>: SIGTERM, wait up to 30 s, then SIGKILL.
stop_pid() {
    local comm=$1 pid=$2 t0=$SECONDS t0n
    t0n=$(date +%s.%N)
    if ! pid_runs "$pid" "$comm"; then
        say "$comm (pid $pid) is not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null
    while pid_runs "$pid" "$comm" && [ $((SECONDS - t0)) -lt 30 ]; do
        sleep 0.1
    done
    if pid_runs "$pid" "$comm"; then
        say "$comm (pid $pid) ignored SIGTERM for 30 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null
        sleep 0.5
    fi
    say "stopped $comm (pid $pid) in $(awk -v a="$t0n" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
}

# stop_ours: the daemons this script started, clients first.
stop_ours() {
    local d name pid
    for d in slurmd slurmctld slurmdbd mariadbd munged; do
        while read -r name pid; do
            [ "${name%%:*}" = "$d" ] && stop_pid "$d" "$pid"
        done < <(cat "$started" 2>/dev/null)
    done
    rm -f "$started"
}

short_host() { hostname -s 2>/dev/null || hostname; }

need_root_debian() {
    [ "$(id -u)" -eq 0 ] || skip "the SLURM harness needs root"
    command -v dpkg-query >/dev/null 2>&1 || skip "not a Debian system (no dpkg)"
}

make_state_dir() {
    install -d -o root -g root -m 755 "$state_dir"
}

installed_set() {
    dpkg-query -W -f='${Package} ${Status}\n' 2>/dev/null | awk '$NF == "installed" { print $1 }' | sort
}

# policy_denies: /usr/sbin/policy-rc.d exists and forbids starting services.
policy_denies() {
    local rc=0
    [ -x /usr/sbin/policy-rc.d ] || return 1
    /usr/sbin/policy-rc.d munge start >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 101 ]
}

# Package maintainer scripts must start no service: when policy-rc.d does not
# already forbid it, ours stands in for the install and the original (if
# any) is put back afterwards, also when the install fails or is interrupted.
policy_saved=$state_dir/policy-rc.d.saved
policy_state=none
policy_guard() {
    policy_denies && return 0
    if [ -e /usr/sbin/policy-rc.d ]; then
        cp -p /usr/sbin/policy-rc.d "$policy_saved" || fail "could not save /usr/sbin/policy-rc.d"
        policy_state=saved
    else
        policy_state=made
    fi
    trap policy_restore EXIT
    printf '#!/bin/sh\n# hpc-sizer tests/slurm/harness.sh, during apt-get only\nexit 101\n' \
        >/usr/sbin/policy-rc.d.hpc-sizer
    chmod 755 /usr/sbin/policy-rc.d.hpc-sizer
    mv -f /usr/sbin/policy-rc.d.hpc-sizer /usr/sbin/policy-rc.d
}
policy_restore() {
    case $policy_state in
        saved) mv -f "$policy_saved" /usr/sbin/policy-rc.d ;;
        made) rm -f /usr/sbin/policy-rc.d ;;
    esac
    policy_state=none
    trap - EXIT
}

# apt_run <log> <apt-get arguments...>: with services held off.
apt_run() {
    local log=$1 rc
    shift
    policy_guard
    DEBIAN_FRONTEND=noninteractive timeout "$apt_timeout" apt-get -y -q \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "$@" >>"$log" 2>&1
    rc=$?
    policy_restore
    return "$rc"
}

install_packages() {
    local missing=() p log=$state_dir/apt.log before
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || skip "SLURM packages missing (${missing[*]}) and no apt-get to install them"
    say "installing ${missing[*]}"
    before=$(installed_set)
    # The package scripts make these (a key, a data directory); `down
    # --purge` removes the ones that were not there before.
    for p in "${package_paths[@]}"; do
        [ -e "$p" ] || echo "$p" >>"$state_dir/paths-made-by-install"
    done
    : >"$log"
    if ! apt_run "$log" update || ! apt_run "$log" install --no-install-recommends "${missing[@]}"; then
        tail -n 15 "$log" >&2
        fail "apt-get failed (log: $log)"
    fi
    # What this install added, for `down --purge`.
    comm -13 <(printf '%s\n' "$before") <(installed_set) >>"$state_dir/packages-installed"
    say "packages installed ($(elapsed) s)"
}

# check_ports: each port of the test cluster is free or held by our daemon.
check_ports() {
    command -v ss >/dev/null 2>&1 || return 0
    local spec name port i=0 node
    local specs=("slurmctld=$ctld_port" "slurmdbd=$dbd_port" "mariadbd=$db_port")
    while read -r node; do
        i=$((i + 1))
        specs+=("slurmd:$node=$(node_port "$i")")
    done < <(node_names)
    for spec in "${specs[@]}"; do
        name=${spec%%=*}
        port=${spec#*=}
        ours "$name" && continue
        if [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; then
            skip "TCP port $port (for the test cluster's $name) is in use by another program; set HPC_SLURM_PORT to the first of $((3 + nodes)) free ports"
        fi
    done
}

# check_foreign: a slurmd of the machine's own shares the node's cgroups with
# any other slurmd, so the test cluster is not started beside it. Other
# daemons of the machine's own are only reported: ours use other files and
# ports, and neither theirs nor ours is touched by the other.
check_foreign() {
    local d pids
    pids=$(foreign_pids slurmd)
    [ -z "$pids" ] || skip "a slurmd of this machine's own runs (pid ${pids% }); the test cluster is not started beside it"
    for d in slurmctld slurmdbd munged mariadbd; do
        pids=$(foreign_pids "$d")
        [ -z "$pids" ] || say "a $d of this machine's own runs (pid ${pids% }); it is neither used nor stopped"
    done
}

munge_round_trip() {
    timeout 10 munge --socket="$munge_socket" -n | timeout 10 unmunge --socket="$munge_socket"
}

start_munge() {
    install -d -o munge -g munge -m 700 "$munge_dir"
    install -d -o munge -g munge -m 755 "$munge_run"
    if [ ! -s "$munge_dir/munge.key" ]; then
        mungekey --create --keyfile="$munge_dir/munge.key" >/dev/null 2>&1 ||
            dd if=/dev/urandom of="$munge_dir/munge.key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$munge_dir/munge.key"
    chmod 400 "$munge_dir/munge.key"
    if ! pidfile_runs munged "$munge_pid" >/dev/null; then
        rm -f "$munge_pid"
        timeout 20 runuser -u munge -- /usr/sbin/munged --socket="$munge_socket" \
            --key-file="$munge_dir/munge.key" --pid-file="$munge_pid" \
            --log-file="$munge_dir/munged.log" --seed-file="$munge_dir/munged.seed" ||
            fail "munged did not start (log: $munge_dir/munged.log)"
        retry 10 test -S "$munge_socket" || fail "munged made no socket"
        retry 10 pidfile_runs munged "$munge_pid" || fail "munged wrote no pid file"
        remember munged "$(pidfile_runs munged "$munge_pid")"
        say "started munged"
    fi
    retry 10 munge_round_trip || fail "munge round trip failed"
}

start_mariadb() {
    install -d -o mysql -g mysql -m 700 "$db_dir"
    install -d -o mysql -g mysql -m 755 "$db_run"
    if ! pidfile_runs mariadbd "$db_pid" >/dev/null; then
        if [ ! -d "$db_dir/mysql" ]; then
            timeout 120 mariadb-install-db --defaults-file="$db_cnf" \
                --auth-root-authentication-method=socket --skip-test-db \
                >"$log_dir/mariadb-install.log" 2>&1 ||
                fail "mariadb-install-db failed (log: $log_dir/mariadb-install.log)"
        fi
        rm -f "$db_pid"
        setsid /usr/sbin/mariadbd --defaults-file="$db_cnf" \
            </dev/null >>"$log_dir/mariadbd.out" 2>&1 &
        local pid=$! deadline=$((SECONDS + 60))
        remember mariadbd "$pid"
        until timeout 10 mariadb-admin --no-defaults --socket="$db_socket" ping >/dev/null 2>&1; do
            if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
                tail -n 15 "$db_run/mariadbd.err" >&2
                fail "mariadbd did not answer within 60 s (log: $db_run/mariadbd.err)"
            fi
            sleep 0.2
        done
        retry 10 pidfile_runs mariadbd "$db_pid" || fail "mariadbd wrote no pid file"
        remember mariadbd "$(pidfile_runs mariadbd "$db_pid")"
        say "started mariadbd"
    fi
    timeout 30 mariadb --no-defaults --socket="$db_socket" -u root <<EOF ||
CREATE DATABASE IF NOT EXISTS $db_name;
CREATE USER IF NOT EXISTS '$db_user'@'127.0.0.1' IDENTIFIED BY '$db_pass';
ALTER USER '$db_user'@'127.0.0.1' IDENTIFIED BY '$db_pass';
GRANT ALL ON $db_name.* TO '$db_user'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
        fail "could not set up the accounting database"
}

# node_lines: a NodeName line per node (its own port) with the hardware
# slurmd -C reports. Each node claims the whole machine (a job's limits are
# its own cgroups; the tests' jobs are small).
node_lines() {
    local hw key out="" node i=0
    hw=$(timeout 20 slurmd -C 2>/dev/null | head -n 1)
    for key in CPUs Boards SocketsPerBoard CoresPerSocket ThreadsPerCore RealMemory; do
        local v
        v=$(printf '%s\n' "$hw" | tr ' ' '\n' | sed -n "s/^$key=//p")
        [ -n "$v" ] && out="$out $key=$v"
    done
    case $out in
        *CPUs=*RealMemory=*) ;;
        *) out=" CPUs=$(nproc) RealMemory=$(awk '/^MemTotal:/ { print int($2 / 1024) - 256 }' /proc/meminfo)" ;;
    esac
    while read -r node; do
        i=$((i + 1))
        echo "NodeName=$node NodeHostname=$(short_host) NodeAddr=127.0.0.1 Port=$(node_port "$i")$out${HPC_SLURM_GRES:+ Gres=$HPC_SLURM_GRES} State=UNKNOWN"
    done < <(node_names)
}

# gres_types: gpu, and the other names of HPC_SLURM_GRES.
gres_types() {
    local types=gpu g list=${HPC_SLURM_GRES:-}
    for g in ${list//,/ }; do
        g=${g%%:*}
        case ",$types," in *",$g,"*) ;; *) types="$types,$g" ;; esac
    done
    echo "$types"
}

# slurm_hooks: the Prolog, TaskProlog and Epilog lines asked for.
slurm_hooks() {
    [ -z "${HPC_SLURM_PROLOG:-}" ] || echo "Prolog=$HPC_SLURM_PROLOG"
    [ -z "${HPC_SLURM_TASKPROLOG:-}" ] || echo "TaskProlog=$HPC_SLURM_TASKPROLOG"
    [ -z "${HPC_SLURM_EPILOG:-}" ] || echo "Epilog=$HPC_SLURM_EPILOG"
}

cgroup_mode() {
    local probe=/sys/fs/cgroup/memory/hpc_sizer_probe_$$
    if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] && [ -d /sys/fs/cgroup/freezer ] &&
        [ -d /sys/fs/cgroup/cpuset ] && mkdir "$probe" 2>/dev/null; then
        rmdir "$probe"
        echo v1
    else
        echo none
    fi
}

# The cgroup folders slurmd makes for the node (v1: one per controller).
node_cgroups() {
    local d
    for d in /sys/fs/cgroup/*/"slurm_$1" /sys/fs/cgroup/*/slurm; do
        [ -d "$d" ] && echo "$d"
    done
}

# write_if_changed <file> <mode> <owner>: stdin to file; status 0 when changed.
write_if_changed() {
    local tmp
    tmp=$(mktemp "$1.XXXXXX") || fail "could not write $1"
    cat >"$tmp"
    chmod "$2" "$tmp"
    chown "$3" "$tmp"
    if cmp -s "$tmp" "$1"; then
        rm -f "$tmp"
        return 1
    fi
    mv -f "$tmp" "$1"
    return 0
}

write_config() {
    local host=$1 mode=$2 same=1 proctrack taskplugin gather_params=""
    local jobacct=${HPC_SLURM_JOBACCT:-linux}
    case $jobacct in
        linux) ;;
        cgroup) [ "$mode" = v1 ] || { echo "$prog: HPC_SLURM_JOBACCT=cgroup needs the cgroup v1 mode" >&2; return 1; } ;;
        *) echo "$prog: HPC_SLURM_JOBACCT=$jobacct: linux or cgroup" >&2; return 1 ;;
    esac
    if [ "$mode" = v1 ]; then
        proctrack=proctrack/cgroup
        taskplugin=task/cgroup,task/affinity
        write_if_changed "$conf_dir/cgroup.conf" 644 root:root <<'EOF' && same=0
# written by hpc-sizer tests/slurm/harness.sh
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
ConstrainDevices=no
EOF
    else
        # No writable cgroup v1 memory controller: jobs are tracked by
        # /proc and killed by the accounting poller when over memory.
        proctrack=proctrack/linuxproc
        taskplugin=task/affinity
        gather_params=JobAcctGatherParams=OverMemoryKill
        rm -f "$conf_dir/cgroup.conf"
    fi
    # The GRES of HPC_SLURM_GRES: counts, and for GPUs (which slurmd counts
    # by their device files) stand-ins under the state folder made as
    # /dev/null is (major 1, minor 3), so nothing can be done through them.
    if [ -n "${HPC_SLURM_GRES:-}" ]; then
        local g n list=$HPC_SLURM_GRES dev=$state_dir/dev
        install -d -m 755 "$dev"
        for g in ${list//,/ }; do
            n=${g##*:}
            if [ "${g%%:*}" = gpu ]; then
                for ((i = 0; i < n; i++)); do
                    [ -c "$dev/gpu$i" ] || mknod -m 666 "$dev/gpu$i" c 1 3
                done
                echo "Name=gpu File=$dev/gpu[0-$((n - 1))]"
            else
                echo "Name=${g%%:*} Count=$n"
            fi
        done | { echo "# written by hpc-sizer tests/slurm/harness.sh"; cat; } |
            write_if_changed "$conf_dir/gres.conf" 644 root:root && same=0
    elif [ -e "$conf_dir/gres.conf" ]; then
        rm -f "$conf_dir/gres.conf"
        same=0
    fi
    # The daemons read every other config file (acct_gather.conf included)
    # from the folder of SLURM_CONF: this one has its own, without options.
    write_if_changed "$conf_dir/acct_gather.conf" 644 root:root <<'EOF' && same=0
# written by hpc-sizer tests/slurm/harness.sh: no profiling options
EOF
    write_if_changed "$SLURM_CONF" 644 root:root <<EOF && same=0
# written by hpc-sizer tests/slurm/harness.sh (cgroup mode: $mode)
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
MpiDefault=none
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$ctld_state
SlurmdSpoolDir=$slurmd_spool/%n
SlurmctldPidFile=$slurm_run/slurmctld.pid
SlurmdPidFile=$slurm_run/slurmd-%n.pid
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd-%n.log
ReturnToService=2
ProctrackType=$proctrack
TaskPlugin=$taskplugin
PrologFlags=Contain
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
JobAcctGatherType=jobacct_gather/$jobacct
JobAcctGatherFrequency=task=1
$gather_params
AcctGatherProfileType=acct_gather_profile/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
# The munged socket for the connections to slurmdbd (AuthInfo is not used there)
AccountingStoragePass=$munge_socket
AccountingStorageEnforce=associations
# GPU limits can be set (sacctmgr GrpTRES=gres/gpu=N) on a node without GPUs
GresTypes=$(gres_types)
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
$(slurm_hooks)
$(node_lines)
PartitionName=debug Nodes=$(node_names | paste -sd,) Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    write_if_changed "$conf_dir/slurmdbd.conf" 600 slurm:slurm <<EOF && same=0
# written by hpc-sizer tests/slurm/harness.sh
AuthType=auth/munge
AuthInfo=socket=$munge_socket
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=slurm
LogFile=$log_dir/slurmdbd.log
PidFile=$slurm_run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageLoc=$db_name
StorageUser=$db_user
StoragePass=$db_pass
EOF
    # slurmdbd warns about a pool under 512 MiB; InnoDB allocates it lazily.
    write_if_changed "$db_cnf" 644 root:root <<EOF && same=0
# written by hpc-sizer tests/slurm/harness.sh: the test cluster's own MariaDB
[mysqld]
user=mysql
datadir=$db_dir
socket=$db_socket
pid-file=$db_pid
port=$db_port
bind-address=127.0.0.1
skip-name-resolve
log-error=$db_run/mariadbd.err
innodb_buffer_pool_size=512M
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
max_allowed_packet=16M
EOF
    echo "$mode" >"$state_dir/cgroup_mode"
    # status 0: a file changed
    return "$same"
}

start_slurmdbd() {
    start_daemon slurmdbd
    if ! retry 30 sacctmgr -n list cluster; then
        tail -n 15 "$log_dir/slurmdbd.log" >&2
        fail "slurmdbd did not answer within 30 s"
    fi
    local u
    if ! timeout 10 sacctmgr -n -P list cluster format=Cluster | grep -qx "$cluster"; then
        timeout 30 sacctmgr -i add cluster "$cluster" >/dev/null || fail "sacctmgr add cluster failed"
    fi
    if ! timeout 10 sacctmgr -n -P list account format=Account | grep -qx "$account"; then
        timeout 30 sacctmgr -i add account "$account" Cluster="$cluster" \
            Description=hpc-sizer-tests Organization=hpc-sizer >/dev/null ||
            fail "sacctmgr add account failed"
    fi
    for u in root $extra_users; do
        id "$u" >/dev/null 2>&1 || continue
        if ! timeout 10 sacctmgr -n -P list assoc cluster="$cluster" account="$account" \
            user="$u" format=User | grep -qx "$u"; then
            timeout 30 sacctmgr -i add user "$u" Account="$account" \
                DefaultAccount="$account" Cluster="$cluster" >/dev/null ||
                fail "sacctmgr add user $u failed"
        fi
    done
}

node_ready() {
    timeout 10 sinfo -h -n "$1" -o '%T' 2>/dev/null | grep -Eqx 'idle|mixed|allocated'
}

# start_daemon <comm> [NODE]: start a SLURM daemon (it daemonizes) unless
# ours runs; a slurmd for NODE (slurmd -N NODE, its files named after it).
start_daemon() {
    local d=$1 node=${2:-} name=$1 file=$1 args=()
    if [ -n "$node" ]; then
        name=$d:$node file=$d-$node args=(-N "$node")
    fi
    local pidf=$slurm_run/$file.pid
    pidfile_runs "$d" "$pidf" >/dev/null && return 0
    rm -f "$pidf"
    [ -z "$node" ] || install -d -o root -g root -m 755 "$slurmd_spool/$node"
    timeout 30 "/usr/sbin/$d" "${args[@]}" || fail "$name did not start (log: $log_dir/$file.log)"
    if ! retry 30 pidfile_runs "$d" "$pidf"; then
        tail -n 15 "$log_dir/$file.log" >&2
        fail "$name wrote no pid file within 30 s"
    fi
    remember "$name" "$(pidfile_runs "$d" "$pidf")"
    say "started $name"
}

start_slurm() {
    local node
    start_daemon slurmctld
    if ! retry 30 scontrol ping; then
        tail -n 15 "$log_dir/slurmctld.log" >&2
        fail "slurmctld did not answer within 30 s"
    fi
    while read -r node; do start_daemon slurmd "$node"; done < <(node_names)
    while read -r node; do
        retry 30 node_ready "$node" && continue
        # A node left down or drained by an earlier unclean stop.
        timeout 10 scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1
        if ! retry 30 node_ready "$node"; then
            timeout 10 sinfo -N -l >&2
            tail -n 15 "$log_dir/slurmd-$node.log" >&2
            fail "node $node is not idle after 60 s"
        fi
    done < <(node_names)
}

cmd_install() {
    need_root_debian
    make_state_dir
    install_packages
}

cmd_up() {
    need_root_debian
    check_foreign
    make_state_dir
    install_packages
    check_ports
    # The daemons drop privileges and then open /dev/null; on some images it
    # is 0600, which makes munged and slurmctld die at start.
    local null_mode
    null_mode=$(stat -c %a /dev/null 2>/dev/null)
    if [ -c /dev/null ] && [ "$null_mode" != 666 ]; then
        chmod 666 /dev/null && say "set /dev/null to its standard mode 0666 (it was $null_mode)"
    fi
    install -d -o root -g root -m 755 "$conf_dir" "$slurmd_spool"
    install -d -o slurm -g slurm -m 755 "$log_dir" "$slurm_run" "$ctld_state"
    local host mode node
    host=$(short_host)
    # Node cgroups that exist before our first slurmd are not ours to purge.
    if [ ! -e "$state_dir/cgroups-before" ]; then
        for node in $(node_names); do node_cgroups "$node"; done | sort -u >"$state_dir/cgroups-before"
    fi
    mode=$(cgroup_mode)
    if write_config "$host" "$mode" && [ -s "$started" ]; then
        say "the config changed: restarting the daemons this harness started"
        stop_ours
    fi
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurm
    say "cluster $cluster up (SLURM_CONF=$SLURM_CONF): $nodes node(s) $(node_names | paste -sd ' ') idle, cgroup mode $mode, ports $ctld_port-$db_port$( [ "$nodes" -eq 1 ] || echo " and $((port_base + 4))-$((port_base + 2 + nodes))"), $(elapsed) s"
}

purge() {
    local d pkgs
    for d in $(for n in $(node_names); do node_cgroups "$n"; done | sort -u); do
        grep -qxF "$d" "$state_dir/cgroups-before" 2>/dev/null && continue
        # Leaves first; a folder still holding tasks stays.
        find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    if [ -s "$state_dir/packages-installed" ]; then
        mapfile -t pkgs < <(sort -u "$state_dir/packages-installed")
        say "purging the ${#pkgs[@]} packages that up installed"
        local log
        log=$(mktemp /tmp/hpc-sizer-slurm-purge.XXXXXX)
        if apt_run "$log" purge "${pkgs[@]}"; then
            rm -f "$log"
        else
            tail -n 15 "$log" >&2
            fail "apt-get purge failed (log: $log); the state folder $state_dir stays"
        fi
    fi
    local p made=()
    [ -s "$state_dir/paths-made-by-install" ] && mapfile -t made < <(sort -u "$state_dir/paths-made-by-install")
    for p in "${made[@]}"; do
        [ -e "$p" ] || continue
        case $p in
            *mysql*) [ -z "$(foreign_pids mariadbd)$(foreign_pids mysqld)" ] || {
                say "kept $p: a MariaDB of this machine's own runs now"
                continue
            } ;;
        esac
        rm -rf "$p" && say "removed $p (made by the package install of up)"
    done
    rm -rf "$state_dir"
    say "removed $state_dir"
}

cmd_down() {
    need_root_debian
    local purge_too=0
    case ${1:-} in
        '') ;;
        --purge) purge_too=1 ;;
        *)
            echo "usage: $0 down [--purge]" >&2
            exit 2
            ;;
    esac
    if [ -s "$started" ]; then
        stop_ours
    else
        say "nothing recorded in $started; nothing to stop"
    fi
    [ "$purge_too" -eq 1 ] && [ -d "$state_dir" ] && purge
    say "down ($(elapsed) s)"
}

cmd_status() {
    local d name others
    for d in munged mariadbd slurmdbd slurmctld $(node_names | sed 's/^/slurmd:/'); do
        name=$d d=${d%%:*}
        if ours "$name"; then
            echo "$name $(recorded "$name") (the test cluster's)"
        else
            echo "$name: the test cluster's is not running"
        fi
        [ "$name" = "$d" ] || [ "$name" = "slurmd:$(short_host)" ] || continue
        others=$(foreign_pids "$d")
        [ -z "$others" ] || echo "$d ${others% } (the machine's own, not the test cluster's)"
    done
}

case ${1:-} in
    install) cmd_install ;;
    up) cmd_up ;;
    down)
        shift
        cmd_down "$@"
        ;;
    status) cmd_status ;;
    conf) echo "$SLURM_CONF" ;;
    *)
        echo "usage: $0 install|up|down [--purge]|status|conf" >&2
        exit 2
        ;;
esac
