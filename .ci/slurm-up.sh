#!/usr/bin/env bash
# Bring up a single-node SLURM cluster with accounting and two fake GPUs, for CI and tests.
#
# Debian 12, run as root, no systemd: every daemon is started by hand (munged, mariadbd,
# slurmdbd, slurmctld, slurmd). Idempotent: daemons already running from an earlier call are
# kept, missing ones are started. Every PID this script starts is appended to
# $CFL_SLURM_STATE/pids (default /tmp/cfl-slurm/pids) as "name pid pidfile"; .ci/slurm-down.sh
# stops exactly those. Facts and pitfalls: /work/shared/reference/slurm.md (project notes).
#
# Exit codes:
#   0  SLURM is up: the node is idle and `srun -N1 -t 1 hostname` ran
#   3  SLURM cannot be brought up here (not root, not Linux, no apt-get, install failed,
#      no mknod); one line "slurm-up: unavailable: <reason>" on stdout — callers SKIP on 3
#   1  bring-up was possible but failed (a daemon died, node never idle): a real error
set -euo pipefail

STATE_DIR="${CFL_SLURM_STATE:-/tmp/cfl-slurm}"
PIDS_FILE="$STATE_DIR/pids"
CLUSTER=ci
PARTITION=debug
N_FAKE_GPUS=2
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
RUN_DIR=/run/slurm
LOG_DIR=/var/log/slurm
T0_MS=$(($(date +%s%N) / 1000000))

unavailable() { echo "slurm-up: unavailable: $*"; exit 3; }
fail() { echo "slurm-up: failed: $*" >&2; exit 1; }
log() { echo "slurm-up: $*"; }

# A process is ours and alive when its pid file names a live process.
pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }
pid_from_file() { [[ -s "$1" ]] && tr -dc '0-9' <"$1" || true; }

wait_for_pidfile() { # name pidfile timeout_s -> echo pid
    local name=$1 file=$2 timeout=$3 i pid
    for ((i = 0; i < timeout * 10; i++)); do
        pid=$(pid_from_file "$file")
        if pid_alive "$pid"; then echo "$pid"; return 0; fi
        sleep 0.1
    done
    fail "$name did not write a live pid to $file within ${timeout}s (see $LOG_DIR)"
}

record_pid() { # name pid pidfile
    mkdir -p "$STATE_DIR"
    echo "$1 $2 $3" >>"$PIDS_FILE"
}

# start_daemon NAME PIDFILE TIMEOUT CMD...: start CMD (which daemonises or is backgrounded
# here) unless PIDFILE already names a live process; record the new PID.
start_daemon() {
    local name=$1 pidfile=$2 timeout=$3; shift 3
    local pid
    pid=$(pid_from_file "$pidfile")
    if pid_alive "$pid"; then log "$name already running (pid $pid)"; return 0; fi
    rm -f "$pidfile"
    # setsid + closed stdio: the daemon must not hold the caller's pipes or process group.
    setsid "$@" </dev/null >>"$LOG_DIR/$name.stdout" 2>&1 &
    pid=$(wait_for_pidfile "$name" "$pidfile" "$timeout")
    record_pid "$name" "$pid" "$pidfile"
    log "started $name (pid $pid)"
}

# ---------------------------------------------------------------- preconditions
[[ "$(uname -s)" == Linux ]] || unavailable "not Linux ($(uname -s))"
[[ "$(id -u)" == 0 ]] || unavailable "needs root to install and start daemons (uid $(id -u))"

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    command -v apt-get >/dev/null || unavailable "packages missing (${missing[*]}) and no apt-get"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"; } \
        >"/tmp/cfl-slurm-apt.log" 2>&1 \
        || unavailable "apt-get install failed (offline?), see /tmp/cfl-slurm-apt.log"
fi

HOST=$(hostname -s)
mkdir -p "$STATE_DIR" "$LOG_DIR" /var/lib/slurm/slurmctld /var/lib/slurm/slurmd "$RUN_DIR" /run/munge /run/mysqld
chown slurm:slurm "$LOG_DIR" /var/lib/slurm/slurmctld "$RUN_DIR"
chown munge:munge /run/munge
chown mysql:mysql /run/mysqld

# ---------------------------------------------------------------- fake GPUs (GRES)
# /dev/null's major/minor: slurmd only needs a device file per GPU to count it (without
# File= the node drains with "gres/gpu count reported lower than configured").
for ((g = 0; g < N_FAKE_GPUS; g++)); do
    [[ -e /dev/fakegpu$g ]] || mknod "/dev/fakegpu$g" c 1 3 2>/dev/null \
        || unavailable "mknod /dev/fakegpu$g not permitted (no CAP_MKNOD)"
done

# ---------------------------------------------------------------- munge
if [[ ! -s /etc/munge/munge.key ]]; then runuser -u munge -- mungekey -c; fi
start_daemon munged /run/munge/munged.pid 10 runuser -u munge -- /usr/sbin/munged
munge -n | unmunge >/dev/null || fail "munge credential round-trip failed"

# ---------------------------------------------------------------- mariadb + slurmdbd
# Socket only (no TCP): slurmdbd reaches it through StorageHost=localhost.
start_daemon mariadbd /run/mysqld/mysqld.pid 60 /usr/sbin/mariadbd --user=mysql \
    --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid --skip-networking
for ((i = 0; i < 100; i++)); do
    mariadb --protocol=socket -uroot -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.2
done
mariadb --protocol=socket -uroot -e 'SELECT 1' >/dev/null || fail "mariadb does not answer"

DBD_CONF=/etc/slurm/slurmdbd.conf
mkdir -p /etc/slurm
# A random, machine-local DB password, generated once and kept only in the mode-600 config.
DB_PASS=$(sed -n 's/^StoragePass=//p' "$DBD_CONF" 2>/dev/null || true)
[[ -n "$DB_PASS" ]] || DB_PASS=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mariadb --protocol=socket -uroot <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
umask 077
cat >"$DBD_CONF.new" <<EOF
# written by .ci/slurm-up.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile=$LOG_DIR/slurmdbd.log
PidFile=$RUN_DIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
umask 022
mv "$DBD_CONF.new" "$DBD_CONF"
chown slurm:slurm "$DBD_CONF"
chmod 600 "$DBD_CONF"

# ---------------------------------------------------------------- slurm.conf, gres.conf
NODE_LINE="$(slurmd -C | head -1) Gres=gpu:fake:$N_FAKE_GPUS NodeAddr=127.0.0.1"
cat >/etc/slurm/slurm.conf <<EOF
# written by .ci/slurm-up.sh: single node, accounting through slurmdbd, fake GPUs
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# >= 3 x slurm-init-seconds-before-status-checks, so the squeue status command stays usable
MinJobAge=300
# a job past its time limit gets SIGTERM, then SIGKILL this many seconds later
KillWait=10
# jobs that ask for no memory must not take the whole node (CR_Core_Memory)
DefMemPerCPU=1000
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
# sacct -o Comment then shows the rule and wildcards the executor plugin puts in --comment
AccountingStoreFlags=job_comment
GresTypes=gpu
$NODE_LINE
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
cat >/etc/slurm/gres.conf <<EOF
# written by .ci/slurm-up.sh
NodeName=$HOST Name=gpu Type=fake File=/dev/fakegpu[0-$((N_FAKE_GPUS - 1))]
EOF

start_daemon slurmdbd "$RUN_DIR/slurmdbd.pid" 30 /usr/sbin/slurmdbd
# The cluster must exist in the database before slurmctld registers; "already exists" is fine.
for ((i = 0; i < 50; i++)); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER" || fail "slurmdbd does not list cluster $CLUSTER"

# ---------------------------------------------------------------- slurmctld, slurmd
start_daemon slurmctld "$RUN_DIR/slurmctld.pid" 30 /usr/sbin/slurmctld
start_daemon slurmd "$RUN_DIR/slurmd.pid" 30 /usr/sbin/slurmd

state=""
for ((i = 0; i < 120; i++)); do
    state=$(sinfo -h -o %t 2>/dev/null | head -1 || true)
    case "$state" in
        idle|mix|alloc) break ;;
        drain*|drng|down*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
[[ "$state" == idle || "$state" == mix || "$state" == alloc ]] \
    || fail "node state '$state' after 60 s (see $LOG_DIR/slurmd.log, slurmctld.log)"

out=$(timeout 60 srun -N1 -t 1 hostname 2>&1) || fail "srun smoke test failed: $out"
[[ "$out" == "$HOST" ]] || fail "srun smoke test printed '$out', expected '$HOST'"
gpus=$(scontrol show node "$HOST" | grep -o 'Gres=[^ ]*' || true)
ELAPSED_MS=$(($(date +%s%N) / 1000000 - T0_MS))
log "up: cluster=$CLUSTER partition=$PARTITION node=$HOST $gpus in $((ELAPSED_MS / 1000)).$((ELAPSED_MS % 1000 / 100)) s"
