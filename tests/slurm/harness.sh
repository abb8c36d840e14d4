#!/usr/bin/env bash
# tests/slurm/harness.sh: a throw-away single-node SLURM cluster with
# accounting (slurmdbd + MariaDB) for the integration test in run.sh.
#
#   bash tests/slurm/harness.sh up       install what is missing, write the
#                                         config, start the daemons, wait idle
#   bash tests/slurm/harness.sh down     stop the daemons `up` started
#   bash tests/slurm/harness.sh status   what runs and what `up` recorded
#
# Debian (apt) and root only: otherwise it exits 77 with one line saying why,
# which callers read as "skipped". No systemd is needed: every daemon is
# started directly. `up` starts only daemons that are not already running and
# records each PID it started in $HPC_SLURM_STATE/started ("name pid" lines);
# `down` stops exactly those, by PID, after checking that the PID still runs
# the same program. A cluster that was running before `up` is reused and left
# alone. Every wait has a time-out.
#
# Settings (environment):
#   HPC_SLURM_STATE    state folder (default /run/hpc-sizer-slurm)
#   HPC_SLURM_CLUSTER  ClusterName (default hpcsizer)
#   HPC_SLURM_ACCOUNT  account of the submitting users (default hpcsizer)
#   HPC_SLURM_USERS    more unix users to add to the accounting (default none)
#   HPC_SLURM_APT_TIMEOUT  seconds allowed for apt-get update + install (600)
set -uo pipefail

prog=harness.sh
state_dir=${HPC_SLURM_STATE:-/run/hpc-sizer-slurm}
started=$state_dir/started
cluster=${HPC_SLURM_CLUSTER:-hpcsizer}
account=${HPC_SLURM_ACCOUNT:-hpcsizer}
extra_users=${HPC_SLURM_USERS:-}
apt_timeout=${HPC_SLURM_APT_TIMEOUT:-600}
db_name=slurm_acct_db
db_user=slurm
db_pass=hpcsizer-test
ctld_state=/var/spool/hpc-sizer-slurm/ctld
slurmd_spool=/var/spool/hpc-sizer-slurm/d
log_dir=/var/log/slurm
run_dir=/run/slurm

packages=(munge slurm-wlm slurmctld slurmd slurmdbd slurm-client
    slurm-wlm-basic-plugins slurm-wlm-mysql-plugin
    mariadb-server mariadb-client)

t_begin=$(date +%s.%N)
say() { printf '%s: %s\n' "$prog" "$*"; }
fail() {
    printf '%s: error: %s\n' "$prog" "$*" >&2
    exit 1
}
skip() {
    printf '%s\n' "$*"
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

# running_pid <comm> [pidfile]: print the pid of a running daemon, if any.
running_pid() {
    local pid
    if [ -n "${2:-}" ] && [ -s "$2" ]; then
        pid=$(head -n 1 "$2" 2>/dev/null | tr -dc '0-9')
        if pid_runs "$pid" "$1"; then
            echo "$pid"
            return 0
        fi
    fi
    for pid in $(pgrep -x "$1" 2>/dev/null); do
        if pid_runs "$pid" "$1"; then
            echo "$pid"
            return 0
        fi
    done
    return 1
}

# remember <comm> <pid>: note that this script started that daemon.
remember() {
    mkdir -p "$state_dir"
    chmod 700 "$state_dir"
    local tmp=$started.tmp
    { grep -v "^$1 " "$started" 2>/dev/null || true; echo "$1 $2"; } >"$tmp"
    mv -f "$tmp" "$started"
}

# ours <comm>: the running daemon of that name is one this script started.
ours() {
    local pid
    pid=$(awk -v n="$1" '$1 == n { print $2 }' "$started" 2>/dev/null)
    [ -n "$pid" ] && pid_runs "$pid" "$1"
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

short_host() { hostname -s 2>/dev/null || hostname; }

install_packages() {
    local missing=() p policy_made=0 log=$state_dir/apt.log
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || skip "SLURM packages missing (${missing[*]}) and no apt-get to install them"
    say "installing ${missing[*]}"
    # Without an init system the maintainer scripts must not start services.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# made by hpc-sizer tests/slurm/harness.sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_made=1
    fi
    local ok=1
    export DEBIAN_FRONTEND=noninteractive
    if ! timeout "$apt_timeout" apt-get update -q >"$log" 2>&1; then
        ok=0
    elif ! timeout "$apt_timeout" apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${missing[@]}" >>"$log" 2>&1; then
        ok=0
    fi
    [ "$policy_made" -eq 1 ] && rm -f /usr/sbin/policy-rc.d
    if [ "$ok" -eq 0 ]; then
        tail -n 15 "$log" >&2
        fail "apt-get failed (log: $log)"
    fi
    say "packages installed ($(elapsed) s)"
}

start_munge() {
    install -d -o munge -g munge -m 700 /etc/munge /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 ||
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    if ! running_pid munged /run/munge/munged.pid >/dev/null; then
        rm -f /run/munge/munged.pid
        timeout 20 su -s /bin/sh munge -c /usr/sbin/munged || fail "munged did not start"
        retry 10 test -S /run/munge/munge.socket.2 || fail "munged made no socket"
        remember munged "$(running_pid munged /run/munge/munged.pid)"
        say "started munged"
    fi
    retry 10 sh -c 'munge -n | unmunge' || fail "munge round trip failed"
}

start_mariadb() {
    install -d -o mysql -g mysql -m 755 /run/mysqld
    mkdir -p /etc/mysql/mariadb.conf.d
    # slurmdbd warns about a pool under 512 MiB; InnoDB allocates it lazily.
    cat >/etc/mysql/mariadb.conf.d/90-hpc-sizer-slurm.cnf <<'EOF'
# written by hpc-sizer tests/slurm/harness.sh
[mysqld]
innodb_buffer_pool_size=512M
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
max_allowed_packet=16M
EOF
    if ! running_pid mariadbd /run/mysqld/mysqld.pid >/dev/null; then
        if [ ! -d /var/lib/mysql/mysql ]; then
            timeout 120 mariadb-install-db --user=mysql --datadir=/var/lib/mysql \
                >"$state_dir/mariadb-install.log" 2>&1 || fail "mariadb-install-db failed"
        fi
        rm -f /run/mysqld/mysqld.pid
        setsid /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid \
            </dev/null >"$state_dir/mariadbd.log" 2>&1 &
        if ! retry 60 mariadb-admin ping; then
            tail -n 15 "$state_dir/mariadbd.log" >&2
            fail "mariadbd did not answer within 60 s"
        fi
        retry 10 test -s /run/mysqld/mysqld.pid
        remember mariadbd "$(running_pid mariadbd /run/mysqld/mysqld.pid)"
        say "started mariadbd"
    fi
    timeout 30 mariadb -u root <<EOF || fail "could not set up the accounting database"
CREATE DATABASE IF NOT EXISTS $db_name;
CREATE USER IF NOT EXISTS '$db_user'@'localhost' IDENTIFIED BY '$db_pass';
ALTER USER '$db_user'@'localhost' IDENTIFIED BY '$db_pass';
GRANT ALL ON $db_name.* TO '$db_user'@'localhost';
FLUSH PRIVILEGES;
EOF
}

# node_line: NodeName=<host> with the hardware slurmd -C reports.
node_line() {
    local host=$1 hw key out=""
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
    echo "NodeName=$host NodeAddr=127.0.0.1$out State=UNKNOWN"
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

# write_if_changed <file> <mode> <owner>: stdin to file; status 0 when changed.
write_if_changed() {
    local tmp
    tmp=$(mktemp "$1.XXXXXX")
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
    mkdir -p /etc/slurm
    install -d -o slurm -g slurm -m 755 "$log_dir" "$run_dir" "$ctld_state"
    install -d -o root -g root -m 755 "$slurmd_spool"
    if [ "$mode" = v1 ]; then
        proctrack=proctrack/cgroup
        taskplugin=task/cgroup,task/affinity
        write_if_changed /etc/slurm/cgroup.conf 644 root:root <<'EOF' && same=0
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
    fi
    write_if_changed /etc/slurm/slurm.conf 644 root:root <<EOF && same=0
# written by hpc-sizer tests/slurm/harness.sh (cgroup mode: $mode)
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$ctld_state
SlurmdSpoolDir=$slurmd_spool
SlurmctldPidFile=$run_dir/slurmctld.pid
SlurmdPidFile=$run_dir/slurmd.pid
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd.log
ReturnToService=2
ProctrackType=$proctrack
TaskPlugin=$taskplugin
PrologFlags=Contain
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
$gather_params
AcctGatherProfileType=acct_gather_profile/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageEnforce=associations
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
$(node_line "$host")
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    write_if_changed /etc/slurm/slurmdbd.conf 600 slurm:slurm <<EOF
# written by hpc-sizer tests/slurm/harness.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
LogFile=$log_dir/slurmdbd.log
PidFile=$run_dir/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$db_name
StorageUser=$db_user
StoragePass=$db_pass
EOF
    echo "$mode" >"$state_dir/cgroup_mode"
    # status 0: slurm.conf or cgroup.conf changed
    return "$same"
}

start_slurmdbd() {
    if ! running_pid slurmdbd "$run_dir/slurmdbd.pid" >/dev/null; then
        rm -f "$run_dir/slurmdbd.pid"
        timeout 30 /usr/sbin/slurmdbd || fail "slurmdbd did not start"
        if ! retry 30 sacctmgr -n list cluster; then
            tail -n 15 "$log_dir/slurmdbd.log" >&2
            fail "slurmdbd did not answer within 30 s"
        fi
        remember slurmdbd "$(running_pid slurmdbd "$run_dir/slurmdbd.pid")"
        say "started slurmdbd"
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

start_slurm() {
    local host=$1 restart=$2 d
    if [ "$restart" -eq 1 ]; then
        # The config changed under daemons that this script started.
        for d in slurmd slurmctld; do
            if ours "$d"; then
                stop_pid "$d" "$(awk -v n="$d" '$1 == n { print $2 }' "$started")"
            fi
        done
    fi
    if ! running_pid slurmctld "$run_dir/slurmctld.pid" >/dev/null; then
        rm -f "$run_dir/slurmctld.pid"
        timeout 30 /usr/sbin/slurmctld || fail "slurmctld did not start"
        if ! retry 30 scontrol ping; then
            tail -n 15 "$log_dir/slurmctld.log" >&2
            fail "slurmctld did not answer within 30 s"
        fi
        remember slurmctld "$(running_pid slurmctld "$run_dir/slurmctld.pid")"
        say "started slurmctld"
    fi
    if ! running_pid slurmd "$run_dir/slurmd.pid" >/dev/null; then
        rm -f "$run_dir/slurmd.pid"
        timeout 30 /usr/sbin/slurmd || fail "slurmd did not start"
        retry 10 test -s "$run_dir/slurmd.pid" || fail "slurmd wrote no pid file"
        remember slurmd "$(running_pid slurmd "$run_dir/slurmd.pid")"
        say "started slurmd"
    fi
    if ! retry 30 node_ready "$host"; then
        # A node left down or drained by an earlier unclean stop.
        timeout 10 scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1
        if ! retry 30 node_ready "$host"; then
            timeout 10 sinfo -N -l >&2
            tail -n 15 "$log_dir/slurmd.log" >&2
            fail "node $host is not idle after 60 s"
        fi
    fi
}

cmd_up() {
    [ "$(id -u)" -eq 0 ] || skip "the SLURM harness needs root"
    command -v dpkg-query >/dev/null 2>&1 || skip "not a Debian system (no dpkg)"
    mkdir -p "$state_dir"
    chmod 700 "$state_dir"
    install_packages
    # The daemons drop privileges and then open /dev/null; on some images it
    # is 0600, which makes munged and slurmctld die at start.
    local null_mode
    null_mode=$(stat -c %a /dev/null 2>/dev/null)
    if [ -c /dev/null ] && [ "$null_mode" != 666 ]; then
        chmod 666 /dev/null && say "set /dev/null to its standard mode 0666 (it was $null_mode)"
    fi
    local host mode restart=0
    host=$(short_host)
    getent hosts "$host" >/dev/null 2>&1 || printf '127.0.0.1 %s # hpc-sizer tests\n' "$host" >>/etc/hosts
    start_munge
    start_mariadb
    mode=$(cgroup_mode)
    if running_pid slurmctld "$run_dir/slurmctld.pid" >/dev/null && ! ours slurmctld; then
        # Someone else's cluster: use it as it is, config included.
        say "reusing the SLURM daemons already running (their config is left as it is)"
        local running_name
        running_name=$(timeout 10 scontrol show config 2>/dev/null |
            awk -F= '/^ClusterName/ { gsub(/[[:space:]]/, "", $2); print $2 }')
        [ -n "$running_name" ] && cluster=$running_name
        [ -s "$state_dir/cgroup_mode" ] || echo "$mode" >"$state_dir/cgroup_mode"
    else
        write_config "$host" "$mode" && restart=1
    fi
    start_slurmdbd
    start_slurm "$host" "$restart"
    say "cluster $cluster up: node $host idle, cgroup mode $(cat "$state_dir/cgroup_mode"), $(elapsed) s"
}

cmd_down() {
    [ "$(id -u)" -eq 0 ] || skip "the SLURM harness needs root"
    if [ ! -s "$started" ]; then
        say "nothing recorded in $started; nothing to stop"
        return 0
    fi
    local d pid
    for d in slurmd slurmctld slurmdbd mariadbd munged; do
        pid=$(awk -v n="$d" '$1 == n { print $2 }' "$started")
        [ -n "$pid" ] && stop_pid "$d" "$pid"
    done
    rm -f "$started"
    say "down ($(elapsed) s)"
}

cmd_status() {
    local d pid
    for d in munged mariadbd slurmdbd slurmctld slurmd; do
        if pid=$(running_pid "$d"); then
            if ours "$d"; then echo "$d $pid (started by this harness)"; else echo "$d $pid"; fi
        else
            echo "$d not running"
        fi
    done
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 up|down|status" >&2
        exit 2
        ;;
esac
